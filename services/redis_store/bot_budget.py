"""Bot CPU as a budget of each API key (issue 32, finding 2): the bot seconds its games in
progress may still take, reserved when a game with bot seats is created and given back when
the game ends.

One sorted set per key, ``{k:<key id>}:bots:in-flight`` (game id -> the bot seconds reserved
for it), in the key's slot. A creation reserves in one script that sums what is reserved and
refuses when the new game would take the key past its limit, so two creations at once never
both take the last seconds. The bot worker's change-feed consumer (services/bots/feed.py)
gives a game's seconds back when it sees the game end (`release`: idempotent, so a batch it
redoes gives nothing back twice).
"""

from __future__ import annotations

from typing import Any

import redis

from .scripts import script

# KEYS: the key's in-flight set. ARGV: game id, its seconds, the key's limit.
# Returns {1, in flight after} when reserved, {0, in flight} when the limit refuses it.
RESERVE_LUA = """
local total = 0
local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 2, #entries, 2 do total = total + tonumber(entries[i]) end
local asked = tonumber(ARGV[2])
if total + asked > tonumber(ARGV[3]) then return {0, tostring(total)} end
redis.call('ZADD', KEYS[1], asked, ARGV[1])
return {1, tostring(total + asked)}
"""


def in_flight_key(key_id: str) -> str:
    """Sorted set: game id -> bot seconds reserved for it, of one API key's games."""
    return "{k:" + key_id + "}:bots:in-flight"


class BotBudget:
    """Reserves bot seconds against each key's limit (`limit_seconds` <= 0: no limit)."""

    def __init__(self, client: redis.Redis, limit_seconds: float) -> None:
        self.limit_seconds = float(limit_seconds)
        self._reserve = script(client, RESERVE_LUA)

    def reserve(self, key_id: str, game_id: str, seconds: float) -> float | None:
        """Reserve `seconds` for the game: None when done, else the seconds the key's games
        in progress hold already (the reservation was refused: nothing written)."""
        if self.limit_seconds <= 0 or seconds <= 0:
            return None
        reply: Any = self._reserve(
            keys=[in_flight_key(key_id)], args=[game_id, repr(seconds), repr(self.limit_seconds)]
        )
        return None if int(reply[0]) else float(reply[1])


def release(client: redis.Redis, key_id: str, game_id: str) -> None:
    """Give a game's reserved seconds back (it ended); nothing if it held none."""
    client.zrem(in_flight_key(key_id), game_id)
