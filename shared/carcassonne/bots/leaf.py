"""`mcts`'s estimate at the end of a playout: the heuristic's terms, weighed by a fit.

`heuristic.worth` weighs a position by judgement (docs/bots.md, "The heuristic"). This
estimate takes the same parts of it, split into `TERMS`, and weighs each by what it turned
out to be worth: least squares of each player's points still to come (final score minus
score now) on their terms, over the positions of greedy games (`fit_weights`), one fit per
player count and stage of the game (`STAGES`, by tiles left). It is for mcts's leaves and
its candidates' priors only; greedy's choice stays `worth`'s.

Where the fit does not apply (another ruleset's scoring, a player count or an empty bag it
was not fitted for) it is `worth` itself; with the bag empty `worth` is exact anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..board import Board
from ..state import GameState
from ..tiles import CITY, FIELD, MONASTERY, ROAD
from .heuristic import CITY_CLOSE, FULL_MEEPLES, farm_cities, majority, worth

TERMS = (
    "road tiles",  # open roads held: their tiles
    "city base",  # open cities held: tiles and pennants
    "city closing",  # the same times CITY_CLOSE ** open edges
    "monastery have",  # open monasteries held: 1 + their neighbours
    "monastery empty",  # their empty ring squares
    "farm done",  # farms held: complete cities they border
    "farm open",  # and open ones
    "supply",  # meeples in supply, up to FULL_MEEPLES
    "supply extra",  # beyond
)
# A stage is the tiles left from its bound (inclusive) up to the next stage's.
STAGES = (1, 6, 12, 21, 36)

# players -> one weight vector per stage (TERMS' order), fitted by `fit_weights` on greedy
# games of the base set with farmers, 3rd-edition farms (docs/bots.md, "A fitted leaf").
WEIGHTS: dict[int, tuple[tuple[float, ...], ...]] = {
    2: (
        (1.041, 0.926, 0.196, 1.004, -0.160, 2.757, 0.064, 3.580, 0.000),
        (1.141, 0.770, 0.722, 1.087, -0.262, 2.473, 0.191, 5.382, 0.000),
        (1.191, 0.765, 0.946, 1.087, -0.227, 2.111, 0.156, 5.967, 0.000),
        (1.353, 0.357, 1.741, 0.988, 0.035, 1.282, 0.314, 4.703, 0.000),
        (1.413, -0.605, 2.990, 0.683, -0.001, -0.516, 0.489, 6.402, 2.877),
    ),
    3: (
        (1.005, 0.909, 0.209, 0.944, 0.218, 2.864, 0.127, 2.215, 0.000),
        (0.987, 0.758, 0.606, 0.930, 0.278, 2.522, 0.489, 4.239, 0.000),
        (1.016, 0.530, 1.039, 0.897, 0.234, 2.160, 0.610, 3.742, 0.000),
        (1.032, 0.507, 0.951, 0.763, 0.224, 1.325, 0.658, 3.352, 0.000),
        (0.854, 0.177, 1.071, 0.726, -0.004, 0.236, 0.738, 4.117, 3.505),
    ),
    4: (
        (0.975, 0.904, 0.270, 0.964, 0.098, 2.883, 0.044, 1.318, 0.000),
        (0.927, 0.670, 0.710, 0.945, 0.083, 2.460, 0.261, 1.890, 0.000),
        (0.896, 0.499, 0.905, 0.895, 0.088, 1.929, 0.430, 1.694, 0.616),
        (0.874, 0.289, 1.237, 0.775, 0.232, 1.388, 0.438, 2.053, -3.364),
        (0.562, -0.631, 2.195, 0.548, 0.133, 0.039, 0.264, 2.360, 2.711),
    ),
}


def stage(tiles_left: int) -> int:
    """The index in `STAGES` of a position with `tiles_left` (-1: the bag is empty)."""
    found = -1
    for index, bound in enumerate(STAGES):
        if tiles_left >= bound:
            found = index
    return found


def fitted(state: GameState) -> bool:
    """Whether the fit applies to `state`: the rules it was fitted on, a bag not empty."""
    rules = state.ruleset
    return (
        state.players in WEIGHTS
        and rules.farmers
        and rules.farm_scoring == "3rd"
        and rules.incomplete_score
        and not state.over
        and state.bag_size > 0
    )


def terms(state: GameState) -> list[list[float]]:
    """Each player's `TERMS`: the features they hold the majority of (R6.4: ties hold each)
    and their supply."""
    players = state.players
    out = [[0.0] * len(TERMS) for _ in range(players)]
    board: Board = state.board
    feats = board.feats
    for root in sorted({board.find(m.node) for m in state.meeples.values()}):
        feat = feats[root]
        if feat is None or feat.done or not feat.meeples:
            continue
        row = [0.0] * len(TERMS)
        kind = feat.kind
        if kind == ROAD:
            row[0] = float(len(feat.tiles))
        elif kind == CITY:
            base = float(len(feat.tiles) + feat.pennants)
            row[1] = base
            row[2] = base * CITY_CLOSE**feat.open
        elif kind == MONASTERY:
            (pos,) = feat.tiles
            have = board.neighbours(pos)
            row[3] = 1.0 + have
            row[4] = 8.0 - have
        elif kind == FIELD:
            done, opened = farm_cities(board, feat)
            row[5], row[6] = float(done), float(opened)
        for p in majority(state, feat):
            mine = out[p]
            for k, value in enumerate(row):
                mine[k] += value
    for p in range(players):
        supply = state.supply[p]
        out[p][7] = float(min(supply, FULL_MEEPLES))
        out[p][8] = float(max(0, supply - FULL_MEEPLES))
    return out


def leaf_worth(state: GameState) -> list[float]:
    """Each player's points plus their terms weighed by the fit (`worth` where it does not
    apply)."""
    if not fitted(state):
        return worth(state)
    weights = WEIGHTS[state.players][stage(state.bag_size)]
    return [
        score + sum(w * t for w, t in zip(weights, row, strict=True))
        for score, row in zip(state.scores, terms(state), strict=True)
    ]


def fit_weights(rows: Sequence[tuple[Sequence[float], float]]) -> tuple[float, ...]:
    """Least squares weights (and a last one, the intercept) of `rows`: (terms, target)."""
    size = len(rows[0][0]) + 1
    normal = [[0.0] * size for _ in range(size)]
    right = [0.0] * size
    for features, target in rows:
        x = [*features, 1.0]
        for i in range(size):
            right[i] += x[i] * target
            for j in range(size):
                normal[i][j] += x[i] * x[j]
    for i in range(size):  # a small ridge: a term never seen in a stage gets weight 0
        normal[i][i] += 1e-6
    return tuple(_solve(normal, right))


def _solve(matrix: list[list[float]], right: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (`matrix` and `right` are changed)."""
    n = len(right)
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(matrix[r][col]))
        matrix[col], matrix[pivot] = matrix[pivot], matrix[col]
        right[col], right[pivot] = right[pivot], right[col]
        for r in range(col + 1, n):
            factor = matrix[r][col] / matrix[col][col]
            if factor:
                for c in range(col, n):
                    matrix[r][c] -= factor * matrix[col][c]
                right[r] -= factor * right[col]
    out = [0.0] * n
    for r in range(n - 1, -1, -1):
        out[r] = (right[r] - sum(matrix[r][c] * out[c] for c in range(r + 1, n))) / matrix[r][r]
    return out
