"""The change feed: one Redis stream per index shard, ``{<shard tag>}:changes``, and the
followers that read it.

Every append that adds events to a game (or saves a stream's marker: the scoring progress
moving on without score events) also adds, in the same Lua script, one entry to the feed of
the game's shard (services/redis_store/store.py): ``g`` the game, ``s`` the stream,
``f``/``l`` the first and last seq appended (``f`` > ``l``: no events, only the marker),
``t`` the append time (ms), ``e`` the events' types, comma-separated, ``r`` the id of the
request that caused it ("" if none: the logs of a consumer name it). A game and its shard's
feed share one Redis Cluster slot (keys.py), so the entry is atomic with the events on a
cluster too. That is all the append knows: scoring, the turn timer, the games directory and
webhook delivery are consumers that follow the feed, each with its own position, and each
owns its index.

A consumer's position in a shard is a field of ``{<shard tag>}:changes:positions`` (consumer
name -> the last entry id it handled). `Follower.catch_up` reads the entries after it, asks
the consumer's `handle` what to write, and writes that together with the new position in
one script, conditional on the position it read (pyeventsourcing's process applications
record their tracking position with their output the same way). So a crash before the
script redoes the batch, a crash after it never redoes it, and two followers of one consumer
on one shard never both apply a batch: the second finds the position moved and reads again.
A consumer whose output lives elsewhere (scoring appends to each game's score stream, with
its own conditional progress marker) does that work inside `handle`, idempotently, and
returns no writes.

The feed is trimmed only below the lowest position of the consumers registered in the shard
(`trim`): a consumer that is down holds the entries it has not handled, however long it is
down; its first `catch_up` registers it in every shard it reads, before reading. A consumer
that starts after entries were trimmed builds its history from the game streams (as
`services.redis_store.backfill` does).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from .connect import is_cluster
from .indexes import text
from .keys import SHARD_TAGS, SHARDS
from .scripts import script

log = logging.getLogger(__name__)
START = "0-0"  # the position of a consumer that has handled nothing


def changes_key(shard: int) -> str:
    """The change feed of a shard (a stream)."""
    return "{" + SHARD_TAGS[shard] + "}:changes"


def positions_key(shard: int) -> str:
    """Hash: consumer name -> the id of the last feed entry of the shard it handled."""
    return changes_key(shard) + ":positions"


@dataclass(frozen=True)
class Change:
    """One append, as its feed entry tells it."""

    id: str  # the feed entry's id
    game_id: str
    stream: str
    first: int
    last: int
    time_ms: int
    types: tuple[str, ...]
    trace: str = ""  # the causing request's id, for logs

    @classmethod
    def parse(cls, entry_id: Any, fields: Any) -> Change:
        """A feed entry of an XRANGE/XREAD reply (fields as a dict or a flat list)."""
        if not isinstance(fields, dict):
            pairs = iter(fields)
            fields = dict(zip(pairs, pairs, strict=True))
        get = {text(k): text(v) for k, v in fields.items()}
        return cls(
            text(entry_id),
            get["g"],
            get["s"],
            int(get["f"]),
            int(get["l"]),
            int(get["t"]),
            tuple(t for t in get["e"].split(",") if t),
            get.get("r", ""),
        )


@dataclass(frozen=True)
class Write:
    """One write a consumer makes with its new position: ``op`` is ``zadd``, ``zadd_nx``,
    ``zadd_lt``, ``zrem``, ``hset`` or ``hincrby`` (``value`` is the score, the hash value
    or the increment)."""

    op: str
    key: str
    member: str
    value: int | float | str = 0


# KEYS: the shard's positions hash, then every key the writes name.
# ARGV: consumer, expected position, new position, then (op, key index, member, value) each.
FOLLOW_LUA = """
local at = redis.call('HGET', KEYS[1], ARGV[1]) or '0-0'
if at ~= ARGV[2] then return 0 end
for i = 4, #ARGV, 4 do
  local op, key, member, value = ARGV[i], KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2], ARGV[i + 3]
  if op == 'zadd' then redis.call('ZADD', key, value, member)
  elseif op == 'zadd_nx' then redis.call('ZADD', key, 'NX', value, member)
  elseif op == 'zadd_lt' then redis.call('ZADD', key, 'LT', value, member)
  elseif op == 'zrem' then redis.call('ZREM', key, member)
  elseif op == 'hset' then redis.call('HSET', key, member, value)
  elseif op == 'hincrby' then redis.call('HINCRBY', key, member, value)
  else return redis.error_reply('unknown write ' .. op) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

