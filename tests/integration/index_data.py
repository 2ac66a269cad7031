"""Many stored finished games, written cheaply (for the index tests and bench_indexes): each
game is two runs of the store's own append script, pipelined — its move stream (GameStarted
and GameEnded, minimal payloads) with the moves marker, then the score stream's progress —
so every index entry is written exactly as a real game's append writes it."""

from __future__ import annotations

import random
from typing import Any

import redis

from eventstore.envelope import MOVES, SCORES
from services.redis_store import game_keys
from services.redis_store.keys import (
    ABANDONED,
    IN_PROGRESS,
    OVER,
    deadlines_key,
    games_key,
    hooks_due_key,
    hooks_key,
    idle_key,
    new_game_id,
    shard_of,
    status_key,
    unscored_key,
)
from services.redis_store.store import APPEND_LUA


def _append_args(
    game_id: str, stream: str, time_ms: int, marker: str, events: list[tuple[str, str]]
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of the store's append script, as `RedisEventStore.append` builds them."""
    shard = shard_of(game_id)
    assert shard is not None
    keys = list(game_keys(game_id, stream))
    if stream == MOVES:
        keys += [unscored_key(shard), game_keys(game_id, SCORES)[2], games_key(shard),
                 status_key(shard, IN_PROGRESS), status_key(shard, OVER),
                 status_key(shard, ABANDONED), deadlines_key(shard), idle_key(shard)]  # fmt: skip
        mode = "m"
    else:
        keys += [unscored_key(shard), game_keys(game_id, MOVES)[2], game_keys(game_id, MOVES)[0],
                 hooks_key(game_id), hooks_due_key(shard)]  # fmt: skip
        mode = "s"
    args: list[Any] = [-1, f"bulk-{stream}", time_ms, marker, "", 0, "", mode, game_id, ""]
    for kind, payload in events:
        args += [kind, 1, payload]
    return keys, args


def write_finished_games(
    client: redis.Redis, count: int, start_ms: int, seed: int = 0, chunk: int = 500
) -> list[str]:
    """`count` finished and fully scored games created 1 ms apart from `start_ms`."""
    sha = str(client.script_load(APPEND_LUA))
    rng = random.Random(seed)
    ids: list[str] = []
    for first in range(0, count, chunk):
        pipe = client.pipeline(transaction=False)
        for i in range(first, min(count, first + chunk)):
            game_id = new_game_id(rng)
            at = start_ms + i
            moves = [("GameStarted", '{"players":2}'), ("GameEnded", "{}")]
            for stream, marker, events in ((MOVES, "$seq", moves), (SCORES, "2", [])):
                keys, args = _append_args(game_id, stream, at, marker, events)
                pipe.evalsha(sha, len(keys), *keys, *args)
            ids.append(game_id)
        pipe.execute()
    return ids
