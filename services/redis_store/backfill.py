"""Build the cross-game indexes for games written before they existed (a one-off command).

    python -m services.redis_store.backfill [--redis-url URL] [--cursor N] [--node I]

Run it once after upgrading, before traffic. It walks the keyspace once with SCAN (the only
SCAN left: the services themselves read the indexes) and, for each game's move stream,
writes the game's entries in its shard's indexes — by creation time, status, player names,
its API key's lists and the public list — computed from the game's own keys, and announces
its unscored moves on the change feed again (the scoring worker follows it). A game the
directory indexed already gets its API key's and the public list's entries only (written by
the directory since issue 33; run this once after upgrading to it, so a platform's earlier
games are listed to its key):

- a game whose id is on a shard slot and that is already in its shard's game index was
  indexed by the games directory from the change feed (from its first event on): left alone;
- any other game gets its entries in shard `shard_of(id)` (an old id that happens to be on a
  shard slot: the directory keeps it in step from now on) or, for an id off the shard slots
  (most games from before), shard ``crc32(id) % 64``. On a single Redis such a game's
  appends go on that shard's change feed, so its consumers keep it in step from then on; on
  a Redis Cluster they cannot (another slot), so the readers check its entries against the
  game's streams (GET /games describes each game from its streams, the subscriptions'
  sweep settles a subscription's entry), which is why this must run before traffic, not
  during.

Idempotent (each entry is set to what the game's keys say, so a second run writes the same
values; it announces a game's unscored moves again, which the scoring consumer, whose
appends are conditional on the game's progress, finds already scored) and resumable: the
progress line on stderr shows the SCAN cursor; pass it back with ``--cursor`` (and
``--node`` on a cluster) to go on from there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO, cast

import redis

from carcassonne.progress import Progress
from eventstore.envelope import MOVES, SCORES

from .acl import default_url
from .changes import changes_key
from .connect import connect, is_cluster
from .directory_index import keyable, owner_of, seats_of
from .indexes import marker_number, text
from .keys import (
    ABANDONED,
    IN_PROGRESS,
    OVER,
    game_keys,
    games_key,
    index_shard,
    key_games_key,
    key_player_id_key,
    key_player_key,
    player_key,
    public_key,
    secrets_key,
    shard_of,
    status_key,
)

_PREFIX, _SUFFIX = game_keys("*", MOVES)[0].split("*")  # "{g:" and "}:moves"


@dataclass
class Tally:
    """What a run did so far."""

    scanned: int = 0  # keys looked at
    total: int = 0  # keys in the database(s) when the run started
    # Games whose entries were written. SCAN may return a key twice (the keyspace resized
    # mid-walk: the run's own index writes can do it), and such a game counts twice; its
    # entries are the same (each write is idempotent).
    indexed: int = 0
    skipped: int = 0  # games the directory had indexed already
    cursor: str = "0"

    def note(self) -> str:
        return f"· {self.indexed:,} games indexed, {self.skipped:,} already · cursor {self.cursor}"


def game_of(key: str) -> str | None:
    """The game id of a move-stream key, None for any other key."""
    if key.startswith(_PREFIX) and key.endswith(_SUFFIX):
        return key[len(_PREFIX) : -len(_SUFFIX)] or None
    return None


def index_game(client: redis.Redis, game_id: str, now_ms: int | None = None) -> bool:
    """Write one game's index entries from its keys; False if the directory indexed it
    already (or the game has no move stream). The entries of its API key and of the public
    list (issue 33) are written either way: the directory indexed games before it kept them."""
    shard = index_shard(game_id)
    if shard_of(game_id) is not None:
        indexed = client.zscore(games_key(shard), game_id)
        if indexed is not None:
            owned = client.pipeline(transaction=False)
            owner_entries(owned, shard, game_id, client.get(secrets_key(game_id)), int(indexed))
            owned.execute()
            return False
    now = int(time.time() * 1000) if now_ms is None else now_ms
    moves, scores = game_keys(game_id, MOVES), game_keys(game_id, SCORES)
    pipe = client.pipeline(transaction=False)
    pipe.xrange(moves[0], count=1)
    pipe.xrevrange(moves[0], count=1)
    pipe.get(moves[2])
    pipe.get(scores[2])
    pipe.get(secrets_key(game_id))
    first, last, moved_raw, scored_raw, secret = pipe.execute()
    if not first:
        return False
    created = int(text(first[0][1][b"t"]))
    last_type = text(last[0][1][b"type"])
    status = {"GameEnded": OVER, "GameAbandoned": ABANDONED}.get(last_type, IN_PROGRESS)
    writes = client.pipeline(transaction=False)
    writes.zadd(games_key(shard), {game_id: created})
    writes.zadd(status_key(shard, status), {game_id: created})
    for other in {IN_PROGRESS, OVER, ABANDONED} - {status}:
        writes.zrem(status_key(shard, other), game_id)
    for name in _names(secret):
        writes.zadd(player_key(shard, name), {game_id: created})
    owner_entries(writes, shard, game_id, secret, created)
    moved, scored = marker_number(moved_raw), marker_number(scored_raw)
    if moved is not None and scored is not None and moved > scored:
        behind = cast(list[Any], client.xrange(moves[0], f"{scored + 1}-0", "+", count=1))
        at = int(text(behind[0][1][b"t"])) if behind else now
        # Announced on the change feed as appended again: the scoring worker follows it.
        writes.xadd(changes_key(shard), {"g": game_id, "s": MOVES, "f": scored + 1,
                                         "l": moved, "t": at, "e": ""})  # fmt: skip
    writes.execute()
    return True


def owner_entries(pipe: Any, shard: int, game_id: str, secret: Any, created: int) -> None:
    """Queue a game's entries in its API key's lists and in the public list, from its
    secrets record (the games directory writes the same from a game's first change)."""
    key_id, public = owner_of(secret)
    names, ids = seats_of(secret)
    if public:
        pipe.zadd(public_key(shard), {game_id: created})
    if key_id is not None:
        pipe.zadd(key_games_key(shard, key_id), {game_id: created})
        for name in sorted({n.casefold() for n in names}):
            pipe.zadd(key_player_key(shard, key_id, name), {game_id: created})
        for player_id in sorted(set(ids)):
            pipe.zadd(key_player_id_key(shard, key_id, player_id), {game_id: created})


def _names(raw: Any) -> list[str]:
    try:
        names = json.loads(raw).get("names") if raw is not None else None
    except (ValueError, AttributeError):
        return []
    if not isinstance(names, list):
        return []
    return sorted({n.casefold() for n in keyable(map(str, names))})


def nodes(client: redis.Redis) -> list[redis.Redis]:
    """One client per database to SCAN: the primaries of a cluster, else the client."""
    if not is_cluster(client):
        return [client]
    cluster: Any = client
    primaries = sorted(cluster.get_primaries(), key=lambda n: (n.host, n.port))
    return [cluster.get_redis_connection(node) for node in primaries]


def scan_keys(node: redis.Redis, cursor: int, count: int) -> Iterator[tuple[int, list[str]]]:
    """(next cursor, keys) per SCAN step from `cursor` until the walk ends."""
    while True:
        cursor, keys = cast(tuple[int, list[Any]], node.scan(cursor, count=count))
        yield cursor, [text(k) for k in keys]
        if cursor == 0:
            return


def run(
    client: redis.Redis,
    cursor: int = 0,
    node_index: int = 0,
    count: int = 1000,
    out: TextIO | None = None,
) -> Tally:
    """Index every game found by SCAN (of each node from `node_index`, the first from
    `cursor`)."""
    databases = nodes(client)
    tally = Tally()
    tally.total = sum(int(cast(Any, db.dbsize())) for db in databases[node_index:])
    # On stderr even off a terminal (a line a second): the cursor to resume from must reach
    # the operator's log.
    bar = Progress(tally.total, out, unit="keys", lines=True, every_s=1.0)
    for i, db in enumerate(databases[node_index:], start=node_index):
        start = cursor if i == node_index else 0
        for following, keys in scan_keys(db, start, count):
            for key in keys:
                game_id = game_of(key)
                if game_id is None:
                    continue
                if index_game(client, game_id):
                    tally.indexed += 1
                else:
                    tally.skipped += 1
            tally.scanned += len(keys)
            node = f" --node {i}" if len(databases) > 1 else ""
            tally.cursor = f"{following}{node}"
            bar.update(min(tally.scanned, tally.total), tally.note())
    done = max(tally.scanned, tally.total)  # the scan is over: all there was is scanned
    bar.finish(done, tally.note())
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.redis_store.backfill",
        description="Index games written before the cross-game indexes existed (by creation, "
        "status, player, unscored moves). One-off: run it once after upgrading, "
        "before traffic. Idempotent; resumable with the cursor shown on stderr.",
    )
    parser.add_argument(
        "--redis-url",
        default=default_url(),
        help="the event store's Redis (redis:// or redis+cluster://); default $REDIS_URL, "
        "else the admin user of `make run`'s",
    )
    parser.add_argument("--cursor", type=int, default=0, help="SCAN cursor to resume from")
    parser.add_argument(
        "--node", type=int, default=0, help="on a cluster: the primary (by index) to resume on"
    )
    parser.add_argument("--count", type=int, default=1000, help="SCAN COUNT per step")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    client = connect(args.redis_url, role="backfill", max_connections=2)
    done = run(client, args.cursor, args.node, args.count, None if args.quiet else sys.stderr)
    print(json.dumps({"indexed": done.indexed, "already_indexed": done.skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
