"""R9.1 The River (TILES.md §3): setup, drawing order, continuing the river, no U-turn, no
meeple on the river, fields split by it, never scored.

Boards are written in notation. With `river=on` the spring RIVA lies at (0,0) unrotated, its
river leaving east: the river's open end is (1,0). RIVD/RIVF are straights (river W–E at
rotation 0), RIVG/RIVJ curves (river W–S at rotation 0: entering from the west it turns right,
to the south).
"""

from __future__ import annotations

import random

import pytest

from carcassonne.events import (
    DiscardTile,
    DrawTile,
    PlayTurn,
    RequestUndo,
    TileDiscarded,
    TilePlaced,
)
from carcassonne.game import actions, decide, drawable, is_unplaceable, placements
from carcassonne.notation import format_record, parse_record
from carcassonne.record import load_record, record_from_events, replay, score_record
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import DRAW, GameState
from carcassonne.tiles import FIELD, Meeple
from carcassonne.tilesets import BASE_COUNTS, LAKE, RIVER_SPECS, SPRING

from .boards import final_state, fresh, record, record_error, refused, run, state_after

RIVER = "river=on"


def test_r9_1_the_spring_replaces_the_start_tile() -> None:
    """R9.1: the spring lies on (0,0) unrotated, the river's end is east of it; the base start
    tile D is mixed into the bag (TILES.md §3 decision): 72 base + 11 river tiles to draw."""
    state = fresh(ruleset=Ruleset(river=True))
    assert [(pos, p.tile.name, p.rotation) for pos, p in state.board.tiles.items()] == [
        ((0, 0), SPRING, 0)
    ]
    assert state.river_end == (1, 0)
    assert state.bag_size == 72 + 11
    assert state.bag["D"] == BASE_COUNTS["D"] == 4
    assert sorted(n for n in state.bag if n.startswith("RIV")) == sorted(
        set(RIVER_SPECS) - {SPRING}
    )
    assert record("", opts=RIVER).to_dict()["start"] == {
        "tile": SPRING,
        "x": 0,
        "y": 0,
        "rotation": 0,
    }


def test_r9_1_river_tiles_are_drawn_first_and_the_lake_last() -> None:
    """R9.1: while river tiles are left only they may be drawn (river_first), and the lake
    only as the last of them (lake_last)."""
    state = fresh(ruleset=Ruleset(river=True))
    assert refused(state, DrawTile("D")).code == "river_first"
    err = refused(state, DrawTile(LAKE))
    assert (err.code, err.rule) == ("lake_last", "R9.1")
    assert LAKE not in drawable(state) and "D" not in drawable(state)
    assert set(drawable(state)) == set(RIVER_SPECS) - {SPRING, LAKE}
    assert drawable(fresh()) == fresh().bag  # without the river: the whole bag


def test_r9_1_a_river_tile_must_continue_the_open_end() -> None:
    """R9.1: RIVD (straight) goes only on (1,0), river W–E: rotations 0 and 2 (the same picture
    turned). Put on (0,1) with its north field against the spring's field it would match
    every edge, yet it does not continue the river: river_not_continued."""
    state = state_after("", draw="RIVD", opts=RIVER)
    assert sorted(placements(state)) == [(1, 0, 0), (1, 0, 2)]
    err = refused(state, PlayTurn(0, 0, 1, 0))
    assert (err.code, err.rule) == ("river_not_continued", "R9.1")
    assert refused(state, PlayTurn(0, 1, 0, 1)).code == "edge_mismatch"  # river N–S: R4.2


def test_r9_1_no_u_turn() -> None:
    """R9.1: RIVG0@2,0 turns right (east to south). At (2,1) the next curve may turn left
    (RIVJ2, out east) but not right again (RIVJ1, out west): river_u_turn, as in a record."""
    state = state_after("RIVD0@1,0 RIVG0@2,0", draw="RIVJ", opts=RIVER)
    assert state.river_end == (2, 1) and state.river_turn == 1
    assert sorted(placements(state)) == [(2, 1, 2)]
    err = refused(state, PlayTurn(0, 2, 1, 1))
    assert (err.code, err.rule) == ("river_u_turn", "R9.1")
    err2 = record_error("RIVD0@1,0 RIVG0@2,0 RIVJ1@2,1", opts=RIVER)
    assert (err2.index, err2.code) == (2, "river_u_turn")


