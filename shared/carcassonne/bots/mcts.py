"""`mcts`: Monte Carlo search over the tiles a player could draw.

The bot does not know the draw order, only the bag's counts (`PlayerView.bag`), so every
playout *determinizes*: it takes one order the bag could have (seeded shuffle), plays the
candidate move, then the next `horizon` turns (one round of the table) with the playout
policy on that order, and scores the result with the fitted leaf (`leaf.leaf_worth`: the
heuristic's terms weighed by what they turned out to be worth in greedy games; the exact final
scores when the playout reaches the end of the game).

The search is at the root only (the tiles drawn below it differ per determinization, so
deeper nodes would not be shared between playouts), and two choices make a small budget go
far:

- **Paired playouts.** Candidates are compared on the same determinizations: a *round*
  draws one bag order and one playout seed and plays every candidate still in the race on
  them. Most of a playout's spread is the luck of the draw, which a pair of candidates then
  shares; the difference of their means is far less noisy than with a fresh order each.
- **Sequential halving** (Karnin, Koren and Somekh, 2013): the budget is cut into equal
  phases, one per halving; each phase runs rounds over the candidates still in, then keeps
  the better half by mean. The best move gets most of the playouts, and every comparison
  that decides is between candidates with the same rounds behind them.

Candidates are the `width` best actions by the greedy estimate (a turn has up to a few
hundred), each starting with the fitted leaf's estimate of the position after it as
`PRIOR_VISITS` playouts' worth, so with a tiny budget the search plays the candidate the leaf
likes best and with a larger one corrects it by looking ahead. The leaf, not greedy's
`worth`, at the prior and the playouts' ends: 37 of 40 games against greedy instead of 30
with 2 players, 200 ms of CPU a move (docs/bots.md, "A fitted leaf").

The budget is `playouts` (reproducible) and/or `think_ms` or a `deadline` on the clock
passed in; no playout starts that the last one's length says would end past the deadline
(the greedy ranking of the candidates runs before the first one, whatever the budget).

The playout policy is greedy: each playout turn weighs every legal action with the
heuristic (`PLAYOUT_SAMPLE` = 0; a positive value weighs that many drawn at random). That is
a few ms a turn, so a second buys fewer playouts, but they are the replies a good player
would make: the reply that punishes a candidate (a meeple slipped into our city, a farm
joined) is found, not sampled past. Weighing is most of what a playout costs, so it is made
cheap without changing a weight (`simple.weigh_all`): each placement is played once on a copy
that shares every feature it cannot change (`Board.copy_around`), and each meeple on it adds
its exact `heuristic.meeple_gain`; the same replies, about 1.5x (2 players) to 2.2x (3
players) as many playouts in the same CPU time; and the terms of the features a placement
cannot change are read back from an appraisal of the position (`heuristic.Appraisal`), with
cheaper copies: about 1.3-1.5x again, the same moves (docs/bots.md). Measured (docs/bots.md):
with the best of 8 sampled actions and two rounds of the table the search took 70 % of its
games from greedy; as it was then, 81 of 100 at 1 s of CPU a move.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from ..events import GameEnded, TileDrawn
from ..game import Action, action_events, actions, drawable
from ..simulate import bag_order, set_aside
from ..state import GameState
from .budget import DEFAULT_PLAYOUTS, Budget, Choice
from .heuristic import margin
from .leaf import leaf_worth
from .simple import after, legal, ranked, weigh_all
from .view import PlayerView

WIDTH = 8  # candidate moves searched
PRIOR_VISITS = 2.0  # weight of a candidate's greedy estimate, in playouts
PLAYOUT_SAMPLE = 0  # actions a playout move weighs with the heuristic (0: all of them)
HORIZON: int | None = None  # turns a playout plays (None: one round of the table)


@dataclass
class Arm:
    """A candidate move, the position after it and what its playouts returned."""

    action: Action
    prior: float
    child: GameState
    playouts: int = 0
    total: float = 0.0

    @property
    def mean(self) -> float:
        """The mean margin of its playouts, the greedy estimate counting `PRIOR_VISITS`."""
        return (PRIOR_VISITS * self.prior + self.total) / (PRIOR_VISITS + self.playouts)


def play_mcts(
    view: PlayerView,
    rng: random.Random,
    budget: Budget | None = None,
    width: int = WIDTH,
    horizon: int | None = None,
) -> Choice:
    """The candidate that wins the halving race (see the module doc)."""
    budget = budget or Budget()
    state, choices = legal(view)
    scored = ranked(state, choices)
    if len(scored) == 1:
        return Choice(scored[0][1], scored[0][0])
    children = [(action, after(state, action)) for _, action in scored[:width]]
    me = view.me
    live = [Arm(action, margin(leaf_worth(child), me), child) for action, child in children]
    horizon = horizon if horizon is not None else HORIZON
    plies = horizon if horizon is not None else view.players
    limit = budget.playouts
    if limit is None and not budget.timed:
        limit = DEFAULT_PLAYOUTS
    clock = budget.clock
    start = clock() if clock is not None else 0.0
    end = budget.end(start)
    seconds = None if end is None else max(0.0, end - start)
    phases = math.ceil(math.log2(len(live)))
    # Stratified first draws: round k gives the next player tile `firsts[k]` (cycling through
    # one shuffled copy of what may be drawn), so the tile that most shapes the reply is
    # sampled without replacement across rounds instead of independently.
    firsts = [name for name, n in sorted(drawable(state).items()) for _ in range(n)]
    rng.shuffle(firsts)
    done = rounds_run = 0
    last = [0.0]  # how long the last playout took (seconds on the clock)
    for phase in range(1, phases + 1):
        # This phase may spend up to an equal share of the budget, counted from the start.
        phase_limit = 0 if limit is None else limit * phase // phases
        phase_end = None if seconds is None else start + seconds * phase / phases
        rounds = 0
        while True:
            # A phase's first round runs if it fits in what is left of the whole budget (so
            # every phase compares on at least one round); the next ones only if they fit
            # in the phase's share.
            if limit is not None and done + len(live) > (phase_limit if rounds else limit):
                break
            if phase_end is not None and rounds and clock() >= phase_end:  # type: ignore[misc]
                break
            deadline = None if seconds is None else start + seconds
            first = firsts[rounds_run % len(firsts)] if firsts else None
            results = _round(state, live, plies, rng, view.me, first, clock, deadline, last)
            for arm, value in zip(live, results, strict=False):
                arm.playouts += 1
                arm.total += value
            done += len(results)
            if len(results) < len(live):  # the time ran out in the middle of the round
                break
            rounds += 1
            rounds_run += 1
        live.sort(key=lambda a: -a.mean)
        live = live[: (len(live) + 1) // 2]
        if len(live) == 1:
            break
    best = max(live, key=lambda a: a.mean)
    return Choice(best.action, best.mean, done)


def _round(
    state: GameState,
    live: list[Arm],
    plies: int,
    rng: random.Random,
    me: int,
    first: str | None,
    clock: Callable[[], float] | None,
    deadline: float | None,
    last: list[float],
) -> list[float]:
    """One determinization, whose first draw is `first`, played out after the candidates in
    `live`: all of them, or the first ones if the time ran out (they are best first). A
    playout starts only if it should end by the deadline, judged by the last one's length
    (`last[0]`, updated), so a search ends on time rather than one playout after it."""
    order = bag_order(state, rng)  # one order the bag could have
    if first is not None and order[-1] != first:  # the end of the order is drawn first
        at = order.index(first)
        order[at], order[-1] = order[-1], order[at]
    seed = rng.getrandbits(64)
    out = []
    for arm in live:
        began = clock() if clock is not None else 0.0
        if deadline is not None and began + last[0] >= deadline:
            break
        leaf = playout(arm.child.copy(), list(order), plies, random.Random(seed))
        out.append(margin(leaf_worth(leaf), me))
        if clock is not None:
            last[0] = clock() - began
    return out


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
    """The best by the heuristic of `PLAYOUT_SAMPLE` uniformly drawn actions (0: of them all;
    ties: the first in the engine's order)."""
    if PLAYOUT_SAMPLE and len(choices) > PLAYOUT_SAMPLE:
        choices = rng.sample(choices, PLAYOUT_SAMPLE)
    values = weigh_all(state, choices)
    return choices[max(range(len(choices)), key=values.__getitem__)]
