"""Command instances behind the proxy (`make bench`), loopback only, bounded in time.

nginx routes `/games/<id>/…` to one instance by a consistent hash of the game id
(deploy/nginx/), but it cannot pick a worker inside an instance. The deployed shape is one sync
worker per instance with the cached state trusted (`TRUST_CACHE`, on by default): the worker
serving a game serves all of its turns. Measured, with the same client load (prepared games,
`run_load` of bench_command.py) through the proxy, the same number of gunicorn worker
processes (cores + 1) in every row:

- baseline: 1 instance × (cores + 1) workers, `TRUST_CACHE=0`: the kernel spreads a game's
  turns over the workers, each reads the stream before it decides (no routing to a worker);
- the same instance with `TRUST_CACHE` on: what the default costs where requests of a game are
  spread (refused appends, then a catch-up), shown, not judged;
- (cores + 1) instances × 1 worker, `TRUST_CACHE` on (the deployed shape), and with it off
  (what trusting the cache adds on top of the routing).

Judged, the deployed shape against the baseline of the same run: server CPU per turn (gunicorn
masters and workers plus redis-server) ≤ `TARGET_CPU_RATIO`x, and **events read per turn**
(move events read from the stream to catch a cached state up, the service's
`carcassonne_events_read_total` on /metrics, counted from the clock's start) ≤
`TARGET_READ_RATIO`x the baseline's, and as a count ≤ 1.2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.bench_command import CONFIG, run_load  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.nginx import find_nginx, nginx  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

READ = re.compile(r"^carcassonne_events_read_total ([0-9.e+]+)$", re.M)
TARGET_EVENTS_READ = 1.2
TARGET_CPU_RATIO = 0.95  # the deployed shape's CPU per turn against the baseline's
TARGET_READ_RATIO = 0.05  # its events read per turn against the baseline's (measured: ~0.01)


def events_read(bases: list[str]) -> float:
    """Move events the instances have read to catch cached states up, so far."""
    total = 0.0
    for base in bases:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
            total += sum(float(v) for v in READ.findall(resp.read().decode()))
    return total


@contextlib.contextmanager
def instances(
    count: int, workers: int, env: dict[str, str], started: list[subprocess.Popen[bytes]]
) -> Iterator[list[str]]:
    """`count` command instances (gunicorn, `workers` each); yields their base URLs."""
    with contextlib.ExitStack() as stack:
        bases = [
            stack.enter_context(
                gunicorn("services.command.wsgi:app", CONFIG, env, workers, started)
            )
            for _ in range(count)
        ]
        yield bases


def measure(
    label: str,
    count: int,
    workers: int,
    trust_cache: bool,
    redis_url: str,
    redis_pid: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One configuration behind the proxy: the best of `args.rounds` peak runs."""
    env = {"REDIS_URL": redis_url, "TRUST_CACHE": "1" if trust_cache else "0", "NOTIFY_MS": "0"}
    started: list[subprocess.Popen[bytes]] = []
    runs: list[dict[str, Any]] = []
    with instances(count, workers, env, started) as bases:
        hosts = [b.removeprefix("http://") for b in bases]
        with nginx({"command": hosts}) as public:
            pids = (*(p.pid for p in started), redis_pid)
            # Counted from the clock's start: creating the prepared games folds each one where
            # POST /games landed (its answer shows the turn), which is not a turn's cost.
            read0: list[float] = []

            def started_reading() -> None:
                read0.append(events_read(bases))

            for _ in range(args.rounds):
                run = run_load(public["public"], "turns", args.clients, args.seconds, 0,
                               redis_url, pids, on_start=started_reading)  # fmt: skip
                run["events_read_per_turn"] = (events_read(bases) - read0[-1]) / run["requests"]
                runs.append(run)
    best = max(runs, key=lambda r: r["per_s"])
    best["label"] = label
    best["server_cpu_ms"] = min(r["server_cpu_ms"] for r in runs)
    best["events_read_per_turn"] = max(r["events_read_per_turn"] for r in runs)
    return best


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description="command instances behind the proxy")
    parser.add_argument("--seconds", type=float, default=size(5.0, 0.5), help="length of each run")
    parser.add_argument(
        "--clients", type=int, default=size(8, 2), help="concurrent client processes"
    )
    parser.add_argument("--rounds", type=int, default=size(2, 1), help="runs per configuration")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    binary, why = find_nginx()
    if binary is None:
        print(f"bench_instances: skipped, {why}")
        return 0

    cores = os.cpu_count() or 2
    processes = cores + 1  # gunicorn workers in every row: one per core plus one for the waits
    redis_proc, redis_url, workdir = start_redis()
    try:
        rows = [
            measure(f"1 instance x {processes} workers, TRUST_CACHE=0", 1, processes, False,
                    redis_url, redis_proc.pid, args),
            measure(f"1 instance x {processes} workers, TRUST_CACHE=1", 1, processes, True,
                    redis_url, redis_proc.pid, args),
            measure(f"{processes} instances x 1 worker, TRUST_CACHE=1", processes, 1, True,
                    redis_url, redis_proc.pid, args),
            measure(f"{processes} instances x 1 worker, TRUST_CACHE=0", processes, 1, False,
                    redis_url, redis_proc.pid, args),
        ]  # fmt: skip
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(rows))
        return 0
    base, spread, deployed, untrusted = rows
    print(
        f"command instances behind nginx (consistent hash of the game id), {args.clients} "
        f"client processes, {args.seconds:g} s per run, best of {args.rounds}, loopback, "
        f"{cores} cores"
    )
    print(f"{'':<44}{'turns/s':>9}{'p99 ms':>8}{'server CPU ms/turn':>20}{'events read/turn':>18}")
    for row in rows:
        print(
            f"{row['label']:<44}{row['per_s']:>9.0f}{row['p99_ms']:>8.1f}"
            f"{row['server_cpu_ms']:>20.3f}{row['events_read_per_turn']:>18.2f}"
        )
    print("(server CPU: gunicorn masters and workers plus redis-server, per turn)")
    print(
        f"TRUST_CACHE=1 with a game's turns spread over {processes} workers: "
        f"{spread['server_cpu_ms'] / base['server_cpu_ms']:.2f}x the baseline's CPU per turn; "
        f"behind the hash, trusting the cache: "
        f"{deployed['server_cpu_ms'] / untrusted['server_cpu_ms']:.2f}x CPU per turn, "
        f"{deployed['per_s'] / untrusted['per_s']:.2f}x turns/s"
    )
    label = f"{processes} instances x 1 worker, trusted cache"
    judge(f"CPU per turn, {label}", deployed["server_cpu_ms"], base["server_cpu_ms"],
          max_ratio=TARGET_CPU_RATIO)  # fmt: skip
    judge(f"events read per turn, {label}", deployed["events_read_per_turn"],
          base["events_read_per_turn"], max_ratio=TARGET_READ_RATIO, unit="")  # fmt: skip
    check(f"events read per turn, {label}", deployed["events_read_per_turn"],
          at_most=TARGET_EVENTS_READ)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
