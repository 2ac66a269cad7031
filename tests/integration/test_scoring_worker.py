"""The scoring worker as a real Celery process against a real Redis (R6, R7, R7.5).

Every test compares a game's score stream with what the engine computes from the same
moves (`score_events` over the folded move stream): same events, same order, once each.
"""

from __future__ import annotations

import random
import time
import uuid
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
from services.redis_store.keys import derived_game_id

from .games import new_game, play
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
    """Whole random games appended as the command service appends them, but with no
    notification sent: only a task or the sweep will get them scored."""
    rng = random.Random(seed)
    ids = []
    for i in range(games):
        ruleset = Ruleset(farm_scoring=("3rd", "2nd", "1st")[i % 3])
        _, events = random_game(rng, 2 + i % 4, ruleset)
        game_id = derived_game_id(f"backlog-{seed}-{i}".encode())  # on a shard slot
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


def test_the_sweep_finds_games_behind_and_skips_unreadable_markers(
    redis_client: redis.Redis,
) -> None:
    from services.redis_store import game_keys
    from services.redis_store.keys import index_shard, shard_of, unscored_key
    from services.scoring.sweep import unscored_games

    # Games from before the indexes (ids off the shard slots), indexed by the backfill: the
    # sweep compares their markers, and drops the entry of one scored since.
    cases = {"behind": ("5", "3"), "done": ("4", "4"), "new": ("2", None), "odd": ("7", "x")}
    # A fresh prefix (the Redis is shared) under which every case's id is off the shard slots:
    # one id in 256 lands on one, so a prefix is drawn until none of the four does.
    prefix = uuid.uuid4().hex[:8]
    while any(shard_of(f"{prefix}{name}") is not None for name in cases):
        prefix = uuid.uuid4().hex[:8]
    for name, (moved, scored) in cases.items():
        game_id = f"{prefix}{name}"
        assert shard_of(game_id) is None
        redis_client.set(game_keys(game_id, MOVES)[2], moved)
        if scored is not None:
            redis_client.set(game_keys(game_id, SCORES)[2], scored)
        redis_client.zadd(unscored_key(index_shard(game_id)), {game_id: 1})
    found = {g for g in unscored_games(redis_client, page=2) if g.startswith(prefix)}
    assert found == {f"{prefix}behind", f"{prefix}new"}
    done = f"{prefix}done"
    assert redis_client.zscore(unscored_key(index_shard(done)), done) is None
