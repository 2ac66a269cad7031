"""Webhook dispatch and delivery steps against a real Redis, called directly (no Celery): one
log entry per (hook, score event) however often a step runs, attempts recorded only once,
deliveries strictly in seq order per hook (one task per hook at a time), the retry window
honoured, private addresses refused, lost work found by the sweep."""

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
from services.common.signing import SIGNATURE_HEADER, verify
from services.redis_store import RedisEventStore
from services.redis_store.keys import derived_game_id, game_subscriptions_key, subscription_keys
from services.scoring.delivery import Deliverer
from services.scoring.posting import Answer, HttpPoster
from services.scoring.subscriptions import SubscriptionChannel, stalled
from services.scoring.subscriptions import SubscriptionDispatcher as Dispatcher

hook_keys = subscription_keys  # a webhook is a subscription filtered to its game


def hook_lease_key(game_id: str, hook_id: str) -> str:
    return subscription_keys(game_id, hook_id)[2]


SECRET = "secret-" * 3


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def scored_game(store: RedisEventStore, seed: int) -> str:
    """A whole random game with its score stream, as the command service and worker write."""
    _, events = random_game(random.Random(seed), 3)
    game_id = derived_game_id(f"scored-{seed}".encode())  # on a shard slot: indexed
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=0, command_id="c",
                 marker="$seq")  # fmt: skip
    scores = score_events(GameState(), store.read(game_id, MOVES))
    store.append(game_id, SCORES, scores, expected=0, command_id="s", marker="x")
    return game_id


def hook(client: redis.Redis, store: RedisEventStore, game_id: str, url: str) -> str:
    hooks = Webhooks(client, store, None, allow_private=True)
    return str(hooks.register(game_id, url, SECRET, "k_test")["hook_id"])


