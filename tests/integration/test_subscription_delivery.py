"""The subscription dispatcher, deliverer and sweep against a real Redis, in process (the real
worker processes: tests/integration/test_subscriptions_worker.py): a lost dispatch is found
by the sweep, dispatching twice creates each delivery once, the feed waits for the scoring
worker's progress, a failing receiver holds its queue in order, and a deleted subscription
leaves the due index."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from eventstore.envelope import MOVES
from services.command.subscriptions import Subscriptions
from services.common.signing import SIGNATURE_HEADER, verify
from services.redis_store import RedisEventStore
from services.redis_store.keys import (
    index_shard,
    subs_due_key,
    subscription_keys,
    subscriptions_key,
)
from services.scoring import delivery
from services.scoring.posting import Answer
from services.scoring.subscriptions import SubscriptionDispatcher
from tests.integration.owned_games import owned_game, score_up_to

URL = "https://hooks.example.com/in"


class Poster:
    """A fake receiver: answers from `statuses` (then 200) and keeps what it was sent."""

    def __init__(self, statuses: list[int | None] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.sent: list[tuple[dict[str, str], bytes]] = []

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        self.sent.append((headers, body))
        status = self.statuses.pop(0) if self.statuses else 200
        return Answer(status) if status is not None else Answer(None, "ConnectionRefused: down")

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(b) for _, b in self.sent]


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def subscribe(client: redis.Redis, key_id: str, kinds: list[str]) -> tuple[str, str]:
    made = Subscriptions(client, None, development=False).create(key_id, URL, kinds)
    return made["subscription_id"], made["secret"]


def test_a_lost_dispatch_is_found_by_the_sweep_and_each_delivery_made_once(
    redis_client: redis.Redis, store: RedisEventStore
) -> None:
    key_id = "k_lost"
    sub_id, secret = subscribe(redis_client, key_id, ["turn_started", "move_made", "score"])
    game_id = owned_game(redis_client, store, key_id, 1)
    dispatcher = SubscriptionDispatcher(redis_client, store, window_s=60)
    channel = dispatcher.channel
    half = store.last_seq(game_id, MOVES) // 2
    score_up_to(store, game_id, half)
    assert dispatcher.mark_due(game_id)  # what the scoring task does; its dispatch is "lost"
    found = list(delivery.stalled(redis_client, channel, grace_ms=0))
    assert (game_id, None) in found  # behind its feed: the sweep sends a dispatch
    first = dispatcher.dispatch(game_id)
    assert first and dispatcher.dispatch(game_id) == []  # a second dispatch creates nothing
    state = redis_client.hgetall(subscription_keys(game_id, sub_id)[0])
    assert int(state[b"moves"]) == half and state[b"key"] == key_id.encode()
    # Nothing past the scored moves: the feed waits for the worker.
    log = redis_client.hgetall(subscription_keys(game_id, sub_id)[1])
    assert max(json.loads(v)["item"]["seq"] for v in log.values()) <= half
    poster = Poster()
    deliverer = delivery.Deliverer(redis_client, channel, poster, 0.01, 0.05)
    assert deliverer.run(game_id, sub_id, 10_000).outcome == "idle"
    score_up_to(store, game_id, store.last_seq(game_id, MOVES))
    assert dispatcher.dispatch(game_id)
    assert deliverer.run(game_id, sub_id, 10_000).outcome == "idle"
    bodies = poster.bodies()
    assert [b["delivery"] for b in bodies] == sorted(
        {b["delivery"] for b in bodies}, key=lambda d: int(d.rsplit(".", 1)[1])
    )  # each once, in feed order
    assert [b["seq"] for b in bodies] == sorted(b["seq"] for b in bodies)
    assert {b["kind"] for b in bodies} == {"turn_started", "move_made", "score"}
    assert all(verify(h[SIGNATURE_HEADER], b, secret, time.time()) for h, b in poster.sent)
    # All delivered and dispatched: the sweep settles the entry out of the index.
    assert not [f for f in delivery.stalled(redis_client, channel, grace_ms=0) if f[0] == game_id]
    index = redis_client.zrange(subs_due_key(index_shard(game_id)), 0, -1)
    assert f"{game_id}:{sub_id}".encode() not in index


def test_a_failing_receiver_holds_its_queue_in_order_and_a_deleted_one_leaves(
    redis_client: redis.Redis, store: RedisEventStore
) -> None:
    key_id = "k_fail"
    sub_id, _ = subscribe(redis_client, key_id, ["turn_started"])
    game_id = owned_game(redis_client, store, key_id, 2)
    score_up_to(store, game_id, store.last_seq(game_id, MOVES))
    dispatcher = SubscriptionDispatcher(redis_client, store, window_s=60)
    channel = dispatcher.channel
    dispatcher.dispatch(game_id)
    poster = Poster([500, None, 200])
    deliverer = delivery.Deliverer(redis_client, channel, poster, 0.01, 0.02)
    ran = deliverer.run(game_id, sub_id, 10_000)
    assert ran.outcome == "retrying" and poster.bodies()[0]["seq"] == poster.bodies()[-1]["seq"]
    while deliverer.run(game_id, sub_id, 10_000).outcome in ("retrying", "waiting"):
        time.sleep(0.03)
    seqs = [b["seq"] for b in poster.bodies()]
    assert seqs[:3] == [seqs[0]] * 3  # the head, three times, before anything else
    assert seqs[2:] == sorted(set(seqs))  # then each once, in order
    recent = Subscriptions(redis_client, None).deliveries(key_id, sub_id, 5)["attempts"]
    assert recent[0]["outcome"] == "delivered" and recent[0]["kind"] == "turn_started"
    # Deleted: the sweep drops its entry from the due index (it has nothing to deliver to).
    redis_client.hdel(subscriptions_key(key_id), sub_id)
    member = f"{game_id}:{sub_id}"
    index = subs_due_key(index_shard(game_id))
    redis_client.zadd(index, {member: 0})
    assert deliverer.run(game_id, sub_id).outcome in ("idle", "gone")
    list(delivery.stalled(redis_client, channel, grace_ms=0))
    assert redis_client.zscore(index, member) is None


def logged_items(client: redis.Redis, game_id: str, sub_id: str) -> list[dict[str, Any]]:
    log = client.hgetall(subscription_keys(game_id, sub_id)[1])
    return [json.loads(log[k])["item"] for k in sorted(log, key=int)]


def test_a_dispatch_per_move_from_the_kept_feed_logs_what_one_dispatch_from_move_1_does(
    redis_client: redis.Redis, store: RedisEventStore
) -> None:
    """The dispatcher keeps each game's feed folded as far as its last dispatch; moves are
    then folded once. Two keys, the same game played: one dispatched after every scored
    move by a dispatcher that keeps feeds, one dispatched once at the end by one that keeps
    none. A subscription added mid-game (cursor 0, behind the kept fold) is served from move
    1 again."""
    kinds = ["turn_started", "move_made", "score", "game_over"]
    stepped_sub, _ = subscribe(redis_client, "k_step", kinds)
    once_sub, _ = subscribe(redis_client, "k_once", kinds)
    stepped = owned_game(redis_client, store, "k_step", 3)
    once = owned_game(redis_client, store, "k_once", 3)
    keeping = SubscriptionDispatcher(redis_client, store, window_s=60)
    last = store.last_seq(stepped, MOVES)
    late_sub = None
    for upto in range(1, last + 1):
        score_up_to(store, stepped, upto)
        keeping.dispatch(stepped)
        if upto == last // 2:
            late_sub, _ = subscribe(redis_client, "k_step", ["move_made"])
            # As if made before the game: it wants every move, from move 1.
            raw = redis_client.hget(subscriptions_key("k_step"), late_sub)
            assert isinstance(raw, bytes)
            config = json.loads(raw)
            config["created_ms"] = 0
            redis_client.hset(subscriptions_key("k_step"), late_sub, json.dumps(config))
        kept = keeping.feeds.peek(stepped)
        assert kept is not None and kept.seq == upto  # the kept fold advanced
    score_up_to(store, once, last)
    SubscriptionDispatcher(redis_client, store, window_s=60, feeds_kept=0).dispatch(once)
    strip = lambda items: [{k: v for k, v in i.items() if k != "time_ms"} for i in items]  # noqa: E731
    mine, reference = (
        logged_items(redis_client, stepped, stepped_sub),
        logged_items(redis_client, once, once_sub),
    )
    assert len(mine) > last // 2 and strip(mine) == strip(reference)
    assert late_sub is not None
    late = logged_items(redis_client, stepped, late_sub)
    assert strip(late) == [i for i in strip(mine) if i["kind"] == "move_made"]
