"""Cheap reads stay cheap while others ask for costly work (`make bench`; issue 32, findings 4
and 8): two loads, each measured beside the same phase without it, in the same run.

1. Hints (finding 4). The command service under its gunicorn config (sync workers), the bot
   worker as a real prefork Celery process (one child), a private Redis (the broker on db 1).
   Six client processes, each with an API key of its own, loop "new game (hints on), mcts
   hint": `POST /games`, then `GET /games/{id}/hint?level=mcts` asked again after its
   `retry_after_ms` until the 200. Meanwhile one client reads `GET /games/{id}/turn` at a
   fixed rate; idle phases (no loops) alternate with loaded ones, `--rounds` times. Before
   the hints moved to the bot worker, each mcts hint held a sync web worker for
   HINT_THINK_MS: the issue measured GET /turn p95 going from 9 ms to 2.8 s.
   Target: /turn p95 with the loops ≤ `HINT_TARGET` × idle (the bot worker's search still
   takes a core of this 2-core machine from the web workers).

2. Costly public reads (finding 8). The command and query services behind nginx from
   deploy/nginx/ with its per-client limits (deploy/local/nginx_conf.py LIMITS: costly reads
   10 r/s a client address, burst 50), a finished 72-tile game stored. First the most
   expensive public read of that game is found, by the median time of a few single requests
   of each candidate (board.svg, the event log, the board and the viewer's page of a past
   turn). Then 16 client processes, each from its own loopback address (127.0.0.2-17, so
   nginx counts 16 clients), hammer it at `--hammer-rate` requests a second each (twice what
   the limit lets through), while one client from 127.0.0.1 reads the plain `GET
   /games/{id}/board` at a fixed rate. Target: its p99 ≤ 2x the idle phase's (the issue's).

Phases alternate, idle first; each figure is the best round of each kind (as
bench_proxy.py), all rounds printed.

    .venv/bin/python tests/bench/bench_costly.py [--seconds 6] [--rounds 2] [--only hints|reads]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import shutil
import statistics
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from deploy.local.nginx_conf import LIMITS  # noqa: E402
from services.redis_store.apikeys import ApiKeys  # noqa: E402
from tests import nginx as private_nginx  # noqa: E402
from tests.bench.bench_board import stored_game  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.integration.workers import BOTS_APP, celery_env, running, worker  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
QUERY = ("services.query.wsgi:app", "deploy/gunicorn/query.py")
HINT_TARGET = 4.0  # /turn p95 with six "new game, mcts hint" loops / idle (the docstring)
READ_TARGET = 2.0  # /board p99 with 16 clients hammering the costliest read / idle (issue 32)
HINT_GAME = {"players": [{"name": "ann"}, {"name": "bob"}], "seat_order": [0, 1],
             "ruleset": {"hints": True}}  # fmt: skip


def connection(base: str, source: str | None = None) -> http.client.HTTPConnection:
    host, port = base.removeprefix("http://").split(":")
    address = None if source is None else (source, 0)
    return http.client.HTTPConnection(host, int(port), timeout=30, source_address=address)


def request(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """One request on a kept-alive connection: (status, decoded JSON or None, headers)."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    conn.request(method, path, body=data, headers={**sent, **(headers or {})})
    reply = conn.getresponse()
    raw = reply.read()
    kind = reply.getheader("Content-Type") or ""
    decoded = json.loads(raw) if raw and "json" in kind else None
    return reply.status, decoded, dict(reply.getheaders())


def paced_reads(base: str, path: str, seconds: float, rate: float) -> list[float]:
    """GET `path` at `rate` a second for `seconds` on one connection: the latencies (ms)."""
    conn = connection(base)
    samples: list[float] = []
    deadline, next_at = time.monotonic() + seconds, time.monotonic()
    try:
        while time.monotonic() < deadline:
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            next_at += 1 / rate
            t0 = time.perf_counter()
            status, _, _ = request(conn, "GET", path)
            samples.append((time.perf_counter() - t0) * 1000)
            assert status == 200, (path, status)
    finally:
        conn.close()
    return samples


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def phase(samples: list[float], q: float) -> str:
    """A phase's reads in words: how many, their p50 and the `q` quantile."""
    return (f"{len(samples)} reads, p50 {statistics.median(samples):.2f} ms, "
            f"p{round(q * 100)} {pct(samples, q):.2f} ms")  # fmt: skip


# -- 1. hints ---------------------------------------------------------------------------------
def hint_loop(args: tuple[str, str, float]) -> dict[str, Any]:
    """Loop "new game, mcts hint" until `deadline`: the hints answered, the seconds from each
    ask to its 200, and the statuses seen."""
    base, key, deadline = args
    conn = connection(base)
    statuses: Counter[int] = Counter()
    waits: list[float] = []
    while time.monotonic() < deadline:
        status, created, _ = request(conn, "POST", "/games", HINT_GAME, {"X-Api-Key": key})
        statuses[status] += 1
        if status != 201:
            time.sleep(0.5)
            continue
        path = f"/games/{created['game_id']}/hint?level=mcts"
        auth = {"Authorization": f"Bearer {created['players'][0]['token']}"}
        asked = time.perf_counter()
        while time.monotonic() < deadline + 15:  # a hint asked is waited for
            status, body, headers = request(conn, "GET", path, headers=auth)
            statuses[status] += 1
            if status == 200:
                waits.append(time.perf_counter() - asked)
                break
            if status == 202:
                time.sleep(int(body["retry_after_ms"]) / 1000)
            else:  # a budget (429) or the worker (503): as a client would, wait and ask again
                time.sleep(float(headers.get("Retry-After", "1")))
    conn.close()
    return {"answered": len(waits), "waits": waits, "statuses": dict(statuses)}


