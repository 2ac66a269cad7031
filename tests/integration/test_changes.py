"""The change feed (services/redis_store/changes.py) on a real Redis: one entry per append,
written in the append's own script; followers that record their output with their position;
a consumer added without touching the append script; a real scoring worker that was down
catching up with nothing lost or doubled."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
import redis

from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.errors import ConcurrencyError
from eventstore.schemas import to_engine, to_new
from eventstore.score_stream import score_events
from services.redis_store import RedisEventStore
from services.redis_store.changes import (
    START,
    Change,
    Follower,
    Write,
    changes_key,
    follow,
    positions_key,
    trim,
)
from services.redis_store.keys import new_game_id, shard_of
from tests.integration.workers import celery_env, running, wait_scored, worker
from tests.redis_server import private_redis

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("own_consumers")]


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def play(
    store: RedisEventStore, seed: int, per_append: int = 3, shard: int | None = None
) -> tuple[str, int]:
    """A whole random game appended a few events at a time, as the command service does
    (in `shard`'s feed when given); (game id, appends)."""
    ids = random.Random(f"{seed}-{time.time_ns()}")
    game_id = new_game_id(ids)
    for _ in range(10_000):  # 1 in 64 ids is in a given shard
        if shard is None or shard_of(game_id) == shard:
            break
        game_id = new_game_id(ids)
    _, events = random_game(random.Random(seed), 2 + seed % 3, Ruleset())
    appends = 0
    for start in range(0, len(events), per_append):
        store.append(game_id, MOVES, [to_new(e) for e in events[start : start + per_append]],
                     expected=start, command_id=f"c{start}", marker="$seq")  # fmt: skip
        appends += 1
    return game_id, appends


def entries_of(client: redis.Redis, game_id: str) -> list[Change]:
    shard = shard_of(game_id)
    assert shard is not None
    raw: Any = client.xrange(changes_key(shard))
    return [c for c in (Change.parse(i, f) for i, f in raw) if c.game_id == game_id]


def test_every_append_with_events_has_exactly_one_feed_entry(redis_client, store) -> None:
    game_id, appends = play(store, 1)
    moves = store.read(game_id, MOVES)
    changes = entries_of(redis_client, game_id)
    assert len(changes) == appends
    assert [(c.first, c.last) for c in changes] == [
        (s + 1, min(s + 3, len(moves))) for s in range(0, len(moves), 3)
    ]
    for change in changes:  # the types, the time and the stream of the events it points to
        events = moves[change.first - 1 : change.last]
        assert change.types == tuple(e.type for e in events)
        assert change.time_ms == events[0].time_ms and change.stream == MOVES
    # A duplicate and a conflict add no entry.
    store.append(game_id, MOVES, [to_new(to_engine(moves[0]))], expected=0, command_id="c0",
                 marker="$seq")  # fmt: skip
    with pytest.raises(ConcurrencyError):
        store.append(game_id, MOVES, [to_new(to_engine(moves[0]))], expected=1,
                     command_id="late", marker="$seq")  # fmt: skip
    assert len(entries_of(redis_client, game_id)) == appends
    # Progress saved without events (scoring that found nothing to score) is a change too.
    store.append(game_id, SCORES, [], expected=0, command_id="p", marker="5")
    progress = entries_of(redis_client, game_id)[-1]
    assert (progress.stream, progress.first, progress.last, progress.types) == (SCORES, 1, 0, ())


def moves_counter(client: redis.Redis, key: str, calls: list[int] | None = None) -> Follower:
    """The tiny consumer: per game, how many move events were appended (a hash), built only
    from the feed (no change to the append script)."""

    def writes(shard: int, changes: list[Change]) -> list[Write]:
        if calls is not None:
            calls.append(len(changes))
        return [Write("hincrby", key, c.game_id, c.last - c.first + 1)
                for c in changes if c.stream == MOVES]  # fmt: skip

    return Follower(client, f"counter-{key}", writes, batch=7)


def test_a_new_consumer_follows_the_feed_and_never_counts_twice(redis_client, store) -> None:
    games = [play(store, seed)[0] for seed in range(2, 6)]
    key = f"counts-{time.time_ns()}"  # its own hash (any key will do on a single Redis)
    counter = moves_counter(redis_client, key)
    counter.catch_up()
    counts = {g: int(redis_client.hget(key, g) or 0) for g in games}
    assert counts == {g: store.last_seq(g, MOVES) for g in games}
    assert counter.catch_up() == 0  # nothing new: nothing applied again
    # Four followers of the same consumer racing over new appends: each batch applied once.
    more = [play(store, seed)[0] for seed in range(6, 9)]
    rivals = [moves_counter(redis_client, key) for _ in range(4)]
    threads = [threading.Thread(target=f.catch_up) for f in rivals]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert {g: int(redis_client.hget(key, g) or 0) for g in games + more} == {
        g: store.last_seq(g, MOVES) for g in games + more
    }


def test_a_follower_that_fails_mid_batch_writes_nothing_and_redoes_it(redis_client, store) -> None:
    game_id, _ = play(store, 9)
    key = f"counts-{time.time_ns()}"
    boom = {"left": 1}

    def writes(shard: int, changes: list[Change]) -> list[Write]:
        if boom["left"] and any(c.game_id == game_id for c in changes):
            boom["left"] -= 1
            raise RuntimeError("killed mid-batch")
        return [Write("hincrby", key, c.game_id, c.last - c.first + 1) for c in changes]

    follower = Follower(redis_client, f"fragile-{key}", writes)
    shard = shard_of(game_id)
    assert shard is not None
    with pytest.raises(RuntimeError):
        follower.catch_up([shard])
    assert redis_client.hget(key, game_id) is None
    assert follower.positions([shard])[shard] == START
    follower.catch_up([shard])
    assert int(redis_client.hget(key, game_id) or 0) == store.last_seq(game_id, MOVES)


def test_one_shared_read_serves_several_followers_as_their_own_catch_up_would(
    redis_client, store
) -> None:
    """`follow` (a watcher's round) reads every follower's position and the feeds once for
    all of them: followers at different positions, with batches smaller than the entries
    waiting, each end up having applied every entry exactly once."""
    shard = shard_of(play(store, 20)[0])
    assert shard is not None
    games = [play(store, seed, shard=shard)[0] for seed in range(21, 23)]
    shards = [shard]
    keys = [f"counts-{i}-{time.time_ns()}" for i in range(3)]
    ahead, behind, small = (moves_counter(redis_client, k) for k in keys)
    small.batch = 2  # below the shared read's count: it reads the rest itself
    ahead.catch_up(shards)  # one consumer already up to date, the others from the start
    more = [play(store, seed, shard=shard)[0] for seed in range(24, 26)]
    assert follow([ahead, behind, small], shards) > 0
    for key in keys:
        assert {g: int(redis_client.hget(key, g) or 0) for g in games + more} == {
            g: store.last_seq(g, MOVES) for g in games + more
        }
    assert follow([ahead, behind, small], shards) == 0  # nothing new: nothing applied again


@pytest.mark.parametrize("appends", [True, False])
def test_a_follower_after_one_that_appends_sees_its_output_in_the_same_round(
    redis_client, store, appends: bool
) -> None:
    """A follower marked `appends` (scoring: its output is score events, with feed entries
    of their own) makes `follow` read the feeds again for the followers after it, so they
    see its output at once (the ratings consumer reads final scores); unmarked, they see it
    only on the next round."""
    game_id, _ = play(store, 27)
    shard = shard_of(game_id)
    assert shard is not None
    follow_all_of = [moves_counter(redis_client, f"warm-{time.time_ns()}")]
    follow(follow_all_of, [shard])  # nothing else waiting in the shard for the test's pair
    name = time.time_ns()

    def score(_: int, changes: list[Change]) -> list[Write]:
        if any(c.game_id == game_id and c.stream == MOVES for c in changes):
            store.append(game_id, SCORES, [], expected=0, command_id=f"s{name}", marker="1")
        return []

    seen: list[str] = []

    def read_scores(_: int, changes: list[Change]) -> list[Write]:
        seen.extend(c.game_id for c in changes if c.stream == SCORES)
        return []

    scorer = Follower(redis_client, f"appender-{name}", score, appends=appends)
    reader = Follower(redis_client, f"reader-{name}", read_scores)
    follow([scorer, reader], [shard])
    assert (game_id in seen) is appends
    follow([scorer, reader], [shard])
    assert seen.count(game_id) == 1  # the next round, either way; and once


def test_the_feed_is_trimmed_only_below_every_consumers_position() -> None:
    """On a Redis of its own: trimming the session's feed would take entries from the other
    tests' consumers that are not registered yet."""
    with private_redis() as url:
        trimmed_alone(redis.Redis.from_url(url))


def trimmed_alone(redis_client: redis.Redis) -> None:
    store = RedisEventStore(redis_client)
    game_id, appends = play(store, 10)
    shard = shard_of(game_id)
    assert shard is not None
    fast = moves_counter(redis_client, f"fast-{time.time_ns()}")
    fast.catch_up([shard])
    slow_name = f"slow-{time.time_ns()}"
    redis_client.hset(positions_key(shard), slow_name, START)  # registered, handled nothing
    trim(redis_client, [shard])
    assert len(entries_of(redis_client, game_id)) == appends  # the slow one still needs them
    redis_client.hdel(positions_key(shard), slow_name)
    others: Any = redis_client.hgetall(positions_key(shard))
    trim(redis_client, [shard])
    lowest = min(tuple(int(p) for p in v.decode().split("-")) for v in others.values())
    kept: Any = redis_client.xrange(changes_key(shard))
    assert all(tuple(int(p) for p in i.decode().split("-")) >= lowest for i, _ in kept)


def rescored(store: RedisEventStore, game_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The game's score events computed afresh from its moves (what a scorer must append)."""
    return [(e.type, e.payload) for e in score_events(GameState(), store.read(game_id, MOVES))]


@pytest.mark.slow
def test_a_worker_down_while_games_are_played_catches_up_exactly(redis_url, redis_client) -> None:
    """Games appended while no scoring worker runs are all scored once a worker starts (it
    watches the change feed: no task was sent for any of them), each exactly once; a second
    worker started meanwhile doubles nothing."""
    store = RedisEventStore(redis_client)
    games = [play(store, 100 + i)[0] for i in range(12)]
    env = celery_env(redis_url)
    with running(worker(env, "catch-a"), worker(env, "catch-b")):
        wait_scored(redis_client, store, games, timeout=120)
    for game_id in games:
        stored = [(e.type, e.payload) for e in store.read(game_id, SCORES)]
        assert stored == rescored(store, game_id)


def test_with_a_lease_two_followers_never_do_the_same_batch_at_once(redis_client, store) -> None:
    """A costly consumer (scoring) takes the shard's lease per batch: a rival finds it held
    and leaves the batch to its holder, who reads on after letting go; every entry handled
    once in all."""
    game_id, _ = play(store, 11)
    shard = shard_of(game_id)
    assert shard is not None
    name = f"leased-{time.time_ns()}"
    seen: list[str] = []
    lock = threading.Lock()

    def slow(_: int, changes: list[Change]) -> list[Write]:
        time.sleep(0.05)  # the work a rival would repeat without the lease
        with lock:
            seen.extend(c.id for c in changes)
        return []

    rivals = [Follower(redis_client, name, slow, batch=5, lease_ms=10_000) for _ in range(3)]
    threads = [threading.Thread(target=f.catch_up, args=([shard],)) for f in rivals]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything: Any = redis_client.xrange(changes_key(shard))
    assert sorted(seen) == sorted(set(seen))  # no entry handled twice
    assert set(seen) == {i.decode() for i, _ in everything}  # and none left out
    assert rivals[0].positions([shard])[shard] == everything[-1][0].decode()


def test_scoring_progress_makes_hooks_and_subscriptions_due_from_the_feed(
    redis_client, store
) -> None:
    """The delivery consumers learn of new scores from the feed alone (no task from the
    scorer): each hook of the game, and each subscription of its owner key, is due."""
    from services.redis_store.keys import (
        game_subscriptions_key,
        secrets_key,
        subs_due_key,
        subscriptions_key,
    )
    from services.scoring import subscriptions
    from services.scoring.scorer import Scorer

    game_id, _ = play(store, 12)
    key_id = f"k{time.time_ns()}"
    redis_client.set(secrets_key(game_id), f'{{"key_id": "{key_id}"}}')
    redis_client.hset(subscriptions_key(key_id), "sub1", "{}")
    redis_client.hset(game_subscriptions_key(game_id), "hook1", "{}")  # a webhook
    Scorer(store).catch_up(game_id)
    shard = shard_of(game_id)
    assert shard is not None
    subscriptions.due_follower(redis_client).catch_up([shard])
    assert redis_client.zscore(subs_due_key(shard), f"{game_id}:hook1") is not None
    assert redis_client.zscore(subs_due_key(shard), f"{game_id}:sub1") is not None


def test_a_feed_entry_is_scored_up_to_its_own_last_move(redis_client, store) -> None:
    """Scoring a feed entry's moves stops at its last move, so a move appended meanwhile is
    scored with its own entry (and under its own request's id in the logs), nothing twice."""
    from services.scoring.scorer import Scorer

    game_id, _ = play(store, 28)
    scorer, half = Scorer(store), store.last_seq(game_id, MOVES) // 2
    assert scorer.catch_up(game_id, until=half).progress == half
    assert store.marker(game_id, SCORES) == str(half)
    rest = scorer.catch_up(game_id)
    assert rest.progress == store.last_seq(game_id, MOVES) and rest.moves > 0
    assert [(e.type, e.payload) for e in store.read(game_id, SCORES)] == rescored(store, game_id)
