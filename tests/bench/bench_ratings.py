"""Ratings benchmark (`make bench`): every rating of 10,000 finished games rebuilt from the
games' logs, beside the live consumer that rated them and plain reads of the same logs.

A private redis-server holds 10,000 finished games of one API key, each as the services leave
it for the ratings (services/scoring/ratings.py): its secrets record (the key, a bot seat in
one game of five), its `GameStarted` (2-4 seats drawn from 500 player ids) and its final
`GameScored` (random ranks), each appended with its change-feed entry. Then, timed:

1. live: the consumer "ratings" follows the feed and rates every game (one script per game);
2. rebuild: `rebuild` computes every rating again from the games' logs in the order the key's
   ratings log applied them;
3. baseline, in the same run: reading the same logs plainly (the first move event and the
   score stream of each game: what the rebuild reads, without any rating work).

Judged: the rebuilt ratings equal the live ones (float for float; 0 differences, at any size),
and the rebuild's time ≤ 2x the plain reads' (it also reads each game's secrets record and rates:
openskill's Plackett-Luce update is most of it). Games/s of each are printed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from carcassonne.ruleset import Ruleset  # noqa: E402
from eventstore.envelope import MOVES, SCORES, NewEvent  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.keys import new_game_id, secrets_key  # noqa: E402
from services.redis_store.ratings import Rating, Ratings, pool_key  # noqa: E402
from services.scoring.ratings import RatingsConsumer, rebuild  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

KEY = "kbench"
MAX_REBUILD_VS_READS = 2.0  # measured 1.22x (200 games) and 1.31x (10,000) when it came


def fill(store: RedisEventStore, games: int, players: int, seed: int) -> None:
    """`games` finished games of API key KEY, appended as the services append them."""
    rng = random.Random(seed)
    ruleset = Ruleset().to_dict()
    for n in range(games):
        game_id = new_game_id(rng)
        seats = rng.sample(range(players), rng.choice([2, 3, 4]))
        names = [f"P{s}" for s in seats]
        record: dict[str, Any] = {"seed": "s" * 32, "names": names, "tokens": {}, "key_id": KEY}
        ids: list[str | None] = [f"u{s}" for s in seats]
        if n % 5 == 0:  # a bot seat
            record["bots"] = [None] * (len(seats) - 1) + [{"level": "greedy", "think_ms": 100}]
            ids[-1] = None
        store.client.set(secrets_key(game_id), json.dumps(record))
        seated = [{"name": name, "player_id": who} for name, who in zip(names, ids, strict=True)]
        started = {"ruleset": ruleset, "players": seated}
        store.append(game_id, MOVES, [NewEvent("GameStarted", 2, started)], expected=0,
                     command_id="create", marker="$seq")  # fmt: skip
        totals = [rng.randrange(40, 120) for _ in seats]
        ranks = [1 + sum(o > t for o in totals) for t in totals]
        winners = [i for i, r in enumerate(ranks) if r == 1]
        result = {"move": 1, "final_scores": totals, "scores_before_final": totals,
                  "ranks": ranks, "winners": winners}  # fmt: skip
        store.append(game_id, SCORES, [NewEvent("GameScored", 1, result)], expected=0,
                     command_id="score:1-1", marker="1")  # fmt: skip
        if n % 200 == 0 and n:
            print(f"\r  filled {n}/{games} games", end="", file=sys.stderr, flush=True)
    print(f"\r  filled {games}/{games} games", file=sys.stderr)


def plain_reads(client: redis.Redis, store: RedisEventStore) -> int:
    """Read what the rebuild reads, without rating: each rated game's first move event and its
    score stream, in the ratings log's order; returns the games read."""
    read = 0
    for _, game_id, _ in Ratings(client).log_ids(KEY, 10**7):
        client.get(secrets_key(game_id))
        store.read(game_id, MOVES, 0, 1)
        store.read(game_id, SCORES)
        read += 1
    return read


def live_ratings(client: redis.Redis) -> dict[tuple[str, str], Rating]:
    raw: dict[bytes, bytes] = client.hgetall(pool_key(KEY, "classic"))  # type: ignore[assignment]
    return {("classic", k.decode()): Rating.from_json(v) for k, v in raw.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=size(10_000, 200), help="finished games")
    parser.add_argument("--players", type=int, default=size(500, 20), help="distinct player ids")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    proc, url, workdir = start_redis()
    try:
        client = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        store = RedisEventStore(client)
        fill(store, args.games, args.players, seed=2026)

        t0 = time.perf_counter()
        RatingsConsumer(client, store, batch=500).follower.catch_up(max_rounds=100_000)
        live_s = time.perf_counter() - t0
        rated = int(client.hlen("{k:" + KEY + "}:ratings:games"))

        t0 = time.perf_counter()
        rebuilt = rebuild(client, store, KEY)
        rebuild_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        read = plain_reads(client, store)
        reads_s = time.perf_counter() - t0

        live = live_ratings(client)
        differ = sum(rebuilt.get(k) != v for k, v in live.items()) + len(set(rebuilt) - set(live))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)

    figures = {
        "games": args.games,
        "rated": rated,
        "players": len(live),
        "live_games_per_s": rated / live_s,
        "rebuild_games_per_s": rated / rebuild_s,
        "reads_games_per_s": read / reads_s,
        "rebuild_s": rebuild_s,
        "differences": differ,
    }
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"{rated} of {args.games} games rated for {len(live)} players (one game in five has a "
        f"bot seat): live {figures['live_games_per_s']:.0f} games/s, rebuild "
        f"{figures['rebuild_games_per_s']:.0f} games/s ({rebuild_s:.2f} s), plain reads "
        f"{figures['reads_games_per_s']:.0f} games/s"
    )
    check("games rated once each (of those filled)", rated, at_least=args.games, always=True)
    check("ratings rebuilt from the logs that differ from live", differ, at_most=0, always=True)
    judge(
        "rebuild every rating / plain reads of the same logs",
        rebuild_s,
        reads_s,
        max_ratio=MAX_REBUILD_VS_READS,
        unit="s",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
