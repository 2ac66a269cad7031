"""R5 meeple placement, the R11 clarifications about meeples, farmers off, and `actions`.

Boards are written in notation (`U0@1,0:E` = tile U, rotation 0, at x=1, y=0, meeple on the
feature at its E edge; `:NNW` a farmer, `:M` a monk; `:road.E` spells the feature out).
The start tile D (C R F R) lies at (0,0); y grows south. Meeple spots returned by the engine
name each segment by its first edge (or half-edge, clockwise from NNW) after rotation.
"""

from __future__ import annotations

from collections import Counter

import pytest

from carcassonne.events import PlayTurn
from carcassonne.game import actions, decide, meeple_spots, placements
from carcassonne.ruleset import Ruleset
from carcassonne.state import DRAW, GameState
from carcassonne.tiles import Meeple

from .boards import final_state, fresh, record_error, refused, state_after

ROAD, CITY, FIELD, MONK = "road", "city", "field", "monastery"


def spots(state: GameState, x: int, y: int, rotation: int) -> set[Meeple]:
    """The legal meeple spots for the drawn tile placed at (x, y, rotation)."""
    found = meeple_spots(state, x, y, rotation)
    assert len(found) == len(set(found))
    return set(found)


def m(feature: str, spot: str) -> Meeple:
    """A meeple spot (a monk's spot is always "monastery")."""
    return Meeple(feature, MONK if feature == MONK else spot)


# ------------------------------------------------------------------------------ R5.1


@pytest.mark.parametrize(
    "meeple", [m(ROAD, "E"), m(ROAD, "W"), m(CITY, "E"), m(FIELD, "SSE"), m(MONK, "")]
)
def test_r5_1_spot_must_be_a_feature_of_the_placed_tile(meeple: Meeple) -> None:
    """R5.1: E2@0,-1 (F F C F: city S, field elsewhere) has no road (D's road is on another
    tile), no city at E, no field on its city edge, no monastery: no_such_feature."""
    state = fresh(draw="E")
    err = refused(state, PlayTurn(0, 0, -1, 2, meeple))
    assert (err.code, err.rule) == ("no_such_feature", "R5.1")
    for ok in (m(CITY, "S"), m(FIELD, "NNW"), m(FIELD, "WNW")):
        assert decide(state, PlayTurn(0, 0, -1, 2, ok))


def test_r5_1_meeple_only_on_the_tile_just_placed() -> None:
    """R5.1: `E2@0,-1:road.W` names D's road edge, but the meeple goes on E2: refused.
    `U0@1,0:E` puts the highwayman on the square (1,0) of the tile placed."""
    err = record_error("E2@0,-1:road.W")
    assert (err.index, err.code) == (0, "no_such_feature")
    state = state_after("U0@1,0:E")
    [meeple] = state.meeples.values()
    assert (meeple.player, meeple.pos, meeple.meeple) == (0, (1, 0), m(ROAD, "E"))
    assert state.supply == [6, 7]


# ------------------------------------------------------------------------------ R5.2


@pytest.mark.parametrize(
    ("turn", "pos", "kind"),
    [
        ("U0@1,0:E", (1, 0), ROAD),  # highwayman on U's road (joined to D's)
        ("N2@0,-1:S", (0, -1), CITY),  # knight in N2's city (S+E), joined to D's, still open
        ("B0@0,1:M", (0, 1), MONK),  # monk
        ("E1@0,1:NNW", (0, 1), FIELD),  # farmer on E1's field (E1 = F C F F)
    ],
)
def test_r5_2_roles(turn: str, pos: tuple[int, int], kind: str) -> None:
    """R5.2: a meeple stands on a road, in a city, on a monastery or on a field."""
    state = state_after(turn)
    [meeple] = state.meeples.values()
    assert meeple.pos == pos
    assert meeple.meeple.feature == kind
    assert state.board.feature(meeple.node).kind == kind


def test_r5_2_a_tile_offers_every_role_it_shows() -> None:
    """R5.2: A0@0,1 (F F R F: monastery, road S, one field) offers a monk, a highwayman and a
    farmer; D's south field it joins is free."""
    state = fresh(draw="A")
    assert spots(state, 0, 1, 0) == {m(MONK, ""), m(ROAD, "S"), m(FIELD, "NNW")}


# ------------------------------------------------------------------------------ R5.3


