"""Matchmaking for players who are not online (docs/lobby.md, "Matchmaking"): a ticket
(`player_id`, a named ruleset, a game of 2-5 players) waits until it is matched or
cancelled; the oldest tickets of a queue are matched first; a match makes a game.

Everything of one API key's matchmaking lives under its hash tag ``{mm:<key id>}``
(services/redis_store/keys.py): its tickets, one queue per ruleset and size (a sorted set,
oldest first), the hash of its waiting players (one ticket per player, whatever the queue)
and its matches. Each change is one Lua script on that slot, so any number of command
instances (and the matcher) may run at once, on one Redis or a Redis Cluster:

- `TICKET_LUA` takes a ticket unless its player waits already (409 `already_waiting`);
- `MATCH_LUA` takes the oldest tickets of a queue whose names differ, as many as a game of
  that queue seats, marks them matched with the game's id, drops them from the queue and the
  waiting players, and keeps the match (its game id, seed and tickets) as pending — all at
  once, so a ticket is matched once and its player is in one game;
- `CANCEL_LUA` cancels a waiting ticket (a matched one stays matched: 409 `ticket_matched`).

A match's game is then made through the one write path (`GameService.start_prepared`, from
the match's seed and the tickets' token hashes: idempotent), and the match leaves the pending
set. A matcher cut short between the two is finished by the next matcher run or by polling a
ticket of the match. The matcher runs inline: after each new ticket on that ticket's queue,
and when a waiting ticket is polled; `Matchmaker.drain` matches every queue of every key (a
beat, an operator, the benchmark).

A seat's token is made with its ticket and answered to that request only (kept hashed, as
every token): a match needs no token in the clear. The key hears of a match through its
subscriptions (`match_found`, with every seat's ticket and player id: services/scoring/
subscriptions.py) and by polling the ticket.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Any, cast

import redis

from carcassonne.errors import GameError, OutOfTurnError
from services.redis_store.keys import (
    match_key,
    mm_keys_key,
    mm_order_key,
    mm_pending_key,
    mm_queues_key,
    mm_tag,
    new_game_id,
    queue_key,
    ticket_key,
    waiting_key,
)
from services.redis_store.ratings import Ratings, pool_of
from services.redis_store.scripts import script

from .errors import NotFound
from .lobby import fold
from .rulesets import preset
from .secrets_store import token_hash
from .service import GameService, seats_in_order

log = logging.getLogger(__name__)
KEPT_MS = 7 * 86_400_000  # a matched, cancelled or expired ticket is kept a week for its polls
# How long a ticket waits at most (seconds; `expires_seconds`): a player who left the app is
# not matched, days later, into a game the others play against an empty seat.
EXPIRES_S = 7 * 86_400
MAX_EXPIRES_S = 30 * 86_400
SCAN = 64  # oldest tickets a match looks at (names that clash are passed over)
LOOK = 1_024  # queue entries a match may read to find them (bounded work per request)
# Games one request's inline matcher makes at most: a backlog (tickets taken while matching
# was cut short, windows that widened together) is a drain's work, not one poller's wait.
INLINE_GAMES = 4
WINDOW_GROWTH = 1.0  # how much a ticket's rating window widens a minute it waits (ordinal)

# KEYS: waiting, queue, ticket, queues, order, pending. ARGV: player id, ticket JSON, ticket
# id, "<ruleset>:<players>". Answers the key's pending matches too (a matcher cut short).
TICKET_LUA = """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then return {'already_waiting', held} end
local t = cjson.decode(ARGV[2])
t.order = redis.call('INCR', KEYS[5])
local raw = cjson.encode(t)
redis.call('SET', KEYS[3], raw)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], t.order, ARGV[3])
redis.call('SADD', KEYS[4], ARGV[4])
return {'ok', raw, redis.call('SCARD', KEYS[6])}
"""

# KEYS: queue, waiting, pending, match. ARGV: players, game id, seed, now, ticket key
# prefix (the same tag), kept ms, how many of the oldest tickets to look at, how much a rating
# window widens a minute, how many queue entries to read at most. The tickets' keys are named
# from the prefix: the queue holds their ids, each on this script's slot. The oldest ticket
# that can fill a game with younger ones (names that differ, every two ratings within both
# tickets' windows) is matched with the oldest of those; a ticket without a window takes
# anyone. Of one name only the `players` oldest are looked at (a game seats one of a name):
# counted, the oldest tickets sharing a name (an app's default) would fill the look and stall
# the queue for every other name behind them.
MATCH_LUA = """
local size, now = tonumber(ARGV[1]), tonumber(ARGV[4])
local growth = tonumber(ARGV[8]) / 60000
local want, most = tonumber(ARGV[7]), tonumber(ARGV[9])
local waiting, per_name, at, examined = {}, {}, 0, 0
while #waiting < want and examined < most do
  local ids = redis.call('ZRANGE', KEYS[1], at, at + want - 1)
  examined = examined + #ids
  if #ids == 0 then break end
  local gone = 0
  for _, id in ipairs(ids) do
    local raw = redis.call('GET', ARGV[5] .. id)
    local t = raw and cjson.decode(raw)
    local due = t and t.state == 'waiting' and tonumber(t.expires_ms)
    if due and due <= now then  -- expired: never matched, its player free to wait again
      t.state = 'expired'
      redis.call('SET', ARGV[5] .. id, cjson.encode(t), 'PX', tonumber(ARGV[6]))
      if redis.call('HGET', KEYS[2], t.player_id) == id then
        redis.call('HDEL', KEYS[2], t.player_id)
      end
    end
    if not t or t.state ~= 'waiting' then
      redis.call('ZREM', KEYS[1], id)
      gone = gone + 1
    elseif #waiting < want and (per_name[t.fold] or 0) < size then
      per_name[t.fold] = (per_name[t.fold] or 0) + 1
      table.insert(waiting, t)
    end
  end
  at = at + #ids - gone  -- the ones dropped from the queue moved the rest up
  if #ids < want then break end