# Turn, straight, turn the same way (TILES.md §3, Hans im Glück's Big Box FAQ). The spring
# flows east. Right (issue #26's record): RIVG0@1,0 turns south, RIVD1@1,1 runs on, and at
# (1,2) RIVJ may turn either way: RIVJ1 right (west) or RIVJ2 left (east). Left, its mirror
# image: RIVG1@1,0 turns north, RIVD1@1,-1, and at (1,-2) RIVJ0 turns left (west) or RIVJ3
# right (east). Either way the river then flows west, and RIVE turning the same way once
# more would be an immediate U-turn (RIVE2 north after right, RIVE3 south after left); it
# may only turn the other way (RIVE3, RIVE2).
TURN_STRAIGHT_TURN = {
    "right": ("RIVG0@1,0 RIVD1@1,1", [(1, 2, 1), (1, 2, 2)], "RIVJ1@1,2", (0, 2), 1, (2, 3)),
    "left": ("RIVG1@1,0 RIVD1@1,-1", [(1, -2, 0), (1, -2, 3)], "RIVJ0@1,-2", (0, -2), -1, (3, 2)),
}


@pytest.mark.parametrize("side", sorted(TURN_STRAIGHT_TURN))
def test_r9_1_a_straight_between_two_curves_resets_the_no_u_turn_rule(side: str) -> None:
    """R9.1 (TILES.md §3): only an immediate U-turn is illegal. After a curve and a straight
    the next curve may turn either way (`placements` and `actions` offer both, `decide`
    takes both), the same way included; right after that curve, the same turn again is a
    U-turn (river_u_turn)."""
    before, both, third, end, turn, (again, other) = TURN_STRAIGHT_TURN[side]
    state = state_after(before, draw="RIVJ", opts=RIVER)
    assert state.river_turn == 0  # the straight reset it
    assert sorted(placements(state)) == both
    assert sorted({(x, y, r) for x, y, r, _ in actions(state)}) == both
    for x, y, rotation in both:
        decide(state, PlayTurn(state.current, x, y, rotation))
    after = state_after(f"{before} {third}", draw="RIVE", opts=RIVER)
    assert (after.river_end, after.river_heading, after.river_turn) == (end, 3, turn)
    err = refused(after, PlayTurn(after.current, end[0], end[1], again))
    assert (err.code, err.rule) == ("river_u_turn", "R9.1")
    assert placements(after) == [(end[0], end[1], other)]


def test_r9_1_an_undo_gives_back_how_the_river_last_turned() -> None:
    """Undo (docs/undo.md) puts back the whole state before the placement, `river_turn`
    with it: undoing the straight brings back the right turn before it (RIVJ may then only
    turn left), undoing the curve after the straight brings back the reset (either way)."""
    opts = RIVER + " undo=free"
    straight = state_after("RIVD0@1,0 RIVG0@2,0 RIVF1@2,1", opts=opts)
    assert straight.river_turn == 0
    run(straight, RequestUndo(0))
    assert (straight.drawn, straight.river_end, straight.river_turn) == ("RIVF", (2, 1), 1)
    assert sorted(placements(straight, "RIVJ")) == [(2, 1, 2)]
    curve = state_after("RIVD0@1,0 RIVG0@2,0 RIVF1@2,1 RIVJ1@2,2", opts=opts)
    assert curve.river_turn == 1
    run(curve, RequestUndo(1))
    assert (curve.drawn, curve.river_end, curve.river_turn) == ("RIVJ", (2, 2), 0)
    assert sorted(placements(curve)) == [(2, 2, 1), (2, 2, 2)]


