"""Issue 32, finding 1: a bot's move time no longer tells its hidden hand (R10.3).

Two bots of one level play hand games on a private Redis through `BotPlayer.play` (what the
bot worker's task runs; four games at once, each in a process of its own as in the bot
worker's prefork pool). Each move's time is what an opponent sees: the gap between the public
`time_ms` of the event before it and of its `TilePlaced` (tests/bot_timing.py). Moves made
with a full hand of three are grouped by how many distinct tiles it held; the best
single-threshold classifier between the two large groups (2 and 3 distinct tiles) must do
no better than chance (balanced accuracy ≤ 0.65; for 45 and 210 moves from one distribution,
luck alone went past 0.65 3 times in 3,000 draws, and past 0.60 in 9 %), and every group's
range must overlap the others'.

Before (the same harness on 7d564d4, the commit before this change, 20:42 UTC on the shared
2-core machine at load 4.5, 4 games a level on 4 processes, think_ms 100 for mcts):
  random: 1 distinct 17 ms (n=1), 2 distinct 2-24 ms (n=46), 3 distinct 1-178 ms (n=217);
          accuracy 1v2 0.94, 1v3 0.89, 2v3 0.56
  greedy: 1 distinct 8-19 ms (n=5), 2 distinct 4-187 ms (n=72), 3 distinct 3-274 ms (n=187);
          accuracy 1v2 0.85, 1v3 0.89, 2v3 0.65
  mcts:   1 distinct 106 ms (n=1), 2 distinct 216-509 ms (n=68), 3 distinct 317-762 ms
          (n=194); accuracy 1v2 1.00, 1v3 1.00, 2v3 0.88 — over this test's bound
After (this test, 20:49 UTC, load 3.1): random 2 distinct 150-162 ms (n=65), 3 distinct
151-165 ms (n=196), 2v3 0.52; greedy 151-157 ms (n=56) and 151-176 ms (n=205), 0.55; mcts
151-1,365 ms (n=87) and 151-1,185 ms (n=170), medians 157 and 156 ms, 0.56.
Greedy and random leaked less than this machine's noise for 2v3 (both were within the bound
on the old code: 0.56, 0.65); their pacing is shown exactly, on a fake clock, in
tests/unit/test_bot_pace.py. The 1-distinct group (a hand of three alike) is too rare to
judge by accuracy (n ≤ 7): only its range is checked.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bot_timing import best_threshold_accuracy, describe, groups, play_games, summary
from tests.redis_server import private_redis

# The test's MOVE_FLOOR_MS (the worker's is 250): shorter games, with room for a move's work
# to stretch when the whole suite loads the machine (a late move's gap is its work's again).
FLOOR_MS = 150


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with private_redis() as found:
        yield found


@pytest.mark.parametrize(("level", "think_ms"), [("random", 1), ("greedy", 1), ("mcts", 100)])
def test_move_time_does_not_tell_how_many_distinct_tiles_a_bot_holds(
    url: str, level: str, think_ms: int
) -> None:
    moves = play_games(url, level, think_ms, games=4, jobs=4, floor_ms=FLOOR_MS)
    describe(level, summary(moves))  # shown with -s
    by = groups(moves)
    assert len(by.get(2, [])) >= 25 and len(by.get(3, [])) >= 25, {k: len(v) for k, v in by.items()}
    assert best_threshold_accuracy(by[2], by[3]) <= 0.65
    for a in by.values():  # every group's range overlaps every other's
        for b in by.values():
            assert a[0] <= b[-1] and b[0] <= a[-1], (a, b)
    # the pace is kept: most moves take their duration, none much less
    gaps = sorted(g for v in by.values() for g in v)
    assert gaps[0] >= FLOOR_MS - 2  # padding is a lower bound (ms rounding of time_ms)
    assert gaps[len(gaps) // 2] <= FLOOR_MS * 1.5