Handle = Callable[[int, list[Change]], Sequence[Write]]


# KEYS: a lease. ARGV: its holder's token. Let go only by its holder.
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def lease_key(shard: int, consumer: str) -> str:
    """Held by the one follower of a consumer handling a batch of the shard right now."""
    return changes_key(shard) + ":lease:" + consumer


class Follower:
    """Follows every shard's feed for one consumer: `handle(shard, changes)` is given each
    batch of new entries in order, and what it returns is written with the new position.

    With `lease_ms`, a follower takes the shard's lease for the consumer before handling a
    batch and skips a shard whose lease another holds: for a consumer whose `handle` does
    costly work (scoring), several processes then never do the same work at once. The
    holder reads the shard again after letting go, so an entry that arrived meanwhile is
    handled by it or by the next follower woken by the append; a holder that dies leaves
    the shard to others after `lease_ms`. Correctness never rests on the lease: the
    position is conditional either way.

    `after(shard, changes)` runs once a batch's output is recorded, for the one kind of
    output that cannot be in the script: a message to another process (the bot consumer
    sends the bot task). A crash between the two loses the message, so the consumer's
    recorded writes must say what it was for a sweep to send it again (the bot index's
    due time does)."""

    def __init__(
        self,
        client: redis.Redis,
        consumer: str,
        handle: Handle,
        batch: int = 500,
        lease_ms: int | None = None,
        after: Callable[[int, list[Change]], None] | None = None,
        appends: bool = False,
    ) -> None:
        self.client = client
        self.appends = appends  # its `handle` appends to games: `follow` reads again after it
        self.consumer = consumer
        self.handle = handle
        self.after = after
        self.batch = max(1, batch)
        self.lease_ms = lease_ms
        self._token = uuid.uuid4().hex
        self._apply = script(client, FOLLOW_LUA)  # rides out a slot migration
        self._release = script(client, RELEASE_LUA)

    def positions(self, shards: Iterable[int] = range(SHARDS)) -> dict[int, str]:
        """This consumer's position in each shard; where it has none it is registered at
        `START` first, so `trim` keeps every entry for it from now on."""
        found = read_positions(self.client, [(self.consumer, shard) for shard in shards])
        return {shard: position for (_, shard), position in found.items()}

    def catch_up(
        self,
        shards: Iterable[int] = range(SHARDS),
        max_rounds: int = 1_000,
        at: dict[int, str] | None = None,
    ) -> int:
        """Handle every entry of the given shards' feeds past this consumer's positions (read
        here unless the caller read them: `at`); returns how many this call applied.
        Bounded: at most `max_rounds` batches per shard (a caller that stops short is called
        again: nothing is lost, only later)."""
        handled = 0
        at = self.positions(shards) if at is None else dict(at)
        for _ in range(max_rounds):
            if not at:
                break
            pipe = self.client.pipeline(transaction=False)
            for shard, position in at.items():
                pipe.xrange(changes_key(shard), "(" + position, "+", count=self.batch)
            more: dict[int, str] = {}
            for (shard, position), entries in zip(at.items(), pipe.execute(), strict=True):
                changes = [Change.parse(eid, fields) for eid, fields in entries]
                applied, after = self.take(shard, position, changes)
                handled += applied
                if after is not None:
                    more[shard] = after
            at = more
        return handled

    def take(self, shard: int, position: str, changes: list[Change]) -> tuple[int, str | None]:
        """Handle `changes` (the shard's entries right after `position`, in order, at most
        `batch`) and record them: how many were applied, and the position to read the shard
        from again (None: nothing more to read now; the next append wakes the watchers)."""
        if not changes or not self._lease(shard):
            return 0, None  # done, or its holder handles these (and reads again after)
        try:
            recorded = self._record(shard, position, changes)
        finally:
            self._let_go(shard)
        if not recorded:  # another follower moved it: read from where it got to
            return 0, self.positions([shard])[shard]
        if self.after is not None:
            self.after(shard, changes)
        # A full batch may have more behind it. A leased consumer reads once more after
        # letting go: an entry appended while it held the lease was skipped by the others.
        again = len(changes) >= self.batch or self.lease_ms is not None
        return len(changes), changes[-1].id if again else None

    def _lease(self, shard: int) -> bool:
        """Take the shard's lease for this consumer (always True without leases)."""
        if self.lease_ms is None:
            return True
        key = lease_key(shard, self.consumer)
        return bool(self.client.set(key, self._token, nx=True, px=self.lease_ms))

    def _let_go(self, shard: int) -> None:
        if self.lease_ms is not None:
            self._release(keys=[lease_key(shard, self.consumer)], args=[self._token])

    def _record(self, shard: int, position: str, changes: list[Change]) -> bool:
        """Handle a batch and write its output with the new position; False when another
        follower of this consumer recorded the shard meanwhile (nothing written here)."""
        writes = self.handle(shard, changes)
        keys = [positions_key(shard)]
        slot: dict[str, int] = {}
        args: list[Any] = [self.consumer, position, changes[-1].id]
        for write in writes:
            if write.key not in slot:
                keys.append(write.key)
                slot[write.key] = len(keys)
            args += [write.op, slot[write.key], write.member, write.value]
        return bool(self._apply(keys=keys, args=args))