def test_r9_1_issue_26_record_imports_and_scores() -> None:
    """Issue #26: this record, made elsewhere, stopped at its third tile with river_u_turn;
    turn right, straight, turn right is legal (TILES.md §3): it replays and scores."""
    data = {
        "format": "carcassonne-record/1",
        "ruleset": {"tileset": "base", "farmers": True, "farm_scoring": "3rd",
                    "incomplete_score": True, "river": True},
        "players": 2,
        "start": {"tile": "RIVA", "x": 0, "y": 0, "rotation": 0},
        "turns": [{"tile": "RIVG", "x": 1, "y": 0, "rotation": 0, "meeple": None},
                  {"tile": "RIVD", "x": 1, "y": 1, "rotation": 1, "meeple": None},
                  {"tile": "RIVJ", "x": 1, "y": 2, "rotation": 1, "meeple": None}],
    }  # fmt: skip
    rec = load_record(data)
    state = replay(rec)
    assert state.over and state.turn == 3
    assert state.river_end == (0, 2) and state.river_heading == 3  # flowing west
    assert score_record(rec)["final_scores"] == [0, 0]


def test_r9_1_no_meeple_on_the_river() -> None:
    """R9.1: on a straight (RIVD) only the two fields take a meeple, never the river: no
    action names it, and a meeple on the river's edge is refused (no_such_feature, R5.1)."""
    state = state_after("", draw="RIVD", opts=RIVER)
    spots = {m for x, y, r, m in actions(state) if (x, y, r) == (1, 0, 0)}
    assert spots == {None, Meeple(FIELD, "NNW"), Meeple(FIELD, "ESE")}
    assert refused(state, PlayTurn(0, 1, 0, 0, Meeple("road", "E"))).code == "no_such_feature"
    # RIVK: a road crosses the river on a bridge: the road (N–S) takes a meeple, the river not.
    bridge = {s.kind for s in state.tiles.types["RIVK"].orientations[0].segments}
    assert "river" not in bridge and "road" in bridge


def test_r9_1_the_river_splits_fields_as_a_road_does() -> None:
    """R9.1: a straight's two banks are separate fields. With a farmer on RIVD's north bank
    (NNW), RIVF's north bank is occupied (R5.3) — the farm runs along the bank — while the
    banks meet only at the spring (one field, TILES.md §3) and the lake."""
    ttype = fresh(ruleset=Ruleset(river=True)).tiles.types["RIVD"]
    fields = [s for s in ttype.orientations[0].segments if s.kind == FIELD]
    assert len(fields) == 2
    # North bank farmer on tile 1; tile 2's north bank joins it: no farmer there (R5.3).
    state = state_after("RIVD0@1,0:NNW", draw="RIVF", opts=RIVER)
    north = {m for x, y, r, m in actions(state) if (x, y, r) == (2, 0, 0)}
    assert Meeple(FIELD, "NNW") not in north


def test_r9_1_the_river_is_never_scored() -> None:
    """R9.1: a whole random river game logs no river score; the river is no feature."""
    state, _ = random_game(random.Random(3), 2, Ruleset(river=True))
    assert all(f is None or f.kind != "river" for f in state.board.feats)
    assert all(s.kind != "river" for s in state.log)
    assert state.river_end is None  # the lake was placed


def test_r9_1_a_blocked_river_tile_is_discarded_even_under_r10_4() -> None:
    """R9.1 with R10.5 area=3x3: after RIVD0@1,0 the river's end is (2,0), off the table, so
    no river tile fits (river_blocked for one that would lead off it); R9.1 decision: it is
    discarded, not returned, even with unplaceable=return."""
    state = state_after("", draw="RIVD", opts=RIVER + " area=3x3 unplaceable=return")
    assert placements(state) == []
    assert refused(state, PlayTurn(0, 1, 0, 0)).code == "river_blocked"
    events = run(state, DiscardTile(0))
    assert events == [TileDiscarded(0, "RIVD")]


