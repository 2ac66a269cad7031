"""Hints worked out by the bot worker, asked for by the command service (issue 32, finding 4).

An mcts hint searched in the web request held a sync gunicorn worker for its whole think
time, and a fresh position costs one `POST /games`. So the command service only asks: one
script checks the seat's and the key's budgets, records the hint as pending and charges it,
and the command service sends the task ``bots.hint`` on the bot worker's queue; the worker
searches and writes the answer with the time it may be shown (`ready_ms`: the hint's fixed
duration after the worker started it, services/common/pace.py), and the command service
answers 202 until then, 200 after. Nothing holds a web worker, and no answer comes sooner for
an easier hand.

(Its scripts add with GET and SET, as services/redis_store/bot_budget.py says why.)

Keys, in the slot of the game's API key (``-`` for a game made without one), so that the
record, the key's budgets and the seat's in one script are one slot:

- ``{k:<key>}:hint:<game>:<seq>:<level>``: the hint of one position and level, JSON:
  ``{"state": "pending", "nonce", "seat", "asked_ms", "due_ms", "ms"}`` while asked, then
  ``{"state": "ready", "nonce", "ready_ms", "answer"}``; kept `keep_ms` (asking again for the
  same position costs no search, as before);
- ``{k:<key>}:hints:seats:<game>``: hash, seat -> hint seconds that seat has taken in the game
  (kept a week from its last hint);
- the key's in-flight sets and day's charge (services/redis_store/bot_budget.py).

A pending hint the worker has not answered by its `due_ms` (the worker is down, or its queue
too long) is given up (`abandon`: its charges given back, the record gone) and the command
service answers 503; a worker that comes to it later finds the record gone, or another
`nonce`, and writes nothing.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import redis

from .bot_budget import DAY_TTL_SECONDS, IN_FLIGHT_LUA, Refused, day_key, hints_key, in_flight_key
from .scripts import script

QUEUE, TASK = "bots", "bots.hint"  # the bot worker's queue; its task (services/bots)
NO_KEY = "-"  # the owner of games made without an API key (development)

# KEYS: the hint's record, the key's hints in flight, its games in flight, its day's charge,
# the game's seats' hint seconds. ARGV: the pending record (JSON), the in-flight member, the
# hint's seconds, the seat, now (ms), when it is given up on (ms), how long the record is kept
# (ms), the key's in-flight limit, its day's limit, the seat's limit, the key's most hints at
# once, the day's TTL. Returns {'known', record} (asked already: nothing changed), {'asked'}
# (recorded and charged), or {'refused', budget, held}.
ASK_LUA = (
    IN_FLIGHT_LUA
    + """
local known = redis.call('GET', KEYS[1])
if known then return {'known', known} end
local seconds = tonumber(ARGV[3])
local seat_limit = tonumber(ARGV[10])
local spent = tonumber(redis.call('HGET', KEYS[5], ARGV[4]) or '0')
if seat_limit > 0 and spent + seconds > seat_limit then
  return {'refused', 'seat', tostring(spent)}
end
local total, hints = in_flight(KEYS[3], KEYS[2], tonumber(ARGV[5]))
local most = tonumber(ARGV[11])
if most > 0 and hints >= most then return {'refused', 'hints_in_flight', tostring(hints)} end
local limit = tonumber(ARGV[8])
if limit > 0 and total + seconds > limit then
  return {'refused', 'in_flight', tostring(total)}
end
local today = tonumber(redis.call('GET', KEYS[4]) or '0')
local day_limit = tonumber(ARGV[9])
if day_limit > 0 and today + seconds > day_limit then
  return {'refused', 'day', tostring(today)}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])
redis.call('SET', KEYS[4], tostring(today + seconds), 'PX', tonumber(ARGV[12]) * 1000)
redis.call('HSET', KEYS[5], ARGV[4], tostring(spent + seconds))
redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[12]) * 3500)
return {'asked'}
"""
)

# The in-flight member (position, level, ms) of a hint given up and asked again is the new
# ask's too: a task of the old ask (its nonce) takes it off the in-flight set only when no
# other ask's pending record holds it, or the new ask, still queued, stops counting against
# the key's hints at once and seconds in flight. KEYS: the record, the key's hints in flight.
# ARGV: nonce, the in-flight member. Answers the record (false if none).
LEAVE_LUA = """
local function leave(nonce, member)
  local known = redis.call('GET', KEYS[1])
  local record = known and cjson.decode(known)
  if not (record and record['state'] == 'pending' and record['nonce'] ~= nonce) then
    redis.call('ZREM', KEYS[2], member)
  end
  return record
