"""R1 components: the tile sets against TILES.md, players, meeples per player, the bag.

Every expected value below is transcribed by hand from TILES.md §1 (base) and §2 (demo),
not read off the engine's own tables.
"""

from __future__ import annotations

import pytest

from carcassonne.errors import GameError, MalformedError, RecordError
from carcassonne.events import DrawTile, PlayTurn, StartGame
from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.record import load_record, replay
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from carcassonne.tiles import CITY, FIELD, MONASTERY, ROAD, TileType
from carcassonne.tilesets import BASE, DEMO, TILESETS

from .boards import fresh, record, record_error, refused, run

# TILES.md §1: letter -> (count, edges N,E,S,W, city segments, road segments, monastery,
# field segments). A city is its edges ("+" = pennant); a field is "half-edges:cities touched".
BASE_TABLE: dict[str, tuple[int, str, list[str], list[str], bool, list[str]]] = {
    "A": (2, "FFRF", [], ["S"], True, ["NNW NNE ENE ESE SSE SSW WSW WNW:0"]),
    "B": (4, "FFFF", [], [], True, ["NNW NNE ENE ESE SSE SSW WSW WNW:0"]),
    "C": (1, "CCCC", ["NESW+"], [], False, []),
    "D": (4, "CRFR", ["N"], ["WE"], False, ["ENE WNW:1", "ESE SSE SSW WSW:0"]),
    "E": (5, "CFFF", ["N"], [], False, ["ENE ESE SSE SSW WSW WNW:1"]),
    "F": (2, "FCFC", ["EW+"], [], False, ["NNW NNE:1", "SSE SSW:1"]),
    "G": (1, "FCFC", ["EW"], [], False, ["NNW NNE:1", "SSE SSW:1"]),
    "H": (3, "CFCF", ["N", "S"], [], False, ["ENE ESE WSW WNW:2"]),
    "I": (2, "CFFC", ["N", "W"], [], False, ["ENE ESE SSE SSW:2"]),
    "J": (3, "CRRF", ["N"], ["ES"], False, ["ENE SSW WSW WNW:1", "ESE SSE:0"]),
    "K": (3, "CFRR", ["N"], ["SW"], False, ["WNW ENE ESE SSE:1", "SSW WSW:0"]),
    "L": (3, "CRRR", ["N"], ["E", "S", "W"], False, ["ENE WNW:1", "ESE SSE:0", "SSW WSW:0"]),
    "M": (2, "CFFC", ["NW+"], [], False, ["ENE ESE SSE SSW:1"]),
    "N": (3, "CFFC", ["NW"], [], False, ["ENE ESE SSE SSW:1"]),
    "O": (2, "CRRC", ["NW+"], ["ES"], False, ["ENE SSW:1", "ESE SSE:0"]),
    "P": (3, "CRRC", ["NW"], ["ES"], False, ["ENE SSW:1", "ESE SSE:0"]),
    "Q": (1, "CCFC", ["NEW+"], [], False, ["SSE SSW:1"]),
    "R": (3, "CCFC", ["NEW"], [], False, ["SSE SSW:1"]),
    "S": (2, "CCRC", ["NEW+"], ["S"], False, ["SSE:1", "SSW:1"]),
    "T": (1, "CCRC", ["NEW"], ["S"], False, ["SSE:1", "SSW:1"]),
    "U": (8, "FRFR", [], ["WE"], False, ["WNW NNW NNE ENE:0", "ESE SSE SSW WSW:0"]),
    "V": (9, "FFRR", [], ["SW"], False, ["WNW NNW NNE ENE ESE SSE:0", "SSW WSW:0"]),
    "W": (4, "FRRR", [], ["E", "S", "W"], False, ["WNW NNW NNE ENE:0", "ESE SSE:0", "SSW WSW:0"]),
    "X": (1, "RRRR", [], ["N", "E", "S", "W"], False,
          ["WNW NNW:0", "NNE ENE:0", "ESE SSE:0", "SSW WSW:0"]),
}  # fmt: skip

# TILES.md §2: the demo's two extra types.
EXTRA_TABLE: dict[str, tuple[int, str, list[str], list[str], bool, list[str]]] = {
    "LRFR": (1, "FRFR", [], ["E", "W"], True, ["ESE SSE SSW WSW:0", "ENE NNW NNE WNW:0"]),
    "CFR": (1, "CFRF", ["N"], ["S"], False, ["WSW WNW SSW:1", "ENE ESE SSE:1"]),
}

# TILES.md §2: "Carcassonne for 2" distribution of the demo set.
DEMO_COUNTS = {
    "A": 1, "B": 2, "LRFR": 1, "D": 4, "E": 2, "CFR": 1, "F": 2, "G": 1, "H": 2, "L": 3,
    "J": 2, "K": 2, "I": 2, "N": 4, "O": 2, "P": 1, "Q": 1, "S": 2, "T": 1, "V": 5, "U": 4,
    "W": 3,
}  # fmt: skip


