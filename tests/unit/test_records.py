"""Game records (`carcassonne-record/1`): malformed and hostile records fail with RecordError,
naming the first bad turn by index (None for the record itself), a stable code and the rule.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from carcassonne.errors import IllegalMoveError, MalformedError, OutOfTurnError, RecordError
from carcassonne.record import (
    FORMAT,
    MAX_TURNS,
    Record,
    Turn,
    load_record,
    record_events,
    record_from_events,
    replay,
    score_record,
)
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.tiles import CITY, Meeple

from .samples import README_RECORD

README = README_RECORD


def turn(tile: str, x: int, y: int, rotation: int, meeple: Any = None) -> dict[str, Any]:
    return {"tile": tile, "x": x, "y": y, "rotation": rotation, "meeple": meeple}


def record(*turns: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(README)
    data["turns"] = list(turns) if turns else data["turns"]
    data.update(changes)
    return data


def error_of(data: Any) -> RecordError:
    """The RecordError that loading and replaying `data` raises."""
    with pytest.raises(RecordError) as err:
        record_events(load_record(data))
    return err.value


def test_the_base_record_is_legal():
    assert score_record(load_record(README))["final_scores"] == [0, 1]


def test_start_may_be_left_out():
    data = copy.deepcopy(README)
    del data["start"]
    assert load_record(data) == load_record(README)


# ------------------------------------------------------------------ the record itself


@pytest.mark.parametrize(
    ("data", "code", "rule"),
    [
        ([], "bad_record", None),
        ("carcassonne-record/1", "bad_record", None),
        (None, "bad_record", None),
        (record(format="carcassonne-record/2"), "bad_format", None),
        (record(format="CARCASSONNE-RECORD/1"), "bad_format", None),
        ({k: v for k, v in README.items() if k != "format"}, "bad_format", None),
        (record(comment="hi"), "bad_record", None),
        (record(ruleset={"tileset": "base", "bishops": True}), "bad_ruleset", None),
        (record(ruleset=["base"]), "bad_ruleset", None),
        (record(ruleset={"tileset": 5}), "bad_ruleset", None),
        (record(ruleset={"farmers": "yes"}), "bad_ruleset", None),
        (record(ruleset={"incomplete_score": 1}), "bad_ruleset", None),
        (record(ruleset={"tileset": "moon"}), "unknown_tileset", "R1"),
        (record(ruleset={"farm_scoring": "4th"}), "unknown_farm_scoring", "R7.4"),
        (record(ruleset={"unplaceable": "keep"}), "unknown_unplaceable", "R10.4"),
        (record(ruleset={"meeples": -1}), "bad_meeples", "R1.3"),
        (record(ruleset={"meeples": True}), "bad_meeples", "R1.3"),
        (record(ruleset={"area": {"width": 0, "height": 3}}), "bad_area", "R10.5"),
        (record(ruleset={"area": {"width": 3}}), "bad_area", "R10.5"),
        (record(ruleset={"area": [3, 3]}), "bad_area", "R10.5"),
        (record(players=1), "bad_players", "R1.3"),
        (record(players=7), "bad_players", "R1.3"),
        (record(players=0), "bad_players", "R1.3"),
        (record(players="2"), "bad_players", "R1.3"),
        (record(players=2.0), "bad_players", "R1.3"),
        (record(players=True), "bad_players", "R1.3"),
        (record(players=None), "bad_players", "R1.3"),
        (record(start={"tile": "D", "x": 1, "y": 0, "rotation": 0}), "bad_start", "R2.1"),
        (record(start={"tile": "C", "x": 0, "y": 0, "rotation": 0}), "bad_start", "R2.1"),
        (record(start={"tile": "D", "x": 0, "y": 0, "rotation": 2}), "bad_start", "R2.1"),
        (record(start={"tile": "D", "x": 0, "y": 0, "rotation": False}), "bad_start", "R2.1"),
        (record(start={"tile": "D", "x": False, "y": 0, "rotation": 0}), "bad_start", "R2.1"),
        (record(start={"tile": "D", "x": 0, "y": 0.0, "rotation": 0}), "bad_start", "R2.1"),
        (record(turns={"0": README["turns"][0]}), "bad_record", None),
        (record(turns="Q1@0,-1"), "bad_record", None),
        (record(turns=None), "bad_record", None),
        (record(turns=[{"tile": "V", "discard": True}] * (MAX_TURNS + 1)), "too_many_turns", None),
    ],
)  # fmt: skip
def test_record_level_errors_have_no_turn_index(data, code, rule):
    err = error_of(data)
    assert err.index is None
    assert err.code == code
    assert err.rule == rule
    assert err.details["index"] is None
    assert str(err).startswith("record: ")
    assert isinstance(err.cause, MalformedError)


# ------------------------------------------------------------- malformed turns (shape)


@pytest.mark.parametrize(
    ("index", "bad", "code"),
    [
        (0, "Q1@0,-1", "bad_turn"),  # notation inside JSON
        (1, None, "bad_turn"),
        (1, ["I", 0, 1, 2], "bad_turn"),
        (1, {"x": 0, "y": 1, "rotation": 2}, "bad_turn"),  # no tile
        (1, {"tile": 9, "x": 0, "y": 1, "rotation": 2}, "bad_turn"),
        (1, {"tile": "I", "x": "0", "y": 1, "rotation": 2}, "bad_turn"),  # a string x
        (1, {"tile": "I", "x": 0.0, "y": 1, "rotation": 2}, "bad_turn"),
        (1, {"tile": "I", "x": True, "y": 1, "rotation": 2}, "bad_turn"),
        (1, {"tile": "I", "x": 0, "rotation": 2}, "bad_turn"),  # no y
        (1, {"tile": "I", "x": 10**30, "y": 1, "rotation": 2}, "bad_turn"),
        (1, {"tile": "I", "x": 10_001, "y": 1, "rotation": 2}, "bad_turn"),
        (2, turn("E", -1, -1, 4), "bad_turn"),  # rotation 4
        (2, turn("E", -1, -1, -1), "bad_turn"),
        (2, turn("E", -1, -1, 90), "bad_turn"),
        (2, turn("E", -1, -1, 2) | {"colour": "red"}, "bad_turn"),
        (2, {"tile": "E", "discard": True, "x": 0}, "bad_turn"),
        (2, turn("E", -1, -1, 2) | {"discard": "yes"}, "bad_turn"),
        (1, turn("I", 0, 1, 2, {"feature": "castle", "edge": "E"}), "bad_meeple"),
        (1, turn("I", 0, 1, 2, {"feature": "knight", "edge": "E"}), "bad_meeple"),
        (1, turn("I", 0, 1, 2, "city"), "bad_meeple"),
        (1, turn("I", 0, 1, 2, {"edge": "E"}), "bad_meeple"),
        (1, turn("I", 0, 1, 2, {"feature": "city"}), "bad_meeple"),
        (1, turn("I", 0, 1, 2, {"feature": "city", "edge": "NE"}), "bad_meeple"),
        (1, turn("I", 0, 1, 2, {"feature": "city", "half_edge": "ENE"}), "bad_meeple"),
        (1, turn("I", 0, 1, 2, {"feature": "city", "edge": "E", "player": 1}), "bad_meeple"),
        (2, turn("E", -1, -1, 2, {"feature": "field", "half_edge": "N"}), "bad_meeple"),
        (2, turn("E", -1, -1, 2, {"feature": "field", "edge": "N"}), "bad_meeple"),
        (2, turn("E", -1, -1, 2, {"feature": "monastery", "edge": "N"}), "bad_meeple"),
    ],
)  # fmt: skip
def test_malformed_turns_name_their_index(index, bad, code):
    data = record()
    data["turns"][index] = bad
    err = error_of(data)
    assert (err.index, err.code) == (index, code)
    assert err.details["index"] == index
    assert str(err).startswith(f"turn {index}: ")
    assert isinstance(err.cause, MalformedError)


def test_meeple_may_be_left_out_or_null():
    data = record()
    del data["turns"][0]["meeple"]
    assert load_record(data) == load_record(README)


# ------------------------------------------------------------ illegal turns (rules)


@pytest.mark.parametrize(
    ("data", "index", "code", "rule"),
    [
        # unknown tile names (R1)
        (record(turn("Q", 0, -1, 1), turn("Z", 0, 1, 0)), 1, "unknown_tile", "R1"),
        (record(turn("q", 0, -1, 1)), 0, "unknown_tile", "R1"),
        (record(turn("X", 1, 0, 0), ruleset={"tileset": "demo"}), 0, "unknown_tile", "R1"),
        # placement (R4)
        (record(turn("Q", 0, -1, 1), turn("I", 0, -1, 2)), 1, "square_taken", "R4.1"),
        (record(turn("Q", 0, 0, 1)), 0, "square_taken", "R4.1"),  # on the start tile
        (record(turn("Q", 0, -1, 1), turn("I", 5, 5, 2)), 1, "not_adjacent", "R4.1"),
        (record(turn("V", 1, 1, 0)), 0, "not_adjacent", "R4.1"),  # corner contact only
        (record(turn("Q", 0, -1, 0)), 0, "edge_mismatch", "R4.2"),  # Q's field S on D's city
        (record(turn("V", 1, 0, 3)), 0, "edge_mismatch", "R4.2"),  # V3's W field on D's road
        (record(turn("Q", 0, -1, 1), ruleset={"area": {"width": 3, "height": 1}}), 0,
         "out_of_bounds", "R10.5"),
        (record({"tile": "V", "discard": True}), 0, "tile_fits", "R4.4"),
        # meeples (R5)
        (record(turn("I", 0, 1, 2, {"feature": "road", "edge": "E"})), 0, "no_such_feature",
         "R5.1"),
        (record(turn("I", 0, 1, 2, {"feature": "city", "edge": "N"})), 0, "no_such_feature",
         "R5.1"),  # I2's N edge is a field edge
        (record(turn("I", 0, 1, 2, {"feature": "monastery"})), 0, "no_such_feature", "R5.1"),
        (record(turn("I", 0, 1, 2, {"feature": "field", "half_edge": "ENE"})), 0,
         "no_such_feature", "R5.1"),  # a city edge has no field half-edges
        (record(turn("E", -1, 0, 1, {"feature": "field", "half_edge": "NNW"})), 0,
         "edge_mismatch", "R4.2"),
        (record(turn("Q", 0, -1, 1), turn("E", 1, -1, 3, {"feature": "field", "half_edge": "NNW"}),
                ruleset={"farmers": False}), 1, "farmers_disabled", "R5.2"),
        # R5.3: another player's knight in the city
        (record(turn("Q", 0, -1, 1), turn("I", 0, 1, 2, {"feature": "city", "edge": "E"}),
                turn("E", 1, 1, 3, {"feature": "city", "edge": "W"})), 2, "feature_occupied",
         "R5.3"),
        # R5.3: the player's own knight included
        (record(*README["turns"], turn("E", 1, 1, 3, {"feature": "city", "edge": "W"})), 3,
         "feature_occupied", "R5.3"),
        # R5.3: a farmer joining a farm that holds one (D's south field through U's)
        (record(turn("U", 1, 0, 0, {"feature": "field", "half_edge": "SSE"}),
                turn("U", -1, 0, 0, {"feature": "field", "half_edge": "ESE"})), 1,
         "feature_occupied", "R5.3"),
        # R5.5: one meeple each, still on the board
        (record(turn("Q", 0, -1, 1, {"feature": "city", "edge": "N"}), turn("U", 1, 0, 0),
                turn("U", 2, 0, 0, {"feature": "road", "edge": "W"}),
                ruleset={"meeples": 1}), 2, "no_meeple_left", "R5.5"),
        # R1.1: one C in the base set
        (record(turn("C", 0, -1, 0), turn("C", 1, -1, 0)), 1, "tile_not_in_bag", "R1.1"),
    ],
)  # fmt: skip
def test_illegal_turns_name_index_code_and_rule(data, index, code, rule):
    err = error_of(data)
    assert (err.index, err.code, err.rule) == (index, code, rule)
    assert err.details["index"] == index
    assert str(err).startswith(f"turn {index}: ")
    assert isinstance(err.cause, IllegalMoveError | MalformedError | OutOfTurnError)
    assert err.to_dict()["code"] == code and err.to_dict()["details"]["index"] == index


def test_an_even_table_width_extends_east():
    """README decision for R10.5: a 4-wide table spans x = -1..2 around the start tile."""
    area = {"area": {"width": 4, "height": 1}}
    east = record(turn("U", 1, 0, 0), turn("U", 2, 0, 0), ruleset=area)
    assert replay(load_record(east)).turn == 2
    west = record(turn("U", -1, 0, 0), turn("U", -2, 0, 0), ruleset=area)
    err = error_of(west)
    assert (err.index, err.code, err.rule) == (1, "out_of_bounds", "R10.5")
    assert error_of(record(turn("E", 0, -1, 2), ruleset=area)).code == "out_of_bounds"


def test_the_first_illegal_turn_is_reported():
    data = record(turn("Q", 0, -1, 1), turn("I", 5, 5, 2), turn("E", 0, -1, 0))
    err = error_of(data)
    assert (err.index, err.code) == (1, "not_adjacent")


def test_a_record_with_more_turns_than_tiles_fails():
    state, events = random_game(random.Random(5), 2, Ruleset(tileset="demo"))
    full = record_from_events(events)
    assert replay(full).snapshot() == state.snapshot()
    extra = Record(full.ruleset, full.players, (*full.turns, Turn("V", 99, 99, 0)))
    err = error_of(extra.to_dict())
    assert err.index == len(full.turns)
    assert err.code in ("game_over", "tile_not_in_bag")
    assert err.code == "game_over" and err.rule == "R7.1"


def test_a_record_drawing_a_used_up_tile_fails():
    # The base set has 5 E tiles: a column of caps facing each other below D, then a 6th E.
    turns = [turn("E", 0, y, 2 if y % 2 else 0) for y in range(1, 7)]
    err = error_of(record(*turns))
    assert (err.index, err.code, err.rule) == (5, "tile_not_in_bag", "R1.1")


def test_json_round_trip_of_a_record():
    loaded = load_record(README)
    assert loaded.to_dict() == README
    assert load_record(json.loads(json.dumps(loaded.to_dict()))) == loaded
    assert loaded.turns[1] == Turn("I", 0, 1, 2, Meeple(CITY, "E"))


def test_the_record_start_and_format_are_fixed():
    loaded = load_record(README)
    assert loaded.to_dict()["format"] == FORMAT
    demo = load_record(record(ruleset={"tileset": "demo"}))
    assert demo.to_dict()["start"] == {"tile": "D", "x": 0, "y": 0, "rotation": 0}


def test_the_first_bad_turn_is_reported_even_when_a_later_one_is_malformed() -> None:
    """Turn 0 is illegal (not adjacent, R4.1); turn 1 is malformed: turn 0 is named."""
    from carcassonne.errors import RecordError as BadRecord
    from carcassonne.record import load_record as load

    data = {
        "format": "carcassonne-record/1",
        "players": 2,
        "turns": [
            {"tile": "E", "x": 5, "y": 5, "rotation": 0, "meeple": None},
            {"tile": "E", "x": "far", "y": 5, "rotation": 0, "meeple": None},
        ],
    }
    with pytest.raises(BadRecord) as info:
        load(data)
    assert (info.value.index, info.value.code, info.value.rule) == (0, "not_adjacent", "R4.1")
