"""Many stored finished games, written cheaply (for the index tests and bench_indexes): each
game is two runs of the store's own append script, pipelined — its move stream (GameStarted
and GameEnded, minimal payloads) with the moves marker, then the score stream's progress —
so every game's events and its change feed entry are written exactly as a real game's
append writes them. The indexes are then built as in production: by the feed's consumers
(`follow_all`), before anything reads them."""

from __future__ import annotations

import json
import random
from typing import Any

import redis

from eventstore.envelope import MOVES, SCORES
from services.archive.archiver import ArchiveDue
from services.redis_store import RedisEventStore, game_keys, secrets_key
from services.redis_store.changes import Change, Follower, Write, changes_key
from services.redis_store.directory_index import DirectoryIndex
from services.redis_store.indexes import marker_number
from services.redis_store.keys import archived_key, new_game_id, seats_key, shard_of
from services.redis_store.store import APPEND_LUA
from services.scoring import subscriptions
from services.scoring.ratings import RatingsConsumer
from services.scoring.timer import TimerIndex


def _append_args(
    game_id: str, stream: str, time_ms: int, marker: str, events: list[tuple[str, int, str]]
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of the store's append script, as `RedisEventStore.append` builds them:
    the game's stream, command hash and marker, its tombstone, then its shard's change feed;
    expected (any), command id, time, marker, expected marker (none), fingerprint (none),
    game, stream, trace (none), after command (none), then (type, version, payload) per
    event. (test_indexes checks them against the store's own.)"""
    shard = shard_of(game_id)
    assert shard is not None
    keys = [*game_keys(game_id, stream), archived_key(game_id), changes_key(shard)]
    args: list[Any] = [-1, f"bulk-{stream}", time_ms, marker, "", "", game_id, stream, "", ""]
    for kind, version, payload in events:
        args += [kind, version, payload]
    return keys, args


def scored_already(client: redis.Redis) -> Follower:
    """Stands in for the scoring consumer (services/scoring/celery_app.py `score_changes`,
    which scores each game of a batch and writes nothing beside its position) over games
    written fully scored: it checks that each one is (one pipelined read per batch) and
    scores nothing. Leased like the worker's."""

    def check(shard: int, changes: list[Change]) -> list[Write]:
        games = list(dict.fromkeys(c.game_id for c in changes if c.stream == MOVES))
        pipe = client.pipeline(transaction=False)
        for game_id in games:
            pipe.get(game_keys(game_id, MOVES)[2])
            pipe.get(game_keys(game_id, SCORES)[2])
        values = pipe.execute()
        behind = [g for i, g in enumerate(games)
                  if marker_number(values[2 * i]) != marker_number(values[2 * i + 1])]  # fmt: skip
        assert not behind, f"games not scored: {behind[:3]}"
        return []

    return Follower(client, "scoring", check, lease_ms=30_000)


def consumers(client: redis.Redis) -> list[Follower]:
    """The change feed's consumers, in the order the worker's sweep runs them (services/
    scoring/celery_app.py `followers`): the games directory, the turn timer's indexes,
    scoring (`scored_already`), the subscriptions' due index (webhooks included), the
    archive's due index, the ratings."""
    return [
        DirectoryIndex(client).follower,
        TimerIndex(RedisEventStore(client), client).follower,
        scored_already(client),
        subscriptions.due_follower(client),
        ArchiveDue(client, 3_600_000).follower,
        RatingsConsumer(client, RedisEventStore(client)).follower,
    ]


def follow_all(client: redis.Redis) -> int:
    """Every consumer caught up with the feed (the indexes built from it); the changes
    applied."""
    return sum(follower.catch_up() for follower in consumers(client))


def write_finished_games(
    client: redis.Redis,
    count: int,
    start_ms: int,
    seed: int = 0,
    chunk: int = 500,
    key_id: str | None = None,
) -> list[str]:
    """`count` finished and fully scored games created 1 ms apart from `start_ms`, every
    consumer of the change feed caught up with them (so a reader timed or counted next
    finds its indexes built and nothing new on the feed). With `key_id`, each was created
    with that API key: its secrets record names the key (written before its first append,
    as the command service does), so the key's own indexes list it."""
    sha = str(client.script_load(APPEND_LUA))
    rng = random.Random(seed)
    ids: list[str] = []
    for first in range(0, count, chunk):
        pipe = client.pipeline(transaction=False)
        for i in range(first, min(count, first + chunk)):
            game_id = new_game_id(rng)
            at = start_ms + i
            if key_id is not None:
                pipe.set(secrets_key(game_id), json.dumps({"key_id": key_id}))
                pipe.set(seats_key(game_id), json.dumps({"names": [], "key_id": key_id}))
            moves = [("GameStarted", 1, '{"players":2}'), ("GameEnded", 1, "{}")]
            for stream, marker, events in ((MOVES, "$seq", moves), (SCORES, "2", [])):
                keys, args = _append_args(game_id, stream, at, marker, events)
                pipe.evalsha(sha, len(keys), *keys, *args)
            ids.append(game_id)
        pipe.execute()
    follow_all(client)
    return ids
