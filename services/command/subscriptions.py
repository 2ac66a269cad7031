"""Subscriptions per API key (command side): create, list, read, delete, rotate the secret,
ping, read the delivery log. The worker's half (the feed of every game the key created or
imported, delivered signed, in order per game) is services/scoring/subscriptions.py.

A subscription is stored in its key's hash ``{k:<key id>}:subs`` (services/common/
notifications.py says what a configuration holds). Every write is one conditional script on
that hash: the per-key limit is checked where the subscription is added, and a rotation
replaces the configuration only if nobody changed it since it was read (two rotations at once
cannot lose a secret). The secret is generated here and answered once, at creation or
rotation; it is stored as is because the worker signs every delivery with it.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

import redis

from carcassonne.errors import GameError
from services.common.notifications import (
    DEFAULT_OVERLAP_SECONDS,
    KINDS,
    MAX_OVERLAP_SECONDS,
    MAX_SUBSCRIPTIONS,
    RECENT_KEPT,
    live_secrets,
    public_view,
)
from services.redis_store.keys import subscription_recent_key, subscriptions_key
from services.redis_store.scripts import script

from . import hooks
from .errors import NotFound
from .hooks import BadWebhook

PING_TASK = "subscriptions.ping"
SECRET_PREFIX = "whsec_"
# KEYS: the key's subscriptions hash. ARGV: id, configuration JSON, the per-key limit.
ADD_LUA = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class UnavailableWorker(GameError):
    """The ping could not be handed to the worker (503)."""

    status = 503


def check_kinds(kinds: Any) -> list[str]:
    """The event kinds of a subscription: a non-empty list of known kinds (duplicates
    dropped, in the order of `KINDS`); 422 `unknown_event_kind` names the first unknown."""
    if not isinstance(kinds, list) or not kinds or len(kinds) > len(KINDS) * 4:
        raise BadWebhook(
            "bad_event_kinds", f"kinds must be a non-empty list of: {', '.join(KINDS)}"
        )
    for kind in kinds:
        if kind not in KINDS:
            shown = kind[:40] if isinstance(kind, str) else type(kind).__name__
            raise BadWebhook(
                "unknown_event_kind",
                f"unknown event kind {shown!r}: one of {', '.join(KINDS)}",
                kind=shown,
                known=list(KINDS),
            )
    return [k for k in KINDS if k in kinds]


def _now_ms() -> int:
    return int(time.time() * 1000)


class Subscriptions:
    """An API key's subscriptions."""

    def __init__(
        self,
        client: redis.Redis,
        ping: Callable[[str, str, str], bool] | None,
        development: bool = False,
    ) -> None:
        self.client = client
        self.ping_sender = ping
        self.development = development
        self._add = script(client, ADD_LUA)
        self._replace = script(client, hooks.REPLACE_LUA)  # a configuration, conditionally

    def create(self, key_id: str, url: Any, kinds: Any) -> dict[str, Any]:
        """A new subscription of every game of `key_id`; answers its secret (only now)."""
        config: dict[str, Any] = {
            "id": "s_" + secrets.token_hex(8),
            "key_id": key_id,
            "url": hooks.check_receiver(url, self.development),
            "kinds": check_kinds(kinds),
            "secrets": [{"secret": SECRET_PREFIX + secrets.token_urlsafe(32), "until_ms": None}],
            "created_ms": _now_ms(),
        }
        added = self._add(
            keys=[subscriptions_key(key_id)],
            args=[config["id"], json.dumps(config), MAX_SUBSCRIPTIONS],
        )
        if not added:
            raise BadWebhook(
                "too_many_subscriptions",
                f"an API key has at most {MAX_SUBSCRIPTIONS} subscriptions",
            )
        return {**self._view(config), "secret": config["secrets"][0]["secret"]}

    def list(self, key_id: str) -> list[dict[str, Any]]:
        """Every subscription of the key, oldest first (no secrets)."""
        raw = cast(dict[Any, Any], self.client.hgetall(subscriptions_key(key_id)))
        configs = sorted((json.loads(v) for v in raw.values()), key=lambda c: c["created_ms"])
        return [self._view(c) for c in configs]

    def config(self, key_id: str, sub_id: str) -> dict[str, Any]:
        """A subscription's stored configuration (404 `subscription_not_found`)."""
        raw = self.client.hget(subscriptions_key(key_id), sub_id) if len(sub_id) <= 64 else None
        if raw is None:  # another key's subscription is reported as missing too
            raise NotFound("subscription_not_found", f"no subscription {sub_id[:64]}")
        return dict(json.loads(raw))

    def get(self, key_id: str, sub_id: str) -> dict[str, Any]:
        """A subscription as the API shows it."""
        return self._view(self.config(key_id, sub_id))

    def delete(self, key_id: str, sub_id: str) -> None:
        """Stop a subscription at once: deliveries not yet made are dropped."""
        self.config(key_id, sub_id)  # 404 if there is none
        self.client.hdel(subscriptions_key(key_id), sub_id)
        self.client.delete(subscription_recent_key(key_id, sub_id))

    def rotate(self, key_id: str, sub_id: str, overlap_seconds: int) -> dict[str, Any]:
        """A new secret; the ones it replaces keep signing for `overlap_seconds` more."""
        if not 0 <= overlap_seconds <= MAX_OVERLAP_SECONDS:
            raise BadWebhook("bad_overlap", f"overlap_seconds must be 0-{MAX_OVERLAP_SECONDS}")
        for _ in range(10):  # lost races with another rotation: bounded
            raw = self.client.hget(subscriptions_key(key_id), sub_id)
            if raw is None:
                break
            config = json.loads(raw)
            now = _now_ms()
            until = now + overlap_seconds * 1000
            old = [
                {"secret": s, "until_ms": min(until, _until(config, s))}
                for s in live_secrets(config, now)
            ]
            new = SECRET_PREFIX + secrets.token_urlsafe(32)
            # The current one and at most two older ones: a receiver checks few secrets.
            config["secrets"] = [{"secret": new, "until_ms": None}, *old[:2]]
            replaced = self._replace(
                keys=[subscriptions_key(key_id)], args=[sub_id, raw, json.dumps(config)]
            )
            if replaced == 1:
                return {**self._view(config), "secret": new}
            if replaced == -1:
                break
        raise NotFound("subscription_not_found", f"no subscription {sub_id[:64]}")

    def ping(self, key_id: str, sub_id: str) -> dict[str, Any]:
        """Have the worker POST a signed `ping` to the subscription's URL (once, no retry)."""
        self.config(key_id, sub_id)
        delivery = "ping_" + secrets.token_hex(8)
        if self.ping_sender is None or not self.ping_sender(key_id, sub_id, delivery):
            raise UnavailableWorker(
                "worker_unreachable", "the ping could not be handed to the worker; retry later"
            )
        return {
            "subscription_id": sub_id,
            "delivery": delivery,
            "deliveries": f"/v1/subscriptions/{sub_id}/deliveries",
        }

    def deliveries(self, key_id: str, sub_id: str, limit: int) -> dict[str, Any]:
        """The subscription's most recent delivery attempts, newest first."""
        self.config(key_id, sub_id)
        raw = cast(
            list[Any],
            self.client.lrange(subscription_recent_key(key_id, sub_id), 0, limit - 1),
        )
        return {
            "subscription_id": sub_id,
            "kept": RECENT_KEPT,
            "attempts": [json.loads(r) for r in raw],
        }

    def _view(self, config: dict[str, Any]) -> dict[str, Any]:
        return public_view(config, _now_ms())


def _until(config: dict[str, Any], secret: str) -> int:
    """When a secret of `config` stops signing (a far future for the current one)."""
    for entry in config["secrets"]:
        if entry["secret"] == secret:
            return int(entry["until_ms"] or 2**62)
    return 0


__all__ = ["DEFAULT_OVERLAP_SECONDS", "PING_TASK", "Subscriptions", "check_kinds"]
