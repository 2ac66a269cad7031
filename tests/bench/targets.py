"""Targets of `make bench`, judged in one place, one uniform row per figure.

A speed figure is judged as a ratio to a baseline measured in the same run on the same
machine (`judge`): machines of this kind differ 2-4x in speed, and one machine by up to 1.8x
between moments, so a miss must mean the code got worse, not the machine slower. Absolute
times are printed in the row for information. A figure that is a count or a correctness check
(events lost, a win share, events read per turn, a size in bytes) is judged as it is
(`check`).

Each judged figure is also appended as a JSON line to the file named by $BENCH_RESULTS (the
Makefile sets it; tests/bench/summary.py prints them all). A benchmark that missed any
target exits non-zero (`exit_code`) after printing all its figures, so `make bench` fails.

In smoke mode (`BENCH_SMOKE=1`, tests/bench/smoke.py) the figures come from the smallest
sizes and mean nothing: each row is printed and recorded with the verdict "smoke", and no
missed target makes the benchmark fail — except a correctness figure that holds at any size
(nothing lost, doubled or refused: `check(..., always=True)`), still judged, so that a path
that ran without doing its work (every delivery lost, every stream refused) fails too.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from tests.bench.smoke import SMOKE

_missed: list[str] = []
_header_printed = False
ROW = "{:<54}{:>14}{:>14}{:>10}{:>12}  {}"


def _number(value: float, unit: str) -> str:
    return f"{value:.4g}{' ' + unit if unit else ''}"


def _row(
    name: str, value: str, baseline: str, ratio: str, target: str, ok: bool, smoke: bool = SMOKE
) -> None:
    global _header_printed
    if not _header_printed:
        print(ROW.format("judged figure", "value", "baseline", "ratio", "target", "verdict"))
        _header_printed = True
    verdict = "smoke" if smoke else "ok" if ok else "MISSED"
    print(ROW.format(name, value, baseline, ratio, target, verdict), flush=True)


def _record(entry: dict[str, object], smoke: bool = SMOKE) -> None:
    if not entry["ok"] and not smoke:
        _missed.append(str(entry["name"]))
    path = os.environ.get("BENCH_RESULTS")
    if path:
        entry = {"bench": Path(sys.argv[0]).stem, **entry, "smoke": smoke}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def judge(
    name: str,
    value: float | None,
    baseline: float,
    *,
    max_ratio: float | None = None,
    min_ratio: float | None = None,
    unit: str = "ms",
) -> bool:
    """Judge `value / baseline` against `max_ratio` (at most) or `min_ratio` (at least);
    `value` None (the figure could not be measured) is a miss. Prints and records the row."""
    assert (max_ratio is None) != (min_ratio is None), "one bound"
    ratio = value / baseline if value is not None and baseline > 0 else math.inf
    if max_ratio is not None:
        ok, target = ratio <= max_ratio, f"≤ {max_ratio:g}x"
    else:
        assert min_ratio is not None
        ok, target = value is not None and ratio >= min_ratio, f"≥ {min_ratio:g}x"
    shown = "-" if value is None else _number(value, unit)
    kept = None if math.isinf(ratio) else ratio
    _row(name, shown, _number(baseline, unit), "-" if kept is None else f"{ratio:.3g}x", target, ok)
    _record({"name": name, "value": value, "baseline": baseline, "unit": unit, "ratio": kept,
             "target": target, "ok": ok})  # fmt: skip
    return ok


def check(
    name: str,
    value: float,
    *,
    at_most: float | None = None,
    at_least: float | None = None,
    more_than: float | None = None,
    unit: str = "",
    always: bool = False,
) -> bool:
    """Judge a count or a correctness figure against absolute bounds (not a speed figure);
    `always`: it holds at any size, so it is judged in smoke mode too."""
    tests = [(at_least, "≥", value >= (at_least or 0)), (more_than, ">", value > (more_than or 0)),
             (at_most, "≤", value <= (at_most or 0))]  # fmt: skip
    ok = all(passed for bound, _, passed in tests if bound is not None)
    bounds = [f"{sign} {bound:g}" for bound, sign, _ in tests if bound is not None]
    target = ", ".join(bounds) + (f" {unit}" if unit else "")
    smoke = SMOKE and not always
    _row(name, _number(value, unit), "-", "-", target, ok, smoke)
    _record({"name": name, "value": value, "baseline": None, "unit": unit, "ratio": None,
             "target": target, "ok": ok}, smoke)  # fmt: skip
    return ok


def exit_code() -> int:
    """1 if any figure missed its target (named on stderr), else 0."""
    if _missed:
        print(f"MISSED {len(_missed)} target(s): {', '.join(_missed)}", file=sys.stderr)
        return 1
    return 0