class Poster:
    """A fake receiver: answers from `statuses` (then 200) and keeps what it was sent."""

    def __init__(self, statuses: list[int | None] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.delay = 0.0

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        time.sleep(self.delay)
        with self.lock:
            self.sent.append((url, body, headers))
            status = self.statuses.pop(0) if self.statuses else 200
        return Answer(status) if status is not None else Answer(None, "ConnectionRefused: down")

    def seqs(self) -> list[int]:
        return [json.loads(body)["seq"] for _, body, _ in self.sent]


def entries(client: redis.Redis, game_id: str, hook_id: str) -> dict[int, dict[str, Any]]:
    raw = client.hgetall(hook_keys(game_id, hook_id)[1])
    return {int(k): json.loads(v) for k, v in raw.items()}


def deliverer(client: redis.Redis, store: RedisEventStore, post: Any, **kw: Any) -> Deliverer:
    options = {"backoff_base": 0.05, "backoff_max": 0.2, **kw}
    return Deliverer(client, SubscriptionChannel(client, store), post, **options)


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


def test_a_hook_is_delivered_in_order_by_one_task_at_a_time(redis_client, store):
    game_id = scored_game(store, 32)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    last = store.last_seq(game_id, SCORES)
    poster = Poster()
    poster.delay = 0.002
    runner = deliverer(redis_client, store, poster)
    ran: list[Any] = []
    threads = [threading.Thread(target=lambda: ran.append(runner.run(game_id, hook_id, 10_000)))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outcomes = sorted(r.outcome for r in ran)
    assert outcomes.count("busy") >= 1 and sum(r.delivered for r in ran) == last
    assert poster.seqs() == list(range(1, last + 1)), "once each, in seq order"
    _, body, headers = poster.sent[0]
    assert headers["X-Carcassonne-Delivery"] == f"{hook_id}.1"
    assert signed(headers, body)
    assert headers["X-Carcassonne-Event"] == json.loads(body)["event"] == "FeatureScored"
    logged = entries(redis_client, game_id, hook_id)
    assert all(e["outcome"] == "delivered" and e["tries"] == 1 for e in logged.values())
    assert int(redis_client.hget(hook_keys(game_id, hook_id)[0], "head") or 0) == last
    # Again (a redelivered task): nothing is due, nothing is sent.
    assert runner.run(game_id, hook_id).outcome == "idle" and len(poster.sent) == last
    assert not redis_client.exists(hook_lease_key(game_id, hook_id))


def test_a_failed_delivery_holds_back_the_later_ones_until_it_is_delivered(redis_client, store):
    game_id = scored_game(store, 33)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    last = store.last_seq(game_id, SCORES)
    poster = Poster([200, 200, 500, None, 503])  # seq 3 fails three times
    runner = deliverer(redis_client, store, poster)
    first = runner.run(game_id, hook_id)
    assert (first.outcome, first.delivered) == ("retrying", 2) and first.retry_in is not None
    assert poster.seqs() == [1, 2, 3]
    # A task sent for new events before the retry is due does nothing: the retry is scheduled.
    if first.retry_in > 0.1:
        assert runner.run(game_id, hook_id).outcome == "waiting" and len(poster.sent) == 3
    for _ in range(10):
        time.sleep(0.25)  # more than the backoff's cap
        done = runner.run(game_id, hook_id, 10_000)
        if done.outcome == "idle":
            break
        assert done.outcome == "retrying"
    assert poster.seqs() == [1, 2, 3, 3, 3, *range(3, last + 1)]
    entry = entries(redis_client, game_id, hook_id)[3]
    assert (entry["outcome"], entry["tries"]) == ("delivered", 4)
    assert [a["status"] for a in entry["attempts"]] == [500, None, 503, 200]
    times = [a["at_ms"] for a in entry["attempts"]]
    assert times == sorted(times)
    # The attempt numbers went out in the header: 1, 2, 3, 4 for seq 3.
    assert [h["X-Carcassonne-Attempt"] for _, _, h in poster.sent[2:6]] == ["1", "2", "3", "4"]


def test_an_attempt_is_recorded_once(redis_client, store):
    """Two tasks that both POSTed attempt 1 (a lease that ran out): one record, the other
    stops."""
    game_id = scored_game(store, 34)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    runner = deliverer(redis_client, store, Poster())
    entry = runner.head(game_id, hook_id)
    assert entry is not None and entry["seq"] == 1
    config = json.loads(redis_client.hget(game_subscriptions_key(game_id), hook_id))
    assert runner.attempt(game_id, hook_id, config, entry, {}).outcome == "delivered"
    again = runner.attempt(game_id, hook_id, config, entry, {})
    assert again.outcome == "stale"
    logged = entries(redis_client, game_id, hook_id)[1]
    assert logged["tries"] == 1 and [a["attempt"] for a in logged["attempts"]] == [1]


def test_failures_are_retried_until_the_window_ends_then_the_next_goes(redis_client, store):
    game_id = scored_game(store, 35)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=0.6).dispatch(game_id)
    poster = Poster([None] * 1000)  # never up
    runner = deliverer(redis_client, store, poster)
    waits = []
    for _ in range(200):
        done = runner.run(game_id, hook_id, max_deliveries=1)
        if done.outcome != "retrying":
            break
        assert done.retry_in is not None
        waits.append(done.retry_in)
        time.sleep(done.retry_in)
    assert all(0 <= w <= 0.2 for w in waits)
    first = entries(redis_client, game_id, hook_id)[1]
    assert first["outcome"] == "failed" and first["tries"] >= 2
    assert all(a["status"] is None and "down" in a["error"] for a in first["attempts"])
    # The last attempt is made at the deadline, not before it.
    assert first["attempts"][-1]["at_ms"] >= first["deadline_ms"] - 20
    assert set(poster.seqs()[: first["tries"]]) == {1}, "nothing after seq 1 before it ended"


def test_a_hook_resolving_to_a_private_address_is_never_called(redis_client, store):
    game_id = scored_game(store, 36)
    hook_id = hook(redis_client, store, game_id, "http://localhost:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    done = deliverer(redis_client, store, HttpPoster(timeout=1.0)).run(game_id, hook_id, 10_000)
    last = store.last_seq(game_id, SCORES)
    assert (done.outcome, done.delivered) == ("idle", last)
    logged = entries(redis_client, game_id, hook_id)
    assert all(e["outcome"] == "failed" and e["tries"] == 1 for e in logged.values())
    assert "blocked" in logged[1]["attempts"][0]["error"]


def test_a_task_hands_over_after_its_budget(redis_client, store):
    game_id = scored_game(store, 37)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    poster = Poster()
    done = deliverer(redis_client, store, poster).run(game_id, hook_id, max_deliveries=3)
    assert (done.outcome, done.delivered) == ("more", 3) and poster.seqs() == [1, 2, 3]


def test_the_sweep_finds_hooks_behind_and_heads_overdue(redis_client, store):
    game_id = scored_game(store, 38)
    hook_id = hook(redis_client, store, game_id, "http://127.0.0.1:9/in")
    found = list(stalled(redis_client, store, grace_ms=0))
    assert (game_id, None) in found  # never dispatched (its dispatch was lost)
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    time.sleep(0.01)
    late = [f for f in stalled(redis_client, store, grace_ms=0) if f[0] == game_id]
    assert late == [(game_id, hook_id)]  # one deliver per hook, not one per delivery
    assert not [f for f in stalled(redis_client, store, grace_ms=60_000) if f[0] == game_id]
    redis_client.set(hook_lease_key(game_id, hook_id), "someone", px=5_000)
    assert not [f for f in stalled(redis_client, store, grace_ms=0) if f[0] == game_id]


def signed(headers: Any, body: bytes) -> bool:
    """Signed as subscriptions are (timed, issue 32 finding 6), and only so: a hook registered
    now gets no untimed legacy header."""
    assert "X-Carcassonne-Signature" not in headers
    return verify(headers[SIGNATURE_HEADER], body, SECRET, time.time())