def describe(t: TileType) -> tuple[str, list[str], list[str], bool, list[str]]:
    """A tile type in the vocabulary of the tables above (sorted for comparison)."""
    cities = sorted(
        "".join(sorted(EDGES[e] for e in s.edges)) + ("+" if s.pennants else "")
        for s in t.segments if s.kind == CITY
    )  # fmt: skip
    roads = sorted("".join(sorted(EDGES[e] for e in s.edges)) for s in t.segments if s.kind == ROAD)
    fields = sorted(
        " ".join(sorted(HALF_EDGES[h] for h in s.halves)) + f":{len(s.cities)}"
        for s in t.segments if s.kind == FIELD
    )  # fmt: skip
    return t.edges, cities, roads, t.has_monastery, fields


def expected(row: tuple[int, str, list[str], list[str], bool, list[str]]) -> tuple[object, ...]:
    """A table row normalised like `describe`."""
    _, edges, cities, roads, monastery, fields = row
    norm_cities = sorted("".join(sorted(c.rstrip("+"))) + ("+" if c.endswith("+") else "")
                         for c in cities)  # fmt: skip
    norm_roads = sorted("".join(sorted(r)) for r in roads)
    norm_fields = []
    for f in fields:
        halves, _, n = f.partition(":")
        norm_fields.append(" ".join(sorted(halves.split())) + f":{n}")
    return edges, norm_cities, norm_roads, monastery, sorted(norm_fields)


# ------------------------------------------------------------------------ R1.1 base set


def test_r1_1_base_set_has_72_tiles_of_24_types_lettered_a_to_x() -> None:
    """R1.1: 72 tiles, 24 types A–X, counts as TILES.md §1; the start tile is D."""
    assert BASE.size == 72
    assert sorted(BASE.types) == [chr(c) for c in range(ord("A"), ord("X") + 1)]
    assert {name: t.count for name, t in BASE.types.items()} == {
        name: row[0] for name, row in BASE_TABLE.items()
    }
    assert BASE.start == "D"
    assert TILESETS["base"] is BASE


@pytest.mark.parametrize("letter", sorted(BASE_TABLE))
def test_r1_1_each_base_type_matches_tiles_md(letter: str) -> None:
    """R1.1: edge string, cities (with pennants), roads, monastery and fields per TILES.md."""
    assert describe(BASE.types[letter]) == expected(BASE_TABLE[letter])


def test_r1_1_cross_check_totals_of_tiles_md() -> None:
    """R1.1 / TILES.md §1 cross-check: fields 126, city segments 49, city tiles 44, pennant
    tiles 10, monasteries 6, road tiles 45, road segments 62."""

    def total(count_of: object) -> int:
        assert callable(count_of)
        return sum(t.count * count_of(t) for t in BASE.types.values())

    def segs(kind: str) -> object:
        return lambda t: sum(s.kind == kind for s in t.segments)

    def has(kind: str) -> object:
        return lambda t: any(s.kind == kind for s in t.segments)

    assert total(segs(FIELD)) == 126
    assert total(segs(CITY)) == 49
    assert total(has(CITY)) == 44
    assert total(lambda t: t.pennants > 0) == 10
    assert total(segs(MONASTERY)) == 6
    assert total(has(ROAD)) == 45
    assert total(segs(ROAD)) == 62


def test_r1_1_same_edges_different_cities() -> None:
    """TILES.md: I and M/N share CFFC (I: two cities, M/N: one); H and F/G turned likewise."""
    assert BASE.types["I"].edges == BASE.types["M"].edges == BASE.types["N"].edges == "CFFC"
    assert sum(s.kind == CITY for s in BASE.types["I"].segments) == 2
    assert sum(s.kind == CITY for s in BASE.types["N"].segments) == 1
    # F turned once shows CFCF, the edge string of H, yet stays one city.
    assert BASE.types["F"].orientations[1].edges == BASE.types["H"].edges == "CFCF"
    assert sum(s.kind == CITY for s in BASE.types["H"].segments) == 2


def test_r4_3_rotation_turns_edges_and_half_edges_clockwise() -> None:
    """TILES.md §0: N→E→S→W; half-edges move two steps (NNW→ENE). D turned once: road N–S,
    city E, field beside the city on SSE+NNE (was ENE+WNW)."""
    assert [o.edges for o in BASE.types["E"].orientations] == ["CFFF", "FCFF", "FFCF", "FFFC"]
    d1 = BASE.types["D"].orientations[1]
    assert d1.edges == "RCRF"
    beside_city = d1.segments[d1.spots["NNE"]]
    assert beside_city.kind == FIELD
    assert d1.spots["SSE"] == d1.spots["NNE"]
    assert d1.spots["N"] == d1.spots["S"]  # the road runs through
    assert d1.segments[d1.spots["E"]].kind == CITY


# ------------------------------------------------------------------------ R1.2 demo set


