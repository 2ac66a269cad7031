"""Finished games leave Redis (`make bench`, issue 28): memory left per archived game, archive
bytes per game, and the archiving rate against plain reads of the same streams.

Real parts: a private Redis and a private PostgreSQL (tests/postgres_server.py; skipped with
its reason where none can start), the archiver of services/archive in this one process.
`--games` (default 10,000) finished 2-4 player games are written as the append script writes
them (both streams with their `<seq>-0` ids and five fields, a command record per append —
uuid command ids, an Idempotency-Key with its request fingerprint on every 4th turn, one
score append per turn as the watching scorer makes — the stream markers and a secrets
record), their last score
append (`GameScored`) through `RedisEventStore.append` itself, so each game's end is on the
change feed; the logs are those of `--distinct` random games (default 150) played once.
The directory and the archive's due index follow the feed, then the feed is trimmed (as the
sweep does) before each memory reading.

Figures (tests/bench/targets.py):
- Redis used_memory per finished game after archiving (the tombstone and the directory's
  list entries, which stay: deploy/README.md "The archive"): ≤ 1,024 bytes; before, printed;
- archive bytes per game on PostgreSQL (pg_total_relation_size of its tables, indexes and
  TOAST included): ≤ 4,096 bytes;
- archiving rate of one process (PostgreSQL) ≥ 25 % of the rate of plain reads (XRANGE of
  both streams, one pipeline per game) of the same games in the same run: 500 games read,
  then those 500 archived, and so on (the machine's load alike for both).
SQLite (the embedded default) figures are printed for information: `--sqlite` games
restored from PostgreSQL into Redis and archived again into a SQLite file.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "shared"))

import redis  # noqa: E402

from eventstore.envelope import MOVES, SCORES, NewEvent  # noqa: E402
from services.archive.archiver import Archiver  # noqa: E402
from services.archive.postgres import PostgresArchive  # noqa: E402
from services.archive.sqlite import SqliteArchive  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.changes import trim  # noqa: E402
from services.redis_store.directory_index import DirectoryIndex  # noqa: E402
from services.redis_store.keys import (  # noqa: E402
    archive_due_key,
    game_keys,
    index_shard,
    new_game_id,
    seats_key,
    secrets_key,
)
from services.redis_store.seats import public_seats  # noqa: E402
from tests.archive_games import scored, turns  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.postgres_server import postgres_missing, private_postgres  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

PLAYERS = 2_000  # distinct players the seats are drawn from (each plays many games)


def compact(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"))


def distinct_games(count: int) -> list[tuple[list[list[NewEvent]], dict[int, list[NewEvent]]]]:
    """`count` random games: their turns and their score events by causing move."""
    out = []
    for seed in range(count):
        played = turns(seed)
        moves = [e for turn in played for e in turn]
        out.append((played, dict(scored(moves))))
    return out


def write_games(
    store: RedisEventStore, games: int, logs: list[Any], rng: random.Random
) -> list[str]:
    """`games` finished games written as the append script writes them (module docstring):
    the first turn (creation), the last turn (the end) and the final scoring through
    `RedisEventStore.append`, so the directory and the archive's due index see them on the
    feed; the turns between written the same way, pipelined."""
    client = store.client
    plans = []
    pipe = client.pipeline(transaction=False)
    for n in range(games):
        played, by_move = logs[n % len(logs)]
        game_id = new_game_id(rng)
        seats = len(played[0][0].payload["players"])
        people = [rng.randrange(PLAYERS) for _ in range(seats)]
        record = {
            "seed": uuid.UUID(int=rng.getrandbits(128)).hex,
            "names": [f"Player {p}" for p in people],
            "tokens": {uuid.UUID(int=rng.getrandbits(128)).hex * 2: i for i in range(seats)},
            "player_ids": [f"user-{p}" for p in people],
        }
        pipe.set(secrets_key(game_id), json.dumps(record))
        pipe.set(seats_key(game_id), json.dumps(public_seats(record)))  # as the service does
        plans.append((game_id, played, by_move))
    pipe.execute()  # the secrets record before the first append, as the service writes it
    for game_id, played, _ in plans:
        store.append(game_id, MOVES, played[0], expected=0, command_id="create", marker="$seq")
    for game_id, played, by_move in plans:
        moves_key, moves_cmd, moves_marker = game_keys(game_id, MOVES)
        scores_key, scores_cmd, scores_marker = game_keys(game_id, SCORES)
        at = int(time.time() * 1000)
        seq, score_seq = len(played[0]), 0
        move_records: dict[str, str] = {}
        score_records: dict[str, str] = {}
        for t, turn in enumerate(played[:-1]):
            at += rng.randrange(2_000, 40_000)
            first = seq + 1 if t else 1
            if t:
                cmd = uuid.UUID(int=rng.getrandbits(128)).hex
                for event in turn:
                    seq += 1
                    pipe.xadd(moves_key, {"type": event.type, "v": event.version, "cmd": cmd,
                                          "t": at, "data": compact(event.payload)},
                              id=f"{seq}-0")  # fmt: skip
                keyed = t % 4 == 3  # an Idempotency-Key: the request's fingerprint (sha256)
                fingerprint = f":{rng.getrandbits(256):064x}" if keyed else ""
                move_records[cmd] = f"{first}:{seq}{fingerprint}"
            scores = [e for m in range(first, seq + 1) for e in by_move.get(m, [])]
            score_cmd = f"score:{first}-{seq}"
            score_first = score_seq + 1
            for event in scores:
                score_seq += 1
                pipe.xadd(scores_key, {"type": event.type, "v": event.version, "cmd": score_cmd,
                                       "t": at + 3, "data": compact(event.payload)},
                          id=f"{score_seq}-0")  # fmt: skip
            score_records[score_cmd] = f"{score_first}:{score_seq}"
        pipe.hset(moves_cmd, mapping=move_records)  # type: ignore[arg-type]
        pipe.hset(scores_cmd, mapping=score_records)  # type: ignore[arg-type]
        pipe.set(moves_marker, seq)
        pipe.set(scores_marker, seq)
        if len(pipe) > 20_000:
            pipe.execute()
    pipe.execute()
    for game_id, played, by_move in plans:
        before = store.last_seq(game_id, MOVES)
        last = store.append(game_id, MOVES, played[-1], expected=before,
                            command_id=uuid.UUID(int=rng.getrandbits(128)).hex,
                            marker="$seq").last_seq  # fmt: skip
        final = [e for m in range(before + 1, last + 1) for e in by_move.get(m, [])]
        store.append(game_id, SCORES, final, expected=store.last_seq(game_id, SCORES),
                     command_id=f"score:{before + 1}-{last}", marker=str(last),
                     expected_marker=str(before))  # fmt: skip
    return [game_id for game_id, _, _ in plans]


def used(client: redis.Redis) -> int:
    info: Any = client.info("memory")
    return int(info["used_memory"])


def read_seconds(client: redis.Redis, games: list[str]) -> float:
    """Seconds of plain reads of the games: XRANGE of both streams, one pipeline per game."""
    started = time.perf_counter()
    for game_id in games:
        pipe = client.pipeline(transaction=False)
        pipe.xrange(game_keys(game_id, MOVES)[0])
        pipe.xrange(game_keys(game_id, SCORES)[0])
        pipe.execute()
    return time.perf_counter() - started


def archive_interleaved(
    client: redis.Redis, archiver: Archiver, chunk: int = 500
) -> tuple[Counter[str], float, float, int]:
    """Every due game archived `chunk` at a time (in the archiver's batches), each chunk read
    with plain XRANGE just before it is archived, so both rates are measured at the same
    moments of a shared machine: (outcomes, archiving seconds, reading seconds, games read)."""
    due = archiver.due(int(time.time() * 1000) + 1, limit=10**9)
    outcomes: Counter[str] = Counter()
    archiving = reading = 0.0
    for start in range(0, len(due), chunk):
        part = due[start : start + chunk]
        reading += read_seconds(client, [game_id for _, game_id in part])
        started = time.perf_counter()
        outcomes.update(archiver.archive_games(part, int(time.time() * 1000)))
        archiving += time.perf_counter() - started
    return outcomes, archiving, reading, len(due)


def main() -> int:
    parser = argparse.ArgumentParser(description="archive benchmark")
    parser.add_argument("--games", type=int, default=size(10_000, 300), help="finished games")
    parser.add_argument("--distinct", type=int, default=size(150, 20), help="distinct games")
    parser.add_argument(
        "--sqlite", type=int, default=size(2_000, 100), help="games also into SQLite"
    )
    parser.add_argument("--batch", type=int, default=100, help="games per archiver step")
    args = parser.parse_args()
    why = postgres_missing()
    if why:
        print(f"bench_archive: skipped: no PostgreSQL server: {why}")
        return 0
    rng = random.Random(28)
    redis_proc, redis_url, redis_dir = start_redis()
    workdir = tempfile.mkdtemp(prefix="cc-bench-archive-")
    figures: dict[str, Any] = {}
    try:
        client = redis.Redis.from_url(redis_url)
        store = RedisEventStore(client)
        started = time.monotonic()
        logs = distinct_games(args.distinct)
        empty = used(client)
        games = write_games(store, args.games, logs, rng)
        directory = DirectoryIndex(client)
        with private_postgres() as pg:
            archive = PostgresArchive(pg.url)
            archiver = Archiver(client, archive, after_ms=0, batch=args.batch)
            directory.catch_up()
            archiver.due_index.follower.catch_up()
            trim(client)
            full = used(client)
            print(f"{args.games} finished games written in {time.monotonic() - started:.0f} s")
            outcomes, archiving, reading, read = archive_interleaved(client, archiver)
            figures["archive_rate"] = outcomes["archived"] / archiving
            figures["read_rate"] = read / reading
            directory.catch_up()
            trim(client)
            left = used(client)
            figures["outcomes"] = dict(outcomes)
            figures["before"] = (full - empty) / args.games
            figures["after"] = (left - empty) / args.games
            figures["pg_bytes"] = archive.size() / archive.count()
            figures["pg_parts"] = {k: v / archive.count() for k, v in archive.sizes().items()}
            # SQLite: some of them back into Redis, then into a SQLite file.
            some = games[: args.sqlite]
            started = time.perf_counter()
            for game_id in some:
                archiver.restore(game_id, schedule=False)
            figures["restore_rate"] = len(some) / (time.perf_counter() - started)
            archive.close()
        lite = SqliteArchive(Path(workdir) / "archive.sqlite3")
        again = Archiver(client, lite, after_ms=0)
        pipe = client.pipeline(transaction=False)
        for game_id in some:
            pipe.zadd(archive_due_key(index_shard(game_id)), {game_id: 0})
        pipe.execute()
        started = time.perf_counter()
        lite_outcomes = again.run(limit=len(some))
        figures["sqlite_rate"] = lite_outcomes["archived"] / (time.perf_counter() - started)
        figures["sqlite_bytes"] = lite.size() / lite.count()
        lite.close()
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(redis_dir, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"outcomes: {figures['outcomes']}")
    parts = ", ".join(f"{k} {v:,.0f}" for k, v in figures["pg_parts"].items())
    print(f"PostgreSQL bytes per game by part: {parts}")
    print(f"Redis used_memory per finished game: {figures['before']:,.0f} bytes before "
          f"archiving, {figures['after']:,.0f} after")  # fmt: skip
    print(
        f"archive: PostgreSQL {figures['pg_bytes']:,.0f} bytes/game, "
        f"{figures['archive_rate']:.0f} games/s; plain XRANGE reads {figures['read_rate']:.0f} "
        f"games/s; SQLite {figures['sqlite_bytes']:,.0f} bytes/game, "
        f"{figures['sqlite_rate']:.0f} games/s; restore {figures['restore_rate']:.0f} games/s"
    )
    check("archive: Redis bytes per archived game", figures["after"], at_most=1_024, unit="B")
    check("archive: PostgreSQL bytes per game", figures["pg_bytes"], at_most=4_096, unit="B")
    check("archive: games lost or left unarchived",
          args.games - figures["outcomes"].get("archived", 0), at_most=0)  # fmt: skip
    judge("archive: archiving rate / XRANGE read rate", figures["archive_rate"],
          figures["read_rate"], min_ratio=0.25, unit="games/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
