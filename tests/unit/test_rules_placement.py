"""R2 setup, R3 turn order and R4 tile placement (with house rules R10.4 and R10.5).

Boards are written in notation (`U0@1,0` = tile U, rotation 0, at x=1, y=0; y grows south).
The start tile D (C R F R: city N, road W–E, field S) lies at (0,0). Expected placements are
worked out by hand from the edge strings of TILES.md; rotating clockwise moves edge N to E.
"""

from __future__ import annotations

import pytest

from carcassonne.errors import OutOfTurnError, RecordError
from carcassonne.events import (
    DiscardTile,
    DrawTile,
    GameEnded,
    PlayTurn,
    TileDiscarded,
    TilePlaced,
    TileReturned,
)
from carcassonne.game import decide, is_unplaceable, placements
from carcassonne.record import load_record, record_events
from carcassonne.ruleset import Ruleset

from .boards import fresh, record, record_error, refused, run, state_after

# ------------------------------------------------------------------------------ R2.1


def test_r2_1_start_tile_d_at_origin_unrotated() -> None:
    """R2.1: a new game holds only D at (0,0), rotation 0. Its open edges ask: north square a
    C on its S edge, east square an R on its W edge, south an F on N, west an R on E."""
    state = fresh()
    assert list(state.board.tiles) == [(0, 0)]
    placed = state.board.tiles[(0, 0)]
    assert (placed.tile.name, placed.rotation) == ("D", 0)
    assert state.board.frontier == {
        (0, -1): "..C.",
        (1, 0): "...R",
        (0, 1): "F...",
        (-1, 0): ".R..",
    }


@pytest.mark.parametrize(
    "start",
    [
        {"tile": "D", "x": 0, "y": 0, "rotation": 1},
        {"tile": "D", "x": 1, "y": 0, "rotation": 0},
        {"tile": "E", "x": 0, "y": 0, "rotation": 0},
    ],
)
def test_r2_1_record_with_other_start_is_rejected(start: dict[str, object]) -> None:
    """R2.1: a record whose start is not D at 0,0 unrotated fails with bad_start."""
    data = {"format": "carcassonne-record/1", "players": 2, "start": start, "turns": []}
    with pytest.raises(RecordError) as info:
        load_record(data)
    assert (info.value.code, info.value.rule, info.value.index) == ("bad_start", "R2.1", None)


def test_r2_1_record_with_the_right_start_is_accepted() -> None:
    """R2.1: the start spelt out as D at 0,0 rotation 0 (or left out) is accepted."""
    start = {"tile": "D", "x": 0, "y": 0, "rotation": 0}
    for data in ({"start": start}, {}):
        rec = load_record({"format": "carcassonne-record/1", "players": 2, "turns": [], **data})
        assert rec.players == 2


# ------------------------------------------------------------------------- R3 / R2.2


def test_r2_2_players_move_in_seat_order() -> None:
    """R2.2/R3: 3 players, `U0@1,0 U0@2,0 U0@3,0 U0@4,0`: placed by 0, 1, 2, 0; then 1 moves."""
    events = record_events(record("U0@1,0 U0@2,0 U0@3,0 U0@4,0", players=3))
    assert [e.player for e in events if isinstance(e, TilePlaced)] == [0, 1, 2, 0]
    assert state_after("U0@1,0 U0@2,0 U0@3,0 U0@4,0", players=3).current == 1


def test_r2_2_not_your_turn() -> None:
    """R2.2: with E drawn by player 0, player 1 may neither place (E2@0,-1) nor discard;
    after player 0's turn, player 0 may not place again."""
    state = fresh(draw="E")
    for cmd in (PlayTurn(1, 0, -1, 2), DiscardTile(1)):
        err = refused(state, cmd)
        assert isinstance(err, OutOfTurnError)
        assert (err.code, err.rule) == ("not_your_turn", "R2.2")
    run(state, PlayTurn(0, 0, -1, 2))
    assert state.current == 1
    run(state, DrawTile("U"))
    assert refused(state, PlayTurn(0, 1, 0, 0)).code == "not_your_turn"
    run(state, PlayTurn(1, 1, 0, 0))
    assert state.current == 0