end
"""

# KEYS: the record, the key's hints in flight. ARGV: nonce, the answer (JSON text, kept as
# text), when it may be shown (ms), the in-flight member, how long the record is kept (ms).
# 1 when written; 0: given up on (or another ask's), nothing written. The member leaves the
# in-flight set unless another ask holds it (`LEAVE_LUA`). The pending record's other fields
# stay (asked_ms, ms, seat).
DONE_LUA = (
    LEAVE_LUA
    + """
local record = leave(ARGV[1], ARGV[4])
if not record then return 0 end
if record['state'] ~= 'pending' or record['nonce'] ~= ARGV[1] then return 0 end
record['state'] = 'ready'
record['answer'] = ARGV[2]
record['ready_ms'] = tonumber(ARGV[3])
redis.call('SET', KEYS[1], cjson.encode(record), 'PX', ARGV[5])
return 1
"""
)

# KEYS: the record, the key's hints in flight. ARGV: nonce, the in-flight member.
DROP_LUA = (
    LEAVE_LUA
    + """
leave(ARGV[1], ARGV[2])
return 1
"""
)

# KEYS: the record, the key's hints in flight, the day's charge it was charged to, the seats'
# hash. ARGV: nonce, in-flight member, the hint's seconds, the seat. 1 when given up (its
# charges given back), 0 when it was answered or given up already.
ABANDON_LUA = """
local known = redis.call('GET', KEYS[1])
if not known then return 0 end
local record = cjson.decode(known)
if record['state'] ~= 'pending' or record['nonce'] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
local seconds = tonumber(ARGV[3])
local today = redis.call('GET', KEYS[3])
if today then
  redis.call('SET', KEYS[3], tostring(math.max(0, tonumber(today) - seconds)), 'KEEPTTL')
end
local spent = redis.call('HGET', KEYS[4], ARGV[4])
if spent then
  redis.call('HSET', KEYS[4], ARGV[4], tostring(math.max(0, tonumber(spent) - seconds)))
end
return 1
"""


def owner_of(record: dict[str, Any]) -> str:
    """The API key a game's hints are charged to (its secrets record's `key_id`)."""
    return str(record.get("key_id") or NO_KEY)


def record_key(owner: str, game_id: str, seq: int, level: str) -> str:
    """The hint of one position and level."""
    return "{k:" + owner + "}:hint:" + f"{game_id}:{seq}:{level}"


def seats_key(owner: str, game_id: str) -> str:
    """Hash: seat -> the hint seconds it has taken in the game."""
    return "{k:" + owner + "}:hints:seats:" + game_id


def member(game_id: str, seq: int, level: str, ms: int) -> str:
    """A hint in the key's in-flight set: its position, level and milliseconds."""
    return f"{game_id}:{seq}:{level}:{ms}"


class Limits:
    """The budgets a hint is asked against (each <= 0: none): the key's bot seconds in flight
    and per day, the seat's hint seconds per game, the key's hints at once."""

    def __init__(
        self, in_flight: float = 0, day: float = 0, seat: float = 0, at_once: int = 0
    ) -> None:
        self.in_flight, self.day, self.seat, self.at_once = in_flight, day, seat, at_once

    def of(self, budget: str) -> float:
        """The limit of a budget named as the scripts name it."""
        return {"in_flight": self.in_flight, "day": self.day, "seat": self.seat,
                "hints_in_flight": float(self.at_once)}[budget]  # fmt: skip


