"""Webhook dispatch and delivery steps against a real Redis, called directly (no Celery): one
log entry per (hook, score event) however often a step runs, attempts recorded only once,
the retry window honoured, private addresses refused, lost work found by the sweep."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import pytest
import redis

from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_new
from eventstore.score_stream import score_events
from services.command.hooks import Webhooks
from services.redis_store import RedisEventStore
from services.scoring.webhooks import (
    Deliverer,
    Dispatcher,
    hook_keys,
    lease_key,
    overdue,
    signature,
)


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def scored_game(store: RedisEventStore, seed: int) -> str:
    """A whole random game with its score stream, as the command service and worker write."""
    _, events = random_game(random.Random(seed), 3)
    game_id = f"{seed:032x}"
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=0, command_id="c",
                 marker="$seq")  # fmt: skip
    scores = score_events(GameState(), store.read(game_id, MOVES))
    store.append(game_id, SCORES, scores, expected=0, command_id="s", marker="x")
    return game_id


def hook(client: redis.Redis, store: RedisEventStore, game_id: str, url: str) -> str:
    hooks = Webhooks(client, store, None, allow_private=True)
    return str(hooks.register(game_id, url, "secret-" * 3, "k_test")["hook_id"])


class Poster:
    """A fake receiver: answers from `statuses` (then 200) and keeps what it was sent."""

    def __init__(self, statuses: list[int | None] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []
        self.lock = threading.Lock()

    def __call__(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int | None, str | None]:
        with self.lock:
            self.sent.append((url, body, headers))
            status = self.statuses.pop(0) if self.statuses else 200
        return (status, None) if status is not None else (None, "ConnectionRefusedError: down")


def entries(client: redis.Redis, game_id: str, hook_id: str) -> dict[int, dict[str, Any]]:
    raw = client.hgetall(hook_keys(game_id, hook_id)[1])
    return {int(k): json.loads(v) for k, v in raw.items()}


def test_dispatch_creates_one_entry_per_score_event_however_often_it_runs(redis_client, store):
    game_id = scored_game(store, 31)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    dispatcher = Dispatcher(redis_client, store, window_s=60, batch=7)  # several batches
    results: list[list[tuple[str, int]]] = []
    threads = [threading.Thread(target=lambda: results.append(dispatcher.dispatch(game_id)))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = sorted(pair for r in results for pair in r)
    last = store.last_seq(game_id, SCORES)
    assert created == [(hook_id, seq) for seq in range(1, last + 1)], "each created exactly once"
    logged = entries(redis_client, game_id, hook_id)
    assert sorted(logged) == list(range(1, last + 1))
    assert dispatcher.dispatch(game_id) == []
    assert entries(redis_client, game_id, hook_id) == logged
    assert {e["delivery"] for e in logged.values()} == {f"{hook_id}.{s}" for s in logged}


def test_an_attempt_is_recorded_once_and_a_redelivered_task_stops(redis_client, store):
    game_id = scored_game(store, 32)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    poster = Poster()
    deliverer = Deliverer(redis_client, store, allow_private=True, post=poster)
    first = deliverer.attempt(game_id, hook_id, 1, 1)
    assert (first.outcome, first.status, first.retry_in) == ("delivered", 200, None)
    again = deliverer.attempt(game_id, hook_id, 1, 1)  # the same task delivered twice
    assert again.outcome == "final" and len(poster.sent) == 1
    _, body, headers = poster.sent[0]
    assert headers["X-Carcassonne-Delivery"] == f"{hook_id}.1"
    assert headers["X-Carcassonne-Signature"] == signature("secret-" * 3, body)
    assert headers["X-Carcassonne-Event"] == json.loads(body)["event"] == "FeatureScored"
    # A stale retry (attempt 3 when 1 is recorded) and a concurrent duplicate do nothing.
    assert deliverer.attempt(game_id, hook_id, 2, 3).outcome == "stale"
    redis_client.set(lease_key(game_id, hook_id, 2), 1)
    assert deliverer.attempt(game_id, hook_id, 2, 1).outcome == "busy"
    redis_client.delete(lease_key(game_id, hook_id, 2))
    assert deliverer.attempt(game_id, hook_id, 2, 1).outcome == "delivered"
    assert len(poster.sent) == 2
    entry = entries(redis_client, game_id, hook_id)[1]
    assert (entry["outcome"], entry["tries"], entry["status"]) == ("delivered", 1, 200)
    assert [a["attempt"] for a in entry["attempts"]] == [1]


def test_failures_are_retried_with_backoff_until_the_window_ends(redis_client, store):
    game_id = scored_game(store, 33)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=0.6).dispatch(game_id)
    poster = Poster([None] * 100)  # never up
    deliverer = Deliverer(redis_client, store, backoff_base=0.05, backoff_max=0.2,
                          allow_private=True, post=poster)  # fmt: skip
    attempt, waits = 1, []
    while True:
        done = deliverer.attempt(game_id, hook_id, 1, attempt)
        if done.outcome != "retrying":
            break
        assert done.retry_in is not None
        waits.append(done.retry_in)
        time.sleep(done.retry_in)
        attempt += 1
    assert done.outcome == "failed"
    assert waits[:3] == sorted(waits[:3]) and 0.05 <= waits[0] <= 0.07
    entry = entries(redis_client, game_id, hook_id)[1]
    assert entry["outcome"] == "failed" and entry["tries"] == attempt
    assert all(a["status"] is None and "down" in a["error"] for a in entry["attempts"])
    # The last attempt is made at the deadline, not before it.
    assert entry["attempts"][-1]["at_ms"] >= entry["deadline_ms"] - 20
    assert not redis_client.zscore(hook_keys(game_id, hook_id)[2], "1")


def test_a_hook_resolving_to_a_private_address_is_never_called(redis_client, store):
    game_id = scored_game(store, 34)
    hook_id = hook(redis_client, store, game_id, "http://localhost:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    poster = Poster()
    done = Deliverer(redis_client, store, allow_private=False, post=poster).attempt(
        game_id, hook_id, 1, 1
    )
    assert done.outcome == "failed" and poster.sent == []
    assert "blocked" in entries(redis_client, game_id, hook_id)[1]["attempts"][0]["error"]


def test_the_sweep_finds_hooks_behind_and_deliveries_overdue(redis_client, store):
    game_id = scored_game(store, 35)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    found = list(overdue(redis_client, store, grace_ms=0))
    assert (game_id, None, 0, 0) in found  # never dispatched (its dispatch was lost)
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    time.sleep(0.01)
    late = [f for f in overdue(redis_client, store, grace_ms=0) if f[0] == game_id]
    last = store.last_seq(game_id, SCORES)
    assert sorted(late) == [(game_id, hook_id, seq, 1) for seq in range(1, last + 1)]
    # Resent now: the next sweep leaves them alone for the grace period.
    assert not [f for f in overdue(redis_client, store, grace_ms=60_000) if f[0] == game_id]
