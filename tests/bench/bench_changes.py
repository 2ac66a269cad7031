"""A consumer that was down catches up (`make bench`): the scoring worker is stopped while
games are played, then started; it finds everything on the change feed.

Real parts: a private Redis and one scoring worker process (thread pool, concurrency 2, as
deploy runs it). For `--down` seconds (default 60) no worker runs while `--games` whole
random 2-4 player games (default 200) are appended a turn at a time, paced evenly over that
time, exactly as the command service appends them (a feed entry per append; no task is sent
to anyone). Then the worker starts, and the time from its start until every game is scored
is measured. Every game's score stream is then compared with the score events computed
afresh from its moves: nothing lost, nothing doubled.

Target (tests/bench/targets.py): catch-up time ≤ 1/6 of the time it was down (issue "One
write path": the baseline is the outage itself, measured in the same run); lost or doubled
score events: 0.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from carcassonne.ruleset import Ruleset  # noqa: E402
from carcassonne.simulate import random_game  # noqa: E402
from carcassonne.state import GameState  # noqa: E402
from eventstore.envelope import MOVES, SCORES  # noqa: E402
from eventstore.schemas import to_new  # noqa: E402
from eventstore.score_stream import score_events  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.keys import derived_game_id  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.integration.workers import celery_env, worker  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402


def turns_of(seed: int) -> tuple[str, list[list[Any]]]:
    """A game id and its events split into turns (TilePlaced and what follows it)."""
    _, events = random_game(random.Random(seed), 2 + seed % 3, Ruleset())
    turns: list[list[Any]] = [[]]
    for event in events:
        if type(event).__name__ == "TilePlaced" and turns[-1]:
            turns.append([])
        turns[-1].append(event)
    return derived_game_id(f"catch-up-{seed}-{time.time_ns()}".encode()), turns


def play_while_down(store: RedisEventStore, games: int, seconds: float) -> list[str]:
    """`games` games appended turn by turn, all games interleaved, paced over `seconds`."""
    played = [turns_of(seed) for seed in range(games)]
    total = sum(len(turns) for _, turns in played)
    done = 0
    started = time.monotonic()
    cursors = [0] * games
    while done < total:
        for i, (game_id, turns) in enumerate(played):
            if cursors[i] >= len(turns):
                continue
            turn = turns[cursors[i]]
            expected = sum(len(t) for t in turns[: cursors[i]])
            store.append(game_id, MOVES, [to_new(e) for e in turn], expected=expected,
                         command_id=f"t{cursors[i]}", marker="$seq")  # fmt: skip
            cursors[i] += 1
            done += 1
            ahead = started + seconds * done / total - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    return [game_id for game_id, _ in played]


def wrong_scores(store: RedisEventStore, games: list[str]) -> int:
    """Score events missing, extra or different, over all games."""
    wrong = 0
    for game_id in games:
        fresh = [(e.type, e.payload) for e in score_events(GameState(), store.read(game_id, MOVES))]
        stored = [(e.type, e.payload) for e in store.read(game_id, SCORES)]
        wrong += sum(a != b for a, b in zip(fresh, stored, strict=False))
        wrong += abs(len(fresh) - len(stored))
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description="change-feed catch-up benchmark")
    parser.add_argument("--games", type=int, default=size(200, 3), help="games played while down")
    parser.add_argument(
        "--down", type=float, default=size(60.0, 2.0), help="seconds the worker is down"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    redis_proc, redis_url, _ = start_redis()
    client = redis.Redis.from_url(redis_url)
    store = RedisEventStore(client)
    figures: dict[str, Any] = {"games": args.games}
    try:
        started = time.monotonic()
        games = play_while_down(store, args.games, args.down)
        figures["down_s"] = time.monotonic() - started
        figures["move_events"] = sum(store.last_seq(g, MOVES) for g in games)
        w = worker(celery_env(redis_url), "catch-up")
        started = time.monotonic()
        w.start()
        try:
            deadline = started + max(120.0, 2 * args.down)
            left = set(games)
            while left and time.monotonic() < deadline:
                left = {g for g in left if store.marker(g, SCORES) != store.marker(g, MOVES)}
                if left:
                    time.sleep(0.05)
            figures["catch_up_s"] = time.monotonic() - started if not left else None
        finally:
            w.stop()
        figures["wrong_score_events"] = wrong_scores(store, games)
    finally:
        redis_proc.terminate()
        redis_proc.wait()

    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"scoring worker down {figures['down_s']:.1f} s while {args.games} games "
          f"({figures['move_events']} move events) were played; caught up in "
          f"{figures['catch_up_s'] or float('nan'):.1f} s from its start")  # fmt: skip
    judge("consumer down: catch-up time / time down", figures["catch_up_s"],
          figures["down_s"], max_ratio=1 / 6, unit="s")  # fmt: skip
    check("consumer down: score events lost or doubled", figures["wrong_score_events"],
          at_most=0, always=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
