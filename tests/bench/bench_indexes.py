"""Do the periodic sweep and the games list cost what is pending or returned, not what is
stored? (`make bench`, issue 14)

Against a private redis-server: the scoring sweep (`scoring.sweep`: every consumer of the
change feed over the 64 shards — each 2 pipelined round trips, its positions then the feeds
after them, nothing new — then the feeds trimmed below their positions), one consumer's
catch-up alone, and `GET /games`'s first page as an API key gets it (`RedisDirectory.page`
with its `key_id`: the directory caught up with the feed, then a merge of the 64 shards'
indexes of the key's games plus the page's descriptions; every stored game was created with
that key) are timed with 1,000 stored finished games, then with 20,000 (the same run, the
same Redis; the indexes are built from the feed before anything is timed). The operators'
listing of every game (the page without a key) is printed beside it. The baseline is the
sweep as it was before the indexes (SCAN over every game's move marker, a copy kept below), on
the same data.

Target (a ratio already, tests/bench/targets.py): 20k / 1k within noise (≤ 1.5×) for the
sweep and the first page, both measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from eventstore.envelope import MOVES, SCORES  # noqa: E402
from services.query.directory import RedisDirectory  # noqa: E402
from services.redis_store import game_keys  # noqa: E402
from services.redis_store.changes import Follower, trim  # noqa: E402
from services.redis_store.connect import connect  # noqa: E402
from services.redis_store.directory_index import DirectoryIndex  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.integration.index_data import consumers, write_finished_games  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

TARGET_RATIO = 1.5
KEY_ID = "k_bench"  # the API key every stored game was created with


# ---- the baseline: the sweep before the indexes (services/scoring/sweep.py until issue 14)
_PATTERN = game_keys("*", MOVES)[2]  # "{g:*}:marker:moves"
_PREFIX, _SUFFIX = _PATTERN.split("*")


def scan_unscored_games(client: redis.Redis, page: int = 1_000) -> Iterator[str]:
    """The old sweep: SCAN every move marker, compare with the score marker a page at a time."""
    batch: list[str] = []
    for key in client.scan_iter(match=_PATTERN, count=page):
        text = key.decode() if isinstance(key, bytes) else str(key)
        batch.append(text[len(_PREFIX) : -len(_SUFFIX)])
        if len(batch) >= page:
            yield from _behind(client, batch)
            batch = []
    if batch:
        yield from _behind(client, batch)


def _behind(client: redis.Redis, games: list[str]) -> Iterator[str]:
    pipe = client.pipeline(transaction=False)
    for game_id in games:
        pipe.get(game_keys(game_id, MOVES)[2])
        pipe.get(game_keys(game_id, SCORES)[2])
    values = pipe.execute()
    for i, game_id in enumerate(games):
        moved, scored = int(values[2 * i] or 0), int(values[2 * i + 1] or 0)
        if moved > scored:
            yield game_id


# ---- measuring


def median_ms(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm: scripts, connections
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def feed_sweep(client: redis.Redis, followers: list[Follower]) -> int:
    """What the worker's `scoring.sweep` does: every consumer over every shard, then the
    feeds trimmed below their positions; the changes applied (none here: all followed)."""
    done = sum(follower.catch_up() for follower in followers)
    trim(client)
    return done


def measure(client: redis.Redis, stored: int, reps: int, baseline_reps: int) -> dict[str, float]:
    directory = RedisDirectory(client)
    followers = consumers(client)
    one = DirectoryIndex(client)
    assert feed_sweep(client, followers) == 0  # write_finished_games left nothing to follow
    listed, _ = directory.page(None, None, None, 50, key_id=KEY_ID)
    assert len(listed) == min(50, stored), f"the key's first page lists {len(listed)} games"
    return {
        "sweep_ms": median_ms(lambda: feed_sweep(client, followers), reps),
        "follow_ms": median_ms(one.catch_up, reps),
        "first_page_ms": median_ms(
            lambda: directory.page(None, None, None, 50, key_id=KEY_ID), reps
        ),
        "all_page_ms": median_ms(lambda: directory.page(None, None, None, 50), reps),
        "scan_sweep_ms": median_ms(lambda: list(scan_unscored_games(client)), baseline_reps),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--small", type=int, default=size(1_000, 20), help="stored games, first round"
    )
    parser.add_argument(
        "--large", type=int, default=size(20_000, 40), help="stored games, second round"
    )
    parser.add_argument("--reps", type=int, default=size(50, 3), help="timed runs per figure")
    parser.add_argument("--baseline-reps", type=int, default=size(5, 1), help="timed SCAN sweeps")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    proc, url, _ = start_redis()
    try:
        client = connect(url, role="bench", max_connections=4)
        write_finished_games(client, args.small, start_ms=1_000_000, seed=1, key_id=KEY_ID)
        small = measure(client, args.small, args.reps, args.baseline_reps)
        write_finished_games(
            client, args.large - args.small, start_ms=2_000_000, seed=2, key_id=KEY_ID
        )
        large = measure(client, args.large, args.reps, args.baseline_reps)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    ratios = {k: large[k] / small[k] for k in small}
    if args.json:
        print(json.dumps({"small": small, "large": large, "ratios": ratios}, indent=1))
    n1, n2 = f"{args.small:,}", f"{args.large:,}"
    print(f"periodic and list cost with {n1} vs {n2} stored finished games (median ms)")
    for key, label in (("sweep_ms", "scoring sweep (change feed)"),
                       ("follow_ms", "one consumer, nothing new"),
                       ("first_page_ms", "GET /games first page, a key's"),
                       ("all_page_ms", "every game's first page (no key)")):  # fmt: skip
        print(f"  {label:<34} {small[key]:8.2f} → {large[key]:8.2f}  ×{ratios[key]:.2f}")
    print(f"  {'baseline: SCAN sweep (before)':<34} {small['scan_sweep_ms']:8.2f} →"
          f" {large['scan_sweep_ms']:8.2f}  ×{ratios['scan_sweep_ms']:.2f}")  # fmt: skip
    judge(
        f"scoring sweep, {n2} / {n1} games",
        large["sweep_ms"],
        small["sweep_ms"],
        max_ratio=TARGET_RATIO,
    )
    judge(
        f"GET /games first page, {n2} / {n1} games",
        large["first_page_ms"],
        small["first_page_ms"],
        max_ratio=TARGET_RATIO,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
