"""Farm scoring at the end of the game: 3rd edition (R7.3) and the 1st/2nd editions (R7.4).

Boards in the compact notation (README); start tile D at 0,0 (city N, road W-E, field S);
x grows east, y grows south. Field segments and the cities they border come from
TILES.md (e.g. D: f1 ENE,WNW -> city; f2 ESE,SSE,SSW,WSW -> none). Expected points are
hand-computed from RULES.md.
"""

from __future__ import annotations

import pytest

from carcassonne.errors import RecordError
from carcassonne.notation import parse_record
from carcassonne.record import replay, score_report
from carcassonne.scoring import ScoreEvent
from carcassonne.state import GameState
from carcassonne.tilesets import BASE


def play(
    turns: str, players: int = 2, farm: str = "3rd", incomplete: str = "on"
) -> tuple[GameState, dict]:
    """Replay a base-set record given by its turns; returns the final state and report."""
    head = (
        f"carcassonne-record/1 base players={players} farmers=on farm={farm} "
        f"incomplete={incomplete}"
    )
    state = replay(parse_record(head + "\n" + turns))
    return state, score_report(state)


def farms(state: GameState) -> list[ScoreEvent]:
    """The farm explanations, in the engine's order."""
    return [e for e in state.log if e.kind == "farm"]


def farm_on(state: GameState, tile: tuple[int, int], player: int) -> ScoreEvent:
    """The farm explanation of the farm on `tile` that holds a farmer of `player`."""
    (hit,) = [e for e in farms(state) if tile in e.tiles and e.meeples[player] > 0]
    return hit


CITY_D = ((0, -1), (0, 0))  # D's city closed by E2 at 0,-1 (2 tiles)


# ------------------------------------------------------------------- R7.3 basics


# E2 at 0,-1 closes D's city; player 0's farmer on E2's field, which borders that city.
def test_r7_3_farm_scores_3_per_completed_bordering_city():
    state, report = play("E2@0,-1:NNW")
    assert report["scores_before_final"] == [0, 0]
    assert report["final_scores"] == [3, 0]
    (farm,) = farms(state)
    assert farm.rule == "R7.3" and farm.final and not farm.complete
    assert farm.tiles == ((0, -1),) and farm.cities == (CITY_D,)
    assert farm.meeples == (1, 0) and farm.winners == (0,)
    assert farm.points == 3 and farm.awarded == (3, 0)


# F1 at 0,-1 (city N-S, still open) with player 0's farmer on its east field: the farm
# borders only an incomplete city, which pays nothing.
def test_r7_3_incomplete_city_pays_nothing():
    state, report = play("F1@0,-1:ENE")
    assert report["final_scores"] == [0, 0]
    (farm,) = farms(state)
    assert farm.cities == () and farm.points == 0 and farm.awarded == (0, 0)
    assert farm.winners == (0,)  # the farm is owned, it is just worth nothing


# E2 at 0,-1 (player 0's farmer) closes D's city; U0 at 1,0 and B0 at 1,-1 join E2's
# field with D's field ENE/WNW. The farm touches the city along two tiles (E2 and D):
# the city counts once per farm, 3 points (not 6).
def test_r7_3_city_counts_once_per_farm():
    state, report = play("E2@0,-1:NNW U0@1,0 B0@1,-1")
    assert report["final_scores"] == [3, 0]
    (farm,) = farms(state)
    assert farm.tiles == ((0, -1), (0, 0), (1, -1), (1, 0))
    assert farm.cities == (CITY_D,) and farm.points == 3


# City D-F1-E2 (F1 at 0,-1, pennant; E2 at 0,-2) borders three separate farms: F1's east
# field (player 0), F1's west field extended by E3 at -1,-1 (player 1), E2's field
# (player 0). 3rd edition: the city pays every farm: player 0 scores it twice (6),
# player 1 once (3). The incomplete city of E3 pays nothing.
def test_r7_3_city_pays_every_farm_it_borders():
    state, report = play("F1@0,-1:ENE E3@-1,-1:NNE E2@0,-2:NNW")
    assert report["final_scores"] == [6, 3]
    city = ((0, -2), (0, -1), (0, 0))
    assert [(e.tiles, e.cities, e.awarded) for e in farms(state)] == [
        (((0, -1),), (city,), (3, 0)),
        (((-1, -1), (0, -1)), (city,), (0, 3)),
        (((0, -2),), (city,), (3, 0)),
    ]


# ---------------------------------------------------- R7.3 farms separated by roads


