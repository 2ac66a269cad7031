"""API keys of third-party callers (`X-Api-Key`), stored hashed in Redis, and their CLI.

``python -m services.command.apikeys create --name acme`` prints a new key once; only its
SHA-256 is stored (a key is 32 random bytes, so a fast hash is as good as a slow one), in
the hash ``{apikeys}:keys`` (field: the key's hash; value: JSON ``{"id", "name",
"created_ms"}``). ``list`` shows ids and names, ``revoke <id>`` deletes a key at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import sys
import time
from collections.abc import Sequence
from typing import Any

import redis

from services.redis_store.connect import connect

from .config import from_env

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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the key CLI."""
    parser = argparse.ArgumentParser(
        prog="python -m services.command.apikeys",
        description="Manage the API keys of third-party callers (sent as X-Api-Key).",
    )
    parser.add_argument("--redis-url", help="the event store's Redis (default: $REDIS_URL)")
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--name", required=True, help="who the key is for, e.g. acme")
    create.add_argument("--json", action="store_true", help="print one JSON line")
    listing = sub.add_parser("list", help="list the keys (ids and names, never the keys)")
    listing.add_argument("--json", action="store_true", help="print one JSON line")
    revoke = sub.add_parser("revoke", help="revoke a key by its id (it stops working at once)")
    revoke.add_argument("key_id", help="the id printed by create or list, e.g. k_1a2b3c4d5e6f")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; exit status 1 when a key to revoke does not exist, 2 on bad usage."""
    args = build_parser().parse_args(argv)
    url = args.redis_url or from_env()["REDIS_URL"]
    keys = ApiKeys(connect(url, role="apikeys-cli", max_connections=1))  # a cluster too
    try:
        if args.command == "create":
            key_id, key = keys.create(args.name)
            if args.json:
                print(json.dumps({"id": key_id, "name": args.name.strip(), "key": key}))
            else:
                print(f"created {key_id} for {args.name.strip()!r}; the key (shown only now):")
                print(key)
            return 0
        if args.command == "list":
            records = keys.records()
            if args.json:
                print(json.dumps(records))
            for r in [] if args.json else records:
                created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["created_ms"] / 1000))
                print(f"{r['id']}  {created} UTC  {r['name']}")
            return 0
        if keys.revoke(args.key_id):
            print(f"revoked {args.key_id}")
            return 0
        print(f"no key {args.key_id}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"apikeys: {exc}", file=sys.stderr)
        return 2
    except redis.RedisError as exc:
        print(f"apikeys: cannot reach Redis at {url}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
