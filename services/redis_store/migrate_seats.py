"""Give every game written before the public seats record its own (a one-off command, run
once when upgrading, before the new query service starts).

    python -m services.redis_store.migrate_seats [--redis-url URL]

Since issue 32 (finding 11) the query service reads a game's names, player ids, bots and owner
from its seats record ``{g:G}:seats`` (services/redis_store/seats.py), never from its secrets
record: its Redis user may not read secrets. This walks the keyspace once with SCAN (each
primary of a cluster) for ``{g:*}:secrets`` and writes each game's seats record from it,
unless it has one (SET NX: a game created meanwhile keeps the one written with it). Run it
with a user that may read secrets (the worker's or an operator's). Idempotent.
"""

from __future__ import annotations

import json
import sys

import redis

from .backfill import nodes
from .indexes import text
from .keys import seats_key
from .one_off import one_off
from .seats import public_seats


def run(client: redis.Redis, count: int = 1000) -> dict[str, int]:
    """Write the seats record of every game that has secrets and no seats record."""
    written = present = 0
    for db in nodes(client):
        for key in db.scan_iter(match="{g:*}:secrets", count=count):
            raw = client.get(text(key))
            if raw is None:
                continue  # archived meanwhile
            game_id = text(key)[3:].split("}", 1)[0]
            seats = json.dumps(public_seats(json.loads(raw)))
            if client.set(seats_key(game_id), seats, nx=True):
                written += 1
            else:
                present += 1
    return {"written": written, "present": present}


def main(argv: list[str] | None = None) -> int:
    return one_off(
        "python -m services.redis_store.migrate_seats",
        "Write the public seats record of every game from before it. One-off: run it once "
        "when upgrading, before the new query service. Idempotent.",
        lambda client, _args: run(client),
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