@pytest.mark.parametrize(
    ("turns", "index"),
    [
        ("U0@1,0:E U0@2,0 U0@3,0 U0@4,0:E", 3),  # road: player 0's highwayman 3 squares away
        ("U0@1,0:E U0@2,0 U0@3,0:E", 2),  # road: the player's own highwayman
        ("U0@1,0:E U0@-1,0:W", 1),  # road: through the start tile
        ("U0@1,0:NNW U0@-1,0:NNW", 1),  # field: both join D's field beside its city
        ("N2@0,-1:S U0@1,0 E3@1,-1:W", 2),  # city: E3's city (W) joins N2's (E edge)
    ],
)
def test_r5_3_feature_connected_to_any_meeple_is_taken(turns: str, index: int) -> None:
    """R5.3: the feature, with everything it joins after placement, must hold no meeple,
    the player's own included, at any distance: feature_occupied."""
    err = record_error(turns)
    assert (err.index, err.code, err.rule) == (index, "feature_occupied", "R5.3")


def test_r5_3_meeple_spots_leave_out_occupied_features() -> None:
    """R5.3: after `U0@1,0:E` the road through D is taken: U0 at (2,0) or (-1,0) offers its two
    fields only; U0 at (0,1) lies on a new road and offers it too. After `U0@1,0:NNW` the
    field north of the road is taken: U0@-1,0 offers its road and south field."""
    state = state_after("U0@1,0:E", draw="U")
    fields = {m(FIELD, "NNW"), m(FIELD, "ESE")}
    assert spots(state, 2, 0, 0) == fields
    assert spots(state, -1, 0, 0) == fields
    assert spots(state, 0, 1, 0) == fields | {m(ROAD, "E")}
    farmer = state_after("U0@1,0:NNW", draw="U")
    assert spots(farmer, -1, 0, 0) == {m(ROAD, "E"), m(FIELD, "ESE")}


def test_r5_3_a_field_taken_through_another_field_of_the_same_tile() -> None:
    """R5.3 ("taken with everything it connects to after the tile is placed"): two fields of
    the tile placed can be joined by one field already on the board, so a field whose own
    neighbours are empty may still join a farmer through its sibling.

    U0@-1,0:NNW puts player 0's farmer in the field north of D's road; B0@0,1 and A2@1,1 lie
    south-east (A's one field runs round the end of its road). V0@1,0 (road S-W) then has
    an inner field SSW WSW (beside D's south field and A's field) and an outer one WNW …
    SSE (beside D's north field, with the farmer, and A's field again): through A's field the
    two are one farm once V lies, and it holds the farmer. No field of V may take a farmer;
    only the road (D's, U's and A's, free) may take a meeple."""
    turns = "U0@-1,0:NNW B0@0,1 A2@1,1"
    state = state_after(turns, draw="V")
    assert spots(state, 1, 0, 0) == {m(ROAD, "S")}
    assert {a[3] for a in actions(state) if a[:3] == (1, 0, 0)} == {None, m(ROAD, "S")}
    err = refused(state, PlayTurn(1, 1, 0, 0, m(FIELD, "SSW")))
    assert (err.code, err.rule) == ("feature_occupied", "R5.3")
    err = record_error(turns + " V0@1,0:SSW")
    assert (err.index, err.code) == (3, "feature_occupied")
    placed = final_state(turns + " V0@1,0")  # and the farm is one: V's two fields, D's, A's, B's
    v = placed.board.tiles[(1, 0)]
    assert len({placed.board.find(v.base + i) for i in (1, 2)}) == 1


# ------------------------------------------------------------------------------ R5.4


def test_r5_4_separately_occupied_roads_joined_later_hold_both_meeples() -> None:
    """R5.4: `V0@1,0:S V3@0,1:E V1@1,1`: player 0's road (D → (1,0) → south) and player 1's
    road ((0,1) east and south) are joined by V1 (R F F R) at (1,1); the joint road holds
    both meeples. It stays open (D's west end, (0,1)'s south end): at the end each scores
    the 4 tiles D, (1,0), (1,1), (0,1) (tie, R6.4/R7.2)."""
    turns = "V0@1,0:S V3@0,1:E V1@1,1"
    before = state_after("V0@1,0:S V3@0,1:E", draw="V")
    a, b = before.meeples.values()
    assert before.board.find(a.node) != before.board.find(b.node)
    assert spots(before, 1, 1, 1) == {m(FIELD, "NNE"), m(FIELD, "NNW")}  # road taken
    state = state_after(turns)
    a, b = state.meeples.values()
    assert state.board.find(a.node) == state.board.find(b.node)
    road = state.board.feature(a.node)
    assert sorted(state.owner(i) for i in road.meeples) == [0, 1]
    assert road.tiles == {(0, 0), (1, 0), (1, 1), (0, 1)}
    assert final_state(turns).scores == [4, 4]


# ------------------------------------------------------------------------------ R5.5


