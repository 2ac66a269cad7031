"""House rules R10.5's variant (the table border closes features) and R10.6 (filling a hole
grants another turn).

Boards are written in notation (`U0@1,0` = tile U, rotation 0, at x=1, y=0; y grows south).
The start tile D (C R F R: city N, road W–E, field S) lies at (0,0).
"""

from __future__ import annotations

import random

import pytest

from carcassonne.errors import MalformedError
from carcassonne.events import TilePlaced
from carcassonne.notation import format_record, parse_record
from carcassonne.record import record_events, record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState

from .boards import final_state, record, state_after

# ------------------------------------------------------------------- R10.5 variant


def test_r10_5_border_closes_a_road() -> None:
    """R10.5 variant, area=3x3 (x -1..1) with border=closes: `U0@1,0:E` (player 0's
    thief) and `U0@-1,0` make the road -1..1 whose two ends face the border: closed, so R6.1
    scores it during play, 3 tiles = 3 points. With the plain bound it stays open and only
    the final scoring (R7.2) gives the same 3."""
    closes = state_after("U0@1,0:E U0@-1,0", opts="area=3x3 border=closes")
    assert closes.scores == [3, 0]
    assert closes.supply == [7, 7]  # the thief came home (R6.6)
    assert closes.log[0].rule == "R6.1" and closes.log[0].complete
    plain = state_after("U0@1,0:E U0@-1,0", opts="area=3x3")
    assert plain.scores == [0, 0]
    assert final_state("U0@1,0:E U0@-1,0", opts="area=3x3").scores == [3, 0]


def test_r10_5_border_closes_a_city() -> None:
    """R10.5 variant, area=3x3 (y -1..1): G turned once (city N–S) on (0,-1) with a knight joins
    the start's city; its north edge faces the border. Closed: 2 tiles x 2 = 4 points (R6.2).
    With the plain bound it is incomplete: 2 points at the end (R7.2)."""
    assert state_after("G1@0,-1:N", opts="area=3x3 border=closes").scores == [4, 0]
    assert state_after("G1@0,-1:N", opts="area=3x3").scores == [0, 0]
    assert final_state("G1@0,-1:N", opts="area=3x3").scores == [2, 0]


def test_r10_5_border_closes_does_not_surround_a_monastery() -> None:
    """R10.5 variant decision: the border closes roads and cities only. A monastery on the edge
    of a 3x3 table is never surrounded (R6.3 counts tiles), so B0@0,1 with a monk scores 1 + its
    neighbours only at the end (R7.2): D at (0,0) is its one neighbour, 2 points."""
    state = final_state("B0@0,1:M", opts="area=3x3 border=closes")
    assert state.scores == [2, 0]
    assert state.log[0].rule == "R7.2"


def test_r10_5_border_closes_needs_an_area_and_round_trips() -> None:
    """R10.5: border_closes without a bounded table is refused; with one it is recorded inside
    `area` (JSON) and as `border=closes` (notation), and both read back equal."""
    with pytest.raises(MalformedError) as info:
        Ruleset(border_closes=True)
    assert info.value.code == "border_without_area"
    with pytest.raises(MalformedError) as small:  # decision: else the start tile closes
        Ruleset(area=(5, 1), border_closes=True)
    assert (small.value.code, small.value.rule) == ("border_area_too_small", "R10.5")
    rules = Ruleset(area=(5, 5), border_closes=True)
    assert rules.to_dict()["area"] == {"width": 5, "height": 5, "border_closes": True}
    assert Ruleset.from_dict(rules.to_dict()) == rules
    rec = record("U0@1,0", opts="area=5x5 border=closes")
    assert rec.ruleset == rules
    assert "border=closes" in format_record(rec)
    assert parse_record(format_record(rec)) == rec
    with pytest.raises(MalformedError) as bad:
        Ruleset.from_dict({"area": {"width": 5, "height": 5, "border_closes": "yes"}})
    assert bad.value.code == "bad_ruleset"


# --------------------------------------------------------------------------- R10.6

# Player 0 and 1 alternate; the last turn, U0@0,1, fills the hole (0,1): D above (field),
# V1@1,1 east (road), B0@0,2 south (field), V2@-1,1 west (road).
HOLE = "V0@1,0 V1@1,1 V3@-1,0 V2@-1,1 B0@1,2 B0@0,2 U0@0,1"


def test_r10_6_filling_a_hole_grants_another_turn() -> None:
    """R10.6: player 0 fills the hole (0,1) at turn 7 and moves again; without the house rule
    player 1 would be next."""
    state = state_after(HOLE, opts="hole=extra")
    assert state.board.is_hole((0, 1))
    assert (state.current, state.extra_turn) == (0, True)
    assert state_after(HOLE).current == 1


def test_r10_6_the_extra_turn_is_a_whole_turn_then_play_passes_on() -> None:
    """R10.6: on the extra turn player 0 places (and may score) as usual; then player 1 moves.
    The record needs no extra field: whose turn it is follows from the ruleset."""
    state = state_after(HOLE + " E2@0,-1:S", opts="hole=extra")
    log = record_events(record(HOLE + " E2@0,-1:S", opts="hole=extra"))
    events = [e for e in log if isinstance(e, TilePlaced)]
    assert [e.player for e in events] == [0, 1, 0, 1, 0, 1, 0, 0]
    assert state.scores == [4, 0]  # E's city closes the start's: 2 tiles x 2 (R6.2)
    assert (state.current, state.extra_turn) == (1, False)


def test_r10_6_is_recorded_and_round_trips() -> None:
    """R10.6: `hole_extra_turn` is recorded in the ruleset (JSON) and as `hole=extra`."""
    rules = Ruleset(hole_extra_turn=True)
    assert rules.to_dict()["hole_extra_turn"] is True
    assert "hole_extra_turn" not in Ruleset().to_dict()  # off by default, left out
    assert Ruleset.from_dict(rules.to_dict()) == rules
    rec = record(HOLE, opts="hole=extra")
    assert parse_record(format_record(rec)) == rec


def test_r10_6_extra_turns_are_not_chained() -> None:
    """R10.6 decision: once per turn. In random games, a hole filled on a normal turn keeps the
    player; a hole filled on the extra turn passes play on. Both cases occur in these seeds
    (seed 685 chains: turn 67 fills a hole, the extra turn 68 fills another)."""
    rules = Ruleset(hole_extra_turn=True)
    seen = {"extra": 0, "chained": 0}
    for seed in [*range(40), 685]:
        _, events = random_game(random.Random(seed), 2, rules)
        state = GameState()
        for event in events:
            was_extra = state.extra_turn
            state.apply(event)
            if not isinstance(event, TilePlaced) or state.phase == "over":
                continue
            if not state.board.is_hole((event.x, event.y)):
                assert state.current == (event.player + 1) % 2
            elif was_extra:
                seen["chained"] += 1
                assert state.current == (event.player + 1) % 2
            else:
                seen["extra"] += 1
                assert state.current == event.player
        assert record_from_events(events).ruleset == rules
    assert seen["extra"] > 0 and seen["chained"] > 0, seen
