"""The bots' estimate of a position: points scored plus what the board is likely to pay.

`worth(state)` gives each player's scored points plus, for every feature not yet scored,
an estimate of what it will pay the players who hold its majority (R6.4: ties pay each):

- **road**: its tiles (an incomplete road pays the same at the end, R6.1/R7.2);
- **city**: its tiles and pennants once, plus the same again times the chance it closes
  (R6.2 pays double when complete): ``0.75 ** open_edges``, scaled down as the bag empties;
- **monastery**: 1 plus its neighbours, plus the empty ring squares times the chance they
  fill (``min(1, tiles_left / 40)`` each; R6.3/R7.2);
- **farm** (with farmers): the edition's points (3, or 4 in the 1st) per bordering city
  that is complete, and a third of that per bordering city still open (it may close, R7.3);
- **meeples in supply**: a meeple in hand can still earn, so each is worth
  ``1.5 * min(1, tiles_left / (6 * players))`` points (the first four), half that beyond;
  a meeple stuck in a feature that will never close is thereby a cost.

Under R10.1 (incomplete features score 0) an open feature is worth its complete value
times its chance to close. The weights are judgement, tuned by `carcassonne duel` runs
against the random bot; the figures are in docs/bots.md.
"""

from __future__ import annotations

from ..board import Board, Feature
from ..scoring import CITY_POINTS_COMPLETE, FARM_POINTS, MONASTERY_POINTS, PENNANT_POINTS_COMPLETE
from ..state import GameState
from ..tiles import CITY, FIELD, MONASTERY, ROAD

CITY_CLOSE = 0.75  # chance factor per open city edge
MONASTERY_FILL_TILES = 40  # with this many tiles left, each empty ring square counts fully
FARM_OPEN_CITY = 1 / 3  # an open bordering city counts this much of a complete one
MEEPLE_POINTS = 1.5
FULL_MEEPLES = 4


def meeple_value(tiles_left: int, players: int) -> float:
    """What one meeple in supply is worth now (the first `FULL_MEEPLES`)."""
    return MEEPLE_POINTS * min(1.0, tiles_left / (6 * players))


def supply_value(count: int, tiles_left: int, players: int) -> float:
    """What `count` meeples in supply are worth."""
    each = meeple_value(tiles_left, players)
    full = min(count, FULL_MEEPLES)
    return each * full + 0.5 * each * (count - full)


def feature_value(
    board: Board, feat: Feature, tiles_left: int, incomplete_pays: bool, farm_points: int
) -> float:
    """The points an unscored feature is expected to pay each of its majority holders."""
    late = min(1.0, tiles_left / 10)  # near the end, little closes any more
    kind = feat.kind
    if kind == ROAD:
        base = float(len(feat.tiles))
        return base if incomplete_pays else base * (0.6**feat.open) * late
    if kind == CITY:
        base = float(len(feat.tiles) + feat.pennants)
        close = (CITY_CLOSE**feat.open) * late
        if incomplete_pays:
            return base + base * (CITY_POINTS_COMPLETE - 1) * close
        return CITY_POINTS_COMPLETE * base * close
    if kind == MONASTERY:
        (pos,) = feat.tiles
        have = board.neighbours(pos)
        fill = min(1.0, tiles_left / MONASTERY_FILL_TILES)
        expected = 1 + have + (8 - have) * fill
        return expected if incomplete_pays else expected * fill
    if kind == FIELD:
        done, opened = farm_cities(board, feat)
        return farm_points * (done + FARM_OPEN_CITY * opened * late)
    return 0.0


def farm_cities(board: Board, farm: Feature) -> tuple[int, int]:
    """The distinct cities a farm borders: (complete, still open) (R7.3)."""
    done = opened = 0
    seen: set[int] = set()
    for node in farm.cities:
        root = board.find(node)
        if root in seen:
            continue
        seen.add(root)
        city = board.feats[root]
        if city is not None and city.open == 0:
            done += 1
        else:
            opened += 1
    return done, opened


def farm_value(state: GameState) -> int:
    """What a complete city bordering a farm pays its farmers (R7.3; 0 without farmers)."""
    rules = state.ruleset
    return FARM_POINTS[rules.farm_scoring] if rules.farmers else 0


def meeple_gain(state: GameState, player: int, node: int) -> float:
    """What one meeple of `player` on the feature of `node` would add to their `worth`, in
    `state` right after the tile of `node` was placed without it. The feature was empty
    (R5.3), so the meeple would hold it alone: a feature the tile completed would have paid
    it (R6.1-R6.3) and sent the meeple home; an open one pays its estimate, and the meeple
    is gone from the supply meanwhile. (Not for the abbot, R9.2: it is no supply meeple.)"""
    board = state.board
    feat = board.feats[board.find(node)]
    assert feat is not None
    if feat.done:
        if feat.kind == ROAD:
            return float(len(feat.tiles))
        if feat.kind == CITY:
            return float(
                CITY_POINTS_COMPLETE * len(feat.tiles) + PENNANT_POINTS_COMPLETE * feat.pennants
            )
        return float(MONASTERY_POINTS)
    left, players, supply = state.bag_size, state.players, state.supply[player]
    value = feature_value(board, feat, left, state.ruleset.incomplete_score, farm_value(state))
    kept = supply_value(supply - 1, left, players) - supply_value(supply, left, players)
    return value + kept