def hints_phase(
    base: str, turn_path: str, keys: list[str], args: argparse.Namespace
) -> tuple[list[float], list[dict[str, Any]]]:
    """/turn latencies (ms) with the hint loops running (none when `keys` is empty)."""
    if not keys:
        return paced_reads(base, turn_path, args.seconds, args.rate), []
    deadline = time.monotonic() + args.seconds + 0.5
    with multiprocessing.Pool(len(keys)) as pool:
        loops = pool.map_async(hint_loop, [(base, key, deadline) for key in keys])
        time.sleep(0.5)  # the loops under way
        samples = paced_reads(base, turn_path, args.seconds, args.rate)
        return samples, loops.get(timeout=args.seconds + 60)


def bench_hints(args: argparse.Namespace) -> None:
    redis_proc, url, workdir = start_redis()
    env = celery_env(url, NOTIFY_MS="0")
    rounds: dict[str, list[float]] = {"idle": [], "loops": []}
    loops_done: list[dict[str, Any]] = []
    try:
        client = redis.Redis.from_url(url)
        keys = [ApiKeys(client).create(f"loop {i}")[1] for i in range(args.loops)]
        reader = ApiKeys(client).create("reader")[1]
        bots = worker(env, "hints", concurrency=1, pool="prefork", queues="bots", app=BOTS_APP)
        with ExitStack() as stack:
            base = stack.enter_context(gunicorn(*COMMAND, env, args.workers))
            stack.enter_context(running(bots))
            conn = connection(base)
            status, created, _ = request(conn, "POST", "/games", HINT_GAME, {"X-Api-Key": reader})
            conn.close()
            assert status == 201, created
            turn_path = f"/games/{created['game_id']}/turn"
            paced_reads(base, turn_path, 0.5, args.rate)  # warm-up
            for _ in range(args.rounds):
                for kind in ("idle", "loops"):
                    samples, done = hints_phase(
                        base, turn_path, keys if kind == "loops" else [], args
                    )
                    rounds[kind].append(pct(samples, 0.95))
                    loops_done += done
                    print(f"  {kind:<6} GET /turn: {phase(samples, 0.95)}")
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    answered = sum(d["answered"] for d in loops_done)
    waits = [w for d in loops_done for w in d["waits"]]
    statuses: Counter[int] = Counter()
    for d in loops_done:
        statuses.update(d["statuses"])
    print(
        f"{args.loops} loops of 'new game, mcts hint' ({args.workers} sync web workers, one bot "
        f"worker child): {answered} hints answered, ask to 200 p50 "
        f"{statistics.median(waits) * 1000 if waits else 0:.0f} ms, "
        f"max {max(waits) * 1000 if waits else 0:.0f} ms; answers {dict(sorted(statuses.items()))}"
    )
    check("hints answered by the bot worker under the loops", answered, at_least=1, always=True)
    judge(
        f"GET /turn p95 with {args.loops} 'new game, hint' loops / idle",
        min(rounds["loops"]),
        min(rounds["idle"]),
        max_ratio=HINT_TARGET,
    )


# -- 2. costly reads --------------------------------------------------------------------------
def hammer(args: tuple[str, str, float, float, str]) -> dict[int, int]:
    """GET `path` at `rate` a second from `source` until `deadline`: the statuses."""
    base, path, deadline, rate, source = args
    conn = connection(base, source)
    statuses: Counter[int] = Counter()
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        next_at += 1 / rate
        conn.request("GET", path)  # read, never decoded: the clients' CPU is not the figure
        reply = conn.getresponse()
        reply.read()
        statuses[reply.status] += 1
        if (reply.getheader("Connection") or "").lower() == "close":
            conn.close()
            conn = connection(base, source)
    conn.close()
    return dict(statuses)


def costliest(base: str, game_id: str) -> tuple[str, dict[str, float]]:
    """The public read of the game that takes longest (median of a few), and each one's."""
    candidates = [
        f"/games/{game_id}/board.svg",
        f"/games/{game_id}/events",
        f"/games/{game_id}/board?turn=36",
        f"/games/{game_id}/view?turn=36",
    ]
    conn = connection(base, "127.0.0.200")  # its own address: the limit spent here is its own
    times: dict[str, float] = {}
    for path in candidates:
        took = []
        for _ in range(5):
            t0 = time.perf_counter()
            status, _, _ = request(conn, "GET", path)
            took.append((time.perf_counter() - t0) * 1000)
            assert status == 200, (path, status)
        times[path] = statistics.median(took)
    conn.close()
    return max(times, key=lambda p: times[p]), times


