"""The games whose bot seats may have a turn to play: `{ixNN}:idx:bots-due`, one per shard.

A game with a bot seat is in its shard's set from before its first append until it is
over; the score is when (ms) the bot sweep should look at it next. The command service
puts it there when it creates the game and whenever a human move hands the turn to a bot;
the bot worker moves the time on while it thinks and after each turn, and removes the game
once it is over. The sweep reads only entries that are due (`due_games`): what it costs
follows the bot games waiting, never how many games are stored. No SCAN.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import redis

from .indexes import shard_pages
from .keys import bots_due_key, index_shard, secrets_key

TASK, QUEUE = "bots.play", "bots"  # the bot worker's task, sent by name (services/bots)


def set_due(client: redis.Redis, game_id: str, at_ms: int) -> None:
    """Have the sweep look at the game at `at_ms` (unless a bot task moves it on first)."""
    client.zadd(bots_due_key(index_shard(game_id)), {game_id: at_ms})


def drop(client: redis.Redis, game_id: str) -> None:
    """The game has no bot turn to play any more (over, or not a game of ours)."""
    client.zrem(bots_due_key(index_shard(game_id)), game_id)


def due_games(client: redis.Redis, now_ms: int, page: int = 1_000) -> Iterator[str]:
    """Games whose sweep time has come (each shard's overdue entries, oldest first)."""
    for members in shard_pages(client, bots_due_key, page, high=now_ms):
        yield from members


def secrets_of(client: redis.Redis, game_id: str) -> dict[str, Any] | None:
    """A game's secrets record (written by the command service), or None."""
    raw = client.get(secrets_key(game_id))
    return None if raw is None else dict(json.loads(raw))


def bot_seats(record: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Per seat, its bot (``{"level", "think_ms"}``) or None for a human, from a game's
    secrets record (empty for a game without bots, and for an imported one)."""
    if record.get("imported"):
        return []
    bots = record.get("bots")
    if not isinstance(bots, list):
        return []
    return [b if isinstance(b, dict) else None for b in bots]


def has_takeover(record: dict[str, Any]) -> bool:
    """Whether a bot takes over a seat of the game that leaves (its ruleset's `on_leave`,
    marked in the secrets record by the command service: docs/takeover.md). Which seats it
    plays is in the log (`SeatTakenOver`), not in the record."""
    return not record.get("imported") and str(record.get("on_leave", "skip")).startswith("bot:")


def plays_bots(record: dict[str, Any]) -> bool:
    """Whether a bot may play in the game: a bot seat, or a ruleset whose bot takes over a seat
    that leaves. Such a game is what the bot worker follows, and the only kind that may hold
    bot seconds of its API key (services/redis_store/bot_budget.py)."""
    return any(bot_seats(record)) or has_takeover(record)


def is_bot(record: dict[str, Any], seat: int) -> bool:
    """Whether a seat of the game is played by a bot."""
    bots = bot_seats(record)
    return 0 <= seat < len(bots) and bots[seat] is not None