def worth(state: GameState) -> list[float]:
    """Each player's scored points plus the estimated worth of the board and supply."""
    players = state.players
    out = [float(s) for s in state.scores]
    if state.over:
        return out
    board = state.board
    rules = state.ruleset
    left = state.bag_size
    farm_points = farm_value(state)
    counts = [0] * players
    meeples = state.meeples
    # Only features with a meeple pay anyone: found from the meeples (a few dozen at most)
    # rather than by a scan of every feature of the board; in root order, as a scan would
    # add them (the same float sums, so the same ties).
    feats = board.feats
    for root in sorted({board.find(m.node) for m in meeples.values()}):
        feat = feats[root]
        if feat is None or feat.done or not feat.meeples:
            continue
        for p in range(players):
            counts[p] = 0
        for meeple_id in feat.meeples:
            counts[meeples[meeple_id].player] += 1
        top = max(counts)
        value = feature_value(board, feat, left, rules.incomplete_score, farm_points)
        for p in range(players):
            if counts[p] == top:
                out[p] += value
    for p in range(players):
        out[p] += supply_value(state.supply[p], left, players)
    return out


class Appraisal:
    """`worth`'s term of every feature with a meeple in one position, kept to weigh glances
    at it (`simple.glance`): a glance shares with the position every feature its placement
    cannot change (`Board.copy_around`), and such a feature pays the same there, so its term
    is read back instead of worked out again. A farm is read back only if none of the cities
    it borders was touched either (a city closed or joined changes every farm beside it).
    The sums are made in the same order as `worth`'s, so the weights are the same floats."""

    __slots__ = ("left", "next_meeple", "roots", "supply", "terms")

    def __init__(self, state: GameState) -> None:
        board = state.board
        self.next_meeple = state.next_meeple
        self.left = state.bag_size  # every term is for this many tiles left
        self.roots = {board.find(m.node) for m in state.meeples.values()}
        # root -> (value, the players it pays, the roots of the cities a farm borders)
        self.terms: dict[int, tuple[float, list[int], frozenset[int]]] = {}
        # supply_value by meeples in supply (a glance changes the bag's size by nothing)
        self.supply: dict[int, float] = {}
        if state.over:
            return
        left, incomplete = state.bag_size, state.ruleset.incomplete_score
        farm_points = farm_value(state)
        for root in self.roots:
            feat = board.feats[root]
            if feat is None or feat.done or not feat.meeples:
                continue
            value = feature_value(board, feat, left, incomplete, farm_points)
            cities = frozenset(board.find(node) for node in feat.cities)
            self.terms[root] = (value, majority(state, feat), cities)


def majority(state: GameState, feat: Feature) -> list[int]:
    """The players a feature pays: those with the most meeples in it (R6.4: ties pay each)."""
    counts = [0] * state.players
    meeples = state.meeples
    for meeple_id in feat.meeples:
        counts[meeples[meeple_id].player] += 1
    top = max(counts)
    return [p for p in range(state.players) if counts[p] == top]


def worth_glanced(glanced: GameState, appraisal: Appraisal) -> list[float]:
    """`worth(glanced)`, the same floats, for a glance at the position of `appraisal` (a
    `GameState.copy(around=...)` with its placement applied): the terms of the features it
    shares with that position are read from `appraisal`. Measured (callgrind, 288 mcts
    playouts on 12 positions of 2-4 players): the search's instructions fell by 29 % with
    this (and `GameState.copy`'s shared slots set once), the same moves (docs/bots.md)."""
    board = glanced.board
    touched = board.touched
    if touched is None or glanced.over or glanced.bag_size != appraisal.left:
        return worth(glanced)
    out = [float(s) for s in glanced.scores]
    find = board.find
    # The roots with a meeple: the position's, joined where the placement touched them,
    # and the glance's own new figure's (a feature completed since is done: skipped below).
    roots = {find(root) if root in touched else root for root in appraisal.roots}
    meeples = glanced.meeples
    for meeple_id in range(appraisal.next_meeple, glanced.next_meeple):
        figure = meeples.get(meeple_id)
        if figure is not None:
            roots.add(find(figure.node))
    feats, terms = board.feats, appraisal.terms
    left, rules = glanced.bag_size, glanced.ruleset
    farm_points = farm_value(glanced)
    for root in sorted(roots):
        term = terms.get(root)
        # An untouched root's feature is the position's own object, with the same meeples
        # (`Board.copy_around` shares it); a farm also needs its cities untouched.
        if (
            term is not None
            and root not in touched
            and (not term[2] or touched.isdisjoint(term[2]))
        ):
            value, winners = term[0], term[1]
        else:
            feat = feats[root]
            if feat is None or feat.done or not feat.meeples:
                continue
            value = feature_value(board, feat, left, rules.incomplete_score, farm_points)
            winners = majority(glanced, feat)
        for p in winners:
            out[p] += value
    players, supply = glanced.players, appraisal.supply
    for p, count in enumerate(glanced.supply):
        kept = supply.get(count)
        if kept is None:
            kept = supply[count] = supply_value(count, left, players)
        out[p] += kept
    return out


def margin(values: list[float], me: int) -> float:
    """How far `me` is ahead of the best other player (negative: behind)."""
    best_other = max(v for p, v in enumerate(values) if p != me)
    return values[me] - best_other
