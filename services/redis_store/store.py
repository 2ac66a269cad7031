"""`RedisEventStore`: one stream per game and kind, appended by one Lua script.

Keys of game G all share the hash tag ``{g:G}`` so a game lives on one Redis Cluster shard:
``{g:G}:moves`` and ``{g:G}:scores`` (streams, never trimmed; entry id ``<seq>-0``),
``{g:G}:cmd:<stream>`` (hash: command id -> "first:last"), ``{g:G}:marker:<stream>`` and
``{g:G}:notify:<stream>`` (a flag with a time to live).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, cast

import redis

from eventstore.envelope import MOVES, SCORES, STREAMS, AppendResult, NewEvent, StoredEvent
from eventstore.errors import ConcurrencyError, MarkerConflict, StoreError
from eventstore.port import ANY, check_append, check_fingerprint
from eventstore.schemas import upcast

from .cluster_wire import ClusterWire
from .connect import is_cluster
from .keys import (
    ABANDONED,
    IN_PROGRESS,
    OVER,
    deadlines_key,
    game_keys,
    games_key,
    hooks_due_key,
    hooks_key,
    idle_key,
    player_id_key,
    player_key,
    secrets_key,
    shard_of,
    status_key,
    unscored_key,
)
from .replication import NotReplicated, evalsha_wait
from .wire import Wire

# KEYS: stream, command hash, marker key, notification flag key, then the index keys of
#       the game's shard (services/redis_store/keys.py; none for a game off the shard slots):
#       moves: unscored, scores marker, games, status in_progress, status over, status
#       abandoned, deadlines, idle, player…, player id…;
#       scores: unscored, moves marker, moves stream, webhooks hash, hooks due.
# ARGV: expected seq (-1 = any), command id, time ms, marker ("" = none, "$seq" = last seq),
#       expected marker ("" = no check, else "=" .. value), notification ms (0 = none),
#       request fingerprint ("" = none), index mode ("" = none, "m" = moves, "s" = scores),
#       game id, the turn deadline ("" = unchanged, "-" = none, else Unix ms), then (type,
#       version, payload JSON) per event.
# The command hash maps a command id to "first:last" or "first:last:fingerprint"; a duplicate
# returns it whole and the caller compares fingerprints (a duplicate appends nothing either way).
APPEND_LUA = """
local done = redis.call('HGET', KEYS[2], ARGV[2])
if done then
  -- Written again (same value) so the reply is followed by a write of this connection's:
  -- a WAIT after it then confirms that the command's events reached the replicas too.
  redis.call('HSET', KEYS[2], ARGV[2], done)
  return {'dup', done}
end
local seq = redis.call('XLEN', KEYS[1])  -- never trimmed: the length is the last seq
local expected = tonumber(ARGV[1])
if expected >= 0 and expected ~= seq then return {'conflict', tostring(seq)} end
if ARGV[5] ~= '' then
  local current = redis.call('GET', KEYS[3]) or ''
  if '=' .. current ~= ARGV[5] then return {'marker', current} end
end
local first = seq + 1
local ended = false
local abandoned = false
for i = 11, #ARGV, 3 do
  seq = seq + 1
  redis.call('XADD', KEYS[1], seq .. '-0', 'type', ARGV[i], 'v', ARGV[i + 1],
             'cmd', ARGV[2], 't', ARGV[3], 'data', ARGV[i + 2])
  if ARGV[i] == 'GameEnded' then ended = true end
  if ARGV[i] == 'GameAbandoned' then abandoned = true end
end
local result = first .. ':' .. seq
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[2], result .. ':' .. ARGV[7])
else
  redis.call('HSET', KEYS[2], ARGV[2], result)
end
if ARGV[4] == '$seq' then
  redis.call('SET', KEYS[3], seq)
elseif ARGV[4] ~= '' then
  redis.call('SET', KEYS[3], ARGV[4])
