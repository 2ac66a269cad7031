"""Bot move time against hidden hands (`make bench`; issue 32, finding 1): does the public gap
before a bot's move tell how many distinct tiles its hand of three holds (R10.3)?

Two bots of one level play hand games on a private Redis through `BotPlayer.play`, four games
at once, one process each (tests/bot_timing.py); each move's time is the gap between the
public `time_ms` of the event before it and of its `TilePlaced`. The moves made with a full
hand are grouped by its distinct tiles (1, 2, 3), and the figure is each group's range and the
balanced accuracy of the best single-threshold classifier between groups (chance: 0.5).

Baseline (same run): the bots as they moved before issue 32, rebuilt by injection — each of a
hand's views searching the whole think time and no pacing (the mcts baseline plays the first
30 moves of its games, to keep the run about a minute).

Targets, for every level: paced, the 2-vs-3 classifier at chance (≤ 0.65; the 1-distinct
group is too rare to judge, n ≤ ~8); the mcts baseline's ≥ 0.75 (the harness does see the
leak the pacing closes); the median paced gap ≤ 1.2x the move's duration (the pace is kept:
padding is a lower bound, lateness is what the machine adds).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from services.common.pace import move_ms  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.bot_timing import describe, groups, play_games, summary  # noqa: E402
from tests.redis_server import private_redis  # noqa: E402

FLOOR_MS = size(100, 20)  # the bench's MOVE_FLOOR_MS (the worker's default is 250): shorter games
LEVELS = (("random", 1), ("greedy", 1), ("mcts", size(100, 20)))
GAMES = JOBS = size(4, 2)
MOVES = size(None, 20)  # each game to its end; in smoke mode its first 20 moves
MCTS_BASELINE_MOVES = size(30, 20)


def main() -> int:
    """Play the games, print every level's figure beside its baseline, judge the targets."""
    print(
        f"bot move time by hand (two bots, hand games, {GAMES} games a level, floor {FLOOR_MS} ms)"
    )
    with private_redis() as url:
        for level, think_ms in LEVELS:
            t0 = time.perf_counter()
            limit = MCTS_BASELINE_MOVES if level == "mcts" else MOVES
            before = play_games(url, level, think_ms, GAMES, JOBS, FLOOR_MS, False, limit)
            after = play_games(url, level, think_ms, GAMES, JOBS, FLOOR_MS, True, MOVES)
            base, paced = summary(before), summary(after)
            describe(f"  {level} baseline (unpaced)", base)
            describe(f"  {level} paced", paced)
            print(f"  ({len(before)} + {len(after)} moves, {time.perf_counter() - t0:.1f} s)")
            # A group with no move (a figure not measured: NaN, a miss) is rare but possible.
            accuracy = paced["accuracy"].get("2v3", math.nan)
            check(f"{level} paced: 2v3 threshold accuracy", accuracy, at_most=0.65)
            if level == "mcts":
                check(
                    "mcts baseline: 2v3 threshold accuracy",
                    base["accuracy"].get("2v3", math.nan),
                    at_least=0.75,
                )
            gaps = sorted(g for v in groups(after).values() for g in v)
            duration = move_ms(level, think_ms, FLOOR_MS)
            judge(
                f"{level} paced median gap / its duration",
                float(gaps[len(gaps) // 2]),
                float(duration),
                max_ratio=1.2,
            )
    return 0


if __name__ == "__main__":
    code = main()
    sys.exit(code or exit_code())
