"""Finished games for the archive's tests and benchmark: random games with their score
streams, as `ArchivedGame`s or appended to a real Redis as the services append them."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.archive import ArchivedGame, GameMeta, RawEvent
from eventstore.envelope import MOVES, SCORES, NewEvent, StoredEvent
from eventstore.schemas import to_new
from eventstore.score_stream import score_events


def turns(seed: int) -> list[list[NewEvent]]:
    """A whole random 2-4 player game's move events, split into turns (a `TilePlaced` and
    what follows it), the first turn the game's start."""
    _, events = random_game(random.Random(seed), 2 + seed % 3, Ruleset())
    out: list[list[NewEvent]] = [[]]
    for event in events:
        if type(event).__name__ == "TilePlaced" and out[-1]:
            out.append([])
        out[-1].append(to_new(event))
    return out


def scored(moves: list[NewEvent]) -> list[tuple[int, list[NewEvent]]]:
    """The score events of a move stream, grouped by the move that caused them."""
    stored = [StoredEvent("g", MOVES, i + 1, e.type, e.version, 0, "", e.payload)
              for i, e in enumerate(moves)]  # fmt: skip
    groups: dict[int, list[NewEvent]] = {}
    for event in score_events(GameState(), stored):
        groups.setdefault(int(event.payload["move"]), []).append(event)
    return sorted(groups.items())


def archived(game_id: str, seed: int, names: list[str] | None = None) -> ArchivedGame:
    """A finished game as the archiver would copy it (uuid command ids, real-looking times)."""
    rng = random.Random(seed)
    moves: list[RawEvent] = []
    at = 1_790_000_000_000 + rng.randrange(10**9)
    for i, turn in enumerate(turns(seed)):
        at += rng.randrange(2_000, 40_000)
        cmd = "create" if i == 0 else uuid.UUID(int=rng.getrandbits(128)).hex
        for e in turn:
            moves.append(RawEvent(MOVES, len(moves) + 1, e.type, e.version, at, cmd,
                                  json.dumps(e.payload, separators=(",", ":"))))  # fmt: skip
    scores: list[RawEvent] = []
    for move, events in scored([NewEvent(m.type, m.version, json.loads(m.data)) for m in moves]):
        for e in events:
            scores.append(RawEvent(SCORES, len(scores) + 1, e.type, e.version, at,
                                   f"score:{move}-{move}", json.dumps(e.payload)))  # fmt: skip
    players = names or [f"Player {i}" for i in range(len(json.loads(moves[0].data)["players"]))]
    record: dict[str, Any] = {"names": players, "player_ids": [f"u-{seed}-{i}" for i in
                              range(len(players))], "key_id": f"k{seed % 7}"}  # fmt: skip
    meta = GameMeta("over", moves[0].time_ms, moves[-1].time_ms, record)
    markers = {MOVES: str(len(moves)), SCORES: str(len(moves))}
    return ArchivedGame(game_id, meta, tuple(moves + scores), markers,
                        {SCORES: {"score:9-9": "9:8"}})  # fmt: skip


def play(
    store: Any,
    seed: int,
    names: list[str] | None = None,
    score_every: int = 10,
    record: dict[str, Any] | None = None,
) -> str:
    """A whole random game appended to a `RedisEventStore` turn by turn as the command
    service appends it (its secrets record first, with `record`'s fields, uuid command ids,
    a fingerprint on every other turn), scored by a real `Scorer` every `score_every` turns
    and at the end."""
    from services.redis_store.keys import new_game_id
    from services.redis_store.seats import write_both
    from services.scoring.scorer import Scorer

    rng = random.Random(f"play-{seed}")
    game_id = new_game_id(rng)
    played = turns(seed)
    seats = names or [f"Player {i}" for i in range(len(played[0][0].payload["players"]))]
    secrets = {"seed": "s" * 32, "names": seats, "tokens": {"h" * 64: 0},
               "player_ids": [f"u{seed}-{i}" for i in range(len(seats))]}  # fmt: skip
    secrets.update(record or {})
    write_both(store.client, game_id, secrets)  # secrets and seats, as the service writes
    scorer = Scorer(store)
    at = 0
    for i, turn in enumerate(played):
        cmd = "create" if i == 0 else uuid.UUID(int=rng.getrandbits(128)).hex
        store.append(game_id, MOVES, turn, expected=at, command_id=cmd, marker="$seq",
                     fingerprint=f"fp{i}" if i % 2 else "")  # fmt: skip
        at += len(turn)
        if i % score_every == 0:
            scorer.catch_up(game_id)
    scorer.catch_up(game_id)
    return game_id
