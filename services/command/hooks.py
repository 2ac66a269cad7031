"""Per-game webhooks (command side): a webhook is a subscription of the registering API key
filtered to one game, in the webhook format (services/common/notifications.py); this module
validates and stores one, reads its delivery log, and wakes the worker that delivers
(``subscriptions.dispatch`` by name: services never import each other; the worker's half is
services/scoring/subscriptions.py, the webhook body services/scoring/webhooks.py).

Keys of game G and hook H, under the game's hash tag (names from `services.redis_store.keys`):
``{g:G}:subs`` (hash: H -> the configuration JSON), ``{g:G}:sub:H`` (the subscription's state
in the game: ``progress``, the last score seq turned into a delivery, and ``head``, the last
one whose delivery is over) and ``{g:G}:sub:H:log`` (score seq -> the delivery's log entry).
A hook with work to do is in its shard's subs-due index, written by the same scripts that
write the hook: registration here, dispatch and delivery in the worker.
The secret is stored as given: the worker needs it to sign every delivery.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

import redis

from carcassonne.errors import GameError
from eventstore.envelope import MOVES, SCORES
from eventstore.port import EventStore
from services.common.notifications import (
    MAX_HOOKS_PER_KEY,
    MAX_OVERLAP_SECONDS,
    WEBHOOK_FORMAT,
    WEBHOOK_KINDS,
    WEBHOOK_SIGNED,
    live_secrets,
    owner_key,
)
from services.common.webhook_url import MAX_URL, RefusedUrl, check, normalise
from services.redis_store.keys import (
    archived_key,
    game_subscriptions_key,
    key_hooks_key,
    legacy_shard,
    shard_of,
    subs_due_key,
    subscription_keys,
)
from services.redis_store.scripts import script

from .cache import archived_game
from .errors import Forbidden, NotFound

DISPATCH_TASK = "subscriptions.dispatch"
MAX_HOOKS_PER_GAME = 10  # every score event is sent to each: this bounds the fan-out
SECRET_LENGTH = (16, 256)
EVENTS = ("FeatureScored", "ScoreReverted", "GameScored")  # every score event (docs/undo.md)
# KEYS: the game's subscriptions hash, its tombstone[, its shard's subs-due index]. ARGV:
# hook id, config JSON, the hook's index member, now (ms), the limit. The new hook has the
# game's score events so far to dispatch: due now, in the same step (the sweep sends the
# dispatch if ours is lost). Returns 1 when added, 0 at the limit, -1 when the game was
# archived (after the request found it in Redis: nothing is added beside its tombstone).
REGISTER_LUA = """
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if KEYS[3] then redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3]) end
return 1
"""
# KEYS: a subscriptions hash (a game's hooks, a key's subscriptions). ARGV: id, the
# configuration as read, the new one. Returns 1 if replaced, 0 if it changed since it was
# read, -1 if it is gone.
REPLACE_LUA = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return -1 end
if current ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""
# How a hook's deliveries are signed, by whether it has the timed signature only.
SIGNATURES = {
    True: "Carcassonne-Signature: t=<unix seconds>,v1=<HMAC-SHA256(secret, t.body)>",
    False: "Carcassonne-Signature (timed), and X-Carcassonne-Signature: sha256=<HMAC-SHA256("
    "secret, body)> until the hook is rotated",
}
log = logging.getLogger(__name__)


class BadWebhook(GameError):
    """A webhook registration that cannot be accepted (422)."""


def check_url(url: Any, allow_private: bool = False) -> str:
    """A webhook URL, normalised (services/common/webhook_url.py): http or https, a host, no
    credentials, at most `MAX_URL` characters, and unless `allow_private` not an address of
    this network in any spelling (``http://2130706433/`` is ``http://127.0.0.1/``). The
    normalised URL is what gets stored and called. A name is checked again, against every
    address it resolves to, before each delivery."""
    if not isinstance(url, str):
        raise BadWebhook("bad_webhook_url", f"url must be a string of 1-{MAX_URL} characters")
    try:
        return check(normalise(url), allow_private).url
    except RefusedUrl as refused:
        raise BadWebhook(refused.code, refused.message, **refused.details) from None


def check_receiver(url: Any, development: bool) -> str:
    """Where a webhook or subscription delivers: `check_url`'s URL, and https (issue 32,
    finding 6: a signed body over http can be read and replayed on the way). In development
    (WEBHOOK_ALLOW_PRIVATE) http and loopback or private hosts pass too."""
    checked = check_url(url, development)
    if not checked.startswith("https://") and not development:  # the scheme is normalised
        raise BadWebhook(
            "webhook_url_not_https",
            "url must start with https:// (http is accepted only in development)",
        )
    return checked


def check_secret(secret: Any) -> str:
    """A webhook secret: a string of 16-256 characters (it keys HMAC-SHA256)."""
    low, high = SECRET_LENGTH
    if not isinstance(secret, str) or not low <= len(secret) <= high:
        raise BadWebhook(
            "bad_webhook_secret", f"secret must be a string of {low}-{high} characters"
        )
    return secret


class Webhooks:
    """Registers hooks and reads their delivery logs."""

    def __init__(
        self,
        client: redis.Redis,
        store: EventStore,
        dispatch: Callable[[str], bool] | None,
        allow_private: bool = False,
        records: Callable[[str], dict[str, Any] | None] | None = None,
    ) -> None:
        self.client = client
        self.records = records  # a game's secrets record (its owner key); None: no check
        self.store = store
        self.dispatch = dispatch
        self.allow_private = allow_private
        self._register = script(client, REGISTER_LUA)
        self._replace = script(client, REPLACE_LUA)

    def register(self, game_id: str, url: Any, secret: Any, key_id: str) -> dict[str, Any]:
        """Add a hook to a game; every score event (from the first) will be delivered to it."""
        url = check_receiver(url, self.allow_private)
        secret = check_secret(secret)
        if self.store.last_seq(game_id, MOVES) == 0:
            if self.client.exists(archived_key(game_id)):
                raise archived_game(game_id)  # as every command on it: 409 game_over
            raise NotFound("game_not_found", f"no game {game_id}")
        if self.records is not None:
            check_owner(self.records(game_id), game_id, key_id)
        hook_id = "h_" + secrets.token_hex(8)
        config = {
            "id": hook_id,
            "key_id": key_id,
            "game_id": game_id,
            "format": WEBHOOK_FORMAT,
            "signature": WEBHOOK_SIGNED,  # timed and rotatable, as subscriptions
            "url": url,
            "kinds": list(WEBHOOK_KINDS),
            "secrets": [{"secret": secret, "until_ms": None}],
            "created_ms": int(time.time() * 1000),
        }
        self._reserve(key_id, game_id, hook_id)
        try:
            self._add(game_id, hook_id, config)
        except BaseException:
            self.client.srem(key_hooks_key(key_id), game_id + ":" + hook_id)
            raise
        if self.dispatch is not None:
            self.dispatch(game_id)  # deliver the score events already in the stream
        return {
            "hook_id": hook_id,
            "game_id": game_id,
            "url": url,
            "events": list(EVENTS),
            "backlog": self.store.last_seq(game_id, SCORES),
            "created_ms": config["created_ms"],
        }

    def _reserve(self, key_id: str, game_id: str, hook_id: str) -> None:
        """Take one of the key's `MAX_HOOKS_PER_KEY` places (issue 32, finding 5: a key could
        aim the worker at any number of URLs); given back if the registration fails. Added
        first and counted after, so two registrations at once never both take the last."""
        places, member = key_hooks_key(key_id), game_id + ":" + hook_id
        pipe = self.client.pipeline(transaction=True)
        pipe.sadd(places, member)
        pipe.scard(places)
        taken = cast(list[int], pipe.execute())[1]
        if taken > MAX_HOOKS_PER_KEY:
            self.client.srem(places, member)
            raise BadWebhook(
                "too_many_webhooks",
                f"an API key has at most {MAX_HOOKS_PER_KEY} webhooks over all its games: "
                "delete one (DELETE /games/{id}/webhooks/{hook_id})",
            )

    def _add(self, game_id: str, hook_id: str, config: dict[str, Any]) -> None:
        shard = shard_of(game_id)  # None: a game from before the indexes (backfill's)
        due = [subs_due_key(shard)] if shard is not None else []
        # The limit is checked in the script that adds the hook: two registrations at once
        # cannot both take the last place (the limit bounds every score event's fan-out).
        added = self._register(
            keys=[game_subscriptions_key(game_id), archived_key(game_id), *due],
            args=[
                hook_id,
                json.dumps(config),
                game_id + ":" + hook_id,
                config["created_ms"],
                MAX_HOOKS_PER_GAME,
            ],
        )
        if added == -1:
            raise archived_game(game_id)
        if not added:
            raise BadWebhook(
                "too_many_webhooks", f"a game has at most {MAX_HOOKS_PER_GAME} webhooks"
            )
        if shard is None:  # its index is in another slot: not in the script (the sweep finds it)
            index = subs_due_key(legacy_shard(game_id))
            self.client.zadd(index, {game_id + ":" + hook_id: config["created_ms"]}, lt=True)

    def list(self, game_id: str, key_id: str) -> list[dict[str, Any]]:
        """The key's hooks on a game, oldest first (never a secret)."""
        raw = cast(dict[Any, Any], self.client.hgetall(game_subscriptions_key(game_id)))
        configs = [json.loads(v) for v in raw.values()]
        mine = sorted((c for c in configs if c.get("key_id") == key_id), key=_created)
        return [self.view(c) for c in mine]

    def view(self, config: dict[str, Any]) -> dict[str, Any]:
        """A hook as the API shows it: no secret, only how many sign its deliveries now."""
        now = int(time.time() * 1000)
        return {
            "hook_id": config["id"],
            "game_id": config["game_id"],
            "url": config["url"],
            "events": list(EVENTS),
            "created_ms": config["created_ms"],
            "secrets_live": len(live_secrets(config, now)),
            "signature": SIGNATURES[config.get("signature") == WEBHOOK_SIGNED],
        }

    def delete(self, game_id: str, hook_id: str, key_id: str) -> None:
        """Stop a hook at once: deliveries not yet made are dropped, its log goes too."""
        self.hook(game_id, hook_id, key_id)  # 404 unless the key's
        state, log_key, lease = subscription_keys(game_id, hook_id)
        pipe = self.client.pipeline(transaction=True)  # one slot: the game's
        pipe.hdel(game_subscriptions_key(game_id), hook_id)
        pipe.delete(state, log_key, lease)
        pipe.execute()
        # The key's place and the due index are other slots: after (a crash leaves a place
        # taken until the key deletes another hook, never a hook without one).
        self.client.srem(key_hooks_key(key_id), game_id + ":" + hook_id)
        shard = shard_of(game_id)
        index = subs_due_key(shard if shard is not None else legacy_shard(game_id))
        self.client.zrem(index, game_id + ":" + hook_id)

    def rotate(
        self, game_id: str, hook_id: str, key_id: str, secret: Any, overlap_seconds: int
    ) -> dict[str, Any]:
        """Sign with `secret` from now on; the secrets it replaces keep signing (beside it)
        for `overlap_seconds`, so a receiver can switch without losing a delivery. A hook
        rotated once signs only with the timed signature."""
        secret = check_secret(secret)
        if not 0 <= overlap_seconds <= MAX_OVERLAP_SECONDS:
            raise BadWebhook("bad_overlap", f"overlap_seconds must be 0-{MAX_OVERLAP_SECONDS}")
        key = game_subscriptions_key(game_id)
        for _ in range(10):  # lost races with another rotation: bounded
            # The secrets rotated are those of the very bytes the replace is conditional on.
            raw, config = self._stored(game_id, hook_id, key_id)
            now = int(time.time() * 1000)
            until = now + overlap_seconds * 1000
            old = [{"secret": s, "until_ms": until} for s in live_secrets(config, now)]
            config["secrets"] = [{"secret": secret, "until_ms": None}, *old[:2]]
            config["signature"] = WEBHOOK_SIGNED
            if self._replace(keys=[key], args=[hook_id, raw, json.dumps(config)]) == 1:
                return self.view(config)
        raise NotFound("hook_not_found", f"no webhook {hook_id[:64]} on game {game_id}")

    def hook(self, game_id: str, hook_id: str, key_id: str) -> dict[str, Any]:
        """A hook's configuration, if it exists and belongs to this key (else 404)."""
        return self._stored(game_id, hook_id, key_id)[1]

    def _stored(self, game_id: str, hook_id: str, key_id: str) -> tuple[Any, dict[str, Any]]:
        """A hook's configuration as stored (its bytes, for a conditional replace) and read."""
        key = game_subscriptions_key(game_id)
        raw = self.client.hget(key, hook_id) if len(hook_id) <= 64 else None
        config = None if raw is None else json.loads(raw)
        if config is None or config.get("key_id") != key_id:
            # Another key's hook is reported as missing: its existence is not theirs to know.
            raise NotFound("hook_not_found", f"no webhook {hook_id[:64]} on game {game_id}")
        return raw, dict(config)

    def deliveries(
        self, game_id: str, hook_id: str, key_id: str, after: int, limit: int
    ) -> dict[str, Any]:
        """A page of a hook's delivery log, in score-event order, after score seq `after`."""
        config = self.hook(game_id, hook_id, key_id)
        state, log_key, _ = subscription_keys(game_id, hook_id)
        progress = int(cast(Any, self.client.hget(state, "progress")) or 0)
        seqs = list(range(after + 1, min(progress, after + limit) + 1))
        raws = cast(list[Any], self.client.hmget(log_key, [str(s) for s in seqs])) if seqs else []
        entries = [json.loads(r) for r in raws if r is not None]
        last = seqs[-1] if seqs else after
        return {
            "game_id": game_id,
            "hook_id": hook_id,
            "url": config["url"],
            "dispatched_up_to": progress,
            "score_seq": self.store.last_seq(game_id, SCORES),
            "deliveries": entries,
            "next": last if last < progress else None,
        }


def _created(config: dict[str, Any]) -> int:
    return int(config["created_ms"])


def check_owner(record: dict[str, Any] | None, game_id: str, key_id: str) -> None:
    """A webhook belongs to the key that registers it, on a game that key created or imported
    (issue 32, finding 5: any key could fill another key's game with hooks): 403
    `not_game_owner` otherwise, also for a game created without a key."""
    if owner_key(record) != key_id:
        raise Forbidden(
            "not_game_owner",
            f"game {game_id} was not created or imported with this API key: only that key "
            "can register webhooks on it",
        )
