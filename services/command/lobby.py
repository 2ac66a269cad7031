"""Lobbies: open games that players join one by one until they start (docs/lobby.md).

A lobby belongs to the API key that opened it: only that key reads, lists, joins, leaves or
starts it (another key's lobby is answered as unknown, 404 `lobby_not_found`). It has a
named ruleset (services/command/rulesets.py), a number of seats (2-5), a visibility
(`listed`: in the key's `GET /lobbies`; `invite`: only joined with its invite code) and an
expiry; a `host` player may start it before it is full.

Everything that affects a lobby lives in one JSON string, ``{g:<id>}:lobby``, changed only
by the scripts below, each one atomic step on one slot: the lobby's id is the id of the game
it starts (drawn on an index shard's slot, services/redis_store/keys.py), so the lobby, its
shard's listing index (``lobbies_key``: the key's listed open lobbies of one ruleset and
size) and the game it becomes share a slot, on one Redis and on a Redis Cluster alike. Any
number of command instances may serve a lobby: a thousand joins for one seat are a thousand
scripts, one of which takes it.

A seat's token is made when its player joins and answered to that join only; the lobby keeps
its hash. The join that takes the last seat (or the host's start) turns the lobby
``starting`` in the same script, then the game is made from the lobby (`GameService.
start_prepared`: its secrets record stored unless it exists, the start appended on an empty
move stream; the draw seed is the lobby's) and the lobby turns ``started``. A lobby left
``starting`` (a process that died in between) is finished by the next request that reads
it: every step is idempotent. States: open -> starting -> started, or open -> expired (its
time ran out: found so by the next request or listing), or open -> closed (its last player
left).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import time
from typing import Any, cast

import redis

from carcassonne.errors import GameError, MalformedError, OutOfTurnError
from services.redis_store.keys import index_shard, lobbies_key, lobby_key, new_game_id
from services.redis_store.scripts import script

from .errors import Forbidden, NotFound
from .rulesets import checked_name, preset
from .secrets_store import token_hash
from .service import GameService, seats_in_order

log = logging.getLogger(__name__)
KEPT_MS = 86_400_000  # how long a lobby is kept after its expiry (GET shows how it ended)
LOBBY_ID = re.compile(r"[0-9a-f]{32}")
INVITE_PREFIX = "inv_"

# The part every script starts with: the lobby of this key (else "lobby_not_found"), turned
# `expired` (and out of its index) if its time ran out. KEYS: lobby, its index. ARGV[1]: now
# (ms), ARGV[2]: the caller's key id.
_LOAD = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {'lobby_not_found'} end
local l = cjson.decode(raw)
if l.key_id ~= ARGV[2] or l.index ~= KEYS[2] then return {'lobby_not_found'} end
local now = tonumber(ARGV[1])
local function save()
  raw = cjson.encode(l)
  redis.call('SET', KEYS[1], raw, 'KEEPTTL')
end
if l.state == 'open' and now >= l.expires_ms then
  l.state = 'expired'
  redis.call('ZREM', KEYS[2], l.id)
  save()
end
"""

# ARGV: now, key id, lobby JSON, kept ms. Stores a new lobby (and lists it) unless the id is
# taken.
OPEN_LUA = """
local l = cjson.decode(ARGV[3])
if redis.call('SET', KEYS[1], ARGV[3], 'NX', 'PX', tonumber(ARGV[4])) == false then
  return 0
end
if l.listed then redis.call('ZADD', KEYS[2], l.expires_ms, l.id) end
return 1
"""

# ARGV: now, key id, player id, name, folded name, invite hash ("" none), token hash. A
# player seated in a lobby that filled (the retry of a join whose answer was lost, maybe the
# one that took the last seat) is `already_joined`, not refused as if it had no seat.
JOIN_LUA = (
    _LOAD
    + """
if l.state ~= 'open' then
  if l.state == 'starting' or l.state == 'started' then
    for _, p in ipairs(l.players) do
      if p.player_id == ARGV[3] then return {'already_joined', raw} end
    end
  end
  return {'state', raw}
end
if l.invite ~= '' and ARGV[6] ~= l.invite then return {'bad_invite_code', raw} end
for _, p in ipairs(l.players) do
  if p.player_id == ARGV[3] then return {'already_joined', raw} end
  if p.fold == ARGV[5] then return {'name_taken', raw} end
end
if #l.players >= l.seats then return {'state', raw} end
table.insert(l.players, {player_id = ARGV[3], name = ARGV[4], fold = ARGV[5],
                         token_hash = ARGV[7], joined_ms = now})
if #l.players >= l.seats then
  l.state = 'starting'
  redis.call('ZREM', KEYS[2], l.id)
end
save()
return {'ok', raw}
"""
)

