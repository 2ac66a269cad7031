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
from .heuristic import Appraisal, margin, meeple_gain, worth, worth_glanced
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


def weigh(state: GameState, action: Action, appraisal: Appraisal | None = None) -> float:
    """The heuristic margin of the player to move after `action` (`appraisal`: the state's,
    to weigh several actions of it for less; the same value)."""
    twin = glance(state, action)
    values = worth(twin) if appraisal is None else worth_glanced(twin, appraisal)
    return margin(values, state.current)


def weigh_all(state: GameState, choices: list[Action]) -> list[float]:
    """`weigh` of every action, near enough (the sums in another order: equal to ~1e-12),
    for a fraction of the cost: each placement is glanced at once, without a meeple, and
    each meeple on it adds its `meeple_gain` (a turn has about three actions a placement).
    The abbot (R9.2) is weighed whole: it is no supply meeple, and a recall moves it."""
    me = state.current
    appraisal = Appraisal(state)
    bare: dict[tuple[int, int, int], tuple[GameState, list[float]]] = {}
    out = []
    for action in choices:
        x, y, rotation, meeple = action
        if meeple is not None and (meeple == RECALL_ABBOT or meeple.abbot):
            out.append(weigh(state, action, appraisal))
            continue
        seen = bare.get((x, y, rotation))
        if seen is None:
            twin = glance(state, (x, y, rotation, None))
            seen = bare[(x, y, rotation)] = (twin, worth_glanced(twin, appraisal))
        twin, values = seen
        if meeple is not None:
            node = twin.board.tiles[(x, y)].base
            node += twin.tiles.types[state.drawn].orientations[rotation].spots[meeple.spot]  # type: ignore[index]
            values = list(values)
            values[me] += meeple_gain(twin, me, node)
        out.append(margin(values, me))
    return out


def ranked(state: GameState, choices: list[Action]) -> list[tuple[float, Action]]:
    """Every action with its heuristic margin for the mover, best first (stable order)."""
    appraisal = Appraisal(state)
    scored = [(weigh(state, action, appraisal), action) for action in choices]
    scored.sort(key=lambda pair: -pair[0])
    return scored


def play_greedy(view: PlayerView, rng: random.Random, budget: Budget | None = None) -> Choice:
    """The action with the best heuristic margin (ties drawn by `rng`)."""
    state, choices = legal(view)
    scored = ranked(state, choices)
    best = scored[0][0]
    tied = [action for value, action in scored if value >= best - 1e-9]
    return Choice(tied[rng.randrange(len(tied))], best)
