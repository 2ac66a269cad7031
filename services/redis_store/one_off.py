"""The command line every one-off operator tool over the event store's Redis shares (the
migrations): `--redis-url` (default: REDIS_URL, else the admin user of `make run`'s Redis),
a connection of its own, and what the tool's `run` returns printed as one JSON line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from typing import Any

import redis

from .acl import default_url
from .connect import connect


def one_off(
    prog: str,
    description: str,
    run: Callable[[redis.Redis, argparse.Namespace], Mapping[str, Any]],
    argv: list[str] | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse `argv` (the tool's own `options` added to the parser), connect, print
    `run(client, args)` as JSON; the exit status (0)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    if options is not None:
        options(parser)
    parser.add_argument(
        "--redis-url",
        default=default_url(),
        help="the event store's Redis (redis:// or redis+cluster://); default $REDIS_URL, "
        "else the admin user of `make run`'s",
    )
    args = parser.parse_args(argv)
    try:
        client = connect(args.redis_url, role="migrate", max_connections=2)
        result = run(client, args)
    except redis.ConnectionError as exc:  # refused, down, a wrong password: no traceback
        parser.exit(1, f"{parser.prog}: cannot use the Redis of --redis-url: {exc}\n")
    print(json.dumps(result))
    return 0
