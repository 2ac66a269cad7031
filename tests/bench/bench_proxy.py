"""What the proxy costs a turn, and turn latency with 100 idle connections open to the public
port (`make bench`), loopback.

The command and query services under their gunicorn configs with nginx from deploy/nginx/ in
front, as deployed: clients connect to the API's one public URL, whose server routes each
request by path and method (public.conf). Client processes play prepared turns (POST
/games/{id}/turns) at a fixed rate (`prepare_games` and `run_load` of bench_command.py).

What the public URL costs a turn is measured paired: each client alternates, turn by turn,
between a game played straight at the command service's own port (gunicorn) and a game played
through the public URL, so both see the same load of a shared machine; the samples of
`--rounds` such phases are pooled. Then turns through the public URL with no other connections
open, and with 100 connections open that send nothing (kept at 100: one nginx closes after
client_header_timeout is opened again); these two phases alternate, `--rounds` times each, and
the best round of each is shown.

Targets (ratios in the same run, tests/bench/targets.py): turn p99 through the one public URL
≤ 1.1 × straight to the command service's port (issue 33); turn p99 with the idle connections
≤ 1.5 × without. nginx is installed when missing and this runs as root (deploy/local/host.py);
without it there is no public URL (both figures missed) and the idle phase goes straight to
gunicorn, whose workers each wait CLIENT_TIMEOUT on an idle connection.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import nginx as private_nginx  # noqa: E402
from tests.bench.bench_command import (  # noqa: E402
    CONFIG,
    SEEDS,
    TURNS_PER_GAME,
    Turn,
    _prepare,
    post_raw,
    run_load,
)
from tests.bench.smoke import SMOKE, size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

QUERY_CONFIG = "deploy/gunicorn/query.py"
TARGET = 1.5  # p99 with idle connections / p99 without
PROXY_TARGET = 1.1  # p99 through the public URL / straight to the command service


class IdleConnections:
    """`count` connections to `base` that send nothing, kept open (reopened if the server
    closes one) until the block ends."""

    def __init__(self, base: str, count: int) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.count = count
        self.reopened = 0
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep, daemon=True)

    def __enter__(self) -> IdleConnections:
        self._socks = [self._open() for _ in range(self.count)]
        self._keeper.start()
        return self

    def _open(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=5)
        sock.setblocking(False)  # the keeper only peeks: never wait
        return sock

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._keeper.join(timeout=5)
        for sock in self._socks:
            sock.close()

    def _keep(self) -> None:
        while not self._stop.wait(0.25):
            for i, sock in enumerate(self._socks):
                try:
                    closed = sock.recv(1, socket.MSG_PEEK) == b""
                except BlockingIOError:
                    continue  # open, nothing to read: as it should be
                except OSError:
                    closed = True
                if closed:
                    sock.close()
                    self._socks[i] = self._open()
                    self.reopened += 1


def measure(base: str, args: argparse.Namespace, redis_url: str) -> dict[str, Any] | None:
    """One timed phase of turns at the fixed rate; None if a turn failed or timed out."""
    try:
        return run_load(base, "turns", args.clients, args.seconds, args.rate, redis_url)
    except Exception as exc:  # a stalled phase is a figure too (in smoke mode, a failure)
        if SMOKE:
            raise
        print(f"  (a phase against {base} failed: {type(exc).__name__}: {exc})")
        return None


def _paired_client(
    args: tuple[str, str, float, float, list[list[Turn]], list[list[Turn]]],
) -> tuple[list[float], list[float]]:
    """Turns at `rate` per second until `deadline`, alternately from the games played straight
    at the command service and from those played through the public URL; the seconds each
    took, (straight, public)."""
    direct, public, deadline, rate, direct_games, public_games = args
    queues = [[t for g in games for t in g] for games in (direct_games, public_games)]
    samples: tuple[list[float], list[float]] = ([], [])
    next_at, sent = time.monotonic(), 0
    while time.monotonic() < deadline:
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        next_at += 1 / rate
        side = sent % 2
        if len(samples[side]) == len(queues[side]):
            raise RuntimeError("a client ran out of prepared games")
        path, auth, body = queues[side][len(samples[side])]
        t0 = time.perf_counter()
        status, reply = post_raw((direct, public)[side], path, body, auth)
        samples[side].append(time.perf_counter() - t0)
        assert status == 200, reply
        sent += 1
    return samples


def paired(direct: str, public: str, args: argparse.Namespace, redis_url: str) -> list[list[float]]:
    """One paired phase: each client alternates turn by turn between a game straight at the
    command service and one through the public URL; [straight ms, public ms]."""
    per_client = args.rate / args.clients
    count = int(per_client / 2 * args.seconds / TURNS_PER_GAME * 1.5) + 2
    with multiprocessing.Pool(args.clients) as pool:
        jobs = [(base, redis_url, next(SEEDS), count) for base in (direct, public)
                for _ in range(args.clients)]  # fmt: skip
        games = pool.map(_prepare, jobs)
        deadline = time.monotonic() + args.seconds
        results = pool.map(_paired_client, [
            (direct, public, deadline, per_client, games[i], games[args.clients + i])
            for i in range(args.clients)])  # fmt: skip
    return [[s * 1000 for r in results for s in r[side]] for side in (0, 1)]


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def best(runs: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The round with the lowest p99 (None if any round failed)."""
    if any(r is None for r in runs):
        return None
    return min((r for r in runs if r is not None), key=lambda r: r["p99_ms"])


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description="turn p99 with idle connections open")
    parser.add_argument(
        "--seconds", type=float, default=size(5.0, 1.0), help="length of each phase"
    )
    parser.add_argument(
        "--rate", type=float, default=size(100.0, 40.0), help="turns per second, in all"
    )
    parser.add_argument("--clients", type=int, default=size(4, 2), help="client processes")
    parser.add_argument("--idle", type=int, default=size(100, 10), help="idle connections")
    parser.add_argument("--rounds", type=int, default=size(3, 1), help="alternating rounds")
    parser.add_argument("--workers", help="gunicorn workers (default: the config's)")
    parser.add_argument("--no-proxy", action="store_true", help="public port = gunicorn's")
    args = parser.parse_args()

    nginx_binary, why = (None, "--no-proxy") if args.no_proxy else private_nginx.find_nginx()
    redis_proc, redis_url, workdir = start_redis()
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}  # no scoring worker here: no tasks
    workers = args.workers or os.environ.get("WEB_CONCURRENCY") or str((os.cpu_count() or 2) + 1)
    started: list[subprocess.Popen[bytes]] = []
    straight_ms: list[float] = []  # the paired phases' turns straight at the command port
    public_ms: list[float] = []  # and through the public URL
    quiet_runs: list[dict[str, Any] | None] = []
    idle_runs: list[dict[str, Any] | None] = []
    reopened, failed = 0, None
    try:
        with ExitStack() as stack:
            direct = stack.enter_context(
                gunicorn("services.command.wsgi:app", CONFIG, env, int(workers), started)
            )
            public = direct
            if nginx_binary is not None:  # the whole API behind it, as deployed
                query = stack.enter_context(
                    gunicorn("services.query.wsgi:app", QUERY_CONFIG, env, 1, started)
                )
                upstream = {"command": direct, "query": query}
                upstream = {k: v.removeprefix("http://") for k, v in upstream.items()}
                public = stack.enter_context(private_nginx.nginx(upstream))["public"]
            for _ in range(args.rounds):
                if public != direct and failed is None:
                    try:
                        straight, through = paired(direct, public, args, redis_url)
                    except Exception as exc:  # a stalled phase: the figure is not measured
                        if SMOKE:
                            raise
                        failed = f"{type(exc).__name__}: {exc}"
                    else:
                        straight_ms += straight
                        public_ms += through
                quiet_runs.append(measure(public, args, redis_url))
                with IdleConnections(public, args.idle) as idle:
                    idle_runs.append(measure(public, args, redis_url))
                reopened += idle.reopened
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)

    where = "behind nginx" if nginx_binary else f"straight to gunicorn: NO nginx ({why})"
    print(
        f"command service ({workers} gunicorn workers) {where}; {args.clients} client "
        f"processes at {args.rate:g} turns/s, {args.seconds:g} s per phase, "
        f"best of {args.rounds} alternating rounds, loopback"
    )
    print(f"{'':<48}{'turns':>7}{'p50 ms':>8}{'p99 ms':>8}")
    if failed is not None:
        print(f"  (a paired phase failed: {failed})")
    for label, ms in (("paired: command port (gunicorn)", straight_ms),
                      ("paired: public URL (nginx)", public_ms)):  # fmt: skip
        if ms:
            print(f"{label:<48}{len(ms):>7}{statistics.median(ms):>8.2f}{p99(ms):>8.2f}")
    rows = [
        ("public URL (nginx), no idle connections", best(quiet_runs)),
        (f"public URL (nginx), {args.idle} idle connections open", best(idle_runs)),
    ]
    for label, row in rows:
        if row is None:
            print(f"{label:<48}{'failed (a turn got no answer in 30 s)':>23}")
        else:
            print(f"{label:<48}{row['requests']:>7}{row['p50_ms']:>8.2f}{row['p99_ms']:>8.2f}")
    if reopened:
        print(f"(idle connections the server closed and the benchmark opened again: {reopened})")
    quiet, idle_best = best(quiet_runs), best(idle_runs)
    # A failed phase is a figure not measured: judged as a miss (as is no proxy at all).
    measured = public_ms and straight_ms and failed is None
    judge(
        "POST /turns p99 via the one public URL / command port",
        p99(public_ms) if measured else None,
        p99(straight_ms) if straight_ms else 0.0,
        max_ratio=PROXY_TARGET,
    )
    judge(
        f"turn p99 with {args.idle} idle connections / none",
        None if idle_best is None else idle_best["p99_ms"],
        0.0 if quiet is None else quiet["p99_ms"],
        max_ratio=TARGET,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