def test_r5_5_no_meeple_left_only_tiles() -> None:
    """R5.5 with meeples=1: `U0@1,0:E E2@0,-1 U0@2,0:NNW`: player 0's only meeple stands on
    the road, so the farmer at turn 2 is refused (no_meeple_left); no spots are offered and
    every action is a bare placement."""
    err = record_error("U0@1,0:E E2@0,-1 U0@2,0:NNW", opts="meeples=1")
    assert (err.index, err.code, err.rule) == (2, "no_meeple_left", "R5.5")
    state = state_after("U0@1,0:E E2@0,-1", draw="U", opts="meeples=1")
    assert state.supply == [0, 1]
    assert meeple_spots(state, 2, 0, 0) == []
    assert placements(state)
    assert sorted(actions(state)) == sorted((x, y, r, None) for x, y, r in placements(state))
    assert decide(state, PlayTurn(0, 2, 0, 0))


def test_r5_5_game_without_meeples() -> None:
    """R5.5 with meeples=0: E2@0,-1 with a knight is refused; without one it is legal."""
    state = fresh(ruleset=Ruleset(meeples=0), draw="E")
    assert meeple_spots(state, 0, -1, 2) == []
    assert refused(state, PlayTurn(0, 0, -1, 2, m(CITY, "S"))).code == "no_meeple_left"
    assert decide(state, PlayTurn(0, 0, -1, 2))


# ------------------------------------------------------------------------------ R5.6


def test_r5_6_meeple_on_the_feature_it_completes_scores_and_returns() -> None:
    """R5.6: `E2@0,-1:S` closes D's city (2 tiles, no pennant): the knight scores 4 at once
    and is back in the supply in the same turn."""
    state = state_after("E2@0,-1:S")
    assert state.scores == [4, 0]
    assert state.supply == [7, 7]
    assert state.meeples == {}
    [city] = state.log
    assert (city.kind, city.tiles, city.points, city.returned) == (
        CITY,
        ((0, -1), (0, 0)),
        4,
        (1, 0),
    )


def test_r5_6_completing_an_unoccupied_feature_scores_nothing() -> None:
    """R5.6: `E2@0,-1` without a meeple closes the same city: nobody scores."""
    state = state_after("E2@0,-1")
    assert state.scores == [0, 0]
    assert state.supply == [7, 7]


# ------------------------------------------------------------------------------ R11


def test_r11_t_junction_offers_each_arm() -> None:
    """R11: W0@1,0 (F R R R: roads E, S, W end at the junction; 3 fields) offers each arm and
    each field; X0@1,0 offers four roads and four fields."""
    state = fresh(draw="W")
    assert spots(state, 1, 0, 0) == {
        m(ROAD, "E"), m(ROAD, "S"), m(ROAD, "W"), m(FIELD, "NNW"), m(FIELD, "ESE"),
        m(FIELD, "SSW")}  # fmt: skip
    x_state = fresh(draw="X")
    assert spots(x_state, 1, 0, 0) == {
        m(ROAD, "N"), m(ROAD, "E"), m(ROAD, "S"), m(ROAD, "W"), m(FIELD, "NNW"),
        m(FIELD, "NNE"), m(FIELD, "ESE"), m(FIELD, "SSW")}  # fmt: skip


def test_r11_highwaymen_on_different_arms_are_on_different_roads() -> None:
    """R11: `W0@1,0:E U1@1,1:N`: player 1's highwayman joins the S arm while player 0 holds
    the E arm: legal, two roads. Then `U0@2,0:E` (E arm) is taken, `U0@-1,0:W` (W arm,
    through D) is free."""
    state = state_after("W0@1,0:E U1@1,1:N")
    a, b = state.meeples.values()
    assert state.board.find(a.node) != state.board.find(b.node)
    err = record_error("W0@1,0:E U1@1,1:N U0@2,0:E")
    assert (err.index, err.code) == (2, "feature_occupied")
    after = state_after("W0@1,0:E U1@1,1:N U0@-1,0:W")
    assert len(after.meeples) == 3


def test_r11_road_ends_at_each_junction() -> None:
    """R11/R6.1: `W0@1,0 W2@-1,0:E`: the road from W2's E arm through D to W0's W arm ends at
    both junctions: complete, 3 tiles, 3 points to player 1, whose highwayman returns."""
    state = state_after("W0@1,0 W2@-1,0:E")
    assert state.scores == [0, 3]
    assert state.supply == [7, 7]
    assert state.log[0].tiles == ((-1, 0), (0, 0), (1, 0))


@pytest.mark.parametrize("turns", ["B0@0,1:NNW B0@1,1:M", "B0@0,1:M B0@1,1:NNW"])
def test_r11_field_beside_a_monastery_takes_a_farmer(turns: str) -> None:
    """R11: a farmer on the field around a monastery leaves the monastery free, and a monk
    leaves the field free: `B0@0,1:NNW B0@1,1:M` and `B0@0,1:M B0@1,1:NNW` are legal."""
    state = state_after(turns)
    kinds = sorted(x.meeple.feature for x in state.meeples.values())
    assert kinds == [FIELD, MONK]


