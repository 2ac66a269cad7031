"""What the proxy costs a turn, and turn latency with 100 idle connections open to the public
port (`make bench`), loopback.

The command and query services under their gunicorn configs with nginx from deploy/nginx/ in
front, as deployed: clients connect to the API's one public URL, whose server routes each
request by path and method (public.conf). Client processes play prepared turns (POST
/games/{id}/turns) at a fixed rate (`prepare_games` and `run_load` of bench_command.py):
straight to the command service's own port (gunicorn), then through the public URL with no
other connections open, then through it with 100 connections open that send nothing (kept at
100: one nginx closes after client_header_timeout is opened again). The phases alternate,
`--rounds` times each; the best round of each is shown.

Targets (ratios in the same run, tests/bench/targets.py): turn p99 through the one public URL
≤ 1.1 × straight to the command service's port (issue 33); turn p99 with the idle connections
≤ 1.5 × without. nginx is installed when missing and this runs as root (deploy/local/host.py);
without it there is no public URL (both figures missed) and the idle phase goes straight to
gunicorn, whose workers each wait CLIENT_TIMEOUT on an idle connection.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import nginx as private_nginx  # noqa: E402
from tests.bench.bench_command import CONFIG, run_load  # noqa: E402
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
    except Exception as exc:  # a stalled phase is a figure too
        print(f"  (a phase against {base} failed: {type(exc).__name__}: {exc})")
        return None


def best(runs: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The round with the lowest p99 (None if any round failed)."""
    if any(r is None for r in runs):
        return None
    return min((r for r in runs if r is not None), key=lambda r: r["p99_ms"])


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description="turn p99 with idle connections open")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase")
    parser.add_argument("--rate", type=float, default=100.0, help="turns per second, in all")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--idle", type=int, default=100, help="idle connections")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--workers", help="gunicorn workers (default: the config's)")
    parser.add_argument("--no-proxy", action="store_true", help="public port = gunicorn's")
    args = parser.parse_args()

    nginx_binary, why = (None, "--no-proxy") if args.no_proxy else private_nginx.find_nginx()
    redis_proc, redis_url, workdir = start_redis()
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}  # no scoring worker here: no tasks
    workers = args.workers or os.environ.get("WEB_CONCURRENCY") or str((os.cpu_count() or 2) + 1)
    started: list[subprocess.Popen[bytes]] = []
    direct_runs: list[dict[str, Any] | None] = []
    quiet_runs: list[dict[str, Any] | None] = []
    idle_runs: list[dict[str, Any] | None] = []
    reopened = 0
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
                if public != direct:
                    direct_runs.append(measure(direct, args, redis_url))
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
    rows = (
        [("command port (gunicorn), no idle connections", best(direct_runs))] if direct_runs else []
    )
    rows += [
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
    quiet, idle_best, straight = best(quiet_runs), best(idle_runs), best(direct_runs)
    # A failed phase is a figure not measured: judged as a miss (as is no proxy at all).
    judge(
        "POST /turns p99 via the one public URL / command port",
        None if quiet is None or not direct_runs else quiet["p99_ms"],
        0.0 if straight is None else straight["p99_ms"],
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
