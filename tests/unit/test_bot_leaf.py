"""mcts's fitted leaf (shared/carcassonne/bots/leaf.py): the heuristic's terms, split out
and weighed by a least-squares fit to greedy games' final scores."""

from __future__ import annotations

import dataclasses
import random

import pytest

from carcassonne.bots import leaf
from carcassonne.bots.heuristic import FARM_OPEN_CITY, majority, meeple_value, worth
from carcassonne.bots.leaf import (
    TERMS,
    WEIGHTS,
    fit_weights,
    leaf_worth,
    stage,
    stuck_cities,
    terms,
)
from carcassonne.game import fold, placements
from carcassonne.geometry import DELTA
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState


def positions(players: int, count: int) -> list[GameState]:
    """Random games of the base set with farmers stopped at every stage."""
    out = []
    for seed in range(count):
        turns = random.Random(seed).randrange(1, 70)
        _, events = random_game(random.Random(seed), players, Ruleset(), max_turns=turns)
        state = fold(events[:-1])
        if not state.over and state.bag_size:
            out.append(state)
    return out


def worths_own_weights(tiles_left: int, players: int) -> tuple[float, ...]:
    """The weights that make the terms sum to `heuristic.worth` (3rd-edition farms)."""
    late = min(1.0, tiles_left / 10)
    fill = min(1.0, tiles_left / 40)
    meeple = meeple_value(tiles_left, players)
    return (
        *(1.0, 1.0, late, 1.0, fill, 3.0, 3.0 * FARM_OPEN_CITY * late, meeple, 0.5 * meeple),
        *(0.0, 0.0),  # a stuck city: worth does not look at the bag
    )


@pytest.mark.parametrize("players", [2, 3, 4])
def test_the_terms_weighed_as_the_heuristic_weighs_them_give_its_worth(players: int) -> None:
    """`terms` splits `worth` into its parts: weighed by worth's own factors they add up to
    worth's figure for every player, so each feature's term goes to its majority holders."""
    for state in positions(players, 30):
        weights = worths_own_weights(state.bag_size, players)
        split = [
            score + sum(w * t for w, t in zip(weights, row, strict=True))
            for score, row in zip(state.scores, terms(state), strict=True)
        ]
        assert split == pytest.approx(worth(state), abs=1e-9)


def test_a_fit_recovers_the_weights_of_exact_data() -> None:
    rng = random.Random(3)
    truth = (1.5, -0.25, 3.0, 0.0, 2.0)
    rows = []
    for _ in range(200):
        x = [rng.uniform(0, 10) for _ in range(4)]
        rows.append((x, sum(w * v for w, v in zip(truth, [*x, 1.0], strict=True))))
    assert fit_weights(rows) == pytest.approx(truth, abs=1e-6)


def test_the_leaf_is_the_fit_mid_game_and_the_heuristic_where_the_fit_does_not_apply() -> None:
    state = positions(3, 5)[0]
    weights = WEIGHTS[3][stage(state.bag_size)]
    assert len(weights) == len(TERMS)
    expected = [
        score + sum(w * t for w, t in zip(weights, row, strict=True))
        for score, row in zip(state.scores, terms(state), strict=True)
    ]
    assert leaf_worth(state) == pytest.approx(expected)
    for rules in (Ruleset(farmers=False), Ruleset(incomplete_score=False)):
        other = state.copy()
        other.ruleset = dataclasses.replace(state.ruleset, **dataclasses.asdict(rules))
        assert not leaf.fitted(other)
        assert leaf_worth(other) == worth(other)
    empty = state.copy()
    empty.bag_size = 0
    assert leaf_worth(empty) == worth(empty)  # the heuristic is exact with the bag empty


@pytest.mark.parametrize("players", [2, 3, 4])
def test_a_leaf_reads_the_bag_only_where_the_stuck_terms_weigh_and_values_stay_the_same(
    players: int,
) -> None:
    """2 players weigh the stuck cities' terms 0, so their leaf skips `stuck_cities`; every
    leaf is still the fit over all the terms, to the last bit."""
    for state in positions(players, 40):
        weights = WEIGHTS[players][stage(state.bag_size)]
        expected = [
            score + sum(w * t for w, t in zip(weights, row, strict=True))
            for score, row in zip(state.scores, terms(state), strict=True)
        ]
        assert leaf_worth(state) == expected


def test_stages_split_the_bag_by_tiles_left() -> None:
    assert stage(0) == -1
    assert [stage(n) for n in leaf.STAGES] == list(range(len(leaf.STAGES)))
    assert stage(71) == len(leaf.STAGES) - 1
    for players, table in WEIGHTS.items():
        assert 2 <= players <= 4 and len(table) == len(leaf.STAGES)


def stuck_by_placements(state: GameState) -> set[int]:
    """The open cities with an edge facing an empty square where no tile left in the bag has
    a legal placement (`game.placements`), found from the cities' own tiles."""
    fillable = {(x, y) for name, n in state.bag.items() if n for x, y, _ in placements(state, name)}
    board = state.board
    out = set()
    for pos, placed in board.tiles.items():
        for edge, (dx, dy) in enumerate(DELTA):
            square = (pos[0] + dx, pos[1] + dy)
            segment = placed.orientation.slot_segment[edge]
            if square in board.tiles or square in fillable or segment < 0:
                continue
            root = board.find(placed.base + segment)
            feat = board.feats[root]
            assert feat is not None
            if feat.kind == "city" and not feat.done:
                out.add(root)
    return out


@pytest.mark.parametrize("players", [2, 3, 4])
def test_a_city_is_stuck_where_no_tile_left_fits_a_gap_beside_it(players: int) -> None:
    """R4.2, R6.2: a city beside an empty square that no tile left in the bag fits can never
    close; `stuck_cities` finds exactly those (checked by the engine's own placements)."""
    found = 0
    for state in positions(players, 30):
        assert stuck_cities(state) == stuck_by_placements(state)
        found += bool(stuck_cities(state))
        # with none left of the tiles with a city edge, every open city is stuck
        roads = state.copy()
        types = roads.tiles.types
        roads.bag = {name: 0 if "C" in types[name].edges else n for name, n in roads.bag.items()}
        open_cities = {
            roads.board.find(placed.base + segment)
            for placed in roads.board.tiles.values()
            for segment in placed.orientation.slot_segment[:4]
            if segment >= 0
        }
        open_cities = {
            root
            for root in open_cities
            if (feat := roads.board.feats[root]) is not None and feat.kind == "city" and feat.open
        }
        assert stuck_cities(roads) == open_cities
    assert found  # some random positions have one


def test_a_stuck_city_counts_in_its_holders_stuck_terms_only() -> None:
    """The stuck terms repeat the city's own terms (tiles and pennants, and the same times
    the chance factor) for the cities `stuck_cities` names, and are 0 for the others."""
    seen = 0
    for state in positions(3, 30):
        stuck = stuck_cities(state)
        rows = terms(state)
        held = [0.0] * state.players
        for root in stuck:
            feat = state.board.feats[root]
            assert feat is not None
            if feat.meeples:
                for p in majority(state, feat):
                    held[p] += len(feat.tiles) + feat.pennants
        assert [row[9] for row in rows] == pytest.approx(held)
        assert all(row[10] <= row[9] and row[9] <= row[1] for row in rows)
        seen += any(held)
    assert seen
