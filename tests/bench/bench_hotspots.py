"""Are the single-slot structures hot spots? (`make bench`) — why they are not sharded.

Three structures span games and live under one hash tag each, so on a Redis Cluster each is
on one primary: the scoring worker's pending set (`{scoring}:pending`, one SADD + SET NX per
burst of a game's moves), the API keys and the rate limiter's buckets (`{apikeys}`, one
script per third-party request). Everything else that spans games is sharded (issue 14).

This measures, against a private redis-server, the Redis CPU each operation costs (server
CPU from /proc, operations pipelined so the client is not the limit), and today's peak
request rate in the same run: the command service's `POST /turns` peak under its gunicorn
config (the cheapest request, so no other request kind comes faster). At 10× that peak,
with every request touching the structure, the structure must use at most half of one core:
the Redis CPU per operation ≤ 0.5x the time a request has at 10× the peak (1 / (10 × peak)),
both measured in this run — a ratio already (tests/bench/targets.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from services.command.apikeys import KEYS, ApiKeys, bucket_key, key_hash  # noqa: E402
from services.command.ratelimit import RateLimiter  # noqa: E402
from services.redis_store.pending import (  # noqa: E402
    PENDING,
    SCHEDULED,
    mark_pending,
    take_pending,
)
from tests.bench.bench_command import CONFIG, run_load, tree_cpu  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

MAX_CORE_SHARE = 0.5


def redis_cpu_us(
    redis_pid: int, client: redis.Redis, op: Callable[[Any, int], None], ops: int
) -> float:
    """Redis server CPU per operation (µs): `op(pipeline, i)` queued `ops` times, 500 a batch."""
    before = tree_cpu(redis_pid)
    for start in range(0, ops, 500):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(ops, start + 500)):
            op(pipe, i)
        pipe.execute()
    return (tree_cpu(redis_pid) - before) / ops * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50_000, help="operations per structure")
    parser.add_argument("--seconds", type=float, default=4.0, help="turn peak phase length")
    args = parser.parse_args()
    proc, url, workdir = start_redis()
    try:
        client = redis.Redis.from_url(url)
        started: list[Any] = []
        with gunicorn("services.command.wsgi:app", CONFIG, {"REDIS_URL": url}, 3, started) as base:
            peak = run_load(base, "turns", 8, args.seconds, 0, url, (started[0].pid, proc.pid))
        games = [f"{i:032x}" for i in range(args.ops)]

        def pending(pipe: Any, i: int) -> None:
            # The two commands `mark_pending` sends (checked below), queued in the batch.
            pipe.sadd(PENDING, games[i])
            pipe.set(SCHEDULED, 1, nx=True, px=2_000)

        _, key = ApiKeys(client).create("bench")
        hashed = key_hash(key)
        limiter = RateLimiter(client, rate=1e9, burst=10**9)
        assert limiter.check(key).allowed
        assert mark_pending(client, "0" * 32, 2_000) in (True, False)

        def gate(pipe: Any, i: int) -> None:
            # What `RateLimiter.check` runs: the gate script on the key table and the bucket.
            limiter._gate(
                keys=[KEYS, bucket_key(hashed)],
                args=[hashed, repr(limiter.rate), limiter.burst, 1],
                client=pipe,
            )

        figures = {
            "pending set (mark_pending)": redis_cpu_us(proc.pid, client, pending, args.ops),
            "API key check + rate bucket (script)": redis_cpu_us(proc.pid, client, gate, args.ops),
        }
        take_pending(client, args.ops)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    rate = peak["per_s"] * 10
    print(f"single-slot structures: today's peak {peak['per_s']:.0f} turns/s (same run), x10 = "
          f"{rate:.0f}/s, each request touching the structure")  # fmt: skip
    budget_us = 1e6 / rate  # a request's share of one second at 10x the peak
    for name, us in figures.items():
        print(f"  {name:<38} Redis CPU {us:5.1f} µs/op -> one core does {1e6 / us:8.0f}/s;"
              f" at x10 peak {us / budget_us:.0%} of a core")  # fmt: skip
        judge(
            f"{name.split(' (')[0]}: Redis CPU / 10x-peak budget",
            us,
            budget_us,
            max_ratio=MAX_CORE_SHARE,
            unit="µs",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
