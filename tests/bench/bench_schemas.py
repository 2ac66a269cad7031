"""The schema work a turn's payloads cost on their way through the services (`make bench`).

A turn's payloads meet marshmallow schemas on their way: the turn's HTTP body (`TurnIn`,
loaded by webargs as `schema.load(body)`), the command service's append of its move events
(`check_append`), the scoring worker's making and appending of the score events they cause,
and the readers of both streams (`EventStore.read` upcasts each event it returns). This
measures those real calls, in process and without Redis, over the payloads of whole random
games, per placed tile.

Baseline, in the same run: plain marshmallow (`marshmallow.Schema.load`, whatever the
schema's class) loading each of the same payloads once — the body and every move and score
event. A ratio below 1 means the path does less than check everything once with marshmallow.

Times are this thread's CPU time (`time.thread_time_ns`): pure computation, and on a shared
2-core machine wall time would count the other programs' slices too.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from marshmallow import Schema

from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES, NewEvent, StoredEvent
from eventstore.port import check_append
from eventstore.schemas import SCHEMAS, to_new, upcast
from eventstore.score_stream import _new, score_events
from services.command.schemas import TurnIn
from tests.bench.smoke import size
from tests.bench.targets import exit_code, judge

TURN_IN = TurnIn()  # one instance, as the route's `@blp.arguments(TurnIn())`
# The path's schema work as a ratio to marshmallow checking each payload once. It was
# 0.288-0.296x when every event was checked on write and again on read through a compiled
# quick path (eventstore/fastload.py, deleted: this bench, three runs on commit 735fe8d);
# checking at the edge only (0.26x) must not cost more.
MAX_RATIO = 0.28
# A turn body through `TurnIn.plain_turn` against marshmallow's walk of it: the plain path
# stays only while it saves most of that walk (it measured 0.03-0.04x when it came).
MAX_PLAIN_BODY = 0.25


@dataclass
class Game:
    """One random game's payloads as the services see them."""

    bodies: list[dict[str, Any]] = field(default_factory=list)  # one turn body per placement
    appends: list[list[NewEvent]] = field(default_factory=list)  # the move appends, per turn
    moves: list[StoredEvent] = field(default_factory=list)
    scored: list[NewEvent] = field(default_factory=list)
    scores: list[StoredEvent] = field(default_factory=list)


def _stored(stream: str, events: list[NewEvent]) -> list[StoredEvent]:
    return [
        StoredEvent("g", stream, i, e.type, e.version, 0, "c", e.payload)
        for i, e in enumerate(events, 1)
    ]


def make_game(rng: random.Random) -> Game:
    """A random 2-player game (farmers on): its turn bodies, appends and stored events."""
    _, events = random_game(rng, 2)
    game = Game()
    for new in map(to_new, events):
        if new.type in ("TilePlaced", "GameStarted") or not game.appends:
            game.appends.append([])  # a turn's append starts with its placement
        game.appends[-1].append(new)
        if new.type == "TilePlaced":
            p = new.payload
            game.bodies.append(
                {"x": p["x"], "y": p["y"], "rotation": p["rotation"], "meeple": p["meeple"]}
            )
    game.moves = _stored(MOVES, [e for chunk in game.appends for e in chunk])
    game.scored = score_events(GameState(), game.moves)
    game.scores = _stored(SCORES, game.scored)
    return game


def edge(games: list[Game]) -> None:
    """The command service loads each turn's body (webargs: `schema.load(body)`)."""
    for game in games:
        for body in game.bodies:
            TURN_IN.load(body)


def writes(games: list[Game]) -> None:
    """The command service appends each turn's moves; the scoring worker makes the score
    events (`score_stream._new`, as `score_events` does) and appends them."""
    for game in games:
        for chunk in game.appends:
            check_append(MOVES, chunk, "turn")
        made = [_new(e.type, e.payload) for e in game.scored]
        check_append(SCORES, made, "scores")


def reads(games: list[Game]) -> None:
    """One reader of each stream (the scoring worker's of the moves, the query service's of
    the scores): `EventStore.read` upcasts every event it returns."""
    for game in games:
        for stored in game.moves:
            upcast(stored)
        for stored in game.scores:
            upcast(stored)


def body_fields(games: list[Game]) -> None:
    """The edge's baseline: marshmallow's field by field walk of each turn body."""
    for game in games:
        for body in game.bodies:
            Schema.load(TURN_IN, body)


def path(games: list[Game]) -> None:
    """All the services' schema work on the payloads: the same calls as they make."""
    edge(games)
    writes(games)
    reads(games)


def marshmallow_once(games: list[Game]) -> None:
    """The baseline: plain marshmallow loads every payload once."""
    for game in games:
        for body in game.bodies:
            Schema.load(TURN_IN, body)
        for stored in game.moves + game.scores:
            Schema.load(SCHEMAS[(stored.type, stored.version)], stored.payload)


def _cpu_ms(fn: Callable[[list[Game]], None], games: list[Game]) -> float:
    t0 = time.thread_time_ns()
    fn(games)
    return (time.thread_time_ns() - t0) / 1e6


def main() -> int:
    """Run the benchmark and print the figure (or JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=size(10, 1), help="random games")
    parser.add_argument("--rounds", type=int, default=size(25, 2), help="alternating rounds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    rng = random.Random(2027)
    games = [make_game(rng) for _ in range(args.games)]
    turns = sum(len(g.bodies) for g in games)
    stages: dict[str, Callable[[list[Game]], None]] = {
        "path": path,
        "edge": edge,
        "writes": writes,
        "reads": reads,
        "marshmallow_once": marshmallow_once,
        "body_fields": body_fields,
    }
    for run in stages.values():  # warm: compiled loaders, schema caches
        run(games)
    samples: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(args.rounds):  # alternated, so a slow moment of the machine hits all
        for name, run in stages.items():
            samples[name].append(_cpu_ms(run, games))
    figures: dict[str, Any] = {
        "turns": turns,
        "events_per_turn": sum(len(g.moves) + len(g.scores) for g in games) / turns,
        # The best round of each: a slower one measured the machine's other work (its caches,
        # its clock), as timeit's documentation says of repeated timings.
        **{f"{n}_us_per_turn": min(s) * 1000 / turns for n, s in samples.items()},
    }
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"schema work per placed tile over {turns} turns of {args.games} random games "
        f"({figures['events_per_turn']:.2f} stored events a turn); CPU µs, the best of "
        f"{args.rounds} rounds: the HTTP edge {figures['edge_us_per_turn']:.1f}, the appends "
        f"{figures['writes_us_per_turn']:.1f}, the reads {figures['reads_us_per_turn']:.1f}"
    )
    judge(
        "turn body + events' schema work / marshmallow once",
        figures["path_us_per_turn"],
        figures["marshmallow_once_us_per_turn"],
        max_ratio=MAX_RATIO,
        unit="µs",
    )
    judge(
        "turn body: TurnIn.load (plain path) / marshmallow's field walk",
        figures["edge_us_per_turn"],
        figures["body_fields_us_per_turn"],
        max_ratio=MAX_PLAIN_BODY,
        unit="µs",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