end
-- The indexes of the game's shard, in this same atomic step (a marker that is not a number
-- was not written by our services: its game's unscored entry is left alone, never an error).
local game, now = ARGV[9], ARGV[3]
if ARGV[8] == 'm' then
  if first == 1 and seq >= 1 then  -- the game's first events: it exists from now on
    redis.call('ZADD', KEYS[7], now, game)
    redis.call('ZADD', KEYS[8], now, game)
    for k = 13, #KEYS do redis.call('ZADD', KEYS[k], now, game) end
  end
  if ended or abandoned then  -- no more turns: no deadline, never idle again
    redis.call('ZREM', KEYS[8], game)
    redis.call('ZADD', abandoned and KEYS[10] or KEYS[9],
               redis.call('ZSCORE', KEYS[7], game) or now, game)
    redis.call('ZREM', KEYS[11], game)
    redis.call('ZREM', KEYS[12], game)
  elseif seq >= first then  -- the turn timer's and the abandon sweep's indexes
    redis.call('ZADD', KEYS[12], now, game)
    if ARGV[10] == '-' then
      redis.call('ZREM', KEYS[11], game)
    elseif ARGV[10] ~= '' then
      redis.call('ZADD', KEYS[11], ARGV[10], game)
    end
  end
  local moved = tonumber(redis.call('GET', KEYS[3]) or '0')
  local scored = tonumber(redis.call('GET', KEYS[6]) or '0')
  if moved and scored and moved > scored then
    redis.call('ZADD', KEYS[5], 'NX', now, game)  -- keeps its first unscored move's time
  end
elseif ARGV[8] == 's' then
  local scored = tonumber(redis.call('GET', KEYS[3]) or '0')
  local moved = tonumber(redis.call('GET', KEYS[6]) or '0')
  if scored and moved then
    if scored >= moved then
      redis.call('ZREM', KEYS[5], game)
    else  -- still behind: the time of its first unscored move
      local at, nxt = now, redis.call('XRANGE', KEYS[7], (scored + 1) .. '-0', '+', 'COUNT', 1)
      if nxt[1] then
        local fields = nxt[1][2]
        for j = 1, #fields, 2 do
          if fields[j] == 't' then at = fields[j + 1] end
        end
      end
      redis.call('ZADD', KEYS[5], at, game)
    end
  end
  if seq >= first then  -- new score events: every hook of the game has dispatching to do
    for _, hook in ipairs(redis.call('HKEYS', KEYS[8])) do
      redis.call('ZADD', KEYS[9], 'LT', now, game .. ':' .. hook)
    end
  end
end
local notify = 0
if tonumber(ARGV[6]) > 0 and redis.call('SET', KEYS[4], 1, 'NX', 'PX', ARGV[6]) then
  notify = 1