def test_r11_monastery_stays_free_beside_a_farmer() -> None:
    """R11: after `B0@0,1:NNW` the monastery on (0,1) holds nobody; B at (1,1) offers only
    its monastery (its field joins the farmer's). After `B0@0,1:M` it offers both."""
    state = state_after("B0@0,1:NNW", draw="B")
    board = state.board
    assert board.feature(board.monasteries[(0, 1)]).meeples == []
    assert spots(state, 1, 1, 0) == {m(MONK, "")}
    monk = state_after("B0@0,1:M", draw="B")
    assert spots(monk, 1, 1, 0) == {m(MONK, ""), m(FIELD, "NNW")}


def test_r11_two_city_tile_offers_both_cities() -> None:
    """R11: I2@0,-1 (F C C F: cities S and E apart) and H0@0,-1 (C F C F: cities N and S
    apart) each offer two separate knight spots and one field."""
    assert spots(fresh(draw="I"), 0, -1, 2) == {m(CITY, "S"), m(CITY, "E"), m(FIELD, "NNW")}
    assert spots(fresh(draw="H"), 0, -1, 0) == {m(CITY, "N"), m(CITY, "S"), m(FIELD, "ENE")}


def test_r11_two_city_tile_meeple_placed_before_scoring() -> None:
    """R11/R5.6: `I2@0,-1:S`: the knight goes into the city I2 closes with D, is scored (4)
    and returns; the turn is then over (one meeple per turn)."""
    state = state_after("I2@0,-1:S")
    assert (state.scores, state.supply, state.meeples) == ([4, 0], [7, 7], {})
    assert (state.phase, state.current) == (DRAW, 1)


def test_r11_two_city_tile_meeple_in_the_other_city() -> None:
    """R11: `I2@0,-1:E`: the knight stays in the open cap on E; D's city, closed without a
    meeple, scores nothing."""
    state = state_after("I2@0,-1:E")
    assert state.scores == [0, 0]
    assert state.supply == [6, 7]
    [knight] = state.meeples.values()
    assert (knight.pos, knight.meeple) == ((0, -1), m(CITY, "E"))
    assert state.board.feature(knight.node).open == 1


# ------------------------------------------------------------------------- farmers off


def test_farmers_off_no_field_spots() -> None:
    """R5.2 with farmers=off: E2@0,-1 offers only its city; `E2@0,-1:NNW` is refused with
    farmers_disabled; a monk (`B0@0,1:M`) is still fine."""
    rules = Ruleset(farmers=False)
    state = fresh(ruleset=rules, draw="E")
    assert spots(state, 0, -1, 2) == {m(CITY, "S")}
    assert all(a[3] is None or a[3].feature != FIELD for a in actions(state))
    err = record_error("E2@0,-1:NNW", farmers="off")
    assert (err.index, err.code, err.rule) == (0, "farmers_disabled", "R5.2")
    assert len(state_after("B0@0,1:M", farmers="off").meeples) == 1


# ------------------------------------------------------------------------------ actions


def test_actions_after_the_start_tile_by_hand() -> None:
    """E after the start: 4 placements (see R4.3), each with a knight spot and a farmer
    spot: 4 bare placements + 8 with a meeple = 12 actions."""
    got = actions(fresh(draw="E"))
    assert len(got) == 12
    assert (0, -1, 2, m(CITY, "S")) in got and (0, 1, 1, m(CITY, "E")) in got


@pytest.mark.parametrize(
    ("turns", "draw", "opts", "farmers"),
    [
        ("", "E", "", "on"),
        ("U0@1,0:E", "W", "", "on"),
        ("B0@0,1:NNW", "B", "", "on"),
        ("V0@1,0:S V3@0,1:E", "V", "", "on"),
        ("U0@1,0:E E2@0,-1", "U", "meeples=1", "on"),
        ("U0@1,0", "X", "", "off"),
        ("W0@1,0:E U1@1,1:N", "L", "area=5x5", "on"),
    ],
)
def test_actions_are_placements_with_and_without_each_meeple_spot(
    turns: str, draw: str, opts: str, farmers: str
) -> None:
    """`actions` = for each placement: (placement, None) and (placement, spot) per spot."""
    state = state_after(turns, draw=draw, opts=opts, farmers=farmers)
    expected: list[tuple[int, int, int, Meeple | None]] = []
    for x, y, r in placements(state):
        expected.append((x, y, r, None))
        expected.extend((x, y, r, spot) for spot in meeple_spots(state, x, y, r))
    assert Counter(actions(state)) == Counter(expected)
    for x, y, r, spot in actions(state):
        assert decide(state, PlayTurn(state.current, x, y, r, spot))
