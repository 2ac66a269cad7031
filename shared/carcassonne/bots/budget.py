"""What a bot may spend on a move (`Budget`) and what it answers (`Choice`).

The engine reads no clock: a time budget comes with the clock to read (`time.perf_counter`
from the caller), so a policy stays a pure function of its view, seed and budget when it is
given a playout budget — the reproducible form (docs/bots.md). A `deadline` is a reading of
that clock by which the search ends, whenever it started: the one deadline of a whole move
that several searches share (a hand's views, R10.3: `choose_in_hand`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..game import Action


@dataclass(frozen=True)
class Budget:
    """How long a search may think: `playouts`, `think_ms` from its start and/or until
    `deadline`, both read on `clock` (seconds).

    With several, the first reached ends the search; with none, `DEFAULT_PLAYOUTS`.
    """

    playouts: int | None = None
    think_ms: int | None = None
    clock: Callable[[], float] | None = None
    deadline: float | None = None  # a reading of `clock`

    def __post_init__(self) -> None:
        if (self.think_ms is not None or self.deadline is not None) and self.clock is None:
            raise ValueError("a time budget needs the clock to read")

    @property
    def timed(self) -> bool:
        """Whether the budget is (also) a time: `think_ms` or a `deadline`."""
        return self.think_ms is not None or self.deadline is not None

    def end(self, start: float) -> float | None:
        """When a search started at `start` (a clock reading) must end, or None (no time
        budget): `think_ms` after it, or the deadline if that comes first."""
        ends = [] if self.think_ms is None else [start + self.think_ms / 1000]
        if self.deadline is not None:
            ends.append(self.deadline)
        return min(ends) if ends else None


DEFAULT_PLAYOUTS = 300


@dataclass(frozen=True)
class Choice:
    """A policy's move: the action, its estimated value and how many playouts it took.

    `value` is the mover's expected lead in points over the best other player at the end
    of the estimate (the heuristic's for random/greedy, the search's mean for mcts).
    """

    action: Action
    value: float
    playouts: int = 0
