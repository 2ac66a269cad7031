"""A burst of 1,000 unauthenticated `POST /games` from one address (`make bench`; issue 33).

The command service under its gunicorn config with the production defaults of the limits
(services/command/config.py: ADDRESS_WRITE_RATE, ADDRESS_WRITE_BURST; no ANONYMOUS_GAMES),
behind nginx from deploy/nginx/ when it is installed (the client address then comes from its
X-Forwarded-For, TRUSTED_PROXIES=127.0.0.1, as deployed), on a private redis-server. One
client sends 1,000 POST /games without an API key, one after the other, from one address.

Figures, judged as counts (tests/bench/targets.py): none is created (201: 0); every request
beyond the limit is refused with 429 — the limit being the address's burst plus what its
bucket refilled while the burst lasted, so 429s ≥ 1000 − burst − ⌈rate × seconds⌉ and
≤ 1000 − burst; Redis's key count grows by the one address bucket (which expires) and its
used_memory over the requests refused with 429 does not change (0 bytes).

And what the gate costs a write that passes it (one more Redis script per write): prepared
turns (bench_command.py's `prepare_games`) played by one client alternately, turn by turn,
at a command service with the per-address limit on (a bucket too large to refuse) and one
with it off, both straight (gunicorn) on the same Redis; the p50 with the gate ≤ 1.2x the
p50 without, in the same run (the other benchmarks run with the limit off, as the tests do:
tests/integration/http_client.py). The gate is one Redis round trip: measured 1.12-1.15x
(+0.15-0.18 ms on a 1.2-1.3 ms turn) when it was written; folding it into the append's own
script would take that back for turns.

    .venv/bin/python tests/bench/bench_abuse.py [--requests 1000] [--no-proxy] [--games 6]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import random
import shutil
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from services.command.config import DEFAULTS  # noqa: E402
from tests import nginx as private_nginx  # noqa: E402
from tests.bench.bench_command import CONFIG, post_raw, prepare_games  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

MAX_GATE_RATIO = 1.2  # turn p50 with the address gate / without (the docstring)
BODY = json.dumps({"players": [{"name": "Ann"}, {"name": "Bob"}]}).encode()


def used_memory(client: redis.Redis) -> int:
    info: dict[str, Any] = client.info("memory")
    return int(info["used_memory"])


def post(conn: http.client.HTTPConnection) -> int:
    """POST /games without a key on a kept-alive connection; the status."""
    conn.request("POST", "/games", BODY, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    reply.read()
    return reply.status


def gate_cost(redis_url: str, games: int) -> tuple[list[float], list[float]]:
    """Turn latencies (ms) with the address gate on and off, played alternately."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    gated_env = {**env, "ADDRESS_WRITE_RATE": "1000000", "ADDRESS_WRITE_BURST": "1000000000"}
    with (
        gunicorn("services.command.wsgi:app", CONFIG, gated_env, 1) as gated,
        gunicorn(
            "services.command.wsgi:app", CONFIG, {**env, "ADDRESS_WRITE_RATE": "0"}, 1
        ) as open_,
    ):
        rng = random.Random(33)
        plays = {
            base: [t for game in prepare_games(base, redis_url, rng, games) for t in game]
            for base in (gated, open_)
        }
        times: dict[str, list[float]] = {gated: [], open_: []}
        for pair in zip(plays[gated], plays[open_], strict=False):
            for base, (path, auth, body) in zip((gated, open_), pair, strict=True):
                started = time.perf_counter()
                status, _ = post_raw(base, path, body, auth)
                times[base].append((time.perf_counter() - started) * 1000)
                assert status == 200, status
        return times[gated], times[open_]