end
local function width(t)
  if type(t.window) ~= 'number' then return math.huge end
  return t.window + growth * math.max(0, now - t.created_ms)
end
local function fits(a, b)
  local apart = math.abs((tonumber(a.ordinal) or 0) - (tonumber(b.ordinal) or 0))
  return apart <= width(a) and apart <= width(b)
end
local picked
for i = 1, #waiting do
  local group, names = {waiting[i]}, {[waiting[i].fold] = true}
  for j = i + 1, #waiting do
    if #group == size then break end
    local t = waiting[j]
    local ok = not names[t.fold]
    for _, other in ipairs(group) do
      if not ok then break end
      ok = fits(other, t)
    end
    if ok then
      table.insert(group, t)
      names[t.fold] = true
    end
  end
  if #group == size then
    picked = group
    break
  end
end
if not picked then return false end
local ids = {}
for _, t in ipairs(picked) do
  t.state = 'matched'
  t.game_id = ARGV[2]
  t.matched_ms = tonumber(ARGV[4])
  redis.call('SET', ARGV[5] .. t.id, cjson.encode(t), 'PX', tonumber(ARGV[6]))
  redis.call('ZREM', KEYS[1], t.id)
  redis.call('HDEL', KEYS[2], t.player_id)
  table.insert(ids, t.id)
end
local match = cjson.encode({game_id = ARGV[2], seed = ARGV[3], tickets = picked})
redis.call('SET', KEYS[4], match)
redis.call('SADD', KEYS[3], ARGV[2])
return match
"""

# KEYS: ticket, queue, waiting. ARGV: kept ms, the state to leave it in ('cancelled', or
# 'expired': only once its expiry has come), now (ms). A ticket no longer waiting answers its
# state; one not due to expire, 'waiting'.
CANCEL_LUA = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {'ticket_not_found'} end
local t = cjson.decode(raw)
if t.state ~= 'waiting' then return {t.state, raw} end
local due = tonumber(t.expires_ms)
if ARGV[2] == 'expired' and not (due and due <= tonumber(ARGV[3])) then
  return {'waiting', raw}
end
t.state = ARGV[2]
raw = cjson.encode(t)
redis.call('SET', KEYS[1], raw, 'PX', tonumber(ARGV[1]))
redis.call('ZREM', KEYS[2], t.id)
if redis.call('HGET', KEYS[3], t.player_id) == t.id then
  redis.call('HDEL', KEYS[3], t.player_id)
end
return {'ok', raw}
"""


class TicketConflict(OutOfTurnError):
    """A ticket refused for the state of its player or of the ticket (409)."""


def now_ms() -> int:
    """The time tickets are taken and matched by (Unix ms)."""
    return int(time.time() * 1000)