# Traps on an open table. With only immediate U-turns banned the river can run back beside
# itself (R9.1) and close in on its own end; a river tile that then fits nowhere is handled
# as any such tile (R4.4 with R9.1's decision): discarded, even under R10.4, and the same
# player draws again. The river's end is never a taken square: a river edge facing a tile
# would break R4.2 (only the river's end shows a river edge to an empty square), and
# `river_blocked` guards the table's border (R10.5).
#
# SPIRAL turns right four times, a straight or two between: the spring east, RIVG0@1,0
# south, RIVD and RIVF down to RIVJ1@1,3 west, RIVK on, RIVI2@-1,3 north, RIVH up, RIVE3@-1,1
# east. Its end (0,1) has the spring north of it and RIVD east of it: straight on or left
# the river would flow into them (edge_mismatch), and right, south to the one empty side,
# would be an immediate U-turn. Only the lake, which flows nowhere, can go there.
SPIRAL = "RIVG0@1,0 RIVD1@1,1 RIVF1@1,2 RIVJ1@1,3 RIVK0@0,3 RIVI2@-1,3 RIVH1@-1,2 RIVE3@-1,1"
# The same spiral with RIVC (a city cap each side) where RIVD was: its west cap faces the
# river's end, so the lake (field all round) does not fit there either.
SPIRAL_CITY = SPIRAL.replace("RIVD1@1,1", "RIVC1@1,1")
# CORRIDOR: east, RIVI0@2,0 south, RIVJ1@2,2 west, RIVE2@0,2 north: its end (0,1) is under
# the spring. A straight would flow into the spring, a right turn (east) is a U-turn: only
# a left turn (west) continues it.
CORRIDOR = "RIVD0@1,0 RIVI0@2,0 RIVF1@2,1 RIVJ1@2,2 RIVK0@1,2 RIVE2@0,2"


def discard_drawn(state: GameState, tile: str) -> None:
    """Draw `tile`, which fits nowhere, and discard it: TileDiscarded, and the same player
    draws again (R4.4; R9.1 decision: never returned, even under R10.4)."""
    player = state.current
    run(state, DrawTile(tile))
    assert placements(state) == [] and actions(state) == [] and is_unplaceable(state)
    assert run(state, DiscardTile(player)) == [TileDiscarded(player, tile)]
    assert (state.current, state.phase, state.river_end) == (player, DRAW, (0, 1))


@pytest.mark.parametrize("opts", ["", " unplaceable=return"])
def test_r9_1_a_river_closed_in_on_itself_takes_only_the_lake(opts: str) -> None:
    """SPIRAL, then the straights left (RIVB, RIVC) fit nowhere and are discarded one after
    the other; the lake ends the river at (0,1) and the land tiles follow (R9.1, R4.4)."""
    state = state_after(SPIRAL, opts=RIVER + opts)
    assert (state.river_end, state.river_heading, state.river_turn) == ((0, 1), 1, 1)
    assert refused(evolved(state, "RIVB"), PlayTurn(0, 0, 1, 0)).code == "edge_mismatch"
    discard_drawn(state, "RIVB")
    discard_drawn(state, "RIVC")
    run(state, DrawTile(LAKE))
    assert placements(state) == [(0, 1, 0)]
    run(state, PlayTurn(state.current, 0, 1, 0))
    assert state.river_end is None and state.discarded == ["RIVB", "RIVC"]
    assert drawable(state) == state.bag and not any(n.startswith("RIV") for n in state.bag)
    record = f"{SPIRAL} RIVB- RIVC- RIVL0@0,1"
    assert final_state(record, opts=RIVER + opts).discarded == ["RIVB", "RIVC"]


def test_r9_1_a_river_that_cannot_even_end_stays_open_and_the_game_goes_on() -> None:
    """SPIRAL_CITY: the straights and then the lake fit nowhere (its field against RIVC's
    city, R4.2): all three are discarded. The river never ends; its end (0,1) stays empty
    for good — no land tile has a river edge to meet it — and the game goes on with the
    land tiles (R4.4: the land tiles are drawn as usual)."""
    state = state_after(SPIRAL_CITY, opts=RIVER)
    discard_drawn(state, "RIVB")
    discard_drawn(state, "RIVD")
    assert refused(evolved(state, LAKE), PlayTurn(0, 0, 1, 0)).code == "edge_mismatch"
    discard_drawn(state, LAKE)
    assert drawable(state) == state.bag and state.bag_size == 72
    assert all((x, y) != (0, 1) for name in state.bag for x, y, _ in placements(state, name))
    run(state, DrawTile("D"))
    assert placements(state) and state.river_end == (0, 1)
    final = final_state(f"{SPIRAL_CITY} RIVB- RIVD- RIVL- D1@0,4", opts=RIVER)
    assert final.over and final.discarded == ["RIVB", "RIVD", LAKE]
    assert final.river_end == (0, 1) and (0, 1) not in final.board.tiles


