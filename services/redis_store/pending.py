"""The set of games waiting for the scoring worker, shared by all games (not per game).

A move whose append raised its game's notification flag adds the game to the set, and the
first such move after the worker started draining also raises the "scheduled" flag and sends
one `scoring.drain` task. The task lowers "scheduled", then pops games until the set is
empty. So the number of Celery tasks follows how often the worker wakes up, not how many
games or moves there are. Both keys share one hash tag, so they live on one Cluster shard.
"""

from __future__ import annotations

from typing import Any

import redis

PENDING = "{scoring}:pending"
SCHEDULED = "{scoring}:scheduled"


def mark_pending(client: redis.Redis, game_id: str, ttl_ms: int) -> bool:
    """Add a game to the set; True when the caller must send the drain task.

    The "scheduled" flag expires after `ttl_ms`, so a lost task is sent again by a later
    move (and the worker's sweep finds any game left behind meanwhile).
    """
    pipe = client.pipeline(transaction=False)
    pipe.sadd(PENDING, game_id)
    pipe.set(SCHEDULED, 1, nx=True, px=max(1, ttl_ms))
    _, scheduled = pipe.execute()
    return bool(scheduled)


def add_pending(client: redis.Redis, game_id: str) -> None:
    """Add a game to the set without scheduling (the caller sends the drain itself)."""
    client.sadd(PENDING, game_id)


def take_pending(client: redis.Redis, count: int) -> list[str]:
    """Up to `count` waiting games, removed from the set."""
    popped: Any = client.spop(PENDING, count)
    return [g.decode() if isinstance(g, bytes) else str(g) for g in popped or []]


def clear_scheduled(client: redis.Redis) -> None:
    """Lower the flag: the next move of any game sends a new drain task."""
    client.delete(SCHEDULED)
