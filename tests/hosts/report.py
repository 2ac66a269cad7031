"""The figures of a run, per fault kind, per kind of command instance (WAIT on or off) and
per way the clients reach it (directly, or through nginx: with the latency of the delay
proxy when the repetition had it, a row of its own): turns acknowledged, acknowledged turns
lost, availability during the fault and the time to full service after healing. Each op
belongs to the window of the fault it was sent in (from the fault's start to the next
fault's start).
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.hosts.faults import Window
from tests.hosts.history import Op

FAILED = ("unavailable", "timeout", "error")


def failed(op: Op) -> bool:
    """Not served: no answer, 503, or a lone writer's 409 (only a racing writer may lose)."""
    return op.outcome in FAILED or (op.outcome == "conflict" and not op.racer)


@dataclass
class Row:
    """One fault kind's figures for one kind of instance, over its repetitions."""

    kind: str
    wait: bool
    via: str  # direct, nginx, or nginx +<delay each way>ms
    reps: int
    acked: int  # turns (keys) answered 200 in the kind's windows
    lost: int  # of those, not in the final log where they were said to be
    answered: int  # turns sent while faulted that were answered 200
    # turns sent while faulted (409s of racing writers not counted) and reads of the turn
    # (GET /turn) not answered: a turn that cannot be read cannot be played
    attempts: int
    # per repetition: seconds from heal to the last failed attempt (ended before the next
    # fault's start)
    recovery: list[float]
    whole: list[float]  # per repetition: seconds from heal to a healthy cluster
    promoted: int  # repetitions in which a replica took over
    stuck: int = 0  # games given up: their lone writer refused STUCK_AFTER times in a row
    bot_stuck: int = 0  # games given up: their bot seat did not move for BOT_PATIENCE
    # per repetition: the longest time from the fault's start on with no turn of the kind
    # answered 200 (a stall is not seen in the share answered: a turn held 2.5 s counts as 200)
    gaps: list[float] = field(default_factory=list)

    @property
    def availability(self) -> float:
        return self.answered / self.attempts if self.attempts else 1.0


def routes(window: Window) -> list[tuple[bool, str, str]]:
    """(WAIT, the ops' route, the row's `via`) of each row a window counts in."""
    nginx = "nginx" + (f" +{window.latency_ms:g}ms" if window.latency_ms else "")
    return [(True, "direct", "direct"), (False, "direct", "direct"), (True, "nginx", nginx)]


def rows(windows: Sequence[Window], ops: Sequence[Op], lost: Sequence[Op], end: float) -> list[Row]:
    """The figures of every (fault kind, WAIT, via); `end`: when the load stopped."""
    lost_ids = {id(op) for op in lost}
    bounds = [w.start for w in windows[1:]] + [end]
    table: dict[tuple[str, bool, str], Row] = {}
    keys: dict[tuple[str, bool, str], set[str]] = defaultdict(set)
    lost_keys: dict[tuple[str, bool, str], set[str]] = defaultdict(set)
    for window, until in zip(windows, bounds, strict=True):
        for wait, route, via in routes(window):
            pair = (window.kind, wait, via)
            row = table.setdefault(pair, Row(window.kind, wait, via, 0, 0, 0, 0, 0, [], [], 0))
            row.reps += 1
            row.promoted += window.promoted
            row.whole.append(window.whole - window.heal)
            mine = [
                op
                for op in ops
                if op.wait == wait and op.route == route and window.start <= op.start < until
            ]
            row.stuck += sum(1 for op in mine if op.outcome == "stuck")
            row.bot_stuck += sum(1 for op in mine if op.outcome == "bot_stuck")
            for op in mine:
                if op.outcome == "ok" and op.action == "turn":
                    keys[pair].add(op.key)
                    if id(op) in lost_ids:
                        lost_keys[pair].add(op.key)
                if (
                    op.start < window.heal
                    and op.action in ("turn", "read")
                    and not (op.racer and op.outcome == "conflict")
                ):
                    row.attempts += 1
                    row.answered += op.outcome == "ok"
            served = sorted(op.end for op in mine if op.outcome == "ok" and op.action == "turn")
            marks = [window.start, *served, until]
            row.gaps.append(max(b - a for a, b in itertools.pairwise(marks)))
            # an op still in flight when the next fault began may have failed of that one
            late = [
                op.end
                for op in mine
                if failed(op) and op.action in ("turn", "read") and window.heal <= op.end < until
            ]
            row.recovery.append(max(late, default=window.heal) - window.heal)
    for pair, row in table.items():
        row.acked, row.lost = len(keys[pair]), len(lost_keys[pair])
    return list(table.values())


def render(table: Sequence[Row]) -> str:
    """The table as text."""
    head = (
        f"{'fault':<24} {'WAIT':>4} {'via':<13} {'reps':>4} {'acked':>6} {'lost':>5} {'avail':>6} "
        f"{'recovery med/max s':>19} {'cluster whole med/max s':>24} {'promoted':>8} "
        f"{'stuck games':>11} {'bot stuck':>9} {'longest stall med/max s':>23}"
    )
    lines = [head, "-" * len(head)]
    for r in sorted(table, key=lambda r: (r.kind, r.via != "direct", not r.wait, r.via)):
        rec = f"{statistics.median(r.recovery):.1f}/{max(r.recovery):.1f}"
        whole = f"{statistics.median(r.whole):.1f}/{max(r.whole):.1f}"
        lines.append(
            f"{r.kind:<24} {int(r.wait):>4} {r.via:<13} {r.reps:>4} {r.acked:>6} {r.lost:>5} "
            f"{r.availability:>6.0%} {rec:>19} {whole:>24} {r.promoted:>8} {r.stuck:>11} "
            f"{r.bot_stuck:>9} "
            f"{statistics.median(r.gaps):>11.1f}/{max(r.gaps):.1f}"
        )
    return "\n".join(lines)
