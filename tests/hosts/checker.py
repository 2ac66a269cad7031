"""After the faults are healed: the final logs read back and held against the clients'
history (tests/hosts/history.py), in the manner of Jepsen's checkers.

- every turn answered 200 is in its game's log at the seqs it was told, the same events;
- each game's log holds each seq once (1..n, no gap, no double);
- no command id (`turn:<seat>:<Idempotency-Key>`) appears in two places of a log, and of two
  writers of the same turn at most one was applied;
- every command in a log is one somebody sent: the game's creation, a turn of a human seat
  with a key a client sent for that game, or a bot seat's turn (`bot:<game>:<seq>`, played
  by the bot worker and acknowledged to nobody, so only its place is checked: right after
  the seq it names, in a game with a bot seat);
- the worker's final scores equal `carcassonne score` of the exported record, and an
  unfinished game's score stream is exactly the score events of its moves.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.score_stream import GAME_SCORED, score_events
from services.redis_store import RedisEventStore
from tests.hosts.history import History, Op
from tests.hosts.suite import ROOT


@dataclass
class Verdict:
    """What the checker found: the acknowledged ops lost, and every broken invariant."""

    lost: list[Op] = field(default_factory=list)
    doubled_seqs: list[str] = field(default_factory=list)
    applied_twice: list[str] = field(default_factory=list)
    both_racers: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # commands nobody sent (or misplaced)
    rewritten: list[str] = field(default_factory=list)  # logs changed after the load but growing
    wrong_scores: list[str] = field(default_factory=list)
    # Games the worker had not scored to their last move a minute after the load stopped,
    # those that lost acknowledged turns and the others (measured and reported, not asserted:
    # deploy/README.md "Faults on a real network").
    unscored_after_loss: list[str] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)
    games: int = 0
    finished: int = 0
    bot_turns: int = 0  # bot seats' turns in the final logs

    def problems(self) -> list[str]:
        """Every broken invariant but the lost acknowledged turns (reported per fault)."""
        return [
            *self.doubled_seqs,
            *self.applied_twice,
            *self.both_racers,
            *self.foreign,
            *self.rewritten,
            *self.wrong_scores,
        ]

    def late(self) -> list[str]:
        """Every game left unscored."""
        return [*self.unscored_after_loss, *self.unscored]


def _same(op_event: dict[str, object], stored: StoredEvent) -> bool:
    return (op_event["seq"], op_event["type"], op_event["payload"]) == (
        stored.seq,
        stored.type,
        stored.payload,
    )


def check(store: RedisEventStore, history: History, query_bases: list[str]) -> Verdict:
    """Read every played game's log and check it against `history` (the exports for the
    CLI's scores read from each of `query_bases` in turn)."""
    verdict = Verdict()
    by_game: dict[str, list[Op]] = defaultdict(list)
    for op in history.ops:
        if op.game:
            by_game[op.game].append(op)
    logs = {game: store.read(game, MOVES) for game in history.games}
    verdict.games = len(logs)
    for game, events in logs.items():
        seqs = [e.seq for e in events]
        if seqs != list(range(1, len(seqs) + 1)):
            verdict.doubled_seqs.append(f"{game}: seqs {seqs[:5]}… not 1..{len(seqs)}")
        at = {e.seq: e for e in events}
        places: dict[str, list[int]] = defaultdict(list)  # command id -> where its runs start
        for e in events:
            if e.seq - 1 not in at or at[e.seq - 1].command_id != e.command_id:
                places[e.command_id].append(e.seq)
        for command, starts in places.items():
            if len(starts) > 1:
                verdict.applied_twice.append(f"{game}: {command} applied at {starts}")
        keys = {c.rsplit(":", 1)[-1] for c in places if c.startswith("turn:")}
        sent = {op.key for op in by_game.get(game, []) if op.key}
        for command, starts in places.items():
            why = _foreign(game, command, starts[0], history.bots.get(game, set()), sent)
            verdict.foreign += [f"{game}: {command} at {starts[0]}: {why}"] if why else []
            verdict.bot_turns += command.startswith("bot:")
        for op in by_game.get(game, []):
            if op.outcome == "ok" and not all(
                e["seq"] in at and _same(e, at[e["seq"]]) for e in op.events
            ):
                verdict.lost.append(op)
        racers: dict[tuple[str, str], set[str]] = defaultdict(set)  # a turn's racing keys
        for op in by_game.get(game, []):
            if op.racer:
                racers[(json.dumps(op.body, sort_keys=True), op.client)].add(op.key)
        for (body, _), pair in racers.items():
            if len(pair & keys) > 1:
                verdict.both_racers.append(f"{game}: both writers of {body} applied")
    _check_scores(store, logs, query_bases, verdict, {op.game for op in verdict.lost})
    return verdict


