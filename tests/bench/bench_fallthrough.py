"""Reads of archived games (`make bench`, issue 28's second half): the first `/board` of an
archived game against a hot game's first `/board`, and later views of each.

Real parts: a private Redis; the archive on a private PostgreSQL (tests/postgres_server.py)
when one can start here, else the embedded SQLite default (said in the output); one query
instance as deployed (gunicorn with deploy/gunicorn/query.py, 1 worker, so the timings are
one process's), read over one keep-alive connection, after a warm-up on two other games
(one of each). `--games` finished 2-4 player games (tests/archive_games.py `play`: appended
turn by turn and scored as the services do) of which every other one is then archived
(services/archive's archiver): only its tombstone is left in Redis.

Figures, round trips on loopback (client side), archived and hot games interleaved so both
see the same machine load:
- first view: each game's first `GET /games/{id}/board` in the process (a hot game: the
  whole move stream read and folded; an archived one: the tombstone found, the copy read
  from the archive, unpacked and folded) — p99 ≤ 3× the hot games' (tests/bench/targets.py);
- later views: `--views` more of each (the projector's cache; an archived game's log kept
  in memory: no Redis read at all) — p99 ≤ 1.1× the hot games'.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "shared"))

import redis  # noqa: E402

from services.archive import open_archive  # noqa: E402
from services.archive.archiver import Archiver  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.directory_index import DirectoryIndex  # noqa: E402
from tests.archive_games import play  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.postgres_server import postgres_missing, start_postgres  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

CONFIG = "deploy/gunicorn/query.py"
FIRST_MAX, LATER_MAX = 3.0, 1.1


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(values: list[float]) -> str:
    return f"p50 {statistics.median(values):6.2f} ms  p99 {pct(values, 0.99):6.2f} ms"


def timed(conn: http.client.HTTPConnection, path: str) -> float:
    started = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    elapsed = (time.perf_counter() - started) * 1000
    if resp.status != 200:
        raise RuntimeError(f"GET {path}: {resp.status} {body[:200]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=size(400, 6), help="games, half archived")
    parser.add_argument("--views", type=int, default=size(10, 2), help="later views per game")
    args = parser.parse_args()
    proc, url, workdir = start_redis()
    postgres = None if postgres_missing() else start_postgres()
    sqlite_dir = tempfile.mkdtemp(prefix="cc-fallthrough-")
    archive_url = postgres.url if postgres else f"sqlite:///{sqlite_dir}/archive.sqlite3"
    try:
        client = redis.Redis.from_url(url)
        store = RedisEventStore(client)
        warm = [play(store, seed) for seed in (10_000, 10_001)]  # one hot, one archived
        games = [play(store, seed) for seed in range(args.games)]
        archived = {*games[1::2], warm[1]}
        archive = open_archive(archive_url)
        archiver = Archiver(client, archive, after_ms=0)
        DirectoryIndex(client).catch_up()  # as `Archiver.run` does first
        archiver.due_index.follower.catch_up()
        now = int(time.time() * 1000) + 1
        due = [(s, g) for s, g in archiver.due(now, 10 * args.games) if g in archived]
        outcomes = archiver.archive_games(due, now)  # the hot half stays
        archive.close()
        assert outcomes == {"archived": len(archived)}, outcomes
        archived.discard(warm[1])
        env = {"REDIS_URL": url, "ARCHIVE_URL": archive_url}
        with gunicorn("services.query.wsgi:app", CONFIG, env, workers=1) as base:
            host, port = base.removeprefix("http://").split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            for game_id in warm:  # the worker's first requests (imports, pools) unmeasured
                for _ in range(3):
                    timed(conn, f"/games/{game_id}/board")
            first: dict[bool, list[float]] = {True: [], False: []}
            later: dict[bool, list[float]] = {True: [], False: []}
            for game_id in games:  # hot and archived alternate
                first[game_id in archived].append(timed(conn, f"/games/{game_id}/board"))
            for _ in range(args.views):
                for game_id in games:
                    later[game_id in archived].append(timed(conn, f"/games/{game_id}/board"))
            conn.close()
    finally:
        if postgres is not None:
            postgres.stop("immediate")
            shutil.rmtree(postgres.datadir, ignore_errors=True)
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(sqlite_dir, ignore_errors=True)

    where = "PostgreSQL" if postgres else f"SQLite (no PostgreSQL here: {postgres_missing()})"
    print(f"/board of {len(games) - len(archived)} hot and {len(archived)} archived games "
          f"(archive: {where}; 1 gunicorn worker, round trips)")  # fmt: skip
    print(f"  first view, hot        {line(first[False])}")
    print(f"  first view, archived   {line(first[True])}")
    print(f"  later views, hot       {line(later[False])}")
    print(f"  later views, archived  {line(later[True])}")
    judge("fallthrough: archived first /board p99 / hot first", pct(first[True], 0.99),
          pct(first[False], 0.99), max_ratio=FIRST_MAX)  # fmt: skip
    judge("fallthrough: archived later /board p99 / hot later", pct(later[True], 0.99),
          pct(later[False], 0.99), max_ratio=LATER_MAX)  # fmt: skip
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
