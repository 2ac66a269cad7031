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
  (`verify`); give back the bot seconds it holds of its API key (`release`: idempotent, in
  the key's slot, so before the removal, which deletes the secrets record naming the key;
  the bot consumer, which gives them back at the game's end, may not have got there yet);
  then remove the game's keys from Redis in one Lua script, which leaves the
  tombstone ``{g:G}:archived`` and refuses if anything was appended or saved since the
  read (stream lengths, markers, command records, the game's webhook ids compared). A
  crash anywhere leaves the game whole in Redis (and perhaps also in the archive); the
  next run copies again or, if the archive already holds a verified copy, only removes.
  Nothing is removed before the archive holds a copy read back and verified.
- **Restore** (`Archiver.restore`): the archived game back into Redis (streams with their
  ids, markers, each command's record rebuilt from its events — without the request
  fingerprint or the scorer's saves without events —, a tokenless secrets record and its
  public seats record), for support. The removal deletes both records with everything else.

Everything that affects a game's place lives in its Redis keys, its shard's due index and the
archive's row: nothing in this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import logging
import operator
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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
    canonical,
    check_log,
    public_of,
)
from eventstore.envelope import MOVES, SCORES, STREAMS
from services.redis_store.backfill import owner_entries
from services.redis_store.bot_budget import release
from services.redis_store.bot_index import plays_bots
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.connect import is_cluster
from services.redis_store.directory_index import DirectoryIndex, keyable
from services.redis_store.indexes import text
from services.redis_store.keys import (
    ABANDONED,
    IN_PROGRESS,
    OVER,
    SHARDS,
    archive_due_key,
    archive_used_key,
    archived_key,
    bots_due_key,
    deadlines_key,
    game_keys,
    game_subscriptions_key,
    games_key,
    idle_key,
    index_shard,
    key_games_key,
    key_hooks_key,
    key_player_id_key,
    key_player_key,
    player_id_key,
    player_key,
    public_key,
    seats_key,
    secrets_key,
    shard_of,
    status_key,
    subs_due_key,
    subscription_keys,
    subscriptions_key,
)
from services.redis_store.seats import public_seats

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
#       ARGV[9] more keys of the game to delete (the first three: secrets, seats, its
#       webhooks' hash), then ARGV[10] indexes of its shard to drop it from (the directory's
#       lists, the timer's, the bots', the archive's due index; none for a game off the
#       shard slots on a cluster: another slot's).
# ARGV: moves length, scores length, marker:moves, marker:scores ("" = none), cmd:moves and
#       cmd:scores sizes, the time (ms), the game id, how many more keys, how many indexes,
#       the ids of its webhooks as read (sorted, joined by ","): one registered since (its
#       registration answered) is the game changing too.
# Returns 1 when removed, 0 when the game changed since it was read (nothing done), 2 when it
# was removed before (dropped from the indexes again).
REMOVE_LUA = """
local n, m = tonumber(ARGV[9]), tonumber(ARGV[10])
local function unlist()
  for i = 8 + n, 7 + n + m do redis.call('ZREM', KEYS[i], ARGV[8]) end
end
if redis.call('EXISTS', KEYS[7]) == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
  unlist()
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
local hooks = redis.call('HKEYS', KEYS[10])
table.sort(hooks)
if table.concat(hooks, ',') ~= ARGV[11] then return 0 end
for i = 1, 6 do redis.call('DEL', KEYS[i]) end
for i = 8, 7 + n do redis.call('DEL', KEYS[i]) end
unlist()
redis.call('SET', KEYS[7], ARGV[7])
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
    names it ("copied", "verified", "released", "removed")."""
    if os.environ.get("ARCHIVE_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused meanwhile (reference counting still frees all the
    archiver makes: it makes no cycles). A batch's replies and events are tens of thousands
    of lists and tuples that live for a moment; each ~700 of them the collector looks at
    the young ones, and so many survivors set off full collections over the whole process
    (a worker's every module, a benchmark's data): ~0.3 ms of CPU a game, measured. Left
    as it was found (not enabled again when something else had paused it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _listed(shard: int, snap: Snapshot) -> list[str]:
    """The indexes of the game's shard that may list it: the directory's (every status,
    each player name and id; the public list, its API key's lists), the turn timer's, the
    bots', the archive's due index. An archived game is listed from the archive database
    (its own indexes)."""
    meta = snap.game.meta
    names = sorted({n.casefold() for n in keyable(meta.names)})
    ids = sorted(set(keyable(meta.player_ids)))
    owned = []
    if meta.key_id is not None:
        owned = [
            key_games_key(shard, meta.key_id),
            *(key_player_key(shard, meta.key_id, n) for n in names),
            *(key_player_id_key(shard, meta.key_id, i) for i in ids),
        ]
    return [
        games_key(shard),
        *(status_key(shard, s) for s in (IN_PROGRESS, OVER, ABANDONED)),
        *(player_key(shard, n) for n in names),
        *(player_id_key(shard, i) for i in ids),
        *([public_key(shard)] if public_of(meta.record) else []),
        *owned,
        deadlines_key(shard),
        idle_key(shard),
        bots_due_key(shard),
        archive_due_key(shard),
    ]


class Archiver:
    """Moves due games from Redis to `archive` (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        archive: Archive,
        after_ms: int = 3_600_000,
        retry_ms: int = 60_000,
        batch: int = 100,
    ) -> None:
        self.batch = max(1, batch)
        self.client = client
        self.archive = archive
        self.after_ms = after_ms
        self.retry_ms = retry_ms
        self.due_index = ArchiveDue(client, after_ms)
        self._remove_script = client.register_script(REMOVE_LUA)
        self._reader = _raw_reader(client)
        self._subs: dict[str, set[str]] = {}  # the batch's games -> their subscriptions

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

    # ------------------------------------------------------------------ a batch of games

    def snapshots(self, game_ids: list[str]) -> dict[str, Snapshot | NotArchivable | None]:
        """Each game as Redis holds it, read in one pipeline (None: no move stream; a
        `NotArchivable` where its data is not what the append script writes). Not one
        MULTI: streams only grow, and the removal compares what was read with what is
        there (lengths, markers, command records), so a read that raced an append is never
        what gets removed."""
        pipe = self._reader.pipeline(transaction=False)
        for game_id in game_ids:
            for stream in STREAMS:
                key, commands, marker = game_keys(game_id, stream)
                pipe.xrange(key)
                pipe.hlen(commands)
                pipe.get(marker)
            pipe.get(secrets_key(game_id))
            pipe.hgetall(game_subscriptions_key(game_id))
        replies = pipe.execute()
        out: dict[str, Snapshot | NotArchivable | None] = {}
        for n, game_id in enumerate(game_ids):
            try:
                out[game_id] = _snapshot(game_id, replies[8 * n : 8 * n + 8])
            except NotArchivable as e:
                out[game_id] = e
        return out

    def _read_ahead(self, game_ids: list[str]) -> dict[str, Snapshot | NotArchivable | None]:
        """`snapshots`, each game's canonical bytes made too (while the caller waits on the
        archive database, this thread has the GIL to itself)."""
        found = self.snapshots(game_ids)
        for snap in found.values():
            if isinstance(snap, Snapshot):
                canonical(snap.game)
        return found

    def snapshot(self, game_id: str) -> Snapshot | None:
        """One game as Redis holds it (see `snapshots`; raises `NotArchivable`)."""
        found = self.snapshots([game_id])[game_id]
        if isinstance(found, NotArchivable):
            raise found
        return found

    def _busy(self, ready: list[tuple[int, Snapshot]]) -> set[str]:
        """Games of which a subscription (its webhooks, its owner key's) still has
        deliveries to make: they would be lost with the game's keys."""
        owners = sorted({s.owner_key for _, s in ready if s.owner_key})
        pipe = self.client.pipeline(transaction=False)
        for key_id in owners:
            pipe.hkeys(subscriptions_key(key_id))
        owned = {k: {text(x) for x in subs} for k, subs in zip(owners, pipe.execute(), strict=True)}
        asked: list[str] = []
        pipe = self.client.pipeline(transaction=False)
        for _, snap in ready:
            game_id = snap.game.game_id
            subs = set(snap.subscriptions) | owned.get(snap.owner_key or "", set())
            for sub in sorted(subs):
                pipe.zscore(subs_due_key(index_shard(game_id)), f"{game_id}:{sub}")
                asked.append(game_id)
        self._subs = {s.game.game_id: set(s.subscriptions) | owned.get(s.owner_key or "", set())
                      for _, s in ready}  # fmt: skip
        return {g for g, score in zip(asked, pipe.execute(), strict=True) if score is not None}

    def archive_batch(
        self,
        due: list[tuple[int, str]],
        now_ms: int | None = None,
        snaps: dict[str, Snapshot | NotArchivable | None] | None = None,
    ) -> dict[str, str]:
        """Move a batch of due games (shard, game); what happened to each: "archived",
        "removed" (the archive had a verified copy already), "gone" (removed before, or no
        such game), "waiting" (not ready: tried again later), "changed" (appended since the
        read: tried again), "failed" (its data is not an appended game's, or its copy did
        not verify: tried again, logged). Steps: read all, copy all (one commit), read the
        copies back and verify each, remove each verified game in its own atomic step."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        if snaps is None:
            snaps = self.snapshots([g for _, g in due])
        outcome: dict[str, str] = {}
        ready: list[tuple[int, Snapshot]] = []
        for shard, game_id in due:
            snap = snaps[game_id]
            if isinstance(snap, NotArchivable):
                log.error("%s: left in Redis", snap, extra={"game_id": game_id})
                self._later(shard, game_id, now)
                outcome[game_id] = "failed"
            elif snap is None or not snap.game.meta.status:
                # Archived before (its tombstone), never here, or not finished (listed by
                # mistake: the feed lists it again when it ends).
                self.client.zrem(archive_due_key(shard), game_id)
                outcome[game_id] = "gone"
            elif snap.markers.get(SCORES, "") != str(snap.game.count(MOVES)):
                self._later(shard, game_id, now)  # its last moves are not scored yet
                outcome[game_id] = "waiting"
            else:
                ready.append((shard, snap))
        busy = self._busy(ready) if ready else set()
        for shard, snap in ready:
            if snap.game.game_id in busy:
                self._later(shard, snap.game.game_id, now)
                outcome[snap.game.game_id] = "waiting"
        ready = [(shard, snap) for shard, snap in ready if snap.game.game_id not in busy]
        expected = {snap.game.game_id: Summary.of(snap.game) for _, snap in ready}
        held = self.archive.summaries(list(expected)) if expected else {}
        copies = [
            snap.game
            for _, snap in ready
            if held.get(snap.game.game_id) != expected[snap.game.game_id]
        ]
        if copies:
            self.client.set(archive_used_key(), 1)  # lists read the archive from now on
            self.archive.put_many(copies)  # committed when it returns
            crash_point("copied")
            held.update(self.archive.summaries([g.game_id for g in copies]))  # read back
        crash_point("verified")
        verified = []
        for shard, snap in ready:
            game_id = snap.game.game_id
            if held.get(game_id) == expected[game_id]:
                verified.append((shard, snap))
            else:
                log.error("game %s: the archive's copy does not verify; left in Redis",
                          game_id, extra={"game_id": game_id})  # fmt: skip
                self._later(shard, game_id, now)
                outcome[game_id] = "failed"
        copied = {g.game_id for g in copies}
        self._give_back_bot_time(verified)
        crash_point("released")
        # Before the removal: once it is done a rerun finds the game (its webhooks too) gone,
        # and a place forgotten after it would stay taken for ever if this process died
        # between the two.
        self._count_hooks([snap for _, snap in verified], counted=False)
        removed = self._remove_many(verified, now)
        crash_point("removed")
        stayed = []
        for (_, snap), done in zip(verified, removed, strict=True):
            game_id = snap.game.game_id
            if done == 0:
                outcome[game_id] = "changed"  # the copy is stale: the next run copies again
                stayed.append(snap)
            elif done == 2:
                outcome[game_id] = "gone"
            else:
                outcome[game_id] = "archived" if game_id in copied else "removed"
        self._count_hooks(self._still_hooked(stayed), counted=True)  # still in Redis
        return outcome

    def archive_game(self, shard: int, game_id: str, now_ms: int | None = None) -> str:
        """Move one due game (a batch of one: see `archive_batch`)."""
        return self.archive_batch([(shard, game_id)], now_ms)[game_id]

    def _give_back_bot_time(self, games: list[tuple[int, Snapshot]]) -> None:
        """Give back the bot seconds each game still holds of its API key (its bot seats', its
        takeovers'), before its removal deletes the secrets record: the bot consumer gives
        them back when it sees the game end, but only while that record names the key, so a
        game archived before it got there (the bot worker down longer than ARCHIVE_AFTER)
        would hold them for ever. `release` is idempotent and the game is over, so giving
        back first loses nothing if this process dies before the removal, or the removal
        finds the game changed (the next run gives back again)."""
        for _, snap in games:
            if snap.owner_key and plays_bots(snap.game.meta.record):
                release(self.client, snap.owner_key, snap.game.game_id)

    def _remove_many(self, games: list[tuple[int, Snapshot]], now: int) -> list[int]:
        """The removal of each game, each its own atomic step (REMOVE_LUA), pipelined (on a
        Redis Cluster one call each); what each returned (1, 0 or 2)."""
        if not games:
            return []
        if is_cluster(self.client):  # a cluster pipeline refuses scripts: one call each
            done = [int(self._remove_script(*self._removal(shard, snap, now)))
                    for shard, snap in games]  # fmt: skip
        else:
            pipe = self.client.pipeline(transaction=False)
            for shard, snap in games:
                keys, args = self._removal(shard, snap, now)
                self._remove_script(keys=keys, args=args, client=pipe)
            done = [int(r) for r in pipe.execute()]
        pipe = self.client.pipeline(transaction=False)
        for (shard, snap), result in zip(games, done, strict=True):
            if result and shard_of(snap.game.game_id) != shard:  # another slot's indexes
                for key in _listed(shard, snap):
                    pipe.zrem(key, snap.game.game_id)
        if len(pipe):
            pipe.execute()
        return done

    def _removal(self, shard: int, snap: Snapshot, now: int) -> tuple[list[str], list[Any]]:
        """The keys and arguments of a game's REMOVE_LUA."""
        game_id = snap.game.game_id
        base: list[str] = []
        for stream in STREAMS:
            base += game_keys(game_id, stream)
        keys = [base[0], base[3], base[1], base[4], base[2], base[5], archived_key(game_id)]
        more = [secrets_key(game_id), seats_key(game_id), game_subscriptions_key(game_id)]
        for sub in sorted(self._subs.get(game_id, set())):
            more += subscription_keys(game_id, sub)
        listed = _listed(shard, snap) if shard_of(game_id) == shard else []
        keys += more + listed
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
            len(listed),
            ",".join(sorted(snap.subscriptions)),
        ]
        return keys, args

    def _still_hooked(self, snaps: list[Snapshot]) -> list[Snapshot]:
        """The games with only those of their webhooks read that are still theirs (one deleted
        since gave its place back itself: not to be counted again)."""
        pipe = self.client.pipeline(transaction=False)
        for snap in snaps:
            pipe.hkeys(game_subscriptions_key(snap.game.game_id))
        out = []
        for snap, hooks in zip(snaps, pipe.execute() if snaps else [], strict=True):
            now = {text(h) for h in hooks}
            kept = {h: c for h, c in snap.subscriptions.items() if h in now}
            out.append(dataclasses.replace(snap, subscriptions=kept))
        return out

    def _count_hooks(self, snaps: list[Snapshot], counted: bool) -> None:
        """The games' webhooks counted in their keys' caps (`counted`), or no longer (the
        games are being removed). Idempotent: a rerun does it again."""
        pipe = self.client.pipeline(transaction=False)
        for snap in snaps:
            for hook, config in snap.subscriptions.items():
                key_id = config.get("key_id") if isinstance(config, dict) else None
                if key_id:
                    member = f"{snap.game.game_id}:{hook}"
                    (pipe.sadd if counted else pipe.srem)(key_hooks_key(str(key_id)), member)
        if len(pipe):
            pipe.execute()

    # ------------------------------------------------------------------ runs

    def run(
        self,
        now_ms: int | None = None,
        limit: int = 10_000,
        progress: Callable[[int, int, Counter[str]], None] | None = None,
    ) -> Counter[str]:
        """Archive every game due by `now_ms` (at most `limit`), `batch` games a step; the
        outcomes counted. The change feed is followed first. An archive that is down stops
        the run (the games stay in Redis, tried again `retry_ms` later); a Redis failure
        stops it too (raised)."""
        # The directory first: it must have listed a game's end before the game leaves its
        # lists (or it would list it again afterwards).
        DirectoryIndex(self.client).catch_up()
        self.due_index.follower.catch_up()
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        return self.archive_games(self.due(now, limit), now, progress)

    def archive_games(
        self,
        games: list[tuple[int, str]],
        now_ms: int,
        progress: Callable[[int, int, Counter[str]], None] | None = None,
    ) -> Counter[str]:
        """`archive_batch` over `games` (shard, game), `batch` at a time, the next batch read
        from Redis on a thread while this one is compressed and stored (reading it early is
        safe: the removal compares what was read with what is there); the outcomes counted.
        See `run` for what stops it."""
        done: Counter[str] = Counter()
        batches = [games[i : i + self.batch] for i in range(0, len(games), self.batch)]
        with (
            no_cycle_collection(),
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="archive-read") as reader,
        ):
            ahead = reader.submit(self._read_ahead, [g for _, g in batches[0]]) if batches else None
            for k, batch in enumerate(batches):
                start = k * self.batch
                try:
                    assert ahead is not None
                    snaps = ahead.result()
                    if k + 1 < len(batches):
                        ahead = reader.submit(self._read_ahead, [g for _, g in batches[k + 1]])
                    done.update(self.archive_batch(batch, now_ms, snaps).values())
                except redis.RedisError:
                    raise
                except Exception as e:  # the archive down (or failing): all stay in Redis
                    log.warning("archive: %d games not archived (%s); tried again later",
                                len(games) - start, e)  # fmt: skip
                    for shard, game_id in games[start:]:
                        self._later(shard, game_id, now_ms)
                    done["failed"] += len(batch)
                    if len(games) > start + len(batch):
                        done["waiting"] += len(games) - start - len(batch)
                    break
                finally:
                    if progress is not None:
                        progress(min(start + self.batch, len(games)), len(games), done)
        return done

    # ------------------------------------------------------------------ restore

    def restore(self, game_id: str, schedule: bool = True) -> ArchivedGame:
        """Put an archived game back into Redis (support): its streams with their ids, its
        command records and markers, a secrets record without tokens (no seat can play)
        or seed, and no tombstone; listed in the directory again; due again `after_ms` from
        now unless `schedule` is off.
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
        pipe.set(seats_key(game_id), json.dumps(public_seats(record)))  # the query's part
        pipe.delete(archived_key(game_id))
        pipe.execute()
        shard, meta = index_shard(game_id), game.meta
        pipe = self.client.pipeline(transaction=False)  # listed again, as the directory lists
        for key in (games_key(shard), status_key(shard, meta.status)):
            pipe.zadd(key, {game_id: meta.created_ms})
        for name in sorted({n.casefold() for n in keyable(meta.names)}):
            pipe.zadd(player_key(shard, name), {game_id: meta.created_ms})
        for player_id in sorted(set(keyable(meta.player_ids))):
            pipe.zadd(player_id_key(shard, player_id), {game_id: meta.created_ms})
        owner_entries(pipe, shard, game_id, json.dumps(meta.record), meta.created_ms)
        if schedule:
            pipe.zadd(archive_due_key(shard), {game_id: _ms() + self.after_ms})
        pipe.execute()
        return game


def _snapshot(game_id: str, replies: list[Any]) -> Snapshot | None:
    """A game from its eight replies of `Archiver.snapshots`."""
    if not replies[0]:
        return None
    events: list[RawEvent] = []
    records: dict[str, int] = {}
    markers: dict[str, str] = {}
    for i, stream in enumerate(STREAMS):
        entries, commands, marker = replies[3 * i : 3 * i + 3]
        events += _events(game_id, stream, entries)
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
    end = next((e for e in reversed(moves) if e.type in ENDINGS), None)
    status = ENDINGS[end.type] if end else ""
    meta = GameMeta(status, moves[0].time_ms, end.time_ms if end else 0, kept)
    # The command records (idempotency) are not copied: a finished game takes no more
    # commands, and a restore rebuilds each command's span from the events' ids.
    game = ArchivedGame(game_id, meta, tuple(events), markers)
    subscriptions = {text(k): _json(v) for k, v in hooks.items()}
    return Snapshot(game, records, markers, subscriptions, meta.key_id)


def _raw_reader(client: redis.Redis) -> redis.Redis:
    """A client on the same connections whose XRANGE replies stay raw ([id, [field, value,
    …]]: no dict per entry, the archiver reads ~170 entries a game); a cluster client is
    used as it is."""
    if is_cluster(client):
        return client
    reader = redis.Redis(connection_pool=client.connection_pool)
    reader.set_response_callback("XRANGE", lambda response, **_: response)
    return reader


def _ms() -> int:
    return int(time.time() * 1000)


def _json(raw: Any) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


_ORDER = tuple(f.encode() for f in FIELDS)
_IDS = [b"%d-0" % seq for seq in range(1, 4_097)]  # an appended stream's first ids
_DIGITS = b"%d".__mod__  # a number as the append script writes it
_EVENT = functools.partial(tuple.__new__, RawEvent)  # a RawEvent of a tuple, unchecked
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_NAMES = operator.itemgetter(0, 2, 4, 6, 8)  # an entry's field names


def _events(game_id: str, stream: str, entries: Any) -> list[RawEvent]:
    """The entries of a raw XRANGE reply (id, [field, value, …]) as stored events: when
    every entry is what the append script writes (ids ``1-0``, ``2-0``, …, its five fields
    in its order, numbers as it formats them) read by columns, every check and conversion
    a C loop (map, zip, set) with no Python per entry; else entry by entry (`_entry`),
    which says what is wrong."""
    n = len(entries)
    ids, fields = list(map(_FIRST, entries)), list(map(_SECOND, entries))
    if (
        n
        and ids == _IDS[:n]
        and set(map(type, fields)) == {list}
        and set(map(len, fields)) == {10}
        and set(map(_NAMES, fields)) == {_ORDER}
    ):
        _, raw_k, _, raw_v, _, raw_c, _, raw_t, _, raw_d = zip(*fields, strict=True)
        try:
            versions, times = list(map(int, raw_v)), list(map(int, raw_t))
            texts = [list(map(bytes.decode, column)) for column in (raw_k, raw_c, raw_d)]
        except (ValueError, TypeError):  # not numbers, not UTF-8: said by `_entry`
            versions = times = []
        if tuple(map(_DIGITS, versions)) == raw_v and tuple(map(_DIGITS, times)) == raw_t:
            kinds, commands, data = texts
            return list(map(_EVENT, zip([stream] * n, range(1, n + 1), kinds, versions, times,
                                        commands, data, strict=True)))  # fmt: skip
    return [_entry(game_id, stream, entry_id, fields) for entry_id, fields in entries]


def _entry(game_id: str, stream: str, entry_id: Any, fields: Any) -> RawEvent:
    """One entry of a raw XRANGE reply as a stored event (see `_events`)."""
    if isinstance(fields, list) and fields[0::2] == list(_ORDER):
        seq, _, tail = entry_id.partition(b"-")
        v, t = fields[3], fields[7]
        try:
            event = RawEvent(stream, int(seq), fields[1].decode(), int(v), int(t),
                             fields[5].decode(), fields[9].decode())  # fmt: skip
        except ValueError:
            event = None
        if (
            event is None
            or tail != b"0"
            or b"%d" % event.version != v
            or b"%d" % event.time_ms != t
        ):
            raise NotArchivable(f"game {game_id}: {stream} entry {text(entry_id)} is not an event")
        return event
    return _raw(game_id, stream, entry_id, fields)


def _raw(game_id: str, stream: str, entry_id: Any, fields: Any) -> RawEvent:
    """An entry of XRANGE as stored; `NotArchivable` when it is not exactly an appended
    event (other fields, another id form, numbers a round trip would change)."""
    if isinstance(fields, list):
        pairs = iter(fields)
        fields = dict(zip(pairs, pairs, strict=True))
    named = {text(k): v for k, v in fields.items()}
    got = [named.get(f) for f in FIELDS] if set(named) == set(FIELDS) else [None]
    if None in got:
        raise NotArchivable(f"game {game_id}: {stream} entry {text(entry_id)} is not an event")
    kind, v, cmd, t, data = (text(x) for x in got)
    seq, _, tail = text(entry_id).partition("-")
    event = RawEvent(stream, _int(seq), kind, _int(v), _int(t), cmd, data)
    if tail != "0" or str(event.version) != v or str(event.time_ms) != t:
        raise NotArchivable(f"game {game_id}: {stream} entry {text(entry_id)} is not an event")
    return event


def _int(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return -1
