"""Turn per-game webhooks stored before they became subscriptions into subscriptions filtered
to their game (a one-off command, run once when upgrading, with the workers stopped).

    python -m services.redis_store.migrate_webhooks [--redis-url URL]

Before, a game's hooks were the hash ``{g:G}:webhooks`` (H -> ``{"id", "url", "secret",
"key_id", "created_ms"}``) with per hook a state ``{g:G}:wh:H`` (``progress``, ``head``), a
delivery log ``{g:G}:wh:H:log`` (score seq -> entry) and a lease; the shards' hooks-due
indexes and the change feed's consumer "webhooks". Now a hook is an entry of ``{g:G}:subs``
in the webhook format (services/common/notifications.py) whose state and log are the
subscription's (``{g:G}:sub:H``, ``{g:G}:sub:H:log``), with the same positions (score seqs),
so each hook keeps its id, its log and what it delivered. Per hook one script in the game's
slot moves the three keys and the configuration, all or nothing; the hook is then marked
due in its shard's subs-due index, so the sweep dispatches and delivers whatever was left.
Last, the hooks-due indexes and the "webhooks" consumer's feed positions are deleted (a
position left behind would keep the change feed from ever being trimmed).

Idempotent: a hook already moved is no longer in the old hash. Webhook tasks queued before
the upgrade (``webhooks.dispatch``/``deliver``) are unknown to the new worker and dropped;
the sweep does their work.
"""

from __future__ import annotations

import json
import sys
import time

import redis

from .backfill import nodes
from .changes import positions_key
from .indexes import text
from .keys import (
    SHARD_TAGS,
    game_subscriptions_key,
    index_shard,
    subs_due_key,
    subscription_keys,
)
from .one_off import one_off
from .scripts import script

OLD_CONSUMER = "webhooks"
# KEYS: old hooks hash, new subscriptions hash, old state, new state, old log, new log, old
# lease. ARGV: hook id, new configuration JSON, owner key id. The state's `scores` (a
# webhook's dispatch cursor) is the old `progress`: what was dispatched stays dispatched.
MOVE_LUA = """
if not redis.call('HGET', KEYS[1], ARGV[1]) then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('RENAME', KEYS[3], KEYS[4]) end
if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('RENAME', KEYS[5], KEYS[6]) end
local progress = redis.call('HGET', KEYS[4], 'progress') or '0'
redis.call('HSET', KEYS[4], 'scores', progress, 'key', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[7])
return 1
"""


def new_config(game_id: str, old: dict[str, object]) -> dict[str, object]:
    """An old hook's configuration as a subscription filtered to its game."""
    return {
        "id": old["id"],
        "key_id": old["key_id"],
        "game_id": game_id,
        "format": "webhook",
        "url": old["url"],
        "kinds": ["score", "game_over"],
        "secrets": [{"secret": old["secret"], "until_ms": None}],
        "created_ms": old["created_ms"],
    }


def migrate_game(client: redis.Redis, game_id: str) -> int:
    """Move one game's hooks; returns how many."""
    tag = "{g:" + game_id + "}"
    old_hash = tag + ":webhooks"
    move = script(client, MOVE_LUA)
    moved = 0
    for hook, raw in client.hgetall(old_hash).items():
        hook_id, old = text(hook), json.loads(raw)
        state, log_key, _ = subscription_keys(game_id, hook_id)
        base = f"{tag}:wh:{hook_id}"
        keys = [old_hash, game_subscriptions_key(game_id), base, state, base + ":log", log_key,
                base + ":lease"]  # fmt: skip
        config = json.dumps(new_config(game_id, old))
        if move(keys=keys, args=[hook_id, config, old["key_id"]]):
            moved += 1
            due = subs_due_key(index_shard(game_id))
            client.zadd(due, {f"{game_id}:{hook_id}": int(time.time() * 1000)}, lt=True)
    return moved


def run(client: redis.Redis) -> dict[str, int]:
    """Move every game's hooks, then drop the old indexes and feed positions."""
    games = hooks = 0
    for db in nodes(client):
        for key in db.scan_iter(match="{g:*}:webhooks", count=1000):
            game_id = text(key)[3:].split("}", 1)[0]
            hooks += migrate_game(client, game_id)
            games += 1
    for shard, tag in enumerate(SHARD_TAGS):
        client.delete("{" + tag + "}:idx:hooks-due")
        client.hdel(positions_key(shard), OLD_CONSUMER)
    return {"games": games, "hooks": hooks}


def main(argv: list[str] | None = None) -> int:
    return one_off(
        "python -m services.redis_store.migrate_webhooks",
        "Move per-game webhooks into subscriptions filtered to their game. One-off: run it "
        "once when upgrading, with the workers stopped. Idempotent.",
        lambda client, _args: run(client),
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