def view(ticket: dict[str, Any], seat: int | None = None) -> dict[str, Any]:
    """A ticket as the API shows it (never its token)."""
    return {
        "ticket_id": ticket["id"],
        "player_id": ticket["player_id"],
        "name": ticket["name"],
        "ruleset": ticket["ruleset"],
        "players": ticket["players"],
        "state": ticket["state"],
        "created_ms": ticket["created_ms"],
        "game_id": ticket.get("game_id"),
        "seat": seat,
        "rating": ticket.get("ordinal", 0.0),
        "rating_window": ticket.get("window"),
        "expires_ms": ticket.get("expires_ms"),  # None: taken before tickets expired
    }


def due(ticket: dict[str, Any], now: int) -> bool:
    """Whether a waiting ticket's time to wait is over (it is expired by the next step that
    sees it: a match, a poll, its player's next ticket, a cancel)."""
    expires = ticket.get("expires_ms")
    return ticket["state"] == "waiting" and expires is not None and int(expires) <= now


def game_record(key_id: str, match: dict[str, Any]) -> dict[str, Any]:
    """The secrets record of a match's game: its tickets (oldest first) seated from a random
    first player (R2.2, from the match's seed), their tokens those made with the tickets."""
    tickets = match["tickets"]
    order = seats_in_order(len(tickets), None, match["seed"])
    seated = [tickets[i] for i in order]
    return {
        "seed": match["seed"],
        "names": [t["name"] for t in seated],
        "tokens": {t["token_hash"]: seat for seat, t in enumerate(seated)},
        "player_ids": [t["player_id"] for t in seated],
        "key_id": key_id,
        "match": {"tickets": [t["id"] for t in seated]},
    }