def test_r1_2_demo_set_48_tiles_5_meeples() -> None:
    """R1.2: demo set of 48 tiles (TILES.md §2 counts), 5 meeples per player, start D."""
    assert DEMO.size == 48
    assert DEMO.meeples == 5
    assert DEMO.start == "D"
    assert {name: t.count for name, t in DEMO.types.items()} == DEMO_COUNTS
    assert not {"C", "M", "R", "X"} & set(DEMO.types)


def test_r1_2_demo_pennant_tiles_and_extra_types() -> None:
    """R1.2 / TILES.md §2: 7 pennant tiles (F×2, O×2, Q, S×2); LRFR (FRFR, monastery, two
    roads ending at it) and CFR (CFRF, city cap N, road S ending at the city)."""
    assert sum(t.count for t in DEMO.types.values() if t.pennants) == 7
    for name, row in EXTRA_TABLE.items():
        assert describe(DEMO.types[name]) == expected(row)
    assert "LRFR" not in BASE.types and "CFR" not in BASE.types
    # the shared types are the base types
    for name in set(DEMO.types) - set(EXTRA_TABLE):
        assert describe(DEMO.types[name]) == expected(BASE_TABLE[name])


def test_r1_2_demo_game_gives_5_meeples_and_47_tiles_in_the_bag() -> None:
    """R1.2: a demo game starts with 5 meeples each and 47 tiles to draw (48 less D)."""
    state = fresh(2, Ruleset(tileset="demo"))
    assert state.supply == [5, 5]
    assert state.bag_size == 47
    assert state.bag["D"] == 3
    assert refused(state, DrawTile("C")).code == "unknown_tile"  # no C in the demo set
    assert refused(state, DrawTile("X")).code == "unknown_tile"


# ------------------------------------------------------------------------ R1.3 players


@pytest.mark.parametrize("players", [2, 3, 4, 5, 6])
def test_r1_3_two_to_six_players_accepted_with_7_meeples(players: int) -> None:
    """R1.3: 2–6 players; each has 7 meeples (base set) and a score of 0."""
    state = fresh(players)
    assert state.players == players
    assert state.supply == [7] * players
    assert state.scores == [0] * players
    assert load_record({"format": "carcassonne-record/1", "players": players,
                        "turns": []}).players == players  # fmt: skip


@pytest.mark.parametrize("players", [0, 1, 7])
def test_r1_3_one_or_seven_players_rejected(players: int) -> None:
    """R1.3: StartGame and load_record refuse 1 and 7 players (code bad_players)."""
    err = refused(GameState(), StartGame(Ruleset(), players))
    assert isinstance(err, MalformedError)
    assert (err.code, err.rule) == ("bad_players", "R1.3")
    with pytest.raises(RecordError) as info:
        load_record({"format": "carcassonne-record/1", "players": players, "turns": []})
    assert (info.value.code, info.value.index) == ("bad_players", None)


def test_r1_3_notation_record_with_seven_players_is_refused_on_replay() -> None:
    """R1.3: `players=7` in notation parses, but replaying it fails with bad_players."""
    with pytest.raises(GameError) as info:
        replay(record("", players=7))
    assert info.value.code == "bad_players"


def test_r1_3_meeples_per_player_override() -> None:
    """R1.3 with ruleset meeples=3: each player starts with 3 meeples."""
    assert fresh(3, Ruleset(meeples=3)).supply == [3, 3, 3]


# ------------------------------------------------------------------------ the bag


def test_r1_1_bag_holds_71_tiles_with_three_d() -> None:
    """R1.1/R2.1: the start D is on the table, so the bag holds 71 tiles, 3 of them D."""
    state = fresh()
    assert state.bag_size == 71
    assert state.bag["D"] == 3
    assert state.bag["C"] == 1


def test_r1_1_drawing_a_tile_not_left_in_the_bag_is_rejected() -> None:
    """Board `C0@0,-1 C0@0,-2`: base has one C, so the second draw fails (tile_not_in_bag)."""
    err = record_error("C0@0,-1 C0@0,-2")
    assert (err.index, err.code, err.rule) == (1, "tile_not_in_bag", "R1.1")


def test_r1_1_bag_count_falls_by_one_per_draw_and_exhausted_type_refused() -> None:
    """Draw the 3 D left in the bag by hand: the 4th draw is refused (tile_not_in_bag)."""
    state = fresh()
    # D2 (F R C R) fits under a field edge, D0 (C R F R) under D2's city edge: a column.
    for y in (1, 2, 3):
        run(state, DrawTile("D"))
        run(state, PlayTurn(state.current, 0, y, 2 if y % 2 else 0))
    assert state.bag_size == 68
    assert "D" not in state.bag
    err = refused(state, DrawTile("D"))
    assert (err.code, err.rule) == ("tile_not_in_bag", "R1.1")
    assert refused(state, DrawTile("Z")).code == "unknown_tile"