def _foreign(game: str, command: str, start: int, bots: set[int], sent: set[str]) -> str:
    """Why `command`, applied from seq `start` on, is one nobody sent ("" when it is not)."""
    kind, _, rest = command.partition(":")
    if command == "create":
        return "" if start == 1 else "a creation after the first seq"
    if kind == "turn":
        seat, _, key = rest.partition(":")
        if int(seat) in bots:
            return "a turn sent for a bot seat"
        return "" if key in sent else "a key no client sent for this game"
    if kind == "bot":
        if not bots:
            return "a bot's turn in a game without a bot seat"
        named = f"{game}:{start - 1}"
        return "" if rest == named else f"a bot's turn decided at another seq than {start - 1}"
    return "a command of no kind the clients or the bot worker send"


def dump_logs(store: RedisEventStore, games: list[str], path: Path) -> None:
    """Each game's final move log as a JSON line (seq, command id, type), for a post-mortem:
    the cluster is gone once the test ends."""
    with path.open("w") as out:
        for game in games:
            rows = [(e.seq, e.command_id, e.type) for e in store.read(game, MOVES)]
            out.write(json.dumps({"game": game, "moves": rows}) + "\n")


def wait_scored(store: RedisEventStore, games: list[str], timeout: float = 60.0) -> list[str]:
    """Wait until the worker has scored every move of every game; the games still behind."""
    deadline = time.monotonic() + timeout
    late = list(games)
    while late and time.monotonic() < deadline:
        late = [g for g in late if int(store.marker(g, SCORES) or 0) != store.last_seq(g, MOVES)]
        if late:
            time.sleep(0.2)
    return late


def _settled(
    store: RedisEventStore, game: str, timeout: float = 30.0
) -> tuple[list[StoredEvent], list[StoredEvent]] | None:
    """The game's moves and scores as of one moment, every move scored: read between two
    reads of the scores' marker that agree with the last move (a marker only grows once the
    faults are healed); None if that never happens within `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        before = int(store.marker(game, SCORES) or 0)
        moves, scores = store.read(game, MOVES), store.read(game, SCORES)
        after = int(store.marker(game, SCORES) or 0)
        if before == after == (moves[-1].seq if moves else 0) == store.last_seq(game, MOVES):
            return moves, scores
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def _check_scores(
    store: RedisEventStore,
    logs: dict[str, list[StoredEvent]],
    query_bases: list[str],
    verdict: Verdict,
    rewound: set[str],
) -> None:
    late = wait_scored(store, list(logs))
    for game in late:
        marker, last = store.marker(game, SCORES), store.last_seq(game, MOVES)
        found = f"{game}: scored up to move {marker}, its log ends at {last}"
        (verdict.unscored_after_loss if game in rewound else verdict.unscored).append(found)
    for index, (game, checked) in enumerate(logs.items()):
        if game in late or not checked:
            continue
        # The bot worker may still play a bot's turn after the clients stopped (its task
        # re-sent by the sweep), so the moves and scores are read again, together.
        snapshot = _settled(store, game)
        if snapshot is None:
            verdict.unscored.append(f"{game}: its moves or scores kept changing")
            continue
        moves, scores = snapshot
        if [(e.seq, e.command_id) for e in moves[: len(checked)]] != [
            (e.seq, e.command_id) for e in checked
        ]:
            verdict.rewritten.append(
                f"{game}: its log changed after the load other than by growing"
            )
        expected = [(e.type, e.payload) for e in score_events(GameState(), moves)]
        if [(e.type, e.payload) for e in scores] != expected:
            verdict.wrong_scores.append(f"{game}: score stream differs from its moves' scoring")
        if not scores or scores[-1].type != GAME_SCORED:
            continue
        verdict.finished += 1
        cli = cli_score(query_bases[index % len(query_bases)], game)
        if scores[-1].payload["final_scores"] != cli:
            verdict.wrong_scores.append(
                f"{game}: worker {scores[-1].payload['final_scores']} != CLI {cli}"
            )


def cli_score(query_base: str, game: str) -> list[int]:
    """`carcassonne score` of the game's exported record (GET /games/{id}/events, NDJSON)."""
    export = _export(query_base, game)
    done = subprocess.run(
        [sys.executable, "-m", "carcassonne.cli", "score", "-"],
        input=export, capture_output=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"carcassonne score {game}: {done.stderr.decode()}")
    return list(json.loads(done.stdout)["final_scores"])


def _export(query_base: str, game: str) -> bytes:
    host, port = query_base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", f"/games/{game}/events?format=ndjson")
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        raise AssertionError(f"export of {game} answered {resp.status}")
    return body