# A road loop (V0 1,0, V1 1,1, U0 0,1, V2 -1,1, V3 -1,0) through D; E2 at 0,-1 closes
# D's city. Player 0's farmer on V0's outer field (joined with D's field ENE/WNW) owns a
# farm bordering the city: 3. Player 1's farmer on V1's inner corner field owns the farm
# closed inside the loop: no city, 0 points (it still is a farm, scored 0).
def test_r7_3_road_separates_farms_and_closed_farm_without_city_is_0():
    state, report = play("V0@1,0:NNE V1@1,1:WNW U0@0,1 V2@-1,1 V3@-1,0 E2@0,-1")
    assert report["final_scores"] == [3, 0]
    outer, inner = farm_on(state, (1, 0), 0), farm_on(state, (1, 1), 1)
    assert outer is not inner
    assert outer.cities == (CITY_D,) and outer.awarded == (3, 0)
    assert inner.cities == () and inner.points == 0 and inner.winners == (1,)
    assert state.supply == [6, 6]  # farmers stay on the board (R5.2, R6.6)


# Tile data: only the field wedge between a city and the next road borders the city;
# corner fields cut off by roads do not (D f2, L f2/f3 -> none).
def test_r7_3_tile_data_corner_fields_do_not_border():
    def bordering(name):
        tile = BASE.types[name]
        return [(seg.halves, bool(seg.cities)) for seg in tile.segments if seg.kind == "field"]

    # half-edge numbers: NNW 0, NNE 1, ENE 2, ESE 3, SSE 4, SSW 5, WSW 6, WNW 7
    assert bordering("D") == [((2, 7), True), ((3, 4, 5, 6), False)]
    assert bordering("L") == [((2, 7), True), ((3, 4), False), ((5, 6), False)]
    assert bordering("I") == [((2, 3, 4, 5), True)]
    assert BASE.types["I"].segments[2].cities == (0, 1)  # both caps


# E2 at 0,-1 closes D's city; B0 at 0,1 (player 1's farmer, not a monk: R11) on D's
# south field; L0 at 1,0 (player 0's farmer on its SE corner field ESE/SSE); E2 at 1,-1
# closes L0's city. Both farms lie on tiles holding completed cities but are cut off
# from them by roads (their fields reach the city tiles only at corners and across the
# road): neither borders a city, 0 points each.
def test_r7_3_farms_cut_off_from_cities_by_roads_score_0():
    state, report = play("E2@0,-1 B0@0,1:NNW L0@1,0:ESE E2@1,-1")
    assert report["final_scores"] == [0, 0]
    south, corner = farm_on(state, (0, 1), 1), farm_on(state, (1, 0), 0)
    assert south.tiles == ((0, 0), (0, 1), (1, 0)) and south.cities == ()
    assert corner.tiles == ((1, 0),) and corner.cities == ()
    assert all(e.awarded == (0, 0) for e in state.log)
    assert [e for e in state.log if e.kind == "monastery"] == []  # R11: the monastery stays free


# ------------------------------------------------------------ R7.3 majority and ties

# The large/small farm board of the 1st-edition page (three players, RED=0 BLUE=1
# YELLOW=2): city A = D + F1 0,-1 + E2 0,-2; city B = D0 2,0 + E2 2,-1. The large farm
# (F1's east field, D's field ENE/WNW, U0 1,0, D0's wedge, E2 2,-1, E0 1,-2, E2 0,-2)
# is joined last by B0 at 1,-1 and borders A and B; the small farm (F1's west field,
# E3 at -1,-1) borders only A. RED: farmers on F1 (east) and E2 2,-1. YELLOW: on U0 1,0
# and optionally on E0 1,-2. BLUE: on E3 -1,-1.
LARGE_SMALL = (
    "F1@0,-1:ENE E3@-1,-1:ENE U0@1,0:NNW D0@2,0 E2@0,-2 E0@1,-2{yellow} E2@2,-1:WNW B0@1,-1"
)
CITY_A = ((0, -2), (0, -1), (0, 0))
CITY_B = ((2, -1), (2, 0))


# RED 2 farmers vs YELLOW 1 on the large farm: RED owns it, 3 x 2 cities = 6; YELLOW 0.
def test_r7_3_majority_owns_the_farm():
    state, report = play(LARGE_SMALL.format(yellow=""), players=3)
    assert report["final_scores"] == [6, 3, 0]
    large = farm_on(state, (1, -1), 0)
    assert large.meeples == (2, 0, 1) and large.winners == (0,)
    assert large.cities == (CITY_A, CITY_B)
    assert large.points == 6 and large.awarded == (6, 0, 0)
    small = farm_on(state, (-1, -1), 1)
    assert small.cities == (CITY_A,) and small.awarded == (0, 3, 0)


