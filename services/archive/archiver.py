"""The archiver: finished games leave Redis for the archive, each step crash-safe.

Everything that moves a game lives here:

- **Due** (`ArchiveDue`, the change feed's consumer "archive"): a game whose final score
  event (`GameScored`, on its score stream) or `GameAbandoned` (on its move stream, which
  no score follows) is appended is due ``ARCHIVE_AFTER`` seconds after that append, in its
  shard's ``{ixNN}:idx:archive-due``, written with the consumer's feed position.
- **Archiving a due game** (`Archiver.archive_game`), in this order: read the whole game
  from Redis in one MULTI (both streams raw, command records, markers, secrets record);
  refuse what is not ready (scoring behind the moves, a subscription delivery still due:
  retried later); copy it into the archive (committed when `put` returns), unless the copy
  there already has the same digest; read the copy back and compare counts and digest
  (`verify`); then remove the game's keys from Redis in one Lua script, which leaves the
  tombstone ``{g:G}:archived`` and refuses if anything was appended or saved since the
  read (stream lengths, markers, command records compared). A crash anywhere leaves the
  game whole in Redis (and perhaps also in the archive); the next run copies again or, if
  the archive already holds a verified copy, only removes. Nothing is removed before the
  archive holds a copy read back and verified.
- **Restore** (`Archiver.restore`): the archived game back into Redis (streams with their
  ids, markers, each command's record rebuilt from its events — without the request
  fingerprint or the scorer's saves without events —, a tokenless secrets record), for
  support.

Everything that affects a game's place lives in its Redis keys, its shard's due index and the
archive's row: nothing in this process.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from eventstore.archive import (
    Archive,
    ArchivedGame,
    GameMeta,
    RawEvent,
    Summary,
    all_commands,
    check_log,
)
from eventstore.envelope import MOVES, SCORES, STREAMS
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.indexes import text
from services.redis_store.keys import (
    ABANDONED,
    OVER,
    SHARDS,
    archive_due_key,
    archived_key,
    game_keys,
    game_subscriptions_key,
    index_shard,
    key_hooks_key,
    secrets_key,
    shard_of,
    subs_due_key,
    subscription_keys,
    subscriptions_key,
)
from services.redis_store.scripts import script

log = logging.getLogger(__name__)
CONSUMER = "archive"
ENDINGS = {"GameEnded": OVER, "GameAbandoned": ABANDONED}
FIELDS = ("type", "v", "cmd", "t", "data")  # an entry's fields, in the append script's order
SECRET_FIELDS = ("tokens", "seed")  # what the archive never holds of a secrets record


class ArchiveDue:
    """The change feed's consumer "archive": finished games -> due time in their shard."""

    def __init__(self, client: redis.Redis, after_ms: int, batch: int = 500) -> None:
        self.after_ms = after_ms
        self.follower = Follower(client, CONSUMER, self.writes, batch=batch)

    def writes(self, shard: int, changes: list[Change]) -> list[Write]:
        """Each game whose last event was appended in the batch, due `after_ms` after it."""
        return [
            Write("zadd", archive_due_key(shard), c.game_id, c.time_ms + self.after_ms)
            for c in changes
            if (c.stream == SCORES and "GameScored" in c.types)
            or (c.stream == MOVES and "GameAbandoned" in c.types)
        ]


# KEYS: moves, scores, cmd:moves, cmd:scores, marker:moves, marker:scores, tombstone, then
#       ARGV[9] more keys of the game to delete, then the shard's due index (absent for a
#       game off the shard slots on a cluster: another slot's).
# ARGV: moves length, scores length, marker:moves, marker:scores ("" = none), cmd:moves and
#       cmd:scores sizes, the time (ms), the game id, how many more keys.
# Returns 1 when removed, 0 when the game changed since it was read (nothing done), 2 when it
# was removed before (its due entry dropped).
REMOVE_LUA = """
local n = tonumber(ARGV[9])
local due = KEYS[8 + n]
if redis.call('EXISTS', KEYS[7]) == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
  if due then redis.call('ZREM', due, ARGV[8]) end
  return 2
end
if redis.call('XLEN', KEYS[1]) ~= tonumber(ARGV[1])
   or redis.call('XLEN', KEYS[2]) ~= tonumber(ARGV[2])
   or (redis.call('GET', KEYS[5]) or '') ~= ARGV[3]
   or (redis.call('GET', KEYS[6]) or '') ~= ARGV[4]
   or redis.call('HLEN', KEYS[3]) ~= tonumber(ARGV[5])
   or redis.call('HLEN', KEYS[4]) ~= tonumber(ARGV[6]) then
  return 0
end
for i = 1, 6 do redis.call('DEL', KEYS[i]) end
for i = 8, 7 + n do redis.call('DEL', KEYS[i]) end
redis.call('SET', KEYS[7], ARGV[7])
if due then redis.call('ZREM', due, ARGV[8]) end
return 1
"""


