"""Are the single-slot structures hot spots? (`make bench`) — why they are not sharded.

One structure spans games and lives under one hash tag, so on a Redis Cluster it is on one
primary: the API keys and the rate limiter's buckets (`{apikeys}`, one script per third-party
request). Everything else that spans games is sharded (issue 14), the change feed too (which
replaced the scoring worker's pending set): each append adds one entry to its shard's feed,
and each of the feed's consumers reads it and records its position in the shard's positions
hash, one slot per shard. That is measured as if every request landed in the same shard (one
primary, or a single Redis) and each consumer handled each entry alone (a batch of one: the
most reads and position writes an entry can cost).

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
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from carcassonne.ruleset import Ruleset  # noqa: E402
from carcassonne.simulate import random_game  # noqa: E402
from eventstore.envelope import MOVES  # noqa: E402
from eventstore.schemas import to_new  # noqa: E402
from services.command.apikeys import KEYS, ApiKeys, bucket_key, key_hash  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.changes import (  # noqa: E402
    FOLLOW_LUA,
    RELEASE_LUA,
    Change,
    Follower,
    changes_key,
    lease_key,
    positions_key,
)
from services.redis_store.indexes import text  # noqa: E402
from services.redis_store.keys import new_game_id, shard_of  # noqa: E402
from services.redis_store.ratelimit import RateLimiter  # noqa: E402
from services.redis_store.scripts import script  # noqa: E402
from tests.bench.bench_command import CONFIG, run_load, tree_cpu  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.integration.index_data import consumers  # noqa: E402
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
    parser.add_argument(
        "--ops", type=int, default=size(50_000, 5_000), help="operations per structure"
    )
    parser.add_argument(
        "--seconds", type=float, default=size(4.0, 1.0), help="turn peak phase length"
    )
    args = parser.parse_args()
    proc, url, workdir = start_redis()
    try:
        client = redis.Redis.from_url(url)
        started: list[Any] = []
        with gunicorn("services.command.wsgi:app", CONFIG, {"REDIS_URL": url}, 3, started) as base:
            peak = run_load(
                base, "turns", size(8, 2), args.seconds, 0, url, (started[0].pid, proc.pid)
            )
        # One real append and its entry (its shard's newest), followed by every consumer
        # (with the load's entries of that shard): the entry's fields and the positions the
        # operation below repeats.
        game_id = new_game_id()
        shard = shard_of(game_id)
        assert shard is not None
        feed, positions = changes_key(shard), positions_key(shard)
        _, events = random_game(random.Random(1), 2, Ruleset())
        RedisEventStore(client).append(game_id, MOVES, [to_new(events[0])], expected=0,
                                       command_id="c0", marker="$seq")  # fmt: skip
        ((last_id, fields),) = cast(list[Any], client.xrevrange(feed, count=1))
        change = Change.parse(last_id, fields)
        assert (change.game_id, change.first, change.last) == (game_id, 1, 1)
        leases = {f.consumer: f.lease_ms for f in consumers(client)}  # the worker's
        for consumer in leases:
            assert Follower(client, consumer, lambda _s, _c: []).catch_up([shard]) >= 1
        assert {text(v) for v in client.hvals(positions)} == {change.id}
        follow, release = script(client, FOLLOW_LUA), script(client, RELEASE_LUA)
        ids = [change.id] + [f"{int(change.id.split('-')[0]) + 1 + i}-0" for i in range(args.ops)]

        def changes(pipe: Any, i: int) -> None:
            # An append's entry (the XADD its script adds), then each consumer's catch-up:
            # the entries after its position, the shard's lease taken for a leased one
            # (scoring), its new position recorded (no writes), the lease let go.
            pipe.xadd(feed, fields, id=ids[i + 1])
            for consumer, lease_ms in leases.items():
                pipe.xrange(feed, "(" + ids[i], "+", count=500)
                lease = lease_key(shard, consumer)
                if lease_ms is not None:
                    pipe.set(lease, "bench", nx=True, px=lease_ms)
                follow(keys=[positions], args=[consumer, ids[i], ids[i + 1]], client=pipe)
                if lease_ms is not None:
                    release(keys=[lease], args=["bench"], client=pipe)

        _, key = ApiKeys(client).create("bench")
        hashed = key_hash(key)
        limiter = RateLimiter(client, rate=1e9, burst=10**9)
        assert limiter.check(key).allowed

        def gate(pipe: Any, i: int) -> None:
            # What `RateLimiter.check` runs: the gate script on the key table and the bucket.
            limiter._gate(
                keys=[KEYS, bucket_key(hashed)],
                args=[hashed, repr(limiter.rate), limiter.burst, 1],
                client=pipe,
            )

        figures = {
            f"change feed shard (entry + {len(leases)} follows)": redis_cpu_us(
                proc.pid, client, changes, args.ops
            ),
            "API key check + rate bucket (script)": redis_cpu_us(proc.pid, client, gate, args.ops),
        }
        # Every position moved on once per entry: none was refused (the CPU was the real one).
        assert {text(v) for v in client.hvals(positions)} == {ids[-1]}
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