def hammered(
    public: str, board: str, path: str, sources: list[str], args: argparse.Namespace
) -> tuple[list[float], Counter[int]]:
    """Plain /board latencies (ms) while `sources` hammer `path` through `public`."""
    statuses: Counter[int] = Counter()
    deadline = time.monotonic() + args.seconds + 1.0
    with multiprocessing.Pool(len(sources)) as pool:
        jobs = [(public, path, deadline, args.hammer_rate, s) for s in sources]
        running_jobs = pool.map_async(hammer, jobs)
        time.sleep(0.5)
        samples = paced_reads(public, board, args.seconds, args.rate)
        for counts in running_jobs.get(timeout=args.seconds + 60):
            statuses.update(counts)
    return samples, statuses


def bench_reads(args: argparse.Namespace) -> None:
    binary, why = private_nginx.find_nginx()
    name = f"plain /board p99 with {args.hammerers} clients on the costliest read / idle"
    if binary is None:
        print(f"costly reads: no nginx ({why}): not measured")
        judge(name, None, 0.0, max_ratio=READ_TARGET)
        return
    redis_proc, url, workdir = start_redis()
    env = {"REDIS_URL": url, "NOTIFY_MS": "0"}
    kinds = ("idle", "hammer", "per-client only")
    rounds: dict[str, list[float]] = {kind: [] for kind in kinds}
    statuses: dict[str, Counter[int]] = {kind: Counter() for kind in kinds}
    try:
        game_id = stored_game(url)
        with ExitStack() as stack:
            command = stack.enter_context(gunicorn(*COMMAND, env, 1))
            query = stack.enter_context(gunicorn(*QUERY, env, args.workers))
            upstream = {"command": command, "query": query}
            upstream = {k: v.removeprefix("http://") for k, v in upstream.items()}
            public = stack.enter_context(private_nginx.nginx(upstream))["public"]
            # The same proxy without the cap on every client's costly reads together: what
            # the per-client limits alone let through (the baseline of the cap).
            uncapped = {"CC_COSTLY_TOTAL_RATE": "100000r/s", "CC_COSTLY_TOTAL_BURST": "100000"}
            loose = stack.enter_context(private_nginx.nginx(upstream, limits=uncapped))["public"]
            board = f"/games/{game_id}/board"
            paced_reads(public, board, 0.5, args.rate)  # warm-up: the game projected
            path, times = costliest(public, game_id)
            shown = ", ".join(f"{p.split('/', 3)[-1]} {ms:.1f} ms" for p, ms in times.items())
            print(f"public reads of a finished 72-tile game, median of 5: {shown}")
            sources = [f"127.0.0.{i}" for i in range(2, 2 + args.hammerers)]
            for _ in range(args.rounds):
                for kind in kinds:
                    if kind == "idle":
                        samples = paced_reads(public, board, args.seconds, args.rate)
                    else:
                        via = public if kind == "hammer" else loose
                        samples, seen = hammered(via, board, path, sources, args)
                        statuses[kind].update(seen)
                    rounds[kind].append(pct(samples, 0.99))
                    print(f"  {kind:<15} GET /board: {phase(samples, 0.99)}")
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    for kind in kinds[1:]:
        limit = f"{LIMITS['CC_COSTLY_RATE']} burst {LIMITS['CC_COSTLY_BURST']} a client"
        if kind == "hammer":
            limit += (f", {LIMITS['CC_COSTLY_TOTAL_RATE']} burst "
                      f"{LIMITS['CC_COSTLY_TOTAL_BURST']} in all")  # fmt: skip
        print(
            f"{kind}: {args.hammerers} clients (one address each) on {path.split('/', 3)[-1]} "
            f"at {args.hammer_rate:g} r/s each through nginx ({limit}): answers "
            f"{dict(sorted(statuses[kind].items()))}; best /board p99 {min(rounds[kind]):.1f} ms"
        )
    check("costly reads refused by the proxy's limits (429)", statuses["hammer"].get(429, 0),
          more_than=0)  # fmt: skip
    judge(name, min(rounds["hammer"]), min(rounds["idle"]), max_ratio=READ_TARGET)


def main() -> int:
    parser = argparse.ArgumentParser(description="cheap reads beside costly work")
    parser.add_argument("--seconds", type=float, default=size(8.0, 1.0), help="per phase")
    parser.add_argument("--rounds", type=int, default=size(3, 1), help="idle/loaded rounds")
    parser.add_argument("--rate", type=float, default=size(50.0, 20.0), help="cheap reads/s")
    parser.add_argument("--loops", type=int, default=size(6, 2), help="hint loops")
    parser.add_argument("--hammerers", type=int, default=size(16, 3), help="costly clients")
    parser.add_argument("--hammer-rate", type=float, default=size(20.0, 20.0),
                        help="each costly client's requests a second")  # fmt: skip
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (web)")
    parser.add_argument("--only", choices=("hints", "reads"), help="one of the two loads")
    args = parser.parse_args()
    if args.only != "reads":
        bench_hints(args)
    if args.only != "hints":
        bench_reads(args)
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
