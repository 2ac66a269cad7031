"""Players' declared vacations per API key (docs/clocks.md): the yearly allowance's books.

A player's vacations are one JSON list under the API key's hash tag
(``{k:<key id>}:vacations:<player id>``, `keys.vacations_key`): ``[{"id", "from_ms",
"until_ms", "days", "year", "ended_ms"?}…]``, oldest first. `declare` checks and records one
vacation in a single script, so two declarations at once never both fit in the allowance, and
a refused one writes nothing; a vacation may start later than its declaration, two of a
player never overlap, at most `MAX_PENDING` are not over, and at most `MAX_CALLED_OFF`
called off are kept. A declaration recorded also
prunes the list: a vacation called off a day ago or more, or over for more than a year, is
gone (its end's retry then answers 404). `end` ends a vacation early in one script too: a
running one ends then and counts the days begun (the rest go back to the allowance); one not
begun yet is called off (it ends where it was to start, and counts no day).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from .keys import vacations_key
from .scripts import script

DAY_MS = 86_400_000

# How long a vacation called off stays in the book (a retry of its end answers from it, and
# its declaration, still pausing the games, reads it); a vacation that ended more than
# PRUNED_AFTER_MS ago is gone too (its year's books are closed); and at most MAX_PENDING of a
# player's vacations are not over (running or to come). Call-offs cost no day: without these
# a player's list would grow without bound.
KEEP_CALLED_OFF_MS = DAY_MS
PRUNED_AFTER_MS = 366 * DAY_MS
MAX_PENDING = 50
# At most this many call-offs are kept (a day each): a call-off costs no day, so without it a
# caller looping "declare a later vacation, call it off" grew the list by one entry a loop,
# and every declaration, end and list read and rewrote all of it.
MAX_CALLED_OFF = 50

# KEYS[1] the player's list; ARGV: from_ms, until_ms, days, year, allowance, id, now ms,
# KEEP_CALLED_OFF_MS, PRUNED_AFTER_MS, MAX_PENDING, MAX_CALLED_OFF. Refused when another
# vacation of the player overlaps [from_ms, until_ms) ('overlaps', with its start, end and
# id; one called off, empty, overlaps nothing), when MAX_PENDING are not over ('too_many',
# with the days used), when MAX_CALLED_OFF call-offs are still kept ('called_off'), or when
# the year's days would pass the allowance ('allowance', with the days used).
# A vacation recorded, the list is written without those pruned (above).
DECLARE_LUA = """
local raw = redis.call('GET', KEYS[1])
local list = {}
if raw then list = cjson.decode(raw) end
local from_ms, until_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local days, year, allowance = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now, keep, pruned = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local used, pending, off, kept = 0, 0, 0, {}
for _, v in ipairs(list) do
  if tonumber(v.year) == year then used = used + tonumber(v.days) end
  local v_from, v_until = tonumber(v.from_ms), tonumber(v.until_ms)
  local called_off = v_until <= v_from
  if v_until > from_ms and v_from < until_ms and not called_off then
    return {'overlaps', used, tostring(v.until_ms), tostring(v.from_ms), v.id}
  end
  if v_until > now and not called_off then pending = pending + 1 end
  local gone = v_until < now - pruned
  if called_off and v.ended_ms and tonumber(v.ended_ms) <= now - keep then gone = true end
  if not gone then kept[#kept + 1] = v end
  if called_off and not gone then off = off + 1 end
end
if pending >= tonumber(ARGV[10]) then return {'too_many', used, '', '', ''} end
if off >= tonumber(ARGV[11]) then return {'called_off', used, '', '', ''} end
if used + days > allowance then return {'allowance', used, '', '', ''} end
kept[#kept + 1] = {id = ARGV[6], from_ms = ARGV[1], until_ms = ARGV[2], days = days,
                   year = year}
redis.call('SET', KEYS[1], cjson.encode(kept))
return {'ok', used + days, '', '', ''}
"""


# KEYS[1] the player's list; ARGV: vacation id, now ms, a day in ms. 'ok' with the vacation
# as it now stands: ended at now, its days those begun; or, not begun yet (its start's very
# millisecond included: nothing of it ran, and the games drop its window), called off: it
# ends where it was to start and counts no day. 'ended' with it if it was ended early
# before (a retry); 'over' if it ran to its end; 'missing'.
END_LUA = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {'missing', ''} end
local list = cjson.decode(raw)
local now, day = tonumber(ARGV[2]), tonumber(ARGV[3])
for _, v in ipairs(list) do
  if v.id == ARGV[1] then
    if v.ended_ms then return {'ended', cjson.encode(v)} end
    if tonumber(v.until_ms) <= now then return {'over', cjson.encode(v)} end
    if tonumber(v.from_ms) >= now then
      v.days, v.until_ms = 0, v.from_ms
    else
      local begun = math.max(1, math.ceil((now - tonumber(v.from_ms)) / day))
      v.days = math.min(begun, tonumber(v.days))
      v.until_ms = ARGV[2]
    end
    v.ended_ms = ARGV[2]
    redis.call('SET', KEYS[1], cjson.encode(list))
    return {'ok', cjson.encode(v)}
  end
end
return {'missing', ''}
"""


@dataclass(frozen=True)
class Ended:
    """An early end's outcome: 'ok', 'ended' (before), 'over' or 'missing', and the
    vacation as it stands (None when missing)."""

    outcome: str
    vacation: dict[str, Any] | None


@dataclass(frozen=True)
class Declared:
    """A declaration's outcome: 'ok', 'overlaps', 'too_many', 'called_off' or 'allowance';
    the year's days used (with this one if recorded); the start, end and id of the vacation it
    overlaps (ms, or None)."""

    outcome: str
    used_days: int
    other_until_ms: int | None
    other_from_ms: int | None = None
    other_id: str | None = None


class VacationBook:
    """Declared vacations in Redis (the command service's; the query service never reads
    them)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._declare = script(client, DECLARE_LUA)
        self._end = script(client, END_LUA)

    def declare(
        self,
        key_id: str,
        player_id: str,
        vacation_id: str,
        from_ms: int,
        until_ms: int,
        days: int,
        year: int,
        allowance: int,
        *,
        now_ms: int,
    ) -> Declared:
        """Record the vacation if it fits, at `now_ms` (see the module docstring)."""
        reply = self._declare(
            keys=[vacations_key(key_id, player_id)],
            args=[
                *(str(from_ms), str(until_ms), days, year, allowance, vacation_id),
                *(str(now_ms), KEEP_CALLED_OFF_MS, PRUNED_AFTER_MS, MAX_PENDING, MAX_CALLED_OFF),
            ],
        )
        outcome, used, until, start, other = (_text(r) for r in reply)
        return Declared(
            outcome,
            int(used),
            int(until) if until else None,
            int(start) if start else None,
            other or None,
        )

    def end(self, key_id: str, player_id: str, vacation_id: str, now_ms: int) -> Ended:
        """End a running vacation at `now_ms` (see the module docstring)."""
        reply = self._end(
            keys=[vacations_key(key_id, player_id)], args=[vacation_id, str(now_ms), DAY_MS]
        )
        outcome, raw = (_text(r) for r in reply)
        return Ended(outcome, _vacation(json.loads(raw)) if raw else None)

    def away_until(
        self, key_id: str, player_ids: list[str], now_ms: int
    ) -> dict[str, list[tuple[int, int, str]]]:
        """Which of the players are on vacation at `now_ms` or have one declared to start
        later, each vacation's (from, until, id) (one round trip; `GameService`'s `away`: a
        game starting before they are back)."""
        out: dict[str, list[tuple[int, int, str]]] = {}
        for player_id, v in self._of_players(key_id, player_ids):
            if v["until_ms"] > max(now_ms, v["from_ms"]):  # not over, not called off
                out.setdefault(player_id, []).append(
                    (v["from_ms"], v["until_ms"], v["vacation_id"])
                )
        return out

    def ends(self, key_id: str, player_ids: list[str]) -> dict[str, list[tuple[str, int, int]]]:
        """The players' vacations ended early or called off, each one's (id, from, ended)
        (one round trip; `GameService`'s `ends`: a game that paused one at its start)."""
        out: dict[str, list[tuple[str, int, int]]] = {}
        for player_id, v in self._of_players(key_id, player_ids):
            if v["ended_ms"] is not None:
                out.setdefault(player_id, []).append(
                    (v["vacation_id"], v["from_ms"], v["ended_ms"])
                )
        return out

    def _of_players(self, key_id: str, player_ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
        """Each vacation of the players, with its player id (one round trip)."""
        if not player_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for player_id in player_ids:
            pipe.get(vacations_key(key_id, player_id))
        raws = zip(player_ids, pipe.execute(), strict=True)
        return [(player_id, v) for player_id, raw in raws for v in _vacations(raw)]

    def listed(self, key_id: str, player_id: str) -> list[dict[str, Any]]:
        """The player's vacations, oldest first (ms and days as integers)."""
        return _vacations(self.client.get(vacations_key(key_id, player_id)))


def _vacations(raw: Any) -> list[dict[str, Any]]:
    """A player's stored list, read (ms and days as integers)."""
    found = json.loads(raw) if raw else []
    if not isinstance(found, list):  # cjson writes an empty list as {}
        return []
    return [_vacation(v) for v in found]


def _vacation(v: dict[str, Any]) -> dict[str, Any]:
    """One stored vacation, read (ms and days as integers; `ended_ms` null unless it was
    ended early)."""
    ended = v.get("ended_ms")
    return {
        "vacation_id": str(v["id"]),
        "from_ms": int(v["from_ms"]),
        "until_ms": int(v["until_ms"]),
        "days": int(v["days"]),
        "year": int(v["year"]),
        "ended_ms": None if ended is None else int(ended),
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