def main() -> int:
    """Run the burst once, print the counts and Redis before and after, judge them."""
    parser = argparse.ArgumentParser(description="1,000 unauthenticated POST /games")
    # Smoke mode: past the burst by a few, so some are refused.
    smoke_requests = int(DEFAULTS["ADDRESS_WRITE_BURST"]) + 50
    parser.add_argument("--requests", type=int, default=size(1000, smoke_requests))
    parser.add_argument("--no-proxy", action="store_true", help="straight to gunicorn")
    parser.add_argument(
        "--games", type=int, default=size(6, 1), help="games per server (gate cost)"
    )
    args = parser.parse_args()
    rate, burst = float(DEFAULTS["ADDRESS_WRITE_RATE"]), int(DEFAULTS["ADDRESS_WRITE_BURST"])
    binary, why = (None, "--no-proxy") if args.no_proxy else private_nginx.find_nginx()
    redis_proc, redis_url, workdir = start_redis()
    env = {
        "REDIS_URL": redis_url,
        "NOTIFY_MS": "0",
        "ADDRESS_WRITE_RATE": repr(rate),  # the production defaults, not the harness's "off"
        "ADDRESS_WRITE_BURST": str(burst),
        "API_KEY_RATE": repr(float(DEFAULTS["API_KEY_RATE"])),
        "ANONYMOUS_GAMES": "0",
        "TRUSTED_PROXIES": "127.0.0.1" if binary else "",
    }
    client = redis.Redis.from_url(redis_url)
    try:
        with ExitStack() as stack:
            base = stack.enter_context(gunicorn("services.command.wsgi:app", CONFIG, env, 1))
            if binary is not None:
                proxy = private_nginx.nginx({"command": base.removeprefix("http://")})
                base = stack.enter_context(proxy)["public"]
            host, port = base.removeprefix("http://").split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            keys_before, memory_before = client.dbsize(), used_memory(client)
            statuses: list[int] = []
            started = time.monotonic()
            memory_at_429 = None
            for _ in range(args.requests):
                status = post(conn)
                if status == 429 and memory_at_429 is None:
                    memory_at_429 = used_memory(client)  # from here on: refusals
                statuses.append(status)
            seconds = time.monotonic() - started
            keys_after, memory_after = client.dbsize(), used_memory(client)
            conn.close()
        gated_ms, open_ms = gate_cost(redis_url, args.games)
    finally:
        client.close()
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)

    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    refused = counts.get(429, 0)
    refilled = math.ceil(rate * seconds)
    where = "through nginx (X-Forwarded-For)" if binary else f"straight to gunicorn ({why})"
    print(
        f"{args.requests} POST /games without an API key from one address, {where}, in "
        f"{seconds:.2f} s; limit: burst {burst} + {rate:g}/s (≤ {refilled} refilled meanwhile)"
    )
    print(f"answers: {counts} (201 created: {counts.get(201, 0)})")
    grown = None if memory_at_429 is None else memory_after - memory_at_429
    print(
        f"Redis: keys {keys_before} -> {keys_after}; used_memory {memory_before} -> "
        f"{memory_at_429} (the first 429) -> {memory_after} (the last): {grown} bytes over "
        f"the {refused} refusals"
    )
    check("201s of 1000 unauthenticated POST /games", counts.get(201, 0), at_most=0, always=True)
    check(
        "429s of 1000 unauthenticated POST /games",
        refused,
        at_least=args.requests - burst - refilled,
        at_most=args.requests - burst,
    )
    check("Redis keys added by the burst (its address bucket)", keys_after - keys_before,
          at_most=1)  # fmt: skip
    check("used_memory change over the 429s", math.inf if grown is None else grown,
          at_most=0, unit="B")  # fmt: skip
    gated_p50, open_p50 = statistics.median(gated_ms), statistics.median(open_ms)
    print(
        f"POST /turns, one client alternating, {len(gated_ms)} turns each: address gate on "
        f"p50 {gated_p50:.2f} ms, off p50 {open_p50:.2f} ms"
    )
    judge("POST /turns p50 with the address gate / without", gated_p50, open_p50,
          max_ratio=MAX_GATE_RATIO)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