end
return {'ok', result, notify}
"""


def _deadline(events: Sequence[NewEvent]) -> str:
    """The turn deadline an append of moves leaves (the script's deadline argument): that of
    its last draw or undo (which gives the turn back, docs/undo.md) ("-" for one without a
    deadline), or "" (unchanged) when it does neither."""
    for event in reversed(events):
        if event.type in ("TileDrawn", "TurnUndone"):
            deadline = event.payload.get("deadline_ms")
            return "-" if deadline is None else str(int(deadline))
    return ""


def _seq(entry_id: str | bytes) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-", 1)[0])


# KEYS: command hash. ARGV: command id. Its value, written again (a write of this connection
# that a WAIT after it can count: the command's own events were replicated before it).
CONFIRM_LUA = """
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then redis.call('HSET', KEYS[1], ARGV[1], done) end
return done
"""


def _parse_done(value: str) -> tuple[int, int, str]:
    """(first, last, fingerprint) of a command hash value."""
    first, last, *rest = value.split(":", 2)
    return int(first), int(last), rest[0] if rest else ""


class RedisEventStore:
    """An `EventStore` on Redis Streams.

    The append and the catch-up read, every turn's cost, go through `Wire` (raw replies on
    a bounded pool of its own: ~20 µs less CPU per command, see its docstring); the rest
    through the client. `wire_connections` bounds the wire's pool (default: the client's).
    On a Redis Cluster client, a `ClusterWire` (one `Wire` per node, routed by key slot).
    `wait_replicas` > 0: every append is followed by `WAIT wait_replicas wait_ms` on its
    connection, and one confirmed by fewer replicas raises `NotReplicated` (see
    replication.py).
    """

    def __init__(
        self,
        client: redis.Redis,
        wire_connections: int | None = None,
        *,
        wait_replicas: int = 0,
        wait_ms: int = 100,
    ) -> None:
        self.client = client
        self._append = client.register_script(APPEND_LUA)  # for its sha
        self._confirm = client.register_script(CONFIRM_LUA)
        self.wire: Wire | ClusterWire = (
            ClusterWire(cast(Any, client), wire_connections)
            if is_cluster(client)
            else Wire(client, wire_connections)
        )
        self.wait_replicas, self.wait_ms = max(0, wait_replicas), max(0, wait_ms)

    def append(
        self,
        game_id: str,
        stream: str,
        events: Sequence[NewEvent],
        *,
        expected: int,
        command_id: str,
        marker: str | None = None,
        expected_marker: str | None = None,
        notify_ms: int = 0,
        fingerprint: str = "",
    ) -> AppendResult:
        """See `EventStore.append`: one Lua script, all or nothing."""
        check_append(stream, events, command_id, marker)
        now = int(time.time() * 1000)
        args: list[Any] = [
            expected if expected != ANY else -1,
            command_id,
            now,
            marker or "",
            "" if expected_marker is None else "=" + expected_marker,
            max(0, int(notify_ms)),
            fingerprint,
        ]
        keys = list(game_keys(game_id, stream))
        mode = self._index_keys(game_id, stream, events, keys)
        args += [mode, game_id, _deadline(events) if mode == "m" else ""]
        for event in events:
            args += [event.type, event.version, json.dumps(event.payload, separators=(",", ":"))]
        acked = 0
        if self.wait_replicas:
            reply, acked = evalsha_wait(
                self.client, self._append.sha, APPEND_LUA, keys, args,
                self.wait_replicas, self.wait_ms,
            )  # fmt: skip
        else:
            reply = self.wire.evalsha(self._append.sha, APPEND_LUA, keys, args)
        status, value = (v.decode() if isinstance(v, bytes) else str(v) for v in reply[:2])
        if status == "conflict":
            raise ConcurrencyError(expected, int(value))
        if status == "marker":
            raise MarkerConflict(expected_marker or "", value)
        first, last, stored = _parse_done(value)
        if status == "dup":
            check_fingerprint(command_id, stored, fingerprint)
            result = AppendResult(first, last, duplicate=True, fingerprint=stored)
        else:
            result = AppendResult(first, last, time_ms=now, notify=bool(reply[2]))
        if acked < self.wait_replicas:
            raise NotReplicated(result, acked, self.wait_replicas)
        return result

    def _index_keys(
        self, game_id: str, stream: str, events: Sequence[NewEvent], keys: list[str]
    ) -> str:
        """Add the index keys an append of `game_id` updates to `keys`; returns the script's
        index mode ("" for a game off the shard slots: keys of another slot would fail on a
        cluster, so only the backfill indexes such a game)."""
        shard = shard_of(game_id)
        if shard is None:
            return ""
        if stream == SCORES:
            keys += [
                unscored_key(shard),
                game_keys(game_id, MOVES)[2],
                game_keys(game_id, MOVES)[0],
                hooks_key(game_id),
                hooks_due_key(shard),
            ]
            return "s"
        keys += [
            unscored_key(shard),
            game_keys(game_id, SCORES)[2],
            games_key(shard),
            status_key(shard, IN_PROGRESS),
            status_key(shard, OVER),
            status_key(shard, ABANDONED),
            deadlines_key(shard),
            idle_key(shard),
        ]
        if events and events[0].type == "GameStarted":
            # A game's names and player ids are not in its events: the command service
            # writes them to the game's secrets record before its first append (and never
            # changes them).
            names, ids = self._seats(game_id)
            keys += sorted({player_key(shard, name) for name in names})
            keys += sorted({player_id_key(shard, pid) for pid in ids})
        return "m"

    def _seats(self, game_id: str) -> tuple[list[str], list[str]]:
        """The names and the (given) player ids of a game's secrets record."""
        raw = self.client.get(secrets_key(game_id))
        try:
            record = json.loads(raw) if raw is not None else {}
            names, ids = record.get("names"), record.get("player_ids")
        except (ValueError, AttributeError):
            return [], []
        return (
            [str(n) for n in names] if isinstance(names, list) else [],
            [str(i) for i in ids if i is not None] if isinstance(ids, list) else [],
        )

    def read(
        self, game_id: str, stream: str, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """See `EventStore.read`."""
        if stream not in STREAMS:
            raise StoreError(f"unknown stream {stream!r}")
        key = game_keys(game_id, stream)[0]
        count = ("COUNT", limit) if limit is not None else ()
        entries: list[Any] = self.wire.call("XRANGE", key, f"{max(0, after) + 1}-0", "+", *count)
        return [upcast(self._decode(game_id, stream, eid, fields)) for eid, fields in entries]

    @staticmethod
    def _decode(game_id: str, stream: str, entry_id: Any, fields: list[Any]) -> StoredEvent:
        """An entry of a raw XRANGE reply: its id and its flat [field, value, …] list."""
        pairs = iter(fields)
        get = {k.decode(): v.decode() for k, v in zip(pairs, pairs, strict=True)}
        return StoredEvent(
            game_id,
            stream,
            _seq(entry_id),
            get["type"],
            int(get["v"]),
            int(get["t"]),
            get["cmd"],
            json.loads(get["data"]),
        )

    def last_seq(self, game_id: str, stream: str) -> int:
        """See `EventStore.last_seq`."""
        last: list[Any] = cast(
            list[Any], self.client.xrevrange(game_keys(game_id, stream)[0], count=1)
        )
        return _seq(last[0][0]) if last else 0

    def marker(self, game_id: str, stream: str) -> str | None:
        """See `EventStore.marker`."""
        value = self.client.get(game_keys(game_id, stream)[2])
        return value.decode() if isinstance(value, bytes) else value

    def command_result(self, game_id: str, stream: str, command_id: str) -> AppendResult | None:
        """See `EventStore.command_result`. With `wait_replicas`, a found command is
        confirmed on the replicas first (`NotReplicated` otherwise): a retry answered from
        it must not report a write that a failover could still lose."""
        key = game_keys(game_id, stream)[1]
        if self.wait_replicas:
            value, acked = evalsha_wait(
                self.client, self._confirm.sha, CONFIRM_LUA, [key], [command_id],
                self.wait_replicas, self.wait_ms,
            )  # fmt: skip
        else:
            value, acked = self.client.hget(key, command_id), 0
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        first, last, stored = _parse_done(text)
        result = AppendResult(first, last, duplicate=True, fingerprint=stored)
        if acked < self.wait_replicas:
            raise NotReplicated(result, acked, self.wait_replicas)
        return result

    def clear_notify(self, game_id: str, stream: str) -> None:
        """See `EventStore.clear_notify`."""
        self.client.delete(game_keys(game_id, stream)[3])

    def put_raw(self, event: StoredEvent) -> None:
        """Store an event as written by an older version (for upcaster tests)."""
        self.client.xadd(
            game_keys(event.game_id, event.stream)[0],
            {
                "type": event.type,
                "v": event.version,
                "cmd": event.command_id,
                "t": event.time_ms,
                "data": json.dumps(event.payload),
            },
            id=f"{event.seq}-0",
        )
