"""Computer players: policies that choose a legal action from a `PlayerView`.

A policy is a pure function ``(view, rng, budget) -> Choice``: deterministic given the
view, the seeded `random.Random` and a playout budget, no I/O, no clock of its own. The
view holds only what the seat may know (`view.py`); nothing else reaches a policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

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
    level: str,
    views: list[PlayerView],
    seed: str | int,
    budget: Budget | None = None,
    policy: Callable[[str, PlayerView, str, Budget], Choice] | None = None,
) -> tuple[str, Choice]:
    """R10.3: the tile and move of bot `level` given one view per hand tile (`hand_views`):
    each tile's best move by the policy, then the tile whose move is worth most (ties: the
    first tile in name order). A tile that fits nowhere is never in a hand to move from.

    A time budget is the whole move's, however many views (a search per distinct tile, each
    with the whole budget, would take longer the more distinct tiles the hand holds — a
    public clue to a hidden hand, docs/bots.md): the views share one deadline, the k-th of n
    searching until k/n of the time has passed from the first's start. A playout budget is
    each view's (it reads no clock). `policy` stands in for `choose` (a caller's wrapper)."""
    budget = budget or Budget()
    ask = policy or choose
    start = budget.clock() if budget.clock is not None and budget.timed else None
    end = None if start is None else budget.end(start)
    best: tuple[str, Choice] | None = None
    for k, view in enumerate(views, 1):
        share = budget
        if start is not None and end is not None:
            share = replace(budget, deadline=start + (end - start) * k / len(views))
        choice = ask(level, view, f"{seed}:{view.tile}", share)
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