def read_positions(
    client: redis.Redis, wanted: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], str]:
    """(consumer, shard) -> the consumer's position in the shard, in one round trip; a
    consumer without one is registered at `START` first (see `Follower.positions`)."""
    pipe = client.pipeline(transaction=False)
    for consumer, shard in wanted:
        pipe.hget(positions_key(shard), consumer)
    replies = dict(zip(wanted, pipe.execute(), strict=True))
    new = [where for where, reply in replies.items() if reply is None]
    if new:
        pipe = client.pipeline(transaction=False)
        for consumer, shard in new:
            pipe.hsetnx(positions_key(shard), consumer, START)
        pipe.execute()
    return {where: START if reply is None else text(reply) for where, reply in replies.items()}


def _order(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-", 1)
    return int(ms), int(seq)


def follow(followers: Sequence[Follower], shards: Iterable[int] = range(SHARDS)) -> int:
    """Every follower over `shards`, in order, as each one's `catch_up` would, but with one
    read of all their positions and one of the feeds, parsed once and shared (a watcher's
    round: each reading for itself cost two round trips per follower per wake-up, and
    bench_scoring's lag grew with each consumer added). After a follower that `appends`
    applied something, the feeds are read again for the followers after it, so they see
    its output (the score events) in the same round. A follower left with more to read (a
    full batch, a lease it let go) reads the rest itself. Returns how many were applied.
    The followers must share one Redis client."""
    wanted = list(shards)
    if not followers or not wanted:
        return 0
    client = followers[0].client
    at = read_positions(client, [(f.consumer, shard) for f in followers for shard in wanted])
    handled = 0
    read: tuple[int, dict[int, list[Change]]] | None = None
    for index, follower in enumerate(followers):
        if read is None:
            read = _read_feeds(client, at, followers[index:], wanted)
        count, feeds = read
        behind: dict[int, str] = {}
        applied_here = 0
        for shard in wanted:
            position, changes = at[(follower.consumer, shard)], feeds[shard]
            start = _order(position)
            mine = [c for c in changes if _order(c.id) > start][: follower.batch]
            applied, after = follower.take(shard, position, mine)
            applied_here += applied
            cut = len(changes) >= count and (not mine or mine[-1] is changes[-1])
            if after is None and cut and (applied or not mine):
                after = mine[-1].id if mine else position  # the read stopped short of the end
            if after is not None:
                behind[shard] = after
        if behind:
            applied_here += follower.catch_up(list(behind), at=behind)
        if follower.appends and applied_here:
            read = None  # what it appended is in the feeds now: the rest read them again
        handled += applied_here
    return handled


def _read_feeds(
    client: redis.Redis,
    at: dict[tuple[str, int], str],
    followers: Sequence[Follower],
    shards: list[int],
) -> tuple[int, dict[int, list[Change]]]:
    """Each shard's entries past the lowest position of `followers` (at most the largest
    batch of theirs: the count returned), parsed."""
    count = max(f.batch for f in followers)
    lows = {shard: min((at[(f.consumer, shard)] for f in followers), key=_order)
            for shard in shards}  # fmt: skip
    pipe = client.pipeline(transaction=False)
    for shard, low in lows.items():
        pipe.xrange(changes_key(shard), "(" + low, "+", count=count)
    feeds = {
        shard: [Change.parse(eid, fields) for eid, fields in entries]
        for shard, entries in zip(lows, pipe.execute(), strict=True)
    }
    return count, feeds


def trim(client: redis.Redis, shards: Iterable[int] = range(SHARDS)) -> int:
    """Drop the entries every registered consumer of a shard has handled; returns how many.
    A shard without consumers is left whole (the first one will want its entries)."""
    wanted = list(shards)
    pipe = client.pipeline(transaction=False)
    for shard in wanted:
        pipe.hvals(positions_key(shard))
    lows: dict[int, str] = {}
    for shard, values in zip(wanted, pipe.execute(), strict=True):
        if values:
            lows[shard] = min((text(v) for v in values), key=_order)
    if not lows:
        return 0
    pipe = client.pipeline(transaction=False)
    for shard, low in lows.items():
        # MINID keeps entries >= low: the one at every position stays (it was handled).
        pipe.xtrim(changes_key(shard), minid=low, approximate=False)
    return sum(int(n) for n in pipe.execute())


def consumers(client: redis.Redis, shards: Iterable[int] = range(SHARDS)) -> set[str]:
    """The names of every consumer registered in any of the shards."""
    pipe = client.pipeline(transaction=False)
    for shard in shards:
        pipe.hkeys(positions_key(shard))
    return {text(name) for names in pipe.execute() for name in names}


def retire(client: redis.Redis, consumer: str) -> None:
    """Forget a consumer retired for good: its positions (which would hold `trim` back for
    ever) and leases, in every shard."""
    pipe = client.pipeline(transaction=False)
    for shard in range(SHARDS):
        pipe.hdel(positions_key(shard), consumer)
        pipe.delete(lease_key(shard, consumer))
    pipe.execute()


def tails(client: redis.Redis, shards: Iterable[int] = range(SHARDS)) -> dict[int, str]:
    """The id of each shard's newest feed entry (`START` for an empty feed)."""
    wanted = list(shards)
    pipe = client.pipeline(transaction=False)
    for shard in wanted:
        pipe.xrevrange(changes_key(shard), "+", "-", count=1)
    replies = pipe.execute()
    return {s: text(r[0][0]) if r else START for s, r in zip(wanted, replies, strict=True)}


def wait(client: redis.Redis, seen: dict[int, str], block_ms: int) -> list[int]:
    """Shards whose feed has entries after `seen` (their ids are moved on in `seen`), waiting
    up to `block_ms` for one. On a single Redis one blocking XREAD over the 64 feeds; on a
    cluster (one command may not name keys of several slots) one pipelined look at every
    feed's newest entry, without blocking: the caller's loop then polls."""
    if is_cluster(client):
        now = tails(client, seen)
        changed = [s for s, tail in now.items() if tail != seen[s]]
        seen.update(now)
        return changed
    reply: Any = client.xread(
        {changes_key(s): position for s, position in seen.items()}, count=1_000, block=block_ms
    )
    changed = []
    index = {changes_key(s): s for s in seen}
    for key, entries in reply or []:
        shard = index[text(key)]
        if entries:
            seen[shard] = text(entries[-1][0])
            changed.append(shard)
    return changed
