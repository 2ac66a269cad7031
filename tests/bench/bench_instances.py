"""Several command instances behind the proxy (`make bench`), loopback only, bounded in time.

nginx routes `/games/<id>/…` to one instance by a consistent hash of the game id
(deploy/nginx/). Measured, with the same client load (prepared games, `run_load` of
bench_command.py) through the proxy:

- 1 instance (cores + 1 workers) against 2 instances (2 workers each): turns/s, server CPU per
  turn (gunicorn masters and workers plus redis-server) and **events read per turn** (move
  events read from the stream to catch a cached state up, the service's
  `carcassonne_events_read_total` on /metrics; target ≤ 1.2 with routing: a count per turn,
  not a speed, judged as it is);
- 2 instances with the in-gunicorn game affinity (services/common/affinity.py, AFFINITY=1)
  against without it (AFFINITY=0): the figure that decides whether the affinity stays;
- one worker per instance (2 x cores instances), no affinity: the proxy's hash then routes
  each game to one process by itself.
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
from tests.bench.targets import check, exit_code  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.nginx import find_nginx, nginx  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

READ = re.compile(r"^carcassonne_events_read_total ([0-9.e+]+)$", re.M)
TARGET_EVENTS_READ = 1.2


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
    affinity: bool,
    redis_url: str,
    redis_pid: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One configuration behind the proxy: the best of `args.rounds` peak runs."""
    env = {"REDIS_URL": redis_url, "AFFINITY": "1" if affinity else "0", "NOTIFY_MS": "0"}
    started: list[subprocess.Popen[bytes]] = []
    runs: list[dict[str, Any]] = []
    with instances(count, workers, env, started) as bases:
        hosts = [b.removeprefix("http://") for b in bases]
        with nginx({"command": hosts}) as public:
            pids = (*(p.pid for p in started), redis_pid)
            for _ in range(args.rounds):
                read0 = events_read(bases)
                run = run_load(public["command"], "turns", args.clients, args.seconds, 0,
                               redis_url, pids)  # fmt: skip
                run["events_read_per_turn"] = (events_read(bases) - read0) / run["requests"]
                runs.append(run)
    best = max(runs, key=lambda r: r["per_s"])
    best["label"] = label
    best["server_cpu_ms"] = min(r["server_cpu_ms"] for r in runs)
    best["events_read_per_turn"] = max(r["events_read_per_turn"] for r in runs)
    return best


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description="command instances behind the proxy")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each run")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client processes")
    parser.add_argument("--rounds", type=int, default=2, help="runs per configuration")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    binary, why = find_nginx()
    if binary is None:
        print(f"bench_instances: skipped, {why}")
        return 0

    cores = os.cpu_count() or 2
    redis_proc, redis_url, workdir = start_redis()
    try:
        rows = [
            measure(f"1 instance x {cores + 1} workers, affinity", 1, cores + 1, True,
                    redis_url, redis_proc.pid, args),
            measure("2 instances x 2 workers, affinity", 2, 2, True,
                    redis_url, redis_proc.pid, args),
            measure("2 instances x 2 workers, no affinity", 2, 2, False,
                    redis_url, redis_proc.pid, args),
            # The proxy as the only affinity: one worker per instance, each its own ring point.
            measure(f"{2 * cores} instances x 1 worker, no affinity", 2 * cores, 1, False,
                    redis_url, redis_proc.pid, args),
        ]  # fmt: skip
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(rows))
        return 0
    one, two, plain, single = rows
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
    print(f"events read per turn, baseline 1 instance: {one['events_read_per_turn']:.2f}")
    check(
        "events read per turn, 2 instances with routing",
        two["events_read_per_turn"],
        at_most=TARGET_EVENTS_READ,
    )
    print(
        f"CPU per turn, 2 instances / 1 instance: "
        f"{two['server_cpu_ms'] / one['server_cpu_ms']:.2f}x"
    )
    saved = plain["server_cpu_ms"] - two["server_cpu_ms"]
    print(
        f"in-gunicorn affinity, with routing: {saved:+.3f} ms CPU per turn saved "
        f"({saved / plain['server_cpu_ms']:+.0%}), events read per turn "
        f"{two['events_read_per_turn']:.2f} with, {plain['events_read_per_turn']:.2f} without; "
        f"turns/s {two['per_s']:.0f} with, {plain['per_s']:.0f} without"
    )
    print(
        f"the proxy as the only affinity ({single['label']}): "
        f"{single['server_cpu_ms']:.3f} ms CPU per turn, "
        f"{single['events_read_per_turn']:.2f} events read per turn, {single['per_s']:.0f} turns/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
