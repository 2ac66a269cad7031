"""The scoring worker as a real Celery process against a real Redis (R6, R7, R7.5).

Every test compares a game's score stream with what the engine computes from the same
moves (`score_events` over the folded move stream): same events, same order, once each.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from carcassonne.game import fold
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_engine, to_new
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED, score_events
from services.command.app import create_app
from services.redis_store import RedisEventStore
from services.redis_store.changes import changes_key, positions_key, tails
from services.redis_store.indexes import text
from services.redis_store.keys import derived_game_id, shard_of

from .games import new_game, play
from .index_data import consumers
from .workers import beat, celery_env, running, scored_up_to, wait_scored, worker


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


@pytest.fixture
def sender(redis_url: str) -> Iterator[Celery]:
    app = Celery("test-sender", broker=celery_env(redis_url)["BROKER_URL"])
    yield app
    app.close()


def expected_scores(store: RedisEventStore, game_id: str) -> list[tuple[str, dict[str, Any]]]:
    """What the engine says the score stream must hold, from the stored moves."""
    moves = store.read(game_id, MOVES)
    return [(e.type, e.payload) for e in score_events(GameState(), moves)]


def actual_scores(store: RedisEventStore, game_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.payload) for e in store.read(game_id, SCORES)]


def stored_backlog(store: RedisEventStore, games: int, seed: int) -> list[str]:
    """Whole random games appended as the command service appends them, with no task sent:
    only the change feed's followers (a worker watching it, or the sweep) or a task will get
    them scored."""
    rng = random.Random(seed)
    ids = []
    for i in range(games):
        ruleset = Ruleset(farm_scoring=("3rd", "2nd", "1st")[i % 3])
        _, events = random_game(rng, 2 + i % 4, ruleset)
        game_id = backlog_id(seed, i)  # on a shard slot
        for start in range(0, len(events), 3):  # roughly a turn per append
            store.append(game_id, MOVES, [to_new(e) for e in events[start : start + 3]],
                         expected=start, command_id=f"c{start}", marker="$seq")  # fmt: skip
        ids.append(game_id)
    return ids


def test_games_played_through_the_command_service_are_scored_by_a_worker(
    redis_url: str, redis_client: redis.Redis, store: RedisEventStore
) -> None:
    env = celery_env(redis_url)
    app = create_app({"REDIS_URL": redis_url, "BROKER_URL": env["BROKER_URL"]})
    rng = random.Random(7)
    rulesets: list[dict[str, Any]] = [
        {},
        {"farm_scoring": "1st"},
        {"tileset": "demo", "farm_scoring": "2nd", "unplaceable": "return"},
        {"farmers": False, "incomplete_score": False},
        {"area": {"width": 7, "height": 7, "border_closes": True}, "hole_extra_turn": True},
        {"river": True},
        {"river": True, "abbot": True, "tile_edition": "2nd"},
    ]
    games = []
    with running(worker(env)):
        for i, ruleset in enumerate(rulesets):
            game_id, tokens = new_game(app, [f"p{n}" for n in range(2 + i % 5)], ruleset)
            play(app, game_id, tokens, rng)
            games.append(game_id)
        wait_scored(redis_client, store, games)
    for game_id in games:
        actual = actual_scores(store, game_id)
        assert actual == expected_scores(store, game_id)
        engine = fold(to_engine(e) for e in store.read(game_id, MOVES))
        assert actual[-1][0] == GAME_SCORED
        assert actual[-1][1]["final_scores"] == list(engine.scores)
        assert sum(1 for kind, _ in actual if kind == FEATURE_SCORED) == len(engine.log)
        # Every score event names the move that caused it, in order.
        moves = [payload["move"] for _, payload in actual]
        assert moves == sorted(moves) and moves[-1] == store.last_seq(game_id, MOVES)


@pytest.mark.slow
def test_sigkill_mid_catch_up_neither_skips_nor_double_counts(
    redis_url: str, redis_client: redis.Redis, store: RedisEventStore, sender: Celery
) -> None:
    games = stored_backlog(store, 24, seed=11)
    # Small batches: a game takes dozens of appends, so a kill lands inside a catch-up.
    env = celery_env(redis_url, SCORING_BATCH="2", VISIBILITY_TIMEOUT="2", SWEEP_SECONDS="1")
    kills = 0
    for _ in range(3):
        w = worker(env).start("ready.")
        for game_id in games:
            sender.send_task("scoring.catch_up", args=[game_id], queue="scoring")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # kill the moment some game is half scored
            progress = [scored_up_to(redis_client, store, g) for g in games]
            if any(0 < done < last for last, done in progress):
                w.kill()
                kills += 1
                break
            time.sleep(0.01)
        w.kill()
    assert kills > 0, "no kill landed in the middle of a game"
    with running(worker(env), beat(env)):
        wait_scored(redis_client, store, games, timeout=90)
    for game_id in games:
        assert actual_scores(store, game_id) == expected_scores(store, game_id)


def test_a_lost_notification_is_found_by_the_sweep(
    redis_url: str, redis_client: redis.Redis, store: RedisEventStore
) -> None:
    games = stored_backlog(store, 5, seed=12)  # appended with no task sent at all
    env = celery_env(redis_url, SWEEP_SECONDS="1")
    with running(worker(env), beat(env)):
        wait_scored(redis_client, store, games, timeout=60)
    for game_id in games:
        assert actual_scores(store, game_id) == expected_scores(store, game_id)


def test_two_workers_on_the_same_games_write_each_score_event_once(
    redis_url: str, redis_client: redis.Redis, store: RedisEventStore, sender: Celery
) -> None:
    games = stored_backlog(store, 16, seed=13)
    env = celery_env(redis_url, SCORING_BATCH="8")
    with running(worker(env, "a"), worker(env, "b")):
        for _ in range(3):  # every game is caught up by several tasks at once
            for game_id in games:
                sender.send_task("scoring.catch_up", args=[game_id], queue="scoring")
        wait_scored(redis_client, store, games)
    for game_id in games:
        assert actual_scores(store, game_id) == expected_scores(store, game_id)


def held_back_by_none(client: redis.Redis, seed: int) -> bool:
    """Whether only the worker's consumers are registered in the shard of the seed's first
    backlog game (the Redis is the session's: another test's consumer, stopped, would hold
    that shard's trim back)."""
    registered = client.hkeys(positions_key(shard_of(backlog_id(seed, 0)) or 0))
    return {text(k) for k in registered} <= {f.consumer for f in consumers(client)}


def test_games_appended_while_no_worker_watched_are_scored_by_the_sweep(
    redis_url: str, redis_client: redis.Redis, store: RedisEventStore
) -> None:
    """Games appended while no worker ran wait on the change feed, past the scoring
    consumer's position. A worker that does not watch the feed (FOLLOW_CHANGES=0) scores them
    only through beat's `scoring.sweep`: every consumer over every shard, then the feed
    trimmed below their positions. A game it cannot score (a move stream that does not start
    with a game, written around the command service) is logged and passed, and does not hold
    up the games after it in its shard."""
    seed = next(s for s in range(14, 1_000) if held_back_by_none(redis_client, s))
    shard = shard_of(backlog_id(seed, 0))
    assert shard is not None
    broken = next(g for g in (derived_game_id(f"broken-{seed}-{n}".encode()) for n in range(10**4))
                  if shard_of(g) == shard)  # fmt: skip
    _, events = random_game(random.Random(seed), 2, Ruleset())
    drawn = next(e for e in events if type(e).__name__ == "TileDrawn")  # with no game before
    store.append(broken, MOVES, [to_new(drawn)], expected=0, command_id="c0", marker="$seq")
    games = stored_backlog(store, 4, seed=seed)  # after it in the shard; no task sent at all
    appended = tails(redis_client, [shard])[shard]  # the last entry of the shard
    before = redis_client.hget(positions_key(shard), "scoring")
    assert before is None or at(text(before)) < at(appended)  # waiting past the position
    env = celery_env(redis_url, SWEEP_SECONDS="1", FOLLOW_CHANGES="0")
    scoring = worker(env, "sweep-only")
    with running(scoring, beat(env)):
        wait_scored(redis_client, store, games, timeout=90)
        # The scoring consumer past them all (the broken game's entry too), and the feed
        # trimmed below every consumer's position (they all passed these entries).
        deadline = time.monotonic() + 60
        while oldest(redis_client, shard) <= at(appended) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert oldest(redis_client, shard) > at(appended)
    position = redis_client.hget(positions_key(shard), "scoring")
    assert position is not None and at(text(position)) > at(appended)
    for game_id in games:
        assert actual_scores(store, game_id) == expected_scores(store, game_id)
    assert store.marker(broken, SCORES) is None  # not scored: nothing appended for it
    log = scoring.log.read_text(errors="replace")
    assert "sweep:" in log and f"game {broken}: scoring failed" in log


def backlog_id(seed: int, i: int) -> str:
    """The id `stored_backlog(…, seed)` gives its `i`-th game."""
    return derived_game_id(f"backlog-{seed}-{i}".encode())


def at(entry_id: str) -> tuple[int, int]:
    """A feed entry id, ordered."""
    ms, seq = entry_id.split("-", 1)
    return int(ms), int(seq)


def oldest(client: redis.Redis, shard: int) -> tuple[int, int]:
    """The id of the oldest entry left on a shard's feed ((0, 0) if none)."""
    first: Any = client.xrange(changes_key(shard), count=1)
    return at(text(first[0][0])) if first else (0, 0)
