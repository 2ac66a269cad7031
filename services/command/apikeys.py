"""The CLI of the API keys of third-party callers (`X-Api-Key`; the keys themselves:
services/redis_store/apikeys.py, shared by both services).

``python -m services.command.apikeys create --name acme`` prints a new key once (only its
SHA-256 is stored); ``list`` shows ids and names, ``revoke <id>`` deletes a key at once;
``set <id> --vacation-days 20`` gives its players their own yearly vacation allowance
(docs/clocks.md; ``--vacation-days default``: the service's ``VACATION_DAYS_PER_YEAR`` again).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import redis

from services.redis_store.acl import default_url
from services.redis_store.apikeys import KEYS, PREFIX, ApiKeys, bucket_key, key_hash
from services.redis_store.connect import connect

from .config import from_env

__all__ = ["KEYS", "PREFIX", "ApiKeys", "bucket_key", "key_hash", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the key CLI."""
    parser = argparse.ArgumentParser(
        prog="python -m services.command.apikeys",
        description="Manage the API keys of third-party callers (sent as X-Api-Key).",
    )
    parser.add_argument(
        "--redis-url",
        help="the event store's Redis (default: $REDIS_URL, else the admin user of `make run`'s)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--name", required=True, help="who the key is for, e.g. acme")
    create.add_argument("--json", action="store_true", help="print one JSON line")
    listing = sub.add_parser("list", help="list the keys (ids and names, never the keys)")
    listing.add_argument("--json", action="store_true", help="print one JSON line")
    revoke = sub.add_parser("revoke", help="revoke a key by its id (it stops working at once)")
    revoke.add_argument("key_id", help="the id printed by create or list, e.g. k_1a2b3c4d5e6f")
    settings = sub.add_parser("set", help="set a key's own settings")
    settings.add_argument("key_id", help="the id printed by create or list")
    settings.add_argument(
        "--vacation-days",
        required=True,
        help="its players' vacation days a year (0-366), or 'default' for the service's",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; exit status 1 when a key to revoke does not exist, 2 on bad usage."""
    args = build_parser().parse_args(argv)
    url = args.redis_url or default_url(from_env()["REDIS_URL"])  # make run's admin user
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
        if args.command == "set":
            days = None if args.vacation_days == "default" else _days(args.vacation_days)
            if keys.set_vacation_days(args.key_id, days):
                print(f"{args.key_id}: vacation days a year {args.vacation_days}")
                return 0
            print(f"no key {args.key_id}", file=sys.stderr)
            return 1
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


def _days(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"vacation days are 0-366 or 'default', not {text!r}") from None


if __name__ == "__main__":
    sys.exit(main())
