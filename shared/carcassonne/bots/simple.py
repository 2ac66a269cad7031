"""The two simple policies: `random` (any legal action, uniformly) and `greedy`.

`greedy` plays every legal action on a copy of the position and keeps the one that leaves
it furthest ahead of the best other player by the estimate of `heuristic.worth` (points
scored now, what its open features and farms should pay, the meeples kept in supply);
ties go to the seeded generator.
"""

from __future__ import annotations

import random

from ..game import RECALL_ABBOT, Action, action_events, actions
from ..state import GameState
from .budget import Budget, Choice
from .heuristic import margin, worth
from .view import PlayerView


def legal(view: PlayerView) -> tuple[GameState, list[Action]]:
    """The view's position and its legal actions (a bot is only asked when there is one)."""
    state = view.position()
    choices = actions(state)
    if not choices:
        raise ValueError(f"tile {view.tile} fits nowhere: nothing to choose (R4.4)")
    return state, choices


def play_random(view: PlayerView, rng: random.Random, budget: Budget | None = None) -> Choice:
    """Any legal action, uniformly."""
    state, choices = legal(view)
    action = choices[rng.randrange(len(choices))]
    return Choice(action, weigh(state, action))


def after(state: GameState, action: Action) -> GameState:
    """A copy of `state` with `action` played by the player to move."""
    assert state.drawn is not None
    twin = state.copy()
    for event in action_events(state, action):  # R9.2: the abbot taken back is two events
        twin.apply(event)
    return twin


def glance(state: GameState, action: Action) -> GameState:
    """`after`, on a copy to be read and dropped, never played on: it shares with `state`
    the features the placement cannot change (`GameState.copy(around=...)`), which makes
    weighing every action of a turn several times cheaper than whole copies."""
    if action[3] == RECALL_ABBOT:  # R9.2: the recalled abbot's monastery may be anywhere
        return after(state, action)
    twin = state.copy(around=(action[0], action[1]))
    for event in action_events(state, action):
        twin.apply(event)
    return twin


def weigh(state: GameState, action: Action) -> float:
    """The heuristic margin of the player to move after `action`."""
    return margin(worth(glance(state, action)), state.current)


def ranked(state: GameState, choices: list[Action]) -> list[tuple[float, Action]]:
    """Every action with its heuristic margin for the mover, best first (stable order)."""
    scored = [(weigh(state, action), action) for action in choices]
    scored.sort(key=lambda pair: -pair[0])
    return scored


def play_greedy(view: PlayerView, rng: random.Random, budget: Budget | None = None) -> Choice:
    """The action with the best heuristic margin (ties drawn by `rng`)."""
    state, choices = legal(view)
    scored = ranked(state, choices)
    best = scored[0][0]
    tied = [action for value, action in scored if value >= best - 1e-9]
    return Choice(tied[rng.randrange(len(tied))], best)