# ARGV: now, key id, player id.
LEAVE_LUA = (
    _LOAD
    + """
if l.state ~= 'open' then return {'state', raw} end
local found = nil
for i, p in ipairs(l.players) do
  if p.player_id == ARGV[3] then found = i end
end
if not found then return {'not_in_lobby', raw} end
table.remove(l.players, found)
if l.host == ARGV[3] then
  l.host = ''
  if l.players[1] then l.host = l.players[1].player_id end
end
if #l.players == 0 then
  l.state = 'closed'
  redis.call('ZREM', KEYS[2], l.id)
end
save()
return {'ok', raw}
"""
)

# ARGV: now, key id, player id (the host).
START_LUA = (
    _LOAD
    + """
if l.state ~= 'open' then return {'state', raw} end
if l.host == '' or l.host ~= ARGV[3] then return {'not_lobby_host', raw} end
if #l.players < 2 then return {'lobby_too_small', raw} end
l.state = 'starting'
redis.call('ZREM', KEYS[2], l.id)
save()
return {'ok', raw}
"""
)

# ARGV: now, key id. Only the common part: an open lobby whose time ran out turns `expired`.
TOUCH_LUA = _LOAD + "\nreturn {'ok', raw}\n"

# ARGV: now, key id. A `starting` lobby whose game exists turns `started`.
STARTED_LUA = (
    _LOAD
    + """
if l.state == 'starting' then
  l.state = 'started'
  save()
end
return {'ok', raw}
"""
)

STATE_CODES = {  # a lobby not open, as the refusal of a join, leave or start
    "starting": ("lobby_full", "this lobby is full: its game is starting"),
    "started": ("lobby_started", "this lobby's game has started"),
    "expired": ("lobby_expired", "this lobby expired before it filled"),
    "closed": ("lobby_closed", "this lobby was closed: its last player left"),
}


class LobbyConflict(OutOfTurnError):
    """A lobby in a state that refuses the request (409)."""


def now_ms() -> int:
    """The time lobbies are opened, expired and joined by (Unix ms)."""
    return int(time.time() * 1000)


def fold(name: str) -> str:
    """A name as compared: trimmed, without case (as a game's player names)."""
    return name.strip().casefold()


def checked_lobby_id(lobby_id: str) -> str:
    """A lobby id from a URL, refused as unknown before it reaches Redis if malformed."""
    if not LOBBY_ID.fullmatch(lobby_id):
        raise NotFound("lobby_not_found", f"no lobby {lobby_id[:64]}")
    return lobby_id


def players_of(lobby: dict[str, Any]) -> list[dict[str, Any]]:
    """A lobby's players in join order (Lua's cjson writes an empty list as ``{}``)."""
    players = lobby.get("players")
    return list(players) if isinstance(players, list) else []


def view(lobby: dict[str, Any]) -> dict[str, Any]:
    """A lobby as the API shows it: never a token or the invite code."""
    started = lobby["state"] == "started"
    players = players_of(lobby)
    seats: dict[int, int] = {}
    if started:  # who sits where: the game's seats, drawn from the lobby's seed (R2.2)
        order = seats_in_order(len(players), None, lobby["seed"])
        seats = {index: seat for seat, index in enumerate(order)}
    return {
        "lobby_id": lobby["id"],
        "ruleset": lobby["ruleset"],
        "seats": lobby["seats"],
        "visibility": "listed" if lobby["listed"] else "invite",
        "state": lobby["state"],
        "host": lobby["host"] or None,
        "players": [
            {"player_id": p["player_id"], "name": p["name"], "seat": seats.get(i)}
            for i, p in enumerate(players)
        ],
        "created_ms": lobby["created_ms"],
        "expires_ms": lobby["expires_ms"],
        "game_id": lobby["id"] if started else None,
    }