class HintStore:
    """Hint records and their budgets in Redis (see the module's docstring)."""

    def __init__(self, client: redis.Redis, keep_ms: int = 3_600_000) -> None:
        self.keep_ms = keep_ms
        self.client = client
        self._ask = script(client, ASK_LUA)
        self._done = script(client, DONE_LUA)
        self._abandon = script(client, ABANDON_LUA)
        self._drop = script(client, DROP_LUA)

    def get(self, owner: str, game_id: str, seq: int, level: str) -> dict[str, Any] | None:
        """The record of a position's hint, or None."""
        raw = self.client.get(record_key(owner, game_id, seq, level))
        return None if raw is None else dict(json.loads(raw))

    def ask(
        self,
        owner: str,
        game_id: str,
        seq: int,
        level: str,
        seat: int,
        ms: int,
        wait_ms: int,
        limits: Limits,
        now: float | None = None,
    ) -> tuple[dict[str, Any] | None, bool, Refused | None]:
        """Ask for a hint of `ms` (its fixed duration) for `seat`: (the record found, False,
        None) when asked already, (the new pending record, True, None) when recorded and
        charged (the caller sends the task), or (None, False, what refused it). It is given
        up on `ms + wait_ms` from now."""
        at = time.time() if now is None else now
        now_ms = int(at * 1000)
        pending = {"state": "pending", "nonce": secrets.token_hex(8), "seat": seat,
                   "asked_ms": now_ms, "due_ms": now_ms + ms + wait_ms, "ms": ms}  # fmt: skip
        reply: Any = self._ask(
            keys=[
                record_key(owner, game_id, seq, level),
                hints_key(owner),
                in_flight_key(owner),
                day_key(owner, at),
                seats_key(owner, game_id),
            ],
            args=[
                json.dumps(pending),
                member(game_id, seq, level, ms),
                repr(ms / 1000),
                seat,
                now_ms,
                pending["due_ms"],
                self.keep_ms,
                repr(limits.in_flight),
                repr(limits.day),
                repr(limits.seat),
                limits.at_once,
                DAY_TTL_SECONDS,
            ],
        )
        kind = _text(reply[0])
        if kind == "known":
            return dict(json.loads(reply[1])), False, None
        if kind == "asked":
            return pending, True, None
        budget = _text(reply[1])
        return None, False, Refused(budget, float(reply[2]), limits.of(budget))

    def done(
        self, owner: str, game_id: str, seq: int, level: str, ms: int, nonce: str,
        answer: dict[str, Any], ready_ms: int,
    ) -> bool:  # fmt: skip
        """Write a worked-out hint, shown from `ready_ms` (Unix ms); False if it was given up
        on meanwhile (nothing written)."""
        reply = self._done(
            keys=[record_key(owner, game_id, seq, level), hints_key(owner)],
            args=[
                nonce,
                json.dumps(answer),
                ready_ms,
                member(game_id, seq, level, ms),
                self.keep_ms,
            ],
        )
        return bool(int(reply))

    def is_pending(self, owner: str, game_id: str, seq: int, level: str, nonce: str) -> bool:
        """Whether the hint is still asked for under `nonce` (not given up on, not answered)."""
        record = self.get(owner, game_id, seq, level)
        return record is not None and record["state"] == "pending" and record["nonce"] == nonce

    def drop(self, owner: str, game_id: str, seq: int, level: str, ms: int, nonce: str) -> None:
        """Take the ask `nonce` of a hint nobody will ask for again (its game moved on, or it
        was given up on) off the key's in-flight set, unless another ask of the same hint
        holds that entry now; its record is left to expire."""
        self._drop(
            keys=[record_key(owner, game_id, seq, level), hints_key(owner)],
            args=[nonce, member(game_id, seq, level, ms)],
        )

    def abandon(
        self, owner: str, game_id: str, seq: int, level: str, record: dict[str, Any]
    ) -> bool:
        """Give up on a pending hint (no worker answered it in time): its record gone, its
        charges given back; False if it was answered or given up already."""
        ms = int(record["ms"])
        reply = self._abandon(
            keys=[
                record_key(owner, game_id, seq, level),
                hints_key(owner),
                day_key(owner, int(record["asked_ms"]) / 1000),
                seats_key(owner, game_id),
            ],
            args=[
                record["nonce"],
                member(game_id, seq, level, ms),
                repr(ms / 1000),
                record["seat"],
            ],
        )
        return bool(int(reply))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
