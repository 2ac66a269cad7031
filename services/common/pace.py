"""A bot move or a hint that takes the same time whatever it held: one deadline from its start.

Every event's `time_ms` is public, so the time a bot takes to move is public too. In a hand
game (R10.3) the bot searches once per distinct tile of its hidden hand: if the move took as
long as its work, the gap before it would tell an opponent how many distinct tiles the bot
holds (issue 32). So a move is *paced*: when it starts, its fixed duration is set (`move_ms`:
an mcts bot's `think_ms`, never less than a floor for every level), the search gets one
deadline a little before that end (`Paced.budget`: all of the hand's views share it), and
after the work the move waits out what is left of its duration before its append (`Paced.
wait`) — a deadline computed from the start, not a sleep added after the work, so the time
to append is the duration whatever the work took (unless the work overran it: `late_ms`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from carcassonne.bots import Budget

# Of a move's duration, the search ends this share (at most MAX_RESERVE_MS) before its end:
# the rest is for what follows it (the last playout under way, deciding the move).
RESERVE_SHARE, MAX_RESERVE_MS = 0.2, 200


def move_ms(level: str, think_ms: int, floor_ms: int) -> int:
    """How long a move (or a hint) of bot `level` takes, whatever the hand: an mcts bot's
    `think_ms`, a greedy or random bot's `floor_ms` (and never less than it)."""
    return max(floor_ms, think_ms if level == "mcts" else 0)


def search_ms(duration_ms: int) -> int:
    """How long of a move's `duration_ms` the search may take (from the move's start)."""
    return duration_ms - min(int(duration_ms * RESERVE_SHARE), MAX_RESERVE_MS)


class Paced:
    """One move's pace: started at `started` on `clock` (seconds; default now), it lasts
    `duration_ms` and its search may think `think_ms` of it (at most `search_ms`)."""

    def __init__(
        self,
        duration_ms: int,
        think_ms: int,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
        started: float | None = None,
    ) -> None:
        self.clock, self.sleep = clock, sleep
        self.duration_ms = duration_ms
        self.think_ms = min(think_ms, search_ms(duration_ms))
        self.started = clock() if started is None else started
        self.ends = self.started + duration_ms / 1000

    def budget(self) -> Budget:
        """The search's budget: one deadline, `think_ms` after the move's start, shared by
        every search of the move (a hand's views)."""
        return Budget(
            think_ms=self.think_ms,
            clock=self.clock,
            deadline=self.started + self.think_ms / 1000,
        )

    def elapsed_ms(self) -> int:
        """How long since the move started."""
        return round((self.clock() - self.started) * 1000)

    def wait(self) -> int:
        """Wait until the move's duration has passed since its start; returns how late it
        already was when called (ms, 0 if on time: the work overran the duration)."""
        left = self.ends - self.clock()
        if left > 0:
            self.sleep(left)
            return 0
        return round(-left * 1000)
