"""The compact notation (README "Game records"): turns like `Q1@0,-1`, `I2@0,1:E`, `C-`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carcassonne.errors import MalformedError, RecordError
from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.notation import format_record, format_turn, parse_record, parse_turn
from carcassonne.record import FORMAT, Record, Turn, load_record, record_events, score_record
from carcassonne.ruleset import Ruleset
from carcassonne.tiles import CITY, FIELD, GARDEN, KINDS, MONASTERY, ROAD, Meeple
from carcassonne.tilesets import tile_set

from .samples import README_NOTATION, README_RECORD

README_JSON = README_RECORD


@pytest.mark.parametrize(
    ("text", "turn"),
    [
        ("Q1@0,-1", Turn("Q", 0, -1, 1)),
        ("I2@0,1:E", Turn("I", 0, 1, 2, Meeple(CITY, "E"))),
        ("E2@-1,-1:NNW", Turn("E", -1, -1, 2, Meeple(FIELD, "NNW"))),
        ("C-", Turn("C", discard=True)),
        ("LRFR-", Turn("LRFR", discard=True)),
        ("A0@0,1:M", Turn("A", 0, 1, 0, Meeple(MONASTERY, MONASTERY))),
        ("B0@1,0:M", Turn("B", 1, 0, 0, Meeple(MONASTERY, MONASTERY))),
        ("U0@1,0:W", Turn("U", 1, 0, 0, Meeple(ROAD, "W"))),  # inferred: U's W edge is a road
        ("U1@1,0:S", Turn("U", 1, 0, 1, Meeple(ROAD, "S"))),  # turned: the road runs N-S
        ("U1@1,0:WNW", Turn("U", 1, 0, 1, Meeple(FIELD, "WNW"))),
        ("CFR2@-3,12:N", Turn("CFR", -3, 12, 2, Meeple(ROAD, "N"))),  # demo tile, road N
        ("X3@10000,-10000", Turn("X", 10000, -10000, 3)),
    ],
)
def test_readme_and_docstring_examples(text, turn):
    assert parse_turn(text) == turn
    assert format_turn(turn) == text


def test_spot_feature_is_read_off_the_turned_tile():
    # Q turned once: city on N, E and S, field on W (WSW, WNW).
    assert parse_turn("Q1@0,-1:N").meeple == Meeple(CITY, "N")
    assert parse_turn("Q1@0,-1:S").meeple == Meeple(CITY, "S")
    assert parse_turn("Q1@0,-1:WSW").meeple == Meeple(FIELD, "WSW")
    # Q unturned: field on S, so S names nothing and N is still the city.
    assert parse_turn("Q0@0,-1:SSE").meeple == Meeple(FIELD, "SSE")
    with pytest.raises(MalformedError) as err:
        parse_turn("Q0@0,-1:S")
    assert err.value.code == "bad_notation"


def test_surrounding_white_space_is_ignored():
    assert parse_turn("  I2@0,1:E\n") == Turn("I", 0, 1, 2, Meeple(CITY, "E"))


@pytest.mark.parametrize(
    ("turn", "text"),
    [
        # Q turned once shows a city on N: a road there cannot be inferred, so it is spelt out.
        (Turn("Q", 0, -1, 1, Meeple(ROAD, "N")), "Q1@0,-1:road.N"),
        # a field on a whole edge (fields take half-edges) names nothing on the tile
        (Turn("U", 1, 0, 1, Meeple(FIELD, "W")), "U1@1,0:field.W"),
        (Turn("Q", 0, -1, 1, Meeple(FIELD, "NNW")), "Q1@0,-1:field.NNW"),
        (Turn("D", 1, 0, 0, Meeple(CITY, "E")), "D0@1,0:city.E"),
        (Turn("D", 1, 0, 0, Meeple(MONASTERY, "N")), "D0@1,0:monastery.N"),
    ],
)
def test_explicit_feature_form_when_it_cannot_be_inferred(turn, text):
    assert format_turn(turn) == text
    assert parse_turn(text) == turn


def test_explicit_feature_form_is_accepted_where_inference_would_agree():
    assert parse_turn("I2@0,1:city.E") == parse_turn("I2@0,1:E")
    assert format_turn(parse_turn("I2@0,1:city.E")) == "I2@0,1:E"


def test_explicit_wrong_feature_is_rejected_on_replay_not_on_parsing():
    record = parse_record(
        "carcassonne-record/1 base players=2 farmers=on farm=3rd incomplete=on\nQ1@0,-1:road.N"
    )
    assert record.turns[0].meeple == Meeple(ROAD, "N")
    with pytest.raises(RecordError) as err:
        record_events(record)
    assert (err.value.index, err.value.code, err.value.rule) == (0, "no_such_feature", "R5.1")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Q",
        "Q1",
        "Q4@0,0",  # rotation 0-3
        "Q1@0",
        "Q1@0,",
        "Q1@a,b",
        "Q1@1.5,0",
        "Q1@+1,0",
        "q1@0,0",  # tile names are upper case
        "1@0,0",
        "Q1@0,0:",
        "Q1@0,0:road.",
        "Q1@0,0:ROAD.N",
        "Q1@0,0:road.n",
        "Q1@0,0:XYZ",  # no such spot
        "Q1@0,0:castle.N",  # no such feature
        "U1@0,0:W",  # U turned once has a field on W: W names no feature
        "Z1@0,0:N",  # unknown tile: nothing to infer from
        "Q1@0,0;N",
        "Q1 @0,0",
        "Q1@ 0,0",
        "Q1@0,0:road.N:E",
        "Q1@123456,0",  # at most 5 digits
        "-",
        "Q-1",
        "Q1@0,-1 I2@0,1",  # one turn only
        "Q1@0,0:-",
    ],
)
def test_malformed_turns_are_rejected(text):
    with pytest.raises(MalformedError) as err:
        parse_turn(text)
    assert err.value.code == "bad_notation"


def test_readme_record_notation_equals_the_readme_json():
    record = parse_record(README_NOTATION)
    assert record == load_record(README_JSON)
    assert record.to_dict() == README_JSON
    assert format_record(record) == README_NOTATION
    assert score_record(record)["final_scores"] == [0, 1]


def test_record_comments_blank_lines_and_line_breaks():
    text = (
        "# a game\n\n"
        "carcassonne-record/1 base players=2 farmers=on farm=3rd incomplete=on  # header\n"
        "Q1@0,-1   # the first turn\n"
        "\n"
        "I2@0,1:E\tE2@-1,-1:NNW\n"
    )
    assert parse_record(text) == parse_record(README_NOTATION)


def test_header_defaults_and_every_option_round_trip():
    minimal = parse_record("carcassonne-record/1 demo players=3\n")
    assert minimal == Record(Ruleset(tileset="demo"), 3, ())
    ruleset = Ruleset(
        tileset="demo", farmers=False, farm_scoring="1st", incomplete_score=False,
        meeples=4, unplaceable="return", area=(4, 6),
    )  # fmt: skip
    record = Record(ruleset, 5, (Turn("V", 1, 0, 3), Turn("C", discard=True)))
    text = format_record(record)
    assert text.splitlines()[0] == (
        f"{FORMAT} demo players=5 farmers=off farm=1st incomplete=off meeples=4"
        " unplaceable=return area=4x6"
    )
    assert parse_record(text) == record


def test_format_record_puts_per_line_turns_on_a_line():
    turns = tuple(Turn("V", i, 0, 0) for i in range(1, 8))
    record = Record(Ruleset(), 2, turns)
    lines = format_record(record, per_line=3).splitlines()
    assert len(lines) == 1 + 3
    assert lines[1].split() == ["V0@1,0", "V0@2,0", "V0@3,0"]
    assert parse_record("\n".join(lines)) == record


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        "carcassonne-record/2 base players=2\nQ1@0,-1",
        "carcassonne-record/1\nQ1@0,-1",
        "carcassonne-record/1 base\nQ1@0,-1",  # players missing
        "carcassonne-record/1 base players=x",
        "carcassonne-record/1 base players=2 farmers=yes",
        "carcassonne-record/1 base players=2 incomplete=1",
        "carcassonne-record/1 base players=2 colour=red",
        "carcassonne-record/1 base players=2 area=3by1",
        "carcassonne-record/1 base players=2 area=3x",
        "carcassonne-record/1 base players=2 meeples=many",
        "carcassonne-record/1 base players=2\nQ1@0,-1,I2@0,1:E",
        "carcassonne-record/1 base players=2\nQ1@0,-1 I2@0,1:Q",
        "Q1@0,-1 I2@0,1:E",  # no header
    ],
)
def test_malformed_records_are_rejected(text):
    with pytest.raises(MalformedError) as err:
        parse_record(text)
    assert err.value.code == "bad_notation"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("carcassonne-record/1 moon players=2", "unknown_tileset"),
        ("carcassonne-record/1 base players=2 farm=4th", "unknown_farm_scoring"),
        ("carcassonne-record/1 base players=2 unplaceable=keep", "unknown_unplaceable"),
        ("carcassonne-record/1 base players=2 meeples=-1", "bad_meeples"),
        ("carcassonne-record/1 base players=2 area=0x3", "bad_area"),
    ],
)
def test_bad_header_values_are_rejected_by_the_ruleset(text, code):
    with pytest.raises(MalformedError) as err:
        parse_record(text)
    assert err.value.code == code


@pytest.mark.parametrize("players", [0, 1, 7])
def test_a_notation_record_with_a_bad_player_count_is_refused(players):
    """Either the parser or the replay refuses it, with the record-level error (R1.3)."""
    text = f"carcassonne-record/1 base players={players}\nQ1@0,-1"
    with pytest.raises((MalformedError, RecordError)) as err:
        record_events(parse_record(text))
    assert err.value.code == "bad_players"
    assert err.value.rule == "R1.3"


def test_monk_shorthand_only_without_a_feature():
    """`:M` is the monk; with a feature spelt out, M is just the spot name given."""
    assert parse_turn("Q1@0,-1:road.M").meeple == Meeple(ROAD, "M")
    assert format_turn(Turn("Q", 0, -1, 1, Meeple(ROAD, "M"))) == "Q1@0,-1:road.M"


meeples = st.one_of(
    st.none(),
    st.just(Meeple(MONASTERY, MONASTERY)),
    st.sampled_from(  # R9.2: the abbot on a monastery and in a garden; a meeple in a garden
        [Meeple(MONASTERY, MONASTERY, True), Meeple(GARDEN, GARDEN, True), Meeple(GARDEN, GARDEN)]
    ),
    st.builds(
        Meeple,
        st.sampled_from(KINDS),
        st.sampled_from(EDGES + HALF_EDGES + ("M",)),
        st.booleans(),
    ),
)
# Every tile name: the base letters, the demo's, the river's and the 2nd edition's gardens.
NAMES = [*sorted(tile_set("base", river=True, edition="2nd", abbot=True).types), "LRFR", "CFR"]
# A placement's tile, x, y and rotation, legal or not.
PLACED = (
    st.sampled_from(NAMES),
    st.integers(-99_999, 99_999),
    st.integers(-99_999, 99_999),
    st.integers(0, 3),
)
turns = st.one_of(
    st.builds(Turn, st.sampled_from(NAMES), discard=st.just(True)),
    st.builds(Turn, *PLACED, meeples),
    st.builds(Turn, *PLACED, recall=st.just(True)),  # R9.2: the abbot taken back
)


@settings(max_examples=300, deadline=None)
@given(turns)
def test_every_turn_round_trips(turn):
    """Any tile, place, rotation and (feature, spot), legal or not, survives the notation."""
    text = format_turn(turn)
    assert " " not in text
    assert parse_turn(text) == turn


def test_record_header_rejects_bad_player_counts_and_repeated_options() -> None:
    """R1.3 in the notation too; a header option given twice is an error, not an override."""
    from carcassonne.errors import MalformedError as Malformed

    head = "carcassonne-record/1 base farmers=on farm=3rd incomplete=on"
    for players in (1, 7):
        with pytest.raises(Malformed) as info:
            parse_record(f"{head} players={players}\nQ1@0,-1\n")
        assert (info.value.code, info.value.rule) == ("bad_players", "R1.3")
    with pytest.raises(Malformed) as info:
        parse_record(f"{head} players=2 farm=1st\nQ1@0,-1\n")
    assert info.value.code == "bad_notation"