def test_r3_draw_then_place() -> None:
    """R3: a tile must be drawn before it is placed, and only one tile is drawn per turn."""
    state = fresh()
    assert refused(state, PlayTurn(0, 1, 0, 0)).code == "no_tile_drawn"
    run(state, DrawTile("U"))
    assert refused(state, DrawTile("U")).code == "tile_already_drawn"


# ------------------------------------------------------------------------------ R4.1


def test_r4_1_corner_contact_is_not_adjacency() -> None:
    """R4.1: after the start alone, E at (1,1) (touching D only at a corner) or far away at
    (5,5) is not_adjacent in every rotation; on (0,0) it is square_taken."""
    state = fresh(draw="E")
    for rotation in range(4):
        for x, y in ((1, 1), (-1, -1), (1, -1), (-1, 1), (5, 5)):
            err = refused(state, PlayTurn(0, x, y, rotation))
            assert (err.code, err.rule) == ("not_adjacent", "R4.1")
        assert refused(state, PlayTurn(0, 0, 0, rotation)).code == "square_taken"
    assert {(x, y) for x, y, _ in placements(state, "X")} <= {(1, 0), (-1, 0), (0, 1), (0, -1)}


def test_r4_1_square_taken_in_a_record() -> None:
    """R4.1: `U0@1,0 U0@1,0`: the second U lands on a taken square."""
    err = record_error("U0@1,0 U0@1,0")
    assert (err.index, err.code) == (1, "square_taken")


# ------------------------------------------------------------------------------ R4.2

# Board `U0@1,0 N2@0,-1`: square (1,-1) touches U0's N edge (F) below and N2's E edge (C,
# N2 = F C C F) on its west: a tile there needs S=F and W=C.
CORNER = "U0@1,0 N2@0,-1"


def test_r4_2_all_touching_edges_must_match() -> None:
    """R4.2: on `U0@1,0 N2@0,-1`, E at (1,-1): E0 (C F F F) matches S but not W, E1 (F C F F)
    likewise, E2 (F F C F) neither; only E3 (F F F C) fits. S0 (C C R C) matches W but not S."""
    state = state_after(CORNER, draw="E")
    assert state.board.frontier[(1, -1)] == "..FC"
    for rotation, edge in ((0, "W"), (1, "W"), (2, "S")):
        err = refused(state, PlayTurn(0, 1, -1, rotation))
        assert (err.code, err.rule, err.details["edge"]) == ("edge_mismatch", "R4.2", edge)
    assert decide(state, PlayTurn(0, 1, -1, 3))
    assert [r for x, y, r in placements(state) if (x, y) == (1, -1)] == [3]
    s_state = state_after(CORNER, draw="S")
    err = refused(s_state, PlayTurn(0, 1, -1, 0))
    assert (err.code, err.details["edge"]) == ("edge_mismatch", "S")


def test_r4_2_one_matching_edge_is_not_enough_in_a_record() -> None:
    """R4.2: `U0@1,0 N2@0,-1 E0@1,-1` fails at turn 2 with edge_mismatch."""
    err = record_error(CORNER + " E0@1,-1")
    assert (err.index, err.code, err.rule) == (2, "edge_mismatch", "R4.2")


def test_r11_road_cannot_end_in_nothing() -> None:
    """R11/R4.2: D's road leaves east, so (1,0) needs a road on its W edge: U1 (R F R F, W=F),
    E0 (W=F) and E3 (W=C) are refused. With `V0@1,0` (road W–S) the square (1,1) needs a
    road on N, so B (all fields) fits there in no rotation."""
    state = fresh(draw="U")
    assert state.board.frontier[(1, 0)] == "...R"
    assert refused(state, PlayTurn(0, 1, 0, 1)).details["edge"] == "W"
    e_state = fresh(draw="E")
    for rotation in (0, 3):
        assert refused(e_state, PlayTurn(0, 1, 0, rotation)).code == "edge_mismatch"
    b_state = state_after("V0@1,0", draw="B")
    assert b_state.board.frontier[(1, 1)] == "R..."
    assert (1, 1) not in {(x, y) for x, y, _ in placements(b_state)}
    for rotation in range(4):
        assert refused(b_state, PlayTurn(1, 1, 1, rotation)).details["edge"] == "N"