# RED 2 vs YELLOW 2: both own the large farm and both score the full 6.
def test_r7_3_tie_all_owners_score_full():
    state, report = play(LARGE_SMALL.format(yellow=":SSW"), players=3)
    assert report["final_scores"] == [6, 3, 6]
    large = farm_on(state, (1, -1), 0)
    assert large.meeples == (2, 0, 2) and large.winners == (0, 2)
    assert large.awarded == (6, 0, 6)
    assert report["winners"] == [0, 2] and report["ranks"] == [1, 3, 1]


# -------------------------------------------------------- R7.4 1st and 2nd editions

# The "differences between editions" board of the 1st-edition page: BLUE (player 0) has
# farmers on two farms (F1's east field, E2 0,-2's field) that both touch city D-F1-E2,
# YELLOW (player 1) one farmer on the third farm (F1's west field + E3 -1,-1).
#   3rd: every farm scores: BLUE 3 + 3, YELLOW 3.
#   2nd: per farm, but BLUE scores the city only once: BLUE 3, YELLOW 3.
#   1st: per city: farmers touching it BLUE 2, YELLOW 1: BLUE alone takes 4.
EDITIONS = "F1@0,-1:ENE E3@-1,-1:NNE E2@0,-2:NNW"


@pytest.mark.parametrize(
    ("edition", "expected"), [("3rd", [6, 3]), ("2nd", [3, 3]), ("1st", [4, 0])]
)
def test_r7_4_one_board_three_editions(edition, expected):
    _, report = play(EDITIONS, farm=edition)
    assert report["final_scores"] == expected


def test_r7_4_first_edition_scores_each_city_once():
    state, _ = play(EDITIONS, farm="1st")
    (city,) = farms(state)
    assert city.rule == "R7.4" and city.final
    assert city.cities == (CITY_A,)
    assert city.meeples == (2, 1) and city.winners == (0,)
    assert city.points == 4 and city.awarded == (4, 0)
    assert city.tiles == ((-1, -1), (0, -2), (0, -1))  # the farms touching the city


def test_r7_4_second_edition_pays_a_city_once_per_player():
    state, _ = play(EDITIONS, farm="2nd")
    events = farms(state)
    assert all(e.rule == "R7.4" for e in events)
    assert sum(e.awarded[0] for e in events) == 3  # two farms, one city: paid once
    assert sum(e.awarded[1] for e in events) == 3
    assert sorted(e.points for e in events) == [3, 3, 3]  # each farm is worth 3


# The large/small board with the tie, under the old editions. 1st: city A is touched by
# the large farm (RED 2, YELLOW 2) and the small one (BLUE 1): RED and YELLOW tie, 4 each;
# city B (large farm only): RED and YELLOW 4 each. 2nd: as 3rd (no player owns two farms
# touching the same city).
@pytest.mark.parametrize(
    ("edition", "expected"), [("3rd", [6, 3, 6]), ("2nd", [6, 3, 6]), ("1st", [8, 0, 8])]
)
def test_r7_4_large_small_board_in_each_edition(edition, expected):
    state, report = play(LARGE_SMALL.format(yellow=":SSW"), players=3, farm=edition)
    assert report["final_scores"] == expected
    if edition == "1st":
        city_a, city_b = farms(state)
        assert city_a.cities == (CITY_A,) and city_a.meeples == (2, 1, 2)
        assert city_b.cities == (CITY_B,) and city_b.meeples == (2, 0, 2)
        assert city_a.winners == city_b.winners == (0, 2)


# 1st edition: a city with no farmer on any farm touching it is not scored; an incomplete
# city is never scored.
def test_r7_4_first_edition_ignores_incomplete_and_unfarmed_cities():
    state, report = play("F1@0,-1:ENE", farm="1st")
    assert report["final_scores"] == [0, 0] and farms(state) == []


# ----------------------------------------------------------- farmers off (R5.2)


# Without farmers, no farm is scored (E2 closes D's city, player 1's road D-V0 scores 2)
# and a farmer is an illegal meeple.
def test_no_farm_scoring_when_farmers_are_off():
    head = "carcassonne-record/1 base players=2 farmers=off farm=3rd incomplete=on\n"
    state = replay(parse_record(head + "E2@0,-1 V0@1,0:W"))
    assert farms(state) == [] and state.scores == [0, 2]
    with pytest.raises(RecordError) as err:
        replay(parse_record(head + "E2@0,-1:NNW"))
    assert err.value.code == "farmers_disabled" and err.value.index == 0
