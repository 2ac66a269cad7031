"""How fast does one worker time out expired turns, and what does a beat tick cost when many
games are waiting? (`make bench`, issue 17; docs/lifecycle.md)

Against a private redis-server, in one process (what one worker thread does):

* timed-out turns per second: games with a 60 s turn limit are created, then the turn timer
  (`services.scoring.timer.Timer.tick`) runs with its clock 61 s ahead, so every one of them
  is due: each is folded, decided (`TurnTimedOut`, the next player's draw) and appended on
  its expected sequence. Baseline, same run, same Redis: plain turns played through the
  command service's `GameService.play_turn` (a decided and appended turn, the cached path).
  Target ≥ 0.145x the baseline (was ≥ 500/s, set when the baseline ran 3,444/s: 500 / 3,444),
  for games just started and games 30 turns in (the timer's state cached); and every due turn
  timed out (a count).
* a beat tick with games waiting (deadlines ahead, nothing due): the tick reads only the due
  part of the 64 shards' deadline and idle indexes, so its cost must not grow with the games
  waiting. Timed with 1,000 and with 10,000 games waiting; baseline: what a tick that
  scanned (SCAN over every game's move stream key) would cost with 10,000.
  Target: 10,000 / 1,000 within noise (≤ 1.5×, a ratio of the same run already).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from carcassonne.game import actions  # noqa: E402
from carcassonne.ruleset import Ruleset  # noqa: E402
from eventstore.envelope import MOVES  # noqa: E402
from services.command.secrets_store import RedisSecrets  # noqa: E402
from services.command.service import GameService  # noqa: E402
from services.redis_store import RedisEventStore, game_keys  # noqa: E402
from services.redis_store.connect import connect  # noqa: E402
from services.scoring.timer import Timer  # noqa: E402
from tests.bench.bench_indexes import median_ms  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

MIN_TIMEOUTS_VS_TURNS = 0.145  # 500/s / 3,444/s (the docstring)
TARGET_RATIO = 1.5
LIMITED = Ruleset(turn_seconds=60)
ABANDON_AFTER_MS = 30 * 86_400_000


def create_games(service: GameService, count: int, ruleset: Ruleset) -> list[tuple[str, list[str]]]:
    """`count` new 2-player games: (id, tokens by seat)."""
    games = []
    for _ in range(count):
        game_id, players = service.create_game(["Ann", "Bob"], ruleset, [0, 1])
        games.append((game_id, [p["token"] for p in players]))
    return games


Plan = tuple[str, str, int, int, int]  # game, the mover's token, x, y, rotation


def plan_turns(
    service: GameService, games: list[tuple[str, list[str]]], rng: random.Random
) -> list[Plan]:
    """One random legal placement for the player to move in each game not over (worked out
    before a timed round, so the round times the turns alone)."""
    plans = []
    for game_id, tokens in games:
        state = service.load(game_id).state
        if state.over:
            continue
        x, y, rotation, _ = rng.choice(actions(state))
        plans.append((game_id, tokens[state.current], x, y, rotation))
    return plans


def turns_per_second(
    service: GameService, games: list[tuple[str, list[str]]], rounds: int = 1
) -> float:
    """The baseline: decided and appended turns (`rounds` per game), through the command
    service, turn by turn across the games."""
    rng = random.Random(7)
    played, elapsed = 0, 0.0
    for _ in range(rounds):
        plans = plan_turns(service, games, rng)
        started = time.perf_counter()
        for game_id, token, x, y, rotation in plans:
            service.play_turn(game_id, token, x, y, rotation, None, trust_cache=True)
        elapsed += time.perf_counter() - started
        played += len(plans)
    return played / elapsed


def timeouts_per_second(timer: Timer, now_ms: int, count: int) -> tuple[float, int]:
    """One tick at `now_ms` over `count` due games: (timed-out turns per second, how many)."""
    started = time.perf_counter()
    handled = timer.tick(now_ms, 0, limit=count)
    return len(handled.timed_out) / (time.perf_counter() - started), len(handled.timed_out)


def scanning_tick(client: redis.Redis) -> int:
    """What a tick that scanned would cost: visit every game's move stream key."""
    return sum(1 for _ in client.scan_iter(match=game_keys("*", MOVES)[0], count=1_000))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=size(2_000, 10), help="games timed out at once")
    parser.add_argument(
        "--depth", type=int, default=size(30, 3), help="turns played before, 2nd round"
    )
    parser.add_argument(
        "--small", type=int, default=size(1_000, 10), help="games waiting, first round"
    )
    parser.add_argument(
        "--large", type=int, default=size(10_000, 20), help="games waiting, second round"
    )
    parser.add_argument("--reps", type=int, default=size(50, 3), help="timed ticks per figure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    proc, url, _ = start_redis()
    try:
        client = connect(url, role="bench", max_connections=4)
        store = RedisEventStore(client)
        service = GameService(store, RedisSecrets(client))
        timer = Timer(store, client)
        figures: dict[str, float] = {}
        # -- timed-out turns per second, beside plain turns
        due = create_games(service, args.due, LIMITED)
        figures["turn_appends_per_s"] = turns_per_second(service, due)
        ahead = int(time.time() * 1000) + 61_000 * 2  # every turn's deadline has passed
        figures["timeouts_per_s"], timed_out = timeouts_per_second(timer, ahead, args.due)
        # Games `depth` turns in: the timer's first sight of each (folded from move 1), then
        # their next expiry (its cached state caught up: what a running worker mostly does).
        client.flushdb()
        deep = create_games(service, args.due, LIMITED)
        turns_per_second(service, deep, rounds=args.depth)
        fresh = Timer(store, client)
        ahead = int(time.time() * 1000) + 61_000 * 2
        figures["deep_cold_per_s"], deep_done = timeouts_per_second(fresh, ahead, args.due)
        later = ahead + 61_000
        figures["deep_warm_per_s"], deep_warm = timeouts_per_second(fresh, later, args.due)
        timed_out = min(timed_out, deep_done, deep_warm)
        # -- a tick with games waiting (deadlines ahead: nothing due)
        now = lambda: int(time.time() * 1000)  # noqa: E731
        client.flushdb()
        figures["tick_empty_ms"] = median_ms(lambda: timer.tick(now(), ABANDON_AFTER_MS), args.reps)
        create_games(service, args.small, LIMITED)
        figures["tick_small_ms"] = median_ms(lambda: timer.tick(now(), ABANDON_AFTER_MS), args.reps)
        create_games(service, args.large - args.small, LIMITED)
        figures["tick_large_ms"] = median_ms(lambda: timer.tick(now(), ABANDON_AFTER_MS), args.reps)
        figures["scan_large_ms"] = median_ms(lambda: scanning_tick(client), 5)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    ratio = figures["tick_large_ms"] / figures["tick_small_ms"]
    if args.json:
        print(json.dumps({**figures, "ratio": ratio, "timed_out": timed_out}, indent=1))
    turns = figures["turn_appends_per_s"]
    print(f"turn timer, one process, {args.due:,} turns due at once")
    print(f"  timed-out turns handled      {figures['timeouts_per_s']:9.0f}/s "
          f"({timed_out:,} of {args.due:,})")  # fmt: skip
    print(f"  … games {args.depth} turns in, cached {figures['deep_warm_per_s']:9.0f}/s "
          "(the timer's state caught up)")  # fmt: skip
    print(f"  … games {args.depth} turns in, cold   {figures['deep_cold_per_s']:9.0f}/s "
          "(first sight: folded from move 1; no target, see docs/lifecycle.md)")  # fmt: skip
    print(f"  baseline: plain turn appends {turns:9.0f}/s (GameService.play_turn, cached)")
    n1, n2 = f"{args.small:,}", f"{args.large:,}"
    print(f"beat tick with games waiting, nothing due (median ms): {n1} → {n2}")
    print(f"  tick (deadline + idle index)  {figures['tick_small_ms']:8.2f} → "
          f"{figures['tick_large_ms']:8.2f}  ×{ratio:.2f}")  # fmt: skip
    print(f"  baseline: tick with no game   {figures['tick_empty_ms']:8.2f}")
    print(
        f"  baseline: a scan of {n2} games {figures['scan_large_ms']:8.2f} (what must not happen)"
    )
    check("due turns timed out (fewest of 3 rounds)", timed_out, at_least=args.due, always=True)
    judge(
        "timed-out turns/s / plain turn appends/s",
        figures["timeouts_per_s"],
        turns,
        min_ratio=MIN_TIMEOUTS_VS_TURNS,
        unit="/s",
    )
    judge(
        f"… games {args.depth} turns in, cached / turn appends",
        figures["deep_warm_per_s"],
        turns,
        min_ratio=MIN_TIMEOUTS_VS_TURNS,
        unit="/s",
    )
    judge(
        f"beat tick, {n2} / {n1} games waiting",
        figures["tick_large_ms"],
        figures["tick_small_ms"],
        max_ratio=TARGET_RATIO,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