# ------------------------------------------------------------------------------ R4.3


@pytest.mark.parametrize(
    ("tile", "expected"),
    [
        # E: C F F F. North of D needs S=C: only E2. South of D needs N=F: E1, E2, E3.
        # E has no road, so nothing east or west of D.
        ("E", {(0, -1, 2), (0, 1, 1), (0, 1, 2), (0, 1, 3)}),
        # U: F R F R; U0 and U2 look alike but are distinct actions (README decision).
        ("U", {(1, 0, 0), (1, 0, 2), (-1, 0, 0), (-1, 0, 2), (0, 1, 0), (0, 1, 2)}),
        # X: R R R R fits east and west of D in all four rotations, never N (C) or S (F).
        ("X", {(x, 0, r) for x in (1, -1) for r in range(4)}),
        # C: C C C C fits only north of D, all four rotations.
        ("C", {(0, -1, r) for r in range(4)}),
        # B: F F F F fits only south of D.
        ("B", {(0, 1, r) for r in range(4)}),
    ],
)
def test_r4_3_legal_placements_after_the_start_tile(
    tile: str, expected: set[tuple[int, int, int]]
) -> None:
    """R4.3: every rotation is tried; the exact legal set after the start tile alone."""
    state = fresh(draw=tile)
    got = placements(state)
    assert len(got) == len(set(got))
    assert set(got) == expected


@pytest.mark.parametrize("turns", ["", "U0@1,0 N2@0,-1", "V0@1,0 V3@0,1 E2@0,-1"])
@pytest.mark.parametrize("tile", ["E", "K", "V", "X"])
def test_r4_3_placements_agree_with_decide(turns: str, tile: str) -> None:
    """R4.3: for every square next to the board and every rotation, `decide` accepts the
    placement exactly when `placements` lists it."""
    state = state_after(turns, draw=tile)
    legal = set(placements(state))
    around = ((0, 1), (1, 0), (0, -1), (-1, 0))
    squares = {(x + dx, y + dy) for x, y in state.board.tiles for dx, dy in around}
    squares -= set(state.board.tiles)
    for x, y in squares:
        for rotation in range(4):
            cmd = PlayTurn(state.current, x, y, rotation)
            if (x, y, rotation) in legal:
                assert decide(state, cmd)
            else:
                assert refused(state, cmd).code == "edge_mismatch"


# ------------------------------------------------------------------------------ R4.4


def test_r4_4_unplaceable_tile_is_discarded_and_the_same_player_draws_again() -> None:
    """R4.4: `E2@0,-1` closes D's city, so no open city edge is left and C (C C C C) fits
    nowhere: `C-` is accepted, C leaves the game, and player 1 (who drew it) plays next:
    `E2@0,-1 C- U0@1,0` has U placed by player 1."""
    state = state_after("E2@0,-1", draw="C")
    assert is_unplaceable(state)
    assert placements(state) == []
    events = record_events(record("E2@0,-1 C- U0@1,0"))
    assert TileDiscarded(1, "C") in events
    assert [e.player for e in events if isinstance(e, TilePlaced)] == [0, 1]
    after = state_after("E2@0,-1 C-")
    assert after.discarded == ["C"]
    assert after.current == 1
    assert "C" not in after.bag
    assert after.bag_size == 69  # 71 - E - C


def test_r4_4_discarding_a_tile_that_fits_is_rejected() -> None:
    """R4.4: `C-` right after the start (C fits north of D) and `E2@0,-1 E-` (E fits south)
    fail with tile_fits."""
    for turns, index in (("C-", 0), ("E2@0,-1 E-", 1)):
        err = record_error(turns)
        assert (err.index, err.code, err.rule) == (index, "tile_fits", "R4.4")
    state = fresh(draw="E")
    assert not is_unplaceable(state)
    assert refused(state, DiscardTile(0)).code == "tile_fits"


