"""Bot against bot: whole games on a shuffled bag, and the statistics of a series.

A game of a series is fixed by (seed, game number): the bag order is a seeded shuffle and
each move's generator is seeded by (seed, game, turn). Games come in pairs on the same
bag order with the seats turned round (bot A first, then bot B first), which halves the
luck of the draw in the comparison. The policies see only `player_view(state)`; the order
stays here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from ..events import (
    GameEnded,
    GameStarted,
    TileDrawn,
)
from ..game import Action, action_events, actions
from ..ruleset import Ruleset
from ..simulate import bag_order, set_aside
from ..state import OVER, GameState
from . import choose
from .budget import Budget
from .view import player_view

Z95 = 1.959963984540054


@dataclass(frozen=True)
class GameResult:
    """One duel game: bot A's seat, the final scores and the time each side thought."""

    seat_a: int
    scores: tuple[int, ...]
    moves: tuple[int, int]  # moves made by A, by B
    seconds: tuple[float, float]  # thinking time of A, of B (0 without a clock)
    game: int = 0  # its number in the series

    @property
    def diff(self) -> int:
        """A's score minus the best other score."""
        a = self.scores[self.seat_a]
        return a - max(s for p, s in enumerate(self.scores) if p != self.seat_a)


def seats_of_a(game: int, players: int) -> int:
    """Where bot A sits in game number `game`: pairs share a bag, A first then last."""
    return 0 if game % 2 == 0 else players - 1


def play_out(
    state: GameState, order: list[str], bag_rng: random.Random, move: Callable[[GameState], Action]
) -> None:
    """Play a started game to its end from the bag `order` (drawn from its end): `move`
    chooses the action of the seat to move; a tile that fits nowhere is set aside (R4.4)."""
    while order and state.phase != OVER:
        tile = order.pop()
        state.apply(TileDrawn(tile))
        if not actions(state):
            set_aside(state, tile, order, bag_rng, state.apply)
            continue
        for event in action_events(state, move(state)):  # R9.2: a recall is two events
            state.apply(event)
    if state.phase != OVER:
        state.apply(GameEnded("last tile placed"))


def play_duel_game(
    game: int,
    seed: int,
    levels: tuple[str, str],
    players: int = 2,
    ruleset: Ruleset | None = None,
    budgets: tuple[Budget, Budget] = (Budget(), Budget()),
    clock: Callable[[], float] | None = None,
) -> GameResult:
    """Play game `game` of a series: bot A (`levels[0]`) in one seat, bot B in the others."""
    ruleset = ruleset or Ruleset()
    seat_a = seats_of_a(game, players)
    state = GameState()
    state.apply(GameStarted(ruleset, players))
    bag_rng = random.Random(f"duel:{seed}:{game // 2}")
    order = bag_order(state, bag_rng)
    moves, seconds = [0, 0], [0.0, 0.0]

    def move(state: GameState) -> Action:
        side = 0 if state.current == seat_a else 1
        started = clock() if clock else 0.0
        choice = choose(
            levels[side], player_view(state), f"{seed}:{game}:{state.turn}", budgets[side]
        )
        seconds[side] += (clock() - started) if clock else 0.0
        moves[side] += 1
        return choice.action

    play_out(state, order, bag_rng, move)
    return GameResult(
        seat_a, tuple(state.scores), (moves[0], moves[1]), (seconds[0], seconds[1]), game
    )


@dataclass(frozen=True)
class Summary:
    """A series: wins, draws, A's win share with its 95 % interval, the score difference."""

    games: int
    wins_a: int
    wins_b: int
    draws: int
    ci95: tuple[float, float]  # Wilson interval of A's share of games (a draw counts half)
    mean_diff: float
    ci95_diff: tuple[float, float]  # normal interval of the mean difference

    @property
    def share_a(self) -> float:
        """A's share of the games, draws counted half."""
        return (self.wins_a + 0.5 * self.draws) / self.games if self.games else 0.0


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarize(results: list[GameResult]) -> Summary:
    """Statistics of a series of games."""
    n = len(results)
    diffs = [r.diff for r in results]
    wins_a = sum(d > 0 for d in diffs)
    wins_b = sum(d < 0 for d in diffs)
    draws = n - wins_a - wins_b
    mean = sum(diffs) / n if n else 0.0
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    half = Z95 * sd / math.sqrt(n) if n else 0.0
    return Summary(
        games=n,
        wins_a=wins_a,
        wins_b=wins_b,
        draws=draws,
        ci95=wilson(wins_a + 0.5 * draws, n),
        mean_diff=mean,
        ci95_diff=(mean - half, mean + half),
    )
