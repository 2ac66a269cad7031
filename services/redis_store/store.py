"""`RedisEventStore`: one stream per game and kind, appended by one Lua script.

Keys of game G all share the hash tag ``{g:G}`` so a game lives on one Redis Cluster shard:
``{g:G}:moves`` and ``{g:G}:scores`` (streams, never trimmed; entry id ``<seq>-0``),
``{g:G}:cmd:<stream>`` (hash: command id -> "first:last") and ``{g:G}:marker:<stream>``;
and one entry per append on the change feed of the game's shard (services/redis_store/
changes.py), the only key outside the game that an append writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, cast

import redis

from eventstore.envelope import STREAMS, AppendResult, NewEvent, StoredEvent
from eventstore.errors import ConcurrencyError, GameArchived, MarkerConflict, StoreError
from eventstore.port import ANY, check_append, check_fingerprint
from eventstore.schemas import upcast

from .changes import changes_key
from .cluster_wire import ClusterWire
from .connect import is_cluster
from .keys import archived_key, game_keys, legacy_shard, shard_of
from .replication import NotReplicated, evalsha_wait
from .wire import Wire

# KEYS: stream, command hash, marker key, the game's tombstone (services/archive), then the
#       change feed of the game's shard (absent only for a game off the shard slots on a
#       Redis Cluster: that feed is another slot's).
# ARGV: expected seq (-1 = any), command id, time ms, marker ("" = none, "$seq" = last seq),
#       expected marker ("" = no check, else "=" .. value), request fingerprint ("" = none),
#       game id, stream name, trace (the causing request's id, "" = none), the command id
#       the event at the expected seq must have ("" = no check), then (type, version,
#       payload JSON) per event.
# The command hash maps a command id to "first:last" or "first:last:fingerprint"; a duplicate
# returns it whole and the caller compares fingerprints (a duplicate appends nothing either way).
# An append that adds events or saves a marker (a consumer's progress: scoring that found
# nothing to score still moved on) also adds one entry to the change feed in the same step:
# the game, the stream, the seqs, the time, the events' types and the trace (services/redis_store/
# changes.py). Nothing here belongs to a consumer: each follows the feed at its own position.
APPEND_LUA = """
local done = redis.call('HGET', KEYS[2], ARGV[2])
if done then
  -- Written again (same value) so the reply is followed by a write of this connection's:
  -- a WAIT after it then confirms that the command's events reached the replicas too.
  redis.call('HSET', KEYS[2], ARGV[2], done)
  return {'dup', done}
end
local seq = redis.call('XLEN', KEYS[1])  -- never trimmed: the length is the last seq
-- An empty stream of an archived game: its keys left Redis, which must not start it again
-- (an import's retry, a lobby's start racing the archiver). Checked only on an empty stream.
if seq == 0 and redis.call('EXISTS', KEYS[4]) == 1 then return {'archived', '0'} end
local expected = tonumber(ARGV[1])
if expected >= 0 and expected ~= seq then return {'conflict', tostring(seq)} end
if ARGV[10] ~= '' and expected > 0 then  -- the same history, not only the same length
  -- the stream is at `expected` here: its newest entry is the one at that seq
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  local fields, by = last[1] and last[1][2] or {}, nil
  for j = 1, #fields, 2 do
    if fields[j] == 'cmd' then by = fields[j + 1] end
  end
  if by ~= ARGV[10] then return {'conflict', tostring(seq)} end
end
if ARGV[5] ~= '' then
  local current = redis.call('GET', KEYS[3]) or ''
  if '=' .. current ~= ARGV[5] then return {'marker', current} end
end
local first = seq + 1
local types = {}
for i = 11, #ARGV, 3 do
  seq = seq + 1
  redis.call('XADD', KEYS[1], seq .. '-0', 'type', ARGV[i], 'v', ARGV[i + 1],
             'cmd', ARGV[2], 't', ARGV[3], 'data', ARGV[i + 2])
  types[#types + 1] = ARGV[i]
end
local result = first .. ':' .. seq
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[2], result .. ':' .. ARGV[6])
else
  redis.call('HSET', KEYS[2], ARGV[2], result)
end
if ARGV[4] == '$seq' then
  redis.call('SET', KEYS[3], seq)
elseif ARGV[4] ~= '' then
  redis.call('SET', KEYS[3], ARGV[4])
end
if KEYS[5] and (seq >= first or ARGV[4] ~= '') then  -- events, or progress saved
  redis.call('XADD', KEYS[5], '*', 'g', ARGV[7], 's', ARGV[8], 'f', first, 'l', seq,
             't', ARGV[3], 'e', table.concat(types, ','), 'r', ARGV[9])
end
return {'ok', result}
"""


# Each appended event's payload as compact JSON, by one encoder made once: `json.dumps` with
# `separators` builds a new `JSONEncoder` per call (only its default form is cached), ~40 %
# of its ~3.4 µs on a payload of a few fields, paid on every event of every append (on the
# one more event of a banked turn too: issue 30). The output is the same byte for byte
# (tests/unit/test_payload_json.py), and the encoder keeps no state between calls, so a
# process's threads may share it. (Building CPython's private C encoder once, ~0.6 µs a
# payload instead of ~2.4, was tried and removed: bench_clocks saw no difference beyond its
# noise; docs/clocks.md, "The cost".)
_payload_json = json.JSONEncoder(separators=(",", ":")).encode


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
        fingerprint: str = "",
        trace: str = "",
        after_command: str = "",
    ) -> AppendResult:
        """See `EventStore.append`: one Lua script, all or nothing (the change feed's entry,
        which carries `trace`, included)."""
        check_append(stream, events, command_id, marker)
        now = int(time.time() * 1000)
        args: list[Any] = [
            expected if expected != ANY else -1,
            command_id,
            now,
            marker or "",
            "" if expected_marker is None else "=" + expected_marker,
            fingerprint,
            game_id,
            stream,
            trace,
            after_command,
        ]
        keys = [*game_keys(game_id, stream)[:3], archived_key(game_id)]
        feed = self._feed_key(game_id)
        if feed is not None:
            keys.append(feed)
        for event in events:
            args += [event.type, event.version, _payload_json(event.payload)]
        acked = 0
        if self.wait_replicas:
            reply, acked = evalsha_wait(
                self.client, self._append.sha, APPEND_LUA, keys, args,
                self.wait_replicas, self.wait_ms,
            )  # fmt: skip
        else:
            reply = self.wire.evalsha(self._append.sha, APPEND_LUA, keys, args)
        status, value = (v.decode() if isinstance(v, bytes) else str(v) for v in reply[:2])
        if status == "archived":
            raise GameArchived(game_id, expected)
        if status == "conflict":
            raise ConcurrencyError(expected, int(value))
        if status == "marker":
            raise MarkerConflict(expected_marker or "", value)
        first, last, stored = _parse_done(value)
        if status == "dup":
            check_fingerprint(command_id, stored, fingerprint)
            result = AppendResult(first, last, duplicate=True, fingerprint=stored)
        else:
            result = AppendResult(first, last, time_ms=now)
        if acked < self.wait_replicas:
            raise NotReplicated(result, acked, self.wait_replicas)
        return result

    def _feed_key(self, game_id: str) -> str | None:
        """The change feed an append of `game_id` adds its entry to: its shard's. A game off
        the shard slots (created before them) uses the backfill's shard, which only a single
        Redis can reach in the same script; on a cluster such a game has no feed entry."""
        shard = shard_of(game_id)
        if shard is None:
            return None if is_cluster(self.client) else changes_key(legacy_shard(game_id))
        return changes_key(shard)

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