class NotArchivable(ValueError):
    """A game whose Redis data is not what the append script writes: left alone."""


@dataclass(frozen=True)
class Snapshot:
    """A game read from Redis in one step: the archive's copy and what removal compares."""

    game: ArchivedGame
    records: dict[str, int]  # stream -> how many command records Redis holds
    markers: dict[str, str]
    subscriptions: dict[str, Any]  # the game's own (webhooks): id -> configuration
    owner_key: str | None


def crash_point(step: str) -> None:
    """Fault injection for the tests: SIGKILL this process at `step` when ARCHIVE_CRASH_AT
    names it ("copied", "verified", "removed")."""
    if os.environ.get("ARCHIVE_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _due_key(game_id: str, shard: int) -> str | None:
    """The due index a removal script may name: the game's shard's, if in its slot."""
    return archive_due_key(shard) if shard_of(game_id) == shard else None


class Archiver:
    """Moves due games from Redis to `archive` (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        archive: Archive,
        after_ms: int = 3_600_000,
        retry_ms: int = 60_000,
    ) -> None:
        self.client = client
        self.archive = archive
        self.after_ms = after_ms
        self.retry_ms = retry_ms
        self.due_index = ArchiveDue(client, after_ms)
        self._remove = script(client, REMOVE_LUA)

    # ------------------------------------------------------------------ due games

    def due(self, now_ms: int, limit: int = 1_000) -> list[tuple[int, str]]:
        """(shard, game) of games due by `now_ms`, soonest first within a shard."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(SHARDS):
            pipe.zrangebyscore(archive_due_key(shard), "-inf", now_ms, start=0, num=limit)
        found = [
            (shard, text(g))
            for shard, games in enumerate(pipe.execute())
            for g in games
        ]  # fmt: skip
        return found[:limit]

    def waiting(self, now_ms: int) -> tuple[int, int]:
        """(games in the due indexes, of which due by `now_ms`)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(SHARDS):
            pipe.zcard(archive_due_key(shard))
            pipe.zcount(archive_due_key(shard), "-inf", now_ms)
        replies = pipe.execute()
        return sum(replies[0::2]), sum(replies[1::2])

    def _later(self, shard: int, game_id: str, now_ms: int) -> None:
        """Try the game again `retry_ms` from now (if it is still due at all)."""
        self.client.zadd(archive_due_key(shard), {game_id: now_ms + self.retry_ms}, xx=True)

    # ------------------------------------------------------------------ one game

    def snapshot(self, game_id: str) -> Snapshot | None:
        """The game as Redis holds it, read in one MULTI (None: no move stream)."""
        pipe = self.client.pipeline(transaction=True)
        for stream in STREAMS:
            key, commands, marker = game_keys(game_id, stream)
            pipe.xrange(key)
            pipe.hlen(commands)
            pipe.get(marker)
        pipe.get(secrets_key(game_id))
        pipe.hgetall(game_subscriptions_key(game_id))
        replies = pipe.execute()
        if not replies[0]:
            return None
        events: list[RawEvent] = []
        records: dict[str, int] = {}
        markers: dict[str, str] = {}
        for i, stream in enumerate(STREAMS):
            entries, commands, marker = replies[3 * i : 3 * i + 3]
            events += [_raw(game_id, stream, eid, fields) for eid, fields in entries]
            records[stream] = int(commands)
            if marker is not None:
                markers[stream] = text(marker)
        try:
            check_log(events)
        except ValueError as e:
            raise NotArchivable(f"game {game_id}: {e}") from e
        raw_secrets, hooks = replies[6], replies[7]
        record = json.loads(raw_secrets) if raw_secrets is not None else {}
        kept = {k: v for k, v in record.items() if k not in SECRET_FIELDS}
        moves = [e for e in events if e.stream == MOVES]
        ends = [e for e in moves if e.type in ENDINGS]
        status = ENDINGS[ends[-1].type] if ends else ""
        meta = GameMeta(status, moves[0].time_ms, ends[-1].time_ms if ends else 0, kept)
        # The command records (idempotency) are not copied: a finished game takes no more
        # commands, and a restore rebuilds each command's span from the events' ids.
        game = ArchivedGame(game_id, meta, tuple(events), markers)
        subscriptions = {text(k): _json(v) for k, v in hooks.items()}
        return Snapshot(game, records, markers, subscriptions, meta.key_id)

    def _deliveries_due(self, shard: int, snap: Snapshot) -> bool:
        """Whether a subscription of the game (its webhooks, its owner key's) still has
        deliveries to make (they would be lost with the game's keys)."""
        subs = set(snap.subscriptions) | self._owner_subscriptions(snap.owner_key)
        if not subs:
            return False
        game_id = snap.game.game_id
        due = index_shard(game_id)
        pipe = self.client.pipeline(transaction=False)
        for sub in sorted(subs):
            pipe.zscore(subs_due_key(due), f"{game_id}:{sub}")
        return any(score is not None for score in pipe.execute())

    def _owner_subscriptions(self, key_id: str | None) -> set[str]:
        if not key_id:
            return set()
        found: Any = self.client.hkeys(subscriptions_key(key_id))
        return {text(s) for s in found}

    def archive_game(self, shard: int, game_id: str, now_ms: int | None = None) -> str:
        """Move one due game; returns what happened: "archived", "removed" (the archive had
        a verified copy already), "gone" (removed before, or no such game), "waiting" (not
        ready: tried again later), "changed" (appended since the read: tried again)."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        snap = self.snapshot(game_id)
        if snap is None:  # archived before (its tombstone), or never here
            self.client.zrem(archive_due_key(shard), game_id)
            return "gone"
        game = snap.game
        if not game.meta.status:  # not finished (listed by mistake): the feed lists it again
            self.client.zrem(archive_due_key(shard), game_id)
            return "gone"
        scored = snap.markers.get(SCORES, "")
        if scored != str(game.count(MOVES)) or self._deliveries_due(shard, snap):
            self._later(shard, game_id, now)
            return "waiting"
        expected = Summary.of(game)
        copied = False
        if self.archive.summary(game_id) != expected:
            self.archive.put(game)  # committed when it returns
            copied = True
            crash_point("copied")
            if self.archive.summary(game_id) != expected:  # read back
                raise RuntimeError(f"game {game_id}: the archive's copy does not verify")
        crash_point("verified")
        removed = self._remove_keys(shard, snap, now)
        crash_point("removed")
        if removed == 0:
            return "changed"  # the archive's copy is stale: the next run copies again
        if removed == 2:
            return "gone"
        self._forget_hooks(snap)
        return "archived" if copied else "removed"

    def _remove_keys(self, shard: int, snap: Snapshot, now: int) -> int:
        """The one atomic removal (REMOVE_LUA); 1, 0 or 2 as it returns."""
        game_id = snap.game.game_id
        base: list[str] = []
        for stream in STREAMS:
            base += game_keys(game_id, stream)
        keys = [base[0], base[3], base[1], base[4], base[2], base[5], archived_key(game_id)]
        more = [secrets_key(game_id), game_subscriptions_key(game_id)]
        for sub in sorted(set(snap.subscriptions) | self._owner_subscriptions(snap.owner_key)):
            more += subscription_keys(game_id, sub)
        keys += more
        due = _due_key(game_id, shard)
        if due is not None:
            keys.append(due)
        args = [
            snap.game.count(MOVES),
            snap.game.count(SCORES),
            snap.markers.get(MOVES, ""),
            snap.markers.get(SCORES, ""),
            snap.records[MOVES],
            snap.records[SCORES],
            now,
            game_id,
            len(more),
        ]
        done = int(self._remove(keys=keys, args=args))
        if done and due is None:  # another slot's index: after the script (idempotent)
            self.client.zrem(archive_due_key(shard), game_id)
        return done

    def _forget_hooks(self, snap: Snapshot) -> None:
        """The removed game's webhooks no longer count in their keys' caps."""
        pipe = self.client.pipeline(transaction=False)
        for hook, config in snap.subscriptions.items():
            key_id = config.get("key_id") if isinstance(config, dict) else None
            if key_id:
                pipe.srem(key_hooks_key(str(key_id)), f"{snap.game.game_id}:{hook}")
        pipe.execute()

    # ------------------------------------------------------------------ runs

    def run(
        self,
        now_ms: int | None = None,
        limit: int = 10_000,
        progress: Callable[[int, int, Counter[str]], None] | None = None,
    ) -> Counter[str]:
        """Archive every game due by `now_ms` (at most `limit`); the outcomes counted. The
        change feed is followed first. An archive that is down stops the run (the games stay
        in Redis, tried again `retry_ms` later); a Redis failure stops it too (raised)."""
        self.due_index.follower.catch_up()
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        games = self.due(now, limit)
        done: Counter[str] = Counter()
        for i, (shard, game_id) in enumerate(games):
            try:
                outcome = self.archive_game(shard, game_id, now)
            except redis.RedisError:
                raise
            except NotArchivable as e:
                log.error("%s: left in Redis", e, extra={"game_id": game_id})
                self._later(shard, game_id, now)
                outcome = "failed"
            except Exception as e:  # the archive down, or a copy that does not verify
                log.warning("game %s: not archived (%s); tried again later", game_id, e,
                            extra={"game_id": game_id})  # fmt: skip
                self._later(shard, game_id, now)
                outcome = "failed"
                if not _reachable(self.archive):
                    for later_shard, later_game in games[i + 1 :]:
                        self._later(later_shard, later_game, now)
                    done["failed"] += 1
                    done["waiting"] += len(games) - i - 1
                    break
            done[outcome] += 1
            if progress is not None:
                progress(i + 1, len(games), done)
        return done

    # ------------------------------------------------------------------ restore

    def restore(self, game_id: str, schedule: bool = True) -> ArchivedGame:
        """Put an archived game back into Redis (support): its streams with their ids, its
        command records and markers, a secrets record without tokens (no seat can play)
        or seed, and no tombstone; due again `after_ms` from now unless `schedule` is off.
        Refused (`ValueError`) when the game is not archived or its move stream exists."""
        game = self.archive.read(game_id)
        if game is None:
            raise ValueError(f"game {game_id} is not archived")
        if self.client.exists(game_keys(game_id, MOVES)[0]):
            raise ValueError(f"game {game_id} is in Redis already")
        pipe = self.client.pipeline(transaction=True)
        for event in game.events:
            pipe.xadd(
                game_keys(game_id, event.stream)[0],
                dict(zip(FIELDS, (event.type, event.version, event.command_id,
                                  event.time_ms, event.data), strict=True)),
                id=f"{event.seq}-0",
            )  # fmt: skip
        for stream in STREAMS:
            _, commands, marker = game_keys(game_id, stream)
            records: dict[Any, Any] = all_commands(game, stream)
            if records:
                pipe.hset(commands, mapping=records)
            if stream in game.markers:
                pipe.set(marker, game.markers[stream])
        record = {**game.meta.record, "tokens": {}, "seed": None}
        pipe.set(secrets_key(game_id), json.dumps(record))
        pipe.delete(archived_key(game_id))
        pipe.execute()
        if schedule:
            shard = index_shard(game_id)
            self.client.zadd(archive_due_key(shard), {game_id: _ms() + self.after_ms})
        return game


def _ms() -> int:
    return int(time.time() * 1000)


def _json(raw: Any) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _raw(game_id: str, stream: str, entry_id: Any, fields: Any) -> RawEvent:
    """An entry of XRANGE as stored; `NotArchivable` when it is not exactly an appended
    event (other fields, another id form, numbers a round trip would change)."""
    if len(fields) == len(FIELDS) and b"data" in fields:  # a bytes client: the fast way
        got = [fields.get(f.encode()) for f in FIELDS]
    else:
        named = {text(k): v for k, v in fields.items()}
        got = [named.get(f) for f in FIELDS] if set(named) == set(FIELDS) else [None]
    if None in got:
        raise NotArchivable(f"game {game_id}: {stream} entry {text(entry_id)} is not an event")
    kind, v, cmd, t, data = (text(x) for x in got)
    seq, _, tail = text(entry_id).partition("-")
    event = RawEvent(stream, int(seq), kind, _int(v), _int(t), cmd, data)
    if tail != "0" or str(event.version) != v or str(event.time_ms) != t:
        raise NotArchivable(f"game {game_id}: {stream} entry {text(entry_id)} is not an event")
    return event


def _int(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return -1


def _reachable(archive: Archive) -> bool:
    """Whether the archive answers at all (a cheap query)."""
    try:
        archive.count()
        return True
    except Exception:
        return False