class Matchmaker:
    """Take, poll, list and cancel an API key's tickets, and match them."""

    def __init__(
        self,
        client: redis.Redis,
        service: GameService,
        inline: bool = True,
        window_growth: float = WINDOW_GROWTH,
    ) -> None:
        self.client = client
        self.service = service
        self.inline = inline  # match a ticket's queue when it is taken or polled
        self.window_growth = window_growth  # how much a rating window widens a minute
        self.ratings = Ratings(client)
        self._ticket = script(client, TICKET_LUA)
        self._match = script(client, MATCH_LUA)
        self._cancel = script(client, CANCEL_LUA)

    def take(
        self,
        key_id: str,
        player_id: str,
        name: str | None,
        ruleset: str,
        players: int,
        rating_window: float | None = None,
        expires_seconds: int = EXPIRES_S,
    ) -> dict[str, Any]:
        """A new waiting ticket (409 `already_waiting` if the player waits already); answers
        its view and the seat token its player will play with (only here). The ticket keeps
        the player's rating ordinal in the ruleset's pool (0 before its first rated game);
        with a `rating_window`, it is matched only with players that close (docs/lobby.md).
        It waits `expires_seconds` at most."""
        rules = preset(ruleset)  # 422 unknown_ruleset first
        name = name or player_id[:40]
        token = secrets.token_urlsafe(24)
        ticket_id = "t_" + secrets.token_hex(12)
        created = now_ms()
        ticket = {
            "id": ticket_id,
            "key_id": key_id,
            "player_id": player_id,
            "name": name,
            "fold": fold(name),
            "ruleset": ruleset,
            "players": players,
            "state": "waiting",
            "created_ms": created,
            "expires_ms": created + 1000 * expires_seconds,
            "token_hash": token_hash(token),
            "ordinal": self.ordinal(key_id, pool_of(rules.to_dict()), player_id),
        }
        if rating_window is not None:
            ticket["window"] = float(rating_window)
        queue = f"{ruleset}:{players}"
        self.client.sadd(mm_keys_key(), key_id)  # before: a drain then sees the key
        for _ in range(2):  # again once, when the ticket the player waits on has expired
            reply = self._ticket(
                keys=[
                    waiting_key(key_id),
                    queue_key(key_id, ruleset, players),
                    ticket_key(key_id, ticket_id),
                    mm_queues_key(key_id),
                    mm_order_key(key_id),
                    mm_pending_key(key_id),
                ],
                args=[player_id, json.dumps(ticket), ticket_id, queue],
            )
            if _text(reply[0]) == "ok" or not self._expire(key_id, _text(reply[1])):
                break
        if _text(reply[0]) != "ok":
            raise TicketConflict(
                "already_waiting",
                "this player waits already: one ticket at a time (cancel it first)",
                None,
                ticket_id=_text(reply[1]),
            )
        if self.inline:
            try:
                if int(reply[2]):  # a match of the key's whose game was not made: now
                    self.finish_pending(key_id, INLINE_GAMES)
                self.match_queue(key_id, ruleset, players, INLINE_GAMES)
            except redis.RedisError:
                # The ticket is taken: its token must reach its player all the same. A
                # match cut short is finished by the next poll or matcher run.
                log.warning("matchmaking: a match of %s was cut short", key_id, exc_info=True)
        try:
            shown = self.get(key_id, ticket_id, match=False)
        except redis.RedisError:
            shown = view(self._stored(key_id, ticket_id))
        return {**shown, "token": token}

    def ordinal(self, key_id: str, pool: str, player_id: str) -> float:
        """The player's rating ordinal in the pool, for the key (0: a new player's)."""
        (rating,) = self.ratings.current(key_id, pool, [player_id])
        return 0.0 if rating is None else rating.ordinal

    def _stored(self, key_id: str, ticket_id: str) -> dict[str, Any]:
        raw = self.client.get(ticket_key(key_id, ticket_id)) if len(ticket_id) <= 64 else None
        if raw is None:  # another key's ticket is reported as missing too
            raise NotFound("ticket_not_found", f"no ticket {ticket_id[:64]}")
        return cast(dict[str, Any], json.loads(raw))

    def get(self, key_id: str, ticket_id: str, match: bool = True) -> dict[str, Any]:
        """A ticket of the key: waiting (its queue matched first, inline), matched (its game
        made first if a matcher was cut short: `game_id` and `seat`), cancelled or expired
        (expired here if its time is over and nothing did it before)."""
        ticket = self._stored(key_id, ticket_id)
        if due(ticket, now_ms()):
            self._expire(key_id, ticket_id)
            ticket = self._stored(key_id, ticket_id)
        if ticket["state"] == "waiting" and match and self.inline:
            self.match_queue(key_id, ticket["ruleset"], ticket["players"], INLINE_GAMES)
            ticket = self._stored(key_id, ticket_id)
        seat = None
        if ticket["state"] == "matched":
            record = self.finish(key_id, ticket["game_id"])
            ids = record.get("player_ids") or []
            seat = ids.index(ticket["player_id"]) if ticket["player_id"] in ids else None
        return view(ticket, seat)

    def waiting(self, key_id: str, limit: int) -> list[dict[str, Any]]:
        """The key's waiting tickets, oldest first: the oldest `limit` of each queue (each is
        in taking order) merged, and only the oldest 2 x `limit` of those read — bounded by
        `limit`, not by how many wait (the slack covers tickets expired but not yet swept)."""
        queues = sorted(_text(q) for q in cast(set[Any], self.client.smembers(
            mm_queues_key(key_id))))  # fmt: skip
        if not queues:
            return []
        pipe = self.client.pipeline(transaction=False)  # one slot: the key's tag
        for queue in queues:
            ruleset, _, players = queue.rpartition(":")
            pipe.zrange(queue_key(key_id, ruleset, int(players)), 0, limit - 1, withscores=True)
        oldest = sorted((score, _text(i)) for rows in pipe.execute() for i, score in rows)
        ids = [i for _, i in oldest[: 2 * limit]]
        if not ids:
            return []
        raws = cast(list[Any], self.client.mget([ticket_key(key_id, i) for i in ids]))
        tickets = [json.loads(r) for r in raws if r is not None]
        now = now_ms()
        tickets = sorted((t for t in tickets if t["state"] == "waiting" and not due(t, now)),
                         key=lambda t: t["order"])  # fmt: skip
        return [view(t) for t in tickets[:limit]]

    def cancel(self, key_id: str, ticket_id: str) -> dict[str, Any]:
        """Cancel a waiting ticket (409 `ticket_matched` once matched; a cancelled or
        expired one answers as it is)."""
        ticket = self._stored(key_id, ticket_id)
        now = now_ms()
        reply = self._cancel(
            keys=[
                ticket_key(key_id, ticket_id),
                queue_key(key_id, ticket["ruleset"], ticket["players"]),
                waiting_key(key_id),
            ],
            args=[KEPT_MS, "expired" if due(ticket, now) else "cancelled", now],
        )
        outcome = _text(reply[0])
        if outcome == "ticket_not_found":
            raise NotFound("ticket_not_found", f"no ticket {ticket_id[:64]}")
        if outcome == "matched":
            raise TicketConflict("ticket_matched", "this ticket is matched: its game exists", None)
        return view(json.loads(reply[1])) if len(reply) > 1 else view(ticket)

    def _expire(self, key_id: str, ticket_id: str) -> bool:
        """Expire a waiting ticket whose time is over: True if it is expired now."""
        try:
            ticket = self._stored(key_id, ticket_id)
        except NotFound:
            return False
        if not due(ticket, now_ms()):
            return ticket["state"] == "expired"
        reply = self._cancel(
            keys=[
                ticket_key(key_id, ticket_id),
                queue_key(key_id, ticket["ruleset"], ticket["players"]),
                waiting_key(key_id),
            ],
            args=[KEPT_MS, "expired", now_ms()],
        )
        return _text(reply[0]) in ("ok", "expired")

    # -- matching -----------------------------------------------------------------------
    def match_queue(
        self, key_id: str, ruleset: str, players: int, most: int | None = None
    ) -> list[str]:
        """Match a queue's oldest tickets into games until too few are left (or `most`
        games are made: a request's bound); returns the games made."""
        made: list[str] = []
        rules = preset(ruleset)
        while most is None or len(made) < most:
            game_id = new_game_id()  # on an index shard's slot, as every game
            raw = self._match(
                keys=[
                    queue_key(key_id, ruleset, players),
                    waiting_key(key_id),
                    mm_pending_key(key_id),
                    match_key(key_id, game_id),
                ],
                args=[players, game_id, secrets.token_hex(16), now_ms(),
                      mm_tag(key_id) + ":t:", KEPT_MS, SCAN, self.window_growth, LOOK],
            )  # fmt: skip
            if not raw:
                return made
            self._make(key_id, json.loads(raw), rules)
            made.append(game_id)
        return made

    def finish(self, key_id: str, game_id: str) -> dict[str, Any]:
        """The secrets record of a match's game, made first if it is still pending."""
        record = self.service.secrets.get(game_id)
        if record is not None and not self.client.sismember(mm_pending_key(key_id), game_id):
            return record
        raw = self.client.get(match_key(key_id, game_id))
        if raw is None:
            return record or {}
        match = json.loads(raw)
        ruleset = match["tickets"][0]["ruleset"]
        return self._make(key_id, match, preset(ruleset))

    def _make(self, key_id: str, match: dict[str, Any], rules: Any) -> dict[str, Any]:
        """Make a match's game (idempotent) and take it out of the pending set."""
        game_id = match["game_id"]
        record, _ = self.service.start_prepared(game_id, game_record(key_id, match), rules)
        pipe = self.client.pipeline(transaction=False)  # one slot: the key's tag
        pipe.srem(mm_pending_key(key_id), game_id)
        pipe.pexpire(match_key(key_id, game_id), KEPT_MS)
        pipe.execute()
        return record

    def finish_pending(self, key_id: str, most: int | None = None) -> None:
        """Make the game of each of the key's matches still pending (idempotent), or of
        `most` of them (a request's bound: the next requests or a drain make the rest)."""
        if most is None:
            pending = cast(set[Any], self.client.smembers(mm_pending_key(key_id)))
        else:
            pending = set(cast(list[Any], self.client.srandmember(mm_pending_key(key_id), most)))
        for game_id in sorted(pending):
            try:
                self.finish(key_id, _text(game_id))
            except GameError:
                # A match whose game can no longer be made (its ruleset withdrawn since): it
                # stays pending for an operator. Raised, it failed every ticket of its key
                # (taken, its token unanswered) and stopped a drain for every later key.
                log.warning("matchmaking: pending match %s of %s cannot be made", game_id,
                            key_id, exc_info=True)  # fmt: skip

    def drain(self) -> int:
        """Finish every pending match and match every queue of every key; returns the games
        made (any number of drains and inline matchers may run at once)."""
        made = 0
        for raw_key in sorted(cast(set[Any], self.client.smembers(mm_keys_key()))):
            key_id = _text(raw_key)
            self.finish_pending(key_id)
            for queue in sorted(cast(set[Any], self.client.smembers(mm_queues_key(key_id)))):
                ruleset, _, players = _text(queue).rpartition(":")
                try:
                    made += len(self.match_queue(key_id, ruleset, int(players)))
                except GameError:  # a queue of a ruleset no longer offered
                    log.warning("matchmaking: queue %s of %s skipped", queue, key_id)
        return made


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def main() -> None:
    """`python -m services.command.matchmaking`: one drain with the command service's settings
    (REDIS_URL …): every pending match made, every queue matched (an operator's tool; the
    service matches inline)."""
    from .app import create_app  # the service's own composition: its store and settings

    app = create_app()
    print(f"games made: {app.extensions['matchmaker'].drain()}")


if __name__ == "__main__":
    main()
