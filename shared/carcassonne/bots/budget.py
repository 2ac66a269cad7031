"""What a bot may spend on a move (`Budget`) and what it answers (`Choice`).

The engine reads no clock: a time budget comes with the clock to read (`time.perf_counter`
from the caller), so a policy stays a pure function of its view, seed and budget when it is
given a playout budget — the reproducible form (docs/bots.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..game import Action


@dataclass(frozen=True)
class Budget:
    """How long a search may think: `playouts`, or `think_ms` read on `clock` (seconds).

    With both, the first reached ends the search; with neither, `DEFAULT_PLAYOUTS`.
    """

    playouts: int | None = None
    think_ms: int | None = None
    clock: Callable[[], float] | None = None

    def __post_init__(self) -> None:
        if self.think_ms is not None and self.clock is None:
            raise ValueError("a time budget needs the clock to read")


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