def game_record(lobby: dict[str, Any]) -> dict[str, Any]:
    """The secrets record of the game a full (or started) lobby becomes: its players seated
    from a random first player in join order (R2.2, drawn from the lobby's seed), their
    tokens the ones they were given when they joined, owned by the lobby's key."""
    players = players_of(lobby)
    order = seats_in_order(len(players), None, lobby["seed"])
    seated = [players[i] for i in order]
    return {
        "seed": lobby["seed"],
        "names": [p["name"] for p in seated],
        "tokens": {p["token_hash"]: seat for seat, p in enumerate(seated)},
        "player_ids": [p["player_id"] for p in seated],
        "key_id": lobby["key_id"],
        "lobby": lobby["id"],
    }


class Lobbies:
    """Open, read, list, join, leave and start an API key's lobbies."""

    def __init__(self, client: redis.Redis, service: GameService) -> None:
        self.client = client
        self.service = service
        self._open = script(client, OPEN_LUA)
        self._join = script(client, JOIN_LUA)
        self._leave = script(client, LEAVE_LUA)
        self._start = script(client, START_LUA)
        self._started = script(client, STARTED_LUA)
        self._touch = script(client, TOUCH_LUA)

    def open(
        self,
        key_id: str,
        ruleset: str,
        seats: int,
        listed: bool,
        expires_seconds: int,
        host: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """A new lobby; answers its view, its invite code (an `invite` lobby: shown only
        now) and, with a host, the host's seat token (shown only now)."""
        checked_name(ruleset)
        if not 2 <= seats <= 5:
            raise MalformedError("bad_players", "a lobby has 2 to 5 seats", "R1.3")
        now = now_ms()
        invite = None if listed else INVITE_PREFIX + secrets.token_urlsafe(9)
        lobby_id = new_game_id()  # on an index shard's slot: the game's id too
        lobby: dict[str, Any] = {
            "id": lobby_id,
            "key_id": key_id,
            "ruleset": ruleset,
            "seats": seats,
            "listed": listed,
            "invite": token_hash(invite) if invite else "",
            "host": "",
            "state": "open",
            "created_ms": now,
            "expires_ms": now + expires_seconds * 1000,
            "seed": secrets.token_hex(16),
            "index": lobbies_key(index_shard(lobby_id), key_id, ruleset, seats),
            "players": [],
        }
        token = None
        if host is not None:
            token = secrets.token_urlsafe(24)
            name = host.get("name") or host["player_id"][:40]
            lobby["host"] = host["player_id"]
            lobby["players"] = [
                {
                    "player_id": host["player_id"],
                    "name": name,
                    "fold": fold(name),
                    "token_hash": token_hash(token),
                    "joined_ms": now,
                }
            ]
        kept = expires_seconds * 1000 + KEPT_MS
        opened = self._open(
            keys=[lobby_key(lobby_id), lobby["index"]],
            args=[now, key_id, json.dumps(lobby), kept],
        )
        if not opened:  # pragma: no cover - 128 random bits
            raise RuntimeError("lobby id taken")
        out = view(lobby)
        if invite is not None:
            out["invite_code"] = invite
        if token is not None:
            out["token"] = token
        return out

    def _raw(self, key_id: str, lobby_id: str) -> dict[str, Any]:
        """The stored lobby of `key_id` (404 `lobby_not_found` for none or another key's)."""
        raw = self.client.get(lobby_key(checked_lobby_id(lobby_id)))
        lobby = json.loads(raw) if raw is not None else None
        if lobby is None or lobby.get("key_id") != key_id:
            raise NotFound("lobby_not_found", f"no lobby {lobby_id}")
        return cast(dict[str, Any], lobby)

    def _run(self, step: Any, key_id: str, lobby: dict[str, Any], *args: Any) -> dict[str, Any]:
        """Run a lobby script; its refusal as an error, else the lobby it left."""
        reply = step(keys=[lobby_key(lobby["id"]), lobby["index"]], args=[now_ms(), key_id, *args])
        outcome = _text(reply[0])
        after = json.loads(reply[1]) if len(reply) > 1 else lobby
        if outcome == "ok":
            return cast(dict[str, Any], after)
        raise refusal(outcome, after)

    def get(self, key_id: str, lobby_id: str) -> dict[str, Any]:
        """A lobby of the key (a `starting` one finished first: its game made)."""
        lobby = self._raw(key_id, lobby_id)
        if lobby["state"] == "open" and now_ms() >= lobby["expires_ms"]:
            lobby = self._run(self._touch, key_id, lobby)  # turns it expired
        return view(self._finish(key_id, lobby))

    def join(
        self, key_id: str, lobby_id: str, player_id: str, name: str | None, invite: str | None
    ) -> dict[str, Any]:
        """Seat `player_id`; answers its token (only here) and the lobby, started if this
        join took the last seat."""
        lobby = self._raw(key_id, lobby_id)
        name = name or player_id[:40]
        token = secrets.token_urlsafe(24)
        invite_hash = token_hash(invite) if invite else ""
        try:
            after = self._run(
                self._join, key_id, lobby, player_id, name, fold(name), invite_hash,
                token_hash(token),
            )  # fmt: skip
        except LobbyConflict as refused:
            if refused.details.get("state") == "starting":  # a start cut short: finish it
                with contextlib.suppress(redis.RedisError):  # best effort: refused all the same
                    self._finish(key_id, self._raw(key_id, lobby_id))
            raise
        try:
            after = self._finish(key_id, after)
        except redis.RedisError:
            # The seat is taken: its token must reach its player all the same. The lobby
            # stays `starting`; the next request that reads it makes the game.
            log.warning("lobby %s: the game could not be made yet", lobby_id, exc_info=True)
        return {"lobby_id": lobby_id, "player_id": player_id, "token": token, "lobby": view(after)}

    def leave(self, key_id: str, lobby_id: str, player_id: str) -> dict[str, Any]:
        """Take `player_id` out of an open lobby (its token is dropped with it)."""
        lobby = self._raw(key_id, lobby_id)
        return view(self._run(self._leave, key_id, lobby, player_id))

    def start(self, key_id: str, lobby_id: str, player_id: str) -> dict[str, Any]:
        """The host starts the lobby's game with the players seated (at least 2)."""
        lobby = self._raw(key_id, lobby_id)
        return view(self._finish(key_id, self._run(self._start, key_id, lobby, player_id)))

    def _finish(self, key_id: str, lobby: dict[str, Any]) -> dict[str, Any]:
        """Make the game of a `starting` lobby (idempotent), then mark it `started`."""
        if lobby["state"] != "starting":
            return lobby
        self.service.start_prepared(lobby["id"], game_record(lobby), preset(lobby["ruleset"]))
        return self._run(self._started, key_id, lobby)

    def listed(self, key_id: str, ruleset: str, seats: int, limit: int) -> list[dict[str, Any]]:
        """The key's listed open lobbies of a ruleset and size, those expiring soonest first
        (they need players most); expired ones are dropped from the index on the way."""
        checked_name(ruleset)
        now = now_ms()
        pipe = self.client.pipeline(transaction=False)
        keys = [lobbies_key(shard, key_id, ruleset, seats) for shard in range(64)]
        for key in keys:
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.zrangebyscore(key, now + 1, "+inf", start=0, num=limit, withscores=True)
        found = pipe.execute()[1::2]
        ids = sorted(
            ((score, _text(member)) for rows in found for member, score in rows),
        )[:limit]
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for _, lobby_id in ids:
            pipe.get(lobby_key(lobby_id))
        lobbies = [json.loads(raw) for raw in pipe.execute() if raw is not None]
        return [view(lobby) for lobby in lobbies if lobby["state"] == "open"]


def refusal(outcome: str, lobby: dict[str, Any]) -> GameError:
    """The error a lobby script's refusal stands for."""
    players = players_of(lobby)
    if outcome == "state":
        code, message = STATE_CODES.get(
            lobby["state"], ("lobby_full", "this lobby has no free seat")
        )
        return LobbyConflict(code, message, None, state=lobby["state"])
    if outcome == "lobby_not_found":
        return NotFound("lobby_not_found", f"no lobby {lobby['id']}")
    if outcome == "bad_invite_code":
        return Forbidden("bad_invite_code", "this lobby is joined by invitation: send its code")
    if outcome == "already_joined":
        return LobbyConflict(
            "already_joined", "this player is in the lobby already", None, state=lobby["state"]
        )
    if outcome == "name_taken":
        return LobbyConflict(
            "name_taken",
            "a player of that name (ignoring case) is in the lobby: send another name",
            None,
        )
    if outcome == "not_in_lobby":
        return LobbyConflict("not_in_lobby", "this player is not in the lobby", None)
    if outcome == "not_lobby_host":
        return Forbidden("not_lobby_host", "only the lobby's host may start it before it fills")
    if outcome == "lobby_too_small":
        return LobbyConflict(
            "lobby_too_small", "a game needs 2 players", "R1.3", players=len(players)
        )
    raise RuntimeError(f"unknown lobby outcome {outcome}")  # pragma: no cover


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
