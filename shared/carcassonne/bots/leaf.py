"""`mcts`'s estimate at the end of a playout: the heuristic's terms, weighed by a fit.

`heuristic.worth` weighs a position by judgement (docs/bots.md, "The heuristic"). This
estimate takes the same parts of it, split into `TERMS`, and weighs each by what it turned
out to be worth: least squares of each player's points still to come (final score minus
score now) on their terms, over the positions of greedy games (`fit_weights`), one fit per
player count and stage of the game (`STAGES`, by tiles left). It is for mcts's leaves and
its candidates' priors only; greedy's choice stays `worth`'s.

Two terms look at the bag: the open cities beside an empty square that no tile left fits
(`stuck_cities`: they can never close), their tiles and pennants and their closing term again,
so the fit can take back what a closed city would pay. Fitted with 3 and 4 players
(`tools/fit_leaf.py --games 200 --seed fitb --players 3 4`): with them mcts at 200 ms took
more from greedy with 3 players, +2.3 (+0.6..+4.0) points a game against two series without
them, 240 games on two seeds; nothing seen with 4 (docs/bots.md, "A leaf that sees the bag").
With 2 players their weights are 0 and the rest is the 9-term fit as it was (not refitted),
so that search plays exactly as before.

Where the fit does not apply (another ruleset's scoring, a player count or an empty bag it
was not fitted for) it is `worth` itself; with the bag empty `worth` is exact anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..board import Board
from ..geometry import DELTA
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
    "city stuck",  # open cities held with a gap no tile left fits: tiles and pennants
    "city stuck closing",  # the same times CITY_CLOSE ** open edges
)
# A stage is the tiles left from its bound (inclusive) up to the next stage's.
STAGES = (1, 6, 12, 21, 36)

# players -> one weight vector per stage (TERMS' order), fitted by `fit_weights` on greedy
# games of the base set with farmers, 3rd-edition farms (docs/bots.md, "A fitted leaf"); 3 and
# 4 players with the stuck terms (--games 200 --seed fitb), 2 players without (fit1, 300 games).
WEIGHTS: dict[int, tuple[tuple[float, ...], ...]] = {
    2: (
        (1.041, 0.926, 0.196, 1.004, -0.160, 2.757, 0.064, 3.580, 0.000, 0.000, 0.000),
        (1.141, 0.770, 0.722, 1.087, -0.262, 2.473, 0.191, 5.382, 0.000, 0.000, 0.000),
        (1.191, 0.765, 0.946, 1.087, -0.227, 2.111, 0.156, 5.967, 0.000, 0.000, 0.000),
        (1.353, 0.357, 1.741, 0.988, 0.035, 1.282, 0.314, 4.703, 0.000, 0.000, 0.000),
        (1.413, -0.605, 2.990, 0.683, -0.001, -0.516, 0.489, 6.402, 2.877, 0.000, 0.000),
    ),
    3: (
        (0.959, 0.649, 0.862, 0.977, 0.111, 2.795, 0.057, 1.835, 0.000, 0.378, -1.074),
        (0.991, 0.389, 1.518, 0.974, 0.141, 2.448, 0.243, 3.165, 0.000, 0.847, -2.256),
        (0.986, 0.344, 1.606, 0.867, 0.113, 1.948, 0.357, 2.175, 0.000, 1.024, -2.817),
        (0.883, 0.313, 1.544, 0.737, 0.133, 1.376, 0.370, 2.871, 0.000, 0.636, -2.298),
        (0.904, 0.151, 1.456, 0.474, 0.038, 0.354, 0.606, 4.054, 3.527, -0.093, -1.652),
    ),
    4: (
        (0.952, 0.680, 0.883, 0.961, 0.021, 2.781, 0.109, 1.266, 0.000, 0.301, -0.889),
        (0.871, 0.450, 1.268, 0.916, 0.020, 2.452, 0.183, 1.914, 0.000, 0.628, -1.605),
        (0.865, 0.439, 1.328, 0.888, 0.012, 2.015, 0.294, 2.020, 0.000, 0.736, -2.170),
        (0.847, 0.283, 1.581, 0.770, 0.020, 1.328, 0.550, 2.031, -1.843, 0.995, -3.315),
        (0.501, -0.125, 1.687, 0.683, -0.113, 0.282, 0.483, 2.521, 2.872, 0.504, -3.107),
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


def stuck_cities(state: GameState) -> set[int]:
    """The roots of the cities that border an empty square no tile left in the bag fits
    (R4.2, R4.3): such a city never closes (R6.2)."""
    board: Board = state.board
    types = state.tiles.types
    left = [types[name] for name, count in state.bag.items() if count > 0]
    fits: dict[str, bool] = {}
    out: set[int] = set()
    for (x, y), key in board.frontier.items():
        if "C" not in key:
            continue
        fit = fits.get(key)
        if fit is None:
            fit = fits[key] = any(tile.rotations_for(key) for tile in left)
        if fit:
            continue
        for edge in range(4):  # the tiles beside the gap whose city edge faces it
            if key[edge] != "C":
                continue
            dx, dy = DELTA[edge]
            placed = board.tiles.get((x + dx, y + dy))
            if placed is not None:
                segment = placed.orientation.slot_segment[edge ^ 2]
                if segment >= 0:
                    out.add(board.find(placed.base + segment))
    return out


def terms(state: GameState, stuck_terms: bool = True) -> list[list[float]]:
    """Each player's `TERMS`: the features they hold the majority of (R6.4: ties hold each)
    and their supply. `stuck_terms` False leaves the stuck cities' terms 0 (a leaf whose
    weights for them are 0 need not look at the bag)."""
    players = state.players
    out = [[0.0] * len(TERMS) for _ in range(players)]
    board: Board = state.board
    feats = board.feats
    stuck = stuck_cities(state) if stuck_terms else set()
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
            if root in stuck:
                row[9], row[10] = base, row[2]
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
    rows = terms(state, stuck_terms=any(weights[9:11]))  # 2 players: 0, the bag not read
    return [
        score + sum(w * t for w, t in zip(weights, row, strict=True))
        for score, row in zip(state.scores, rows, strict=True)
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
