"""API keys of third-party callers (`X-Api-Key`), stored hashed in Redis: what both services
need of them (the command service creates games with a key, the query service lists a key's
games); the CLI that manages them is ``python -m services.command.apikeys``.

Only a key's SHA-256 is stored (a key is 32 random bytes, so a fast hash is as good as a slow
one), in the hash ``{apikeys}:keys`` (field: the key's hash; value: JSON ``{"id", "name",
"created_ms"}``, and ``vacation_days`` once its operator set the key's own allowance).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

import redis

KEYS = "{apikeys}:keys"  # one hash tag: the rate limiter's script reads it with a bucket key
PREFIX = "cck_"  # recognisable in logs and by secret scanners


def key_hash(key: str) -> str:
    """What is stored of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


def bucket_key(hashed: str) -> str:
    """The rate limiter's token bucket of a key (same hash tag as `KEYS`)."""
    return "{apikeys}:bucket:" + hashed


class ApiKeys:
    """Create, list, revoke and look up API keys."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def create(self, name: str) -> tuple[str, str]:
        """A new key for `name`: returns (key id, the key itself — shown only now)."""
        name = name.strip()
        if not 1 <= len(name) <= 80:
            raise ValueError("a key's name has 1-80 characters")
        key_id = "k_" + secrets.token_hex(6)
        key = PREFIX + secrets.token_urlsafe(32)
        record = {"id": key_id, "name": name, "created_ms": int(time.time() * 1000)}
        self.client.hset(KEYS, key_hash(key), json.dumps(record))
        return key_id, key

    def records(self) -> list[dict[str, Any]]:
        """Every live key's record (never the key), oldest first."""
        raw: dict[Any, Any] = self.client.hgetall(KEYS)
        records = [json.loads(v) for v in raw.values()]
        return sorted(records, key=lambda r: (r["created_ms"], r["id"]))

    def set_vacation_days(self, key_id: str, days: int | None) -> bool:
        """Give the key's players their own yearly vacation allowance (0-366 days; None:
        the service's default again); False if there is no such key."""
        if days is not None and (type(days) is not int or not 0 <= days <= 366):
            raise ValueError("vacation days are 0-366 a year")
        raw: dict[Any, Any] = self.client.hgetall(KEYS)
        for hashed, value in raw.items():
            record = json.loads(value)
            if record["id"] == key_id:
                if days is None:
                    record.pop("vacation_days", None)
                else:
                    record["vacation_days"] = days
                self.client.hset(KEYS, hashed, json.dumps(record))
                return True
        return False

    def revoke(self, key_id: str) -> bool:
        """Delete the key with this id; False if there is none."""
        raw: dict[Any, Any] = self.client.hgetall(KEYS)
        for hashed, value in raw.items():
            if json.loads(value)["id"] == key_id:
                field = hashed.decode() if isinstance(hashed, bytes) else str(hashed)
                self.client.hdel(KEYS, field)
                self.client.delete(bucket_key(field))
                return True
        return False

    def get(self, key: str) -> dict[str, Any] | None:
        """The record of a key, or None if it is unknown or revoked."""
        raw = self.client.hget(KEYS, key_hash(key))
        return None if raw is None else dict(json.loads(raw))
