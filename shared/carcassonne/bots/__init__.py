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
from .view import PlayerView, hand_views, player_view

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


def choose_in_hand(
    level: str, views: list[PlayerView], seed: str | int, budget: Budget | None = None
) -> tuple[str, Choice]:
    """R10.3: the tile and move of bot `level` given one view per hand tile (`hand_views`):
    each tile's best move by the policy, then the tile whose move is worth most (ties: the
    first tile in name order). A tile that fits nowhere is never in a hand to move from."""
    best: tuple[str, Choice] | None = None
    for view in views:
        choice = choose(level, view, f"{seed}:{view.tile}", budget)
        if best is None or choice.value > best[1].value:
            best = (view.tile, choice)
    if best is None:
        raise ValueError("an empty hand has nothing to play")
    return best


__all__ = [
    "LEVELS",
    "POLICIES",
    "Budget",
    "Choice",
    "PlayerView",
    "choose",
    "choose_in_hand",
    "hand_views",
    "player_view",
]