def test_r4_4_tiny_table_makes_a_tile_unplaceable() -> None:
    """R4.4 with R10.5 area=3x1 (x -1..1, y 0): only (1,0) and (-1,0) are open and both need a
    road, so E (no road) is discarded with `E-`, while `U-` is refused (U0 fits)."""
    state = state_after("", draw="E", opts="area=3x1")
    assert state.board.frontier == {(1, 0): "...R", (-1, 0): ".R.."}
    assert is_unplaceable(state)
    assert state_after("E-", opts="area=3x1").discarded == ["E"]
    err = record_error("U-", opts="area=3x1")
    assert (err.index, err.code) == (0, "tile_fits")


# ------------------------------------------------------------------------------ R10.4


def test_r10_4_unplaceable_tile_returns_to_the_bag() -> None:
    """R10.4 (unplaceable=return): `E2@0,-1 C-` puts C back: bag count as before the draw,
    nothing discarded, and player 1 still to move."""
    before = state_after("E2@0,-1", opts="unplaceable=return")
    assert (before.bag["C"], before.bag_size) == (1, 70)
    events = record_events(record("E2@0,-1 C-", opts="unplaceable=return"))
    assert TileReturned(1, "C") in events
    assert not any(isinstance(e, TileDiscarded) for e in events)
    after = state_after("E2@0,-1 C-", opts="unplaceable=return")
    assert (after.bag["C"], after.bag_size) == (1, 70)
    assert after.discarded == []
    assert after.current == 1


def test_r10_4_game_ends_when_no_tile_in_the_bag_can_be_placed() -> None:
    """R10.4 decision: on a 1x1 table nothing fits anywhere; `E-` returns E and ends the game."""
    events = record_events(record("E-", opts="unplaceable=return area=1x1"))
    assert events[-2:] == [TileReturned(0, "E"), GameEnded("no placeable tile left")]


# ------------------------------------------------------------------------ R4.5 / R10.5


def test_r4_5_play_area_unbounded_by_default() -> None:
    """R4.5: without R10.5 a row of U may run far east: `U0@1,0` … `U0@6,0`."""
    turns = " ".join(f"U0@{x},0" for x in range(1, 7))
    state = state_after(turns, draw="U")
    assert (7, 0, 0) in placements(state)


def test_r10_5_bounded_table_3x3() -> None:
    """R10.5 area=3x3 (x and y -1..1): after `U0@1,0`, (2,0) is off the table: not among the
    placements, and `U0@1,0 U0@2,0` fails at turn 1 with out_of_bounds."""
    state = state_after("U0@1,0", draw="U", opts="area=3x3")
    assert not any(x == 2 for x, _, _ in placements(state))
    unbounded = state_after("U0@1,0", draw="U")
    assert (2, 0, 0) in placements(unbounded)
    err = record_error("U0@1,0 U0@2,0", opts="area=3x3")
    assert (err.index, err.code, err.rule) == (1, "out_of_bounds", "R10.5")
    assert refused(state, PlayTurn(1, 2, 0, 0)).code == "out_of_bounds"


def test_r10_5_even_size_extends_east_and_south() -> None:
    """R10.5 decision: area=4x4 spans x -1..2 and y -1..2: `U0@1,0 U0@2,0` is legal,
    `U0@-1,0 U0@-2,0` is out_of_bounds."""
    assert Ruleset(area=(4, 4)).bounds() == (-1, 2, -1, 2)
    assert (2, 0) in state_after("U0@1,0 U0@2,0", opts="area=4x4").board.tiles
    err = record_error("U0@-1,0 U0@-2,0", opts="area=4x4")
    assert (err.index, err.code) == (1, "out_of_bounds")
    state = state_after("U0@-1,0", draw="U", opts="area=4x4")
    assert not any(x < -1 for x, _, _ in placements(state))
