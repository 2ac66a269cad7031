"""The one-off move of per-game webhooks stored before they became subscriptions
(services/redis_store/migrate_webhooks.py), against a real Redis: a hook written in the old
layout, half delivered, keeps its id, secret and log, and the one delivery queue delivers the
rest — nothing twice; the old keys, index and feed position are gone; a second run changes
nothing."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import redis

from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_new
from eventstore.score_stream import score_events
from services.common.signing import hook_signature
from services.redis_store import RedisEventStore
from services.redis_store.changes import positions_key
from services.redis_store.keys import (
    SHARD_TAGS,
    derived_game_id,
    game_subscriptions_key,
    shard_of,
)
from services.redis_store.migrate_webhooks import run
from services.scoring.delivery import Deliverer
from services.scoring.posting import Answer
from services.scoring.subscriptions import SubscriptionDispatcher, stalled
from services.scoring.webhooks import delivery_id

SECRET = "an-old-hook-secret"


def old_hook(client: redis.Redis, store: RedisEventStore) -> tuple[str, str, int]:
    """A scored game with a hook in the old layout, its first two deliveries delivered."""
    _, events = random_game(random.Random(5), 2)
    game_id = derived_game_id(b"migrate-webhooks")
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=0, command_id="m",
                 marker="$seq")  # fmt: skip
    scores = score_events(GameState(), store.read(game_id, MOVES))
    store.append(game_id, SCORES, scores, expected=0, command_id="s", marker="x")
    hook_id, tag, now = "h_0123456789abcdef", "{g:" + game_id + "}", int(time.time() * 1000)
    config = {"id": hook_id, "url": "http://127.0.0.1:9/in", "secret": SECRET,
              "key_id": "k_old", "created_ms": now}  # fmt: skip
    client.hset(tag + ":webhooks", hook_id, json.dumps(config))
    client.hset(f"{tag}:wh:{hook_id}", mapping={"progress": 2, "head": 2})
    for seq in (1, 2):
        entry: dict[str, Any] = {
            "delivery": delivery_id(hook_id, seq), "seq": seq, "event": "FeatureScored",
            "outcome": "delivered", "tries": 1, "attempts": [], "next_ms": None,
            "status": 200, "created_ms": now, "deadline_ms": now + 60_000,
        }  # fmt: skip
        client.hset(f"{tag}:wh:{hook_id}:log", str(seq), json.dumps(entry))
    shard = shard_of(game_id)
    assert shard is not None
    client.zadd("{" + SHARD_TAGS[shard] + "}:idx:hooks-due", {f"{game_id}:{hook_id}": now})
    client.hset(positions_key(shard), "webhooks", "0-1")
    return game_id, hook_id, store.last_seq(game_id, SCORES)


def test_an_old_hook_keeps_its_log_and_gets_the_rest_once(redis_client) -> None:
    store = RedisEventStore(redis_client)
    game_id, hook_id, last = old_hook(redis_client, store)
    assert run(redis_client) == {"games": 1, "hooks": 1}
    assert not redis_client.keys("{g:" + game_id + "}:w*")  # old hash, state, log: gone
    assert not redis_client.keys("*:idx:hooks-due")
    assert redis_client.hget(positions_key(shard_of(game_id) or 0), "webhooks") is None
    config = json.loads(redis_client.hget(game_subscriptions_key(game_id), hook_id))
    assert (config["key_id"], config["format"], config["game_id"]) == ("k_old", "webhook", game_id)
    assert (game_id, None) in list(stalled(redis_client, store, grace_ms=0))  # the rest is due
    assert run(redis_client) == {"games": 0, "hooks": 0}  # again: nothing left to move

    created = SubscriptionDispatcher(redis_client, store, window_s=60).dispatch(game_id)
    assert created == [(hook_id, seq) for seq in range(3, last + 1)]  # not 1 and 2 again
    sent: list[tuple[bytes, dict[str, str]]] = []

    def post(url: str, body: bytes, headers: dict[str, str]) -> Answer:
        sent.append((body, headers))
        return Answer(200)

    channel = SubscriptionDispatcher(redis_client, store, window_s=60).channel
    assert Deliverer(redis_client, channel, post).run(game_id, hook_id, 10_000).outcome == "idle"
    assert [json.loads(body)["seq"] for body, _ in sent] == list(range(3, last + 1))
    body, headers = sent[0]
    assert headers["X-Carcassonne-Signature"] == hook_signature(SECRET, body)
    assert headers["X-Carcassonne-Delivery"] == f"{hook_id}.3"
