"""Computer players: policies that choose a legal action from a `PlayerView`.

A policy is a pure function ``(view, rng, budget) -> Choice``: deterministic given the
view, the seeded `random.Random` and a playout budget, no I/O, no clock of its own. The
view holds only what the seat may know (`view.py`); nothing else reaches a policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .budget import Budget, Choice
from .mcts import play_mcts
from .simple import play_greedy, play_random
from .view import PlayerView, player_view

Policy = Callable[[PlayerView, random.Random, Budget], Choice]

POLICIES: dict[str, Policy] = {
    "random": play_random,
    "greedy": play_greedy,
    "mcts": play_mcts,
}
LEVELS = tuple(POLICIES)


def choose(level: str, view: PlayerView, seed: str | int, budget: Budget | None = None) -> Choice:
    """The move of bot `level` in `view`, reproducible from `seed` (with a playout budget)."""
    policy = POLICIES.get(level)
    if policy is None:
        raise ValueError(f"unknown bot level {level!r}: one of {', '.join(LEVELS)}")
    return policy(view, random.Random(f"bot:{level}:{seed}"), budget or Budget())


__all__ = ["LEVELS", "POLICIES", "Budget", "Choice", "PlayerView", "choose", "player_view"]