def test_r9_1_a_river_under_itself_may_only_turn_away() -> None:
    """CORRIDOR: at (0,1), under the spring, a straight (RIVH) fits nowhere and is
    discarded; the curve RIVG fits only turning left (RIVG0, west): right would be an
    immediate U-turn (river_u_turn), and straight on runs into the spring."""
    state = state_after(CORRIDOR, opts=RIVER)
    assert (state.river_end, state.river_heading, state.river_turn) == ((0, 1), 0, 1)
    assert refused(evolved(state, "RIVH"), PlayTurn(0, 0, 1, 1)).code == "edge_mismatch"
    discard_drawn(state, "RIVH")
    run(state, DrawTile("RIVG"))
    assert placements(state) == [(0, 1, 0)]
    err = refused(state, PlayTurn(state.current, 0, 1, 3))
    assert (err.code, err.rule) == ("river_u_turn", "R9.1")
    run(state, PlayTurn(state.current, 0, 1, 0))
    assert (state.river_end, state.river_turn) == ((-1, 1), -1)


def evolved(state: GameState, tile: str) -> GameState:
    """A copy of `state` with `tile` drawn."""
    twin = state.copy()
    run(twin, DrawTile(tile))
    return twin


def test_r9_1_random_river_games_trap_the_river_and_go_on() -> None:
    """The traps are no corner case: a few of 100 random river games on an open table
    discard a river tile (R4.4), and in some even the lake fits nowhere, so the river never
    ends; every one of these games is played to its end."""
    trapped, open_river = 0, 0
    for seed in range(100):
        state, events = random_game(random.Random(seed), 2, Ruleset(river=True), max_turns=12)
        assert state.over and state.river_end not in state.board.tiles
        discarded = [e.tile for e in events if isinstance(e, TileDiscarded)]
        assert all(name.startswith("RIV") for name in discarded)
        trapped += bool(discarded)
        open_river += LAKE in discarded
    assert trapped >= 2 and open_river >= 1


def test_r9_1_record_notation_and_json_round_trip() -> None:
    """R9.1: `river` is recorded in the ruleset (JSON) and as `river=on` (notation); a random
    river game's record replays to the same state."""
    rules = Ruleset(river=True)
    assert rules.to_dict()["river"] is True and "river" not in Ruleset().to_dict()
    state, events = random_game(random.Random(11), 3, rules)
    rec = record_from_events(events)
    assert parse_record(format_record(rec)) == rec
    assert load_record(rec.to_dict()) == rec
    assert replay(rec).snapshot() == state.snapshot()
    assert [e.tile for e in events if isinstance(e, TilePlaced)][10] == LAKE


def test_r9_1_the_river_with_the_demo_set() -> None:
    """R9.1 decision: the river may open a demo game too (5 meeples, its own tiles after)."""
    state, events = random_game(random.Random(1), 2, Ruleset(tileset="demo", river=True))
    placed = [e.tile for e in events if isinstance(e, TilePlaced)]
    assert placed[10] == LAKE and all(t.startswith("RIV") for t in placed[:11])
    assert state.over and state.supply[0] <= 5


def test_r9_1_decide_and_actions_agree_on_river_tiles() -> None:
    """Every enumerated action for a river tile is accepted by `decide`."""
    state = state_after("RIVD0@1,0 RIVG0@2,0", draw="RIVB", opts=RIVER)
    choices = actions(state)
    assert choices
    for x, y, rotation, meeple in choices:
        decide(state, PlayTurn(state.current, x, y, rotation, meeple))
    assert isinstance(state, GameState)


@pytest.mark.parametrize("name", sorted(RIVER_SPECS))
def test_r9_1_river_tiles_have_two_river_edges_but_spring_and_lake(name: str) -> None:
    """TILES.md §3: every river tile carries the river across two edges, the spring and the
    lake across one."""
    ttype = fresh(ruleset=Ruleset(river=True)).tiles.types[name]
    assert len(ttype.river_edges(0)) == (1 if name in (SPRING, LAKE) else 2)
