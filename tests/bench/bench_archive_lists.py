"""Lists of archived games as the archive grows (`make bench`, issue 28): `GET /games?
player_id=` (an API key's games of one player, newest first) with 100,000 archived games
against the same with 1,000.

Real parts: a private Redis (the API key, the `archive:used` mark, no hot game) and a private
PostgreSQL (tests/postgres_server.py; skipped with its reason where none can start) holding
two archive databases, one of `--small` games (default 1,000) and one of `--large` (default
100,000), filled straight through the adapter (`PostgresArchive.put_rows`, not over HTTP, to
stay fast): rows as the archiver writes them (list columns, `who` keys, a real ~3 KB packed
copy as the log — one of a few, shared: lists never read the logs), all owned by one API key
(its `k:` key is in every game's `who`). Two query instances as deployed (gunicorn with
deploy/gunicorn/query.py, 1 worker each), one on each database, asked in turn so both see
the same machine load; round trips over one keep-alive connection each, after a warm-up.

Who plays: `--players` measured players (default 4) each in `--per-player` games (default
110: more than a page) in both databases — a player's history the same size, the archive
around it 100 times larger —; the other seats drawn from a pool a third as large as the
archive. Figure (tests/bench/targets.py): the measured players' first page (`--limit`,
default 100, the service's page size), median round trip, large / small ≤ 1.5x. Printed for
information, not judged: a heavy player in 1 % of all games (10 against 1,000 games), whose
first page costs what reading and sorting all of that player's games costs (the GIN index on
`who` finds them, unordered).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "shared"))

import psycopg  # noqa: E402
import redis  # noqa: E402

from eventstore.archive import pack  # noqa: E402
from services.archive.postgres import PostgresArchive  # noqa: E402
from services.archive.sql import Row  # noqa: E402
from services.redis_store.apikeys import ApiKeys  # noqa: E402
from services.redis_store.keys import archive_used_key, new_game_id  # noqa: E402
from tests.archive_games import archived  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.postgres_server import postgres_missing, start_postgres  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

CONFIG = "deploy/gunicorn/query.py"
MAX_RATIO = 1.5
HEAVY = "p-heavy"


def rows(count: int, args: argparse.Namespace, key_id: str, logs: list[bytes]) -> list[Row]:
    """`count` archived games' rows (module docstring: who plays), oldest first."""
    rng = random.Random(count)
    measured = [f"p-{n}" for n in range(args.players)]
    spots = {n: set(rng.sample(range(count), args.per_player)) for n in range(args.players)}
    pool = max(1, count // 3)
    start = 1_790_000_000_000
    out = []
    for i in range(count):
        seats = 2 + i % 3
        ids = [f"u-{rng.randrange(pool)}" for _ in range(seats)]
        mine = [n for n in range(args.players) if i in spots[n]]
        for seat, n in enumerate(mine[:seats]):
            ids[seat] = measured[n]
        if i % 100 == 50:
            ids[-1] = HEAVY
        names = [f"Player {p}" for p in ids]
        created = start + i * 60_000 + rng.randrange(60_000)
        totals = [rng.randrange(40, 120) for _ in ids]
        record = {"names": names, "player_ids": ids, "key_id": key_id}
        out.append(Row(new_game_id(rng), "over" if i % 20 else "abandoned", created,
                       created + 1_800_000, created + 5_400_000, key_id, names, ids,
                       150 + i % 40, 40 + i % 15, logs[i % len(logs)], record, False,
                       json.dumps(totals)))  # fmt: skip
    return out


def database(url: str) -> str:
    """A new empty database on the server of `url`: its URL."""
    name = "lists_" + uuid.uuid4().hex[:10]
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def fill(url: str, made: list[Row]) -> float:
    """The rows into a fresh archive at `url` through the adapter, then ANALYZE (as
    autovacuum would after such a load); the seconds taken."""
    started = time.perf_counter()
    archive = PostgresArchive(url)
    for i in range(0, len(made), 2_000):
        archive.put_rows(made[i : i + 2_000])
    archive.close()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("VACUUM ANALYZE archived_games")
    return time.perf_counter() - started


def timed(conn: http.client.HTTPConnection, path: str, key: str) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    conn.request("GET", path, headers={"X-Api-Key": key})
    resp = conn.getresponse()
    body = resp.read()
    elapsed = (time.perf_counter() - started) * 1000
    if resp.status != 200:
        raise RuntimeError(f"GET {path}: {resp.status} {body[:200]!r}")
    return elapsed, json.loads(body)["games"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=size(1_000, 100), help="games, small")
    parser.add_argument("--large", type=int, default=size(100_000, 1_000), help="games, large")
    parser.add_argument("--players", type=int, default=4, help="measured players")
    parser.add_argument("--per-player", type=int, default=size(110, 12), help="their games")
    parser.add_argument("--limit", type=int, default=size(100, 10), help="page size")
    parser.add_argument("--rounds", type=int, default=size(60, 3), help="pages per player")
    args = parser.parse_args()
    why = postgres_missing()
    if why:
        print(f"bench_archive_lists: skipped: no PostgreSQL server: {why}")
        return 0
    proc, redis_url, workdir = start_redis()
    postgres = start_postgres()
    times: dict[str, dict[str, list[float]]] = {"small": {}, "large": {}}
    shown: dict[str, dict[str, int]] = {"small": {}, "large": {}}
    try:
        client = redis.Redis.from_url(redis_url)
        key_id, key = ApiKeys(client).create("bench")
        client.set(archive_used_key(), 1)  # lists read the archive (the archiver sets it)
        logs = [pack(archived(f"{n:032x}", n)) for n in range(5)]
        urls = {}
        for name, count in (("small", args.small), ("large", args.large)):
            urls[name] = database(postgres.url)
            made = rows(count, args, key_id, logs)
            print(f"{count:,} archived games written in {fill(urls[name], made):.0f} s")
        players = [f"p-{n}" for n in range(args.players)] + [HEAVY]
        env = {"REDIS_URL": redis_url}
        with (
            gunicorn("services.query.wsgi:app", CONFIG, {**env, "ARCHIVE_URL": urls["small"]},
                     workers=1) as small,
            gunicorn("services.query.wsgi:app", CONFIG, {**env, "ARCHIVE_URL": urls["large"]},
                     workers=1) as large,
        ):  # fmt: skip
            conns = {}
            for name, base in (("small", small), ("large", large)):
                host, port = base.removeprefix("http://").split(":")
                conns[name] = http.client.HTTPConnection(host, int(port), timeout=60)
            for name in conns:  # the workers' first requests (imports, pools) unmeasured
                for player in players:
                    timed(conns[name], f"/games?player_id={player}&limit={args.limit}", key)
            for r in range(args.rounds):
                for player in players:
                    # Each side first every other time, so neither always follows the other.
                    for name in ("small", "large") if r % 2 else ("large", "small"):
                        path = f"/games?player_id={player}&limit={args.limit}"
                        took, games = timed(conns[name], path, key)
                        times[name].setdefault(player, []).append(took)
                        shown[name][player] = len(games)
                        assert all(player in g["player_ids"] for g in games), player
            for conn in conns.values():
                conn.close()
    finally:
        postgres.stop("immediate")
        shutil.rmtree(postgres.datadir, ignore_errors=True)
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)

    measured = [p for p in players if p != HEAVY]

    def median(name: str, who: list[str]) -> float:
        return statistics.median(t for p in who for t in times[name][p])

    for name, count in (("small", args.small), ("large", args.large)):
        print(f"{count:>7,} archived games: first page by player_id, median round trip "
              f"{median(name, measured):.2f} ms (measured players, {shown[name]['p-0']} "
              f"rows); heavy player ({shown[name][HEAVY]} rows of "
              f"{count // 100} games) {median(name, [HEAVY]):.2f} ms")  # fmt: skip
    heavy = median("large", [HEAVY]) / median("small", [HEAVY])
    print(f"heavy player (1 % of all games), large / small: {heavy:.2f}x (information)")
    full_pages = [shown[name][p] for name in shown for p in measured]
    check("archive lists: measured players' first pages short of a page",
          sum(args.limit - n for n in full_pages), at_most=0, always=True)  # fmt: skip
    judge(f"archive lists: first page by player_id, {args.large:,} / {args.small:,}",
          median("large", measured), median("small", measured), max_ratio=MAX_RATIO)  # fmt: skip
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
