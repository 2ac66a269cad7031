"""`mcts`: Monte Carlo tree search over the tiles a player could draw.

The bot does not know the draw order, only the bag's counts (`PlayerView.bag`), so every
playout *determinizes*: it shuffles the remaining tiles (seeded), plays the candidate move,
then the next `horizon` turns of all players with a fast playout policy on that sampled
order, and scores the result with the heuristic (`heuristic.worth`; the exact final scores
when the playout reaches the end of the game). Which candidate gets the next playout is
chosen by UCB1 (the root of the tree; the tiles drawn below it differ per playout, so deeper
nodes would not be shared between determinizations).

Candidates are the `width` best actions by the greedy estimate (progressive pruning: a
turn has up to a few hundred actions and a playout budget of a few hundred), each seeded
with its greedy estimate as `PRIOR_VISITS` visits, so with a small budget the search falls
back on the greedy move and with a larger one corrects it by looking ahead.

The playout policy places each tile at a uniformly drawn legal spot and puts a meeple on
it with probability `PLAYOUT_MEEPLE` (then on a uniformly drawn free spot): cheap enough for
~1,000 playouts a second in CPython, and it keeps meeples out of most playout turns, as
players do.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..events import GameEnded, TileDrawn
from ..game import Action, action_events, actions
from ..simulate import bag_order, set_aside
from ..state import GameState
from .budget import DEFAULT_PLAYOUTS, Budget, Choice
from .heuristic import margin, worth
from .simple import after, legal, ranked
from .view import PlayerView

WIDTH = 8  # candidate moves searched
PRIOR_VISITS = 2  # weight of a candidate's greedy estimate, in playouts
EXPLORATION = 4.0  # UCB1 constant, in points of margin
PLAYOUT_MEEPLE = 0.25
PLAYOUT_SAMPLE = 8  # actions a playout move weighs with the heuristic (0: uniform)


@dataclass
class Arm:
    """A candidate move and what the playouts through it returned."""

    action: Action
    visits: float
    total: float

    @property
    def mean(self) -> float:
        """The mean margin of the playouts (with the prior)."""
        return self.total / self.visits


def play_mcts(
    view: PlayerView,
    rng: random.Random,
    budget: Budget | None = None,
    width: int = WIDTH,
    horizon: int | None = None,
) -> Choice:
    """The candidate with the most playouts after the budget is spent (see module doc)."""
    budget = budget or Budget()
    state, choices = legal(view)
    scored = ranked(state, choices)
    if len(scored) == 1:
        return Choice(scored[0][1], scored[0][0])
    arms = [Arm(action, PRIOR_VISITS, PRIOR_VISITS * value) for value, action in scored[:width]]
    plies = horizon if horizon is not None else 2 * view.players
    limit = budget.playouts
    if limit is None and budget.think_ms is None:
        limit = DEFAULT_PLAYOUTS
    clock = budget.clock
    deadline = None
    if budget.think_ms is not None and clock is not None:
        deadline = clock() + budget.think_ms / 1000
    done = 0
    while (limit is None or done < limit) and (deadline is None or clock() < deadline):  # type: ignore[misc]
        total = sum(arm.visits for arm in arms)
        log_total = math.log(total)
        arm = max(arms, key=lambda a: a.mean + EXPLORATION * math.sqrt(log_total / a.visits))
        order = bag_order(state, rng)  # a determinization: one order the bag could have
        leaf = playout(after(state, arm.action), order, plies, rng)
        arm.visits += 1
        arm.total += margin(worth(leaf), view.me)
        done += 1
    best = max(arms, key=lambda a: (a.visits, a.mean))
    return Choice(best.action, best.mean, done)


def playout(state: GameState, order: list[str], plies: int, rng: random.Random) -> GameState:
    """Play `plies` more turns of `state` (changed in place) drawing from the end of `order`."""
    while plies > 0 and not state.over:
        if not order:
            state.apply(GameEnded("last tile placed"))  # R7.1
            break
        tile = order.pop()
        state.apply(TileDrawn(tile))
        choices = actions(state)
        if not choices:
            set_aside(state, tile, order, rng, state.apply)  # R4.4 / R10.4, as in play
            continue
        for event in action_events(state, playout_action(state, choices, rng)):  # R9.2
            state.apply(event)
        plies -= 1
    return state


def playout_action(state: GameState, choices: list[Action], rng: random.Random) -> Action:
    """The best by the heuristic of `PLAYOUT_SAMPLE` uniformly drawn actions."""
    if PLAYOUT_SAMPLE:
        me = state.current
        sample = choices if len(choices) <= PLAYOUT_SAMPLE else rng.sample(choices, PLAYOUT_SAMPLE)
        return max(sample, key=lambda a: margin(worth(after(state, a)), me))
    pick = choices[rng.randrange(len(choices))]
    if pick[3] is None or rng.random() < PLAYOUT_MEEPLE:
        return pick
    return (pick[0], pick[1], pick[2], None)  # the same placement, no meeple
