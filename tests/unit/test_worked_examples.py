"""The worked examples of the seed rule pages, rebuilt as legal boards.

seeds/001 (print-and-play demo, C2): final scoring example (Green 8 / Yellow 4 / Blue 3 /
Red 3), examples 4b (road shared, 4 each) and 5b (city taken over, 10 points).
seeds/000 (base game, 1st edition): the same final scoring with a 5-point cloister, the
publisher's clarifications (cloister 1 + 5 = 6, a road of 4 tiles = 4), the farm
examples (RED 6 / BLUE 3, the tie RED & YELLOW 6, farms 1-2-3, edition differences).
Boards are in the compact notation; the start tile D lies at 0,0 (city N, road W-E).
"""

from __future__ import annotations

import pytest

from carcassonne.notation import parse_record
from carcassonne.record import replay, score_report
from carcassonne.scoring import ScoreEvent
from carcassonne.state import GameState

GREEN, YELLOW, BLUE, RED, BLACK = range(5)  # seat order of the final scoring examples


def play(
    turns: str, players: int, tileset: str = "base", farm: str = "3rd"
) -> tuple[GameState, dict]:
    """Replay a record given by its turns; returns the final state and the score report."""
    head = f"carcassonne-record/1 {tileset} players={players} farmers=on farm={farm} incomplete=on"
    state = replay(parse_record(head + "\n" + turns))
    return state, score_report(state)


def won(state: GameState) -> list[ScoreEvent]:
    """The explanations that gave somebody points."""
    return [e for e in state.log if any(e.awarded)]


# ------------------------------------------------ final scoring (seeds 001 and 000)

# Green's city: D + N2 0,-1 (Black's knight) + Q0 1,-1 (pennant, links the parts) +
# F0 2,-1 (pennant, Green's knight) + F1 1,-2 (pennant, Green's knight): 5 tiles, 3 coats
# of arms, open at 3,-1 and 1,-3. Yellow's monastery B0 at 0,-2 has the neighbours N2,
# Q0 and F1. Blue's city E2 0,1 + O0 0,2 (pennant), open W. Red's road D-U0-U0, open at
# both ends. V3 1,1, V0 2,1 and V1 1,2 are fillers. Only the demo's pennant tiles are
# used (F x2, O, Q).
FINAL_EXAMPLE = (
    "U0@1,0 E2@0,1 O0@0,2:N U0@2,0:E N2@0,-1:E F0@2,-1:E B0@0,-2:M "
    "V3@1,1 V0@2,1 V1@1,2 F1@1,-2:N Q0@1,-1"
)


def test_demo_page_final_scoring_8_4_3_3():
    state, report = play(FINAL_EXAMPLE, players=5, tileset="demo")
    assert report["scores_before_final"] == [0, 0, 0, 0, 0]
    # Green 8 (5 tiles + 3 coats of arms), Yellow 4 (3 neighbours + 1), Blue 3 (2 tiles
    # + 1 coat of arms), Red 3 (3 tiles); Black has fewer knights than Green: 0.
    assert report["final_scores"] == [8, 4, 3, 3, 0]
    assert report["winners"] == [GREEN] and report["ranks"] == [1, 2, 3, 3, 5]
    by_kind = {(e.kind, e.winners): e for e in state.log}
    green = by_kind[("city", (GREEN,))]
    assert green.rule == "R7.2" and green.final and not green.complete
    assert green.tiles == ((0, -1), (0, 0), (1, -2), (1, -1), (2, -1))
    assert green.pennants == 3 and green.meeples == (2, 0, 0, 0, 1)
    assert green.points == 8 and green.awarded == (8, 0, 0, 0, 0)
    yellow = by_kind[("monastery", (YELLOW,))]
    assert yellow.tiles == ((0, -2), (0, -1), (1, -2), (1, -1)) and yellow.points == 4
    blue = by_kind[("city", (BLUE,))]
    assert blue.tiles == ((0, 1), (0, 2)) and blue.pennants == 1 and blue.points == 3
    red = by_kind[("road", (RED,))]
    assert red.tiles == ((0, 0), (1, 0), (2, 0)) and red.points == 3
    assert len(won(state)) == 4
    assert state.supply == [3, 4, 4, 4, 4]  # demo: 5 meeples each; the final scoring keeps them


# The 1st-edition page shows the same situation with a cloister of 5 points: one more
# neighbour (B0 at -1,-1) for Yellow's monastery; base tile set.
def test_base_page_final_scoring_with_5_point_cloister():
    _, report = play(FINAL_EXAMPLE + " B0@-1,-1", players=5)
    assert report["final_scores"] == [8, 5, 3, 3, 0]


# Publisher's clarification: an incomplete cloister with 5 neighbours earns 1 + 5 = 6.
# B0 at 0,1 (monk), neighbours D, U0 at +-1,0, E1 1,1 and E3 -1,1.
def test_clarification_incomplete_cloister_with_five_neighbours_is_6():
    state, report = play("B0@0,1:M U0@1,0 U0@-1,0 E1@1,1 E3@-1,1", players=2)
    assert report["final_scores"] == [6, 0]
    (monastery,) = won(state)
    assert monastery.kind == "monastery" and len(monastery.tiles) == 6


# Publisher's clarification: a road scores 1 per tile at the end, as during the game:
# road U0 -1,0 - D - U0 1,0 - U0 2,0 (highwayman on U0 1,0), open at both ends: 4.
def test_clarification_incomplete_road_of_four_tiles_is_4():
    state, report = play("U0@1,0:E U0@2,0 U0@-1,0", players=2)
    assert report["final_scores"] == [4, 0]
    (road,) = won(state)
    assert road.rule == "R7.2" and road.tiles == ((-1, 0), (0, 0), (1, 0), (2, 0))


# ---------------------------------------------------- demo page examples 4b and 5b


# 4b: E3 at 0,1 (support), LRFR0 at -1,0 (player 1's highwayman; its road E ends at the
# monastery), CFR2 at 1,1 (player 0's highwayman; road N ends at its city), then V0 at 1,0
# joins both: road LRFR-D-V0-CFR of 4 tiles, complete: both players score 4.
def test_demo_example_4b_two_highwaymen_both_score_4():
    state, report = play("E3@0,1 LRFR0@-1,0:E CFR2@1,1:N V0@1,0", players=2, tileset="demo")
    assert report["final_scores"] == [4, 4]
    (road,) = won(state)
    assert road.meeples == (1, 1) and road.winners == (0, 1) and road.awarded == (4, 4)
    assert road.tiles == ((-1, 0), (0, 0), (1, 0), (1, 1)) and road.returned == (1, 1)


# 5b: player 0 has knights on E1 1,-1 and CFR2 2,-2, Yellow (player 1) on E3 3,-1; Q0 at
# 2,-1 (pennant) links the three parts: 4 tiles + 1 coat of arms = 10, all to player 0.
# U0 at 1..3,0 and B0 at 1,-2 carry the parts; V0 at 4,0 is a filler.
def test_demo_example_5b_two_knights_take_the_city_10_points():
    turns = "U0@1,0 U0@2,0 E1@1,-1:E U0@3,0 B0@1,-2 E3@3,-1:W CFR2@2,-2:S V0@4,0 Q0@2,-1"
    state, report = play(turns, players=2, tileset="demo")
    assert report["final_scores"] == [10, 0]
    (city,) = won(state)
    assert city.kind == "city" and city.rule == "R6.2" and city.complete
    assert city.tiles == ((1, -1), (2, -2), (2, -1), (3, -1)) and city.pennants == 1
    assert city.meeples == (2, 1) and city.winners == (0,)
    assert city.points == 10 and city.awarded == (10, 0) and city.returned == (2, 1)
    assert state.supply == [5, 5]


# ------------------------------------------------------ 1st-edition page: farms


# "RED owns the large farm, scores 6 (cities A and B); BLUE owns the small farm, 3 for
# city A" and "RED and YELLOW both have two farmers: both score 6; BLUE 3". Players:
# RED 0, BLUE 1, YELLOW 2. City A = D + F1 0,-1 + E2 0,-2; city B = D0 2,0 + E2 2,-1.
# Small farm: F1's west field + E3 -1,-1 (BLUE). Large farm, joined last by B0 at 1,-1:
# F1's east field (RED), U0 1,0 with D's field ENE/WNW (YELLOW), E2 2,-1 (RED), E0 1,-2
# with E2 0,-2's field (YELLOW in the tie case).
@pytest.mark.parametrize(("yellow", "expected"), [("", [6, 3, 0]), (":SSW", [6, 3, 6])])
def test_first_edition_page_large_and_small_farm(yellow, expected):
    turns = (
        f"F1@0,-1:ENE E3@-1,-1:ENE U0@1,0:NNW D0@2,0 E2@0,-2 E0@1,-2{yellow} E2@2,-1:WNW B0@1,-1"
    )
    state, report = play(turns, players=3)
    assert report["final_scores"] == expected
    large = next(e for e in state.log if e.kind == "farm" and (1, -1) in e.tiles)
    assert len(large.cities) == 2 and large.points == 6


# Farms 1, 2 and 3 (players RED 0, BLUE 1, YELLOW 2, BLACK 3):
#  city A = T3 -1,0 (road E ends in it) + caps J2 -1,-1, D1 -2,0, E0 -1,1;
#  city B = S1 2,0 (road W ends in it) + caps K2 2,-1, D3 3,0, L0 2,1;
#  city C = D + E2 0,-1. The road T3-D-U0-S1 separates farm 2 (north) from farm 1 (south);
#  both border A and B through T3 and S1 (fields on both sides of their roads).
#  Farm 1 (D's south field, U0's south field): BLUE alone -> A, B: 6.
#  Farm 2 (D's field ENE/WNW, U0 north, E2 0,-1, B0 1,-1, caps J2 and K2): RED (on T3)
#    and BLUE (on E2 0,-1), joined by B0 1,-1 -> A, B, C: 9 each.
#  Farm 3 (E0 -1,1, B0 -1,2, E3 -2,2, I2 -2,3, E3 -1,3): YELLOW on E0 and E3 -1,3, BLACK
#    on E3 -2,2, joined by B0 -1,2 -> A, X (D1 -3,2 + E3 -2,2), Y (I2 + E3 -1,3) and
#    Z (I2 + K0 -2,4): 12 for YELLOW. V0 -3,0 and U1 -3,1 lead to D1 -3,2.
#  E1 at 0,2 (last) adds an incomplete city to farm 3: it generates no points.
FARMS_123 = (
    "T3@-1,0:ENE E2@0,-1:NNW E0@-1,1:SSE D1@-2,0 J2@-1,-1 U0@1,0:SSE S1@2,0 "
    "V0@-3,0 U1@-3,1 K2@2,-1 D1@-3,2 E3@-2,2:NNE I2@-2,3 L0@2,1 E3@-1,3:NNE "
    "D3@3,0 K0@-2,4 B0@1,-1 B0@-1,2 E1@0,2"
)
CITY_A = ((-2, 0), (-1, -1), (-1, 0), (-1, 1))
CITY_B = ((2, -1), (2, 0), (2, 1), (3, 0))
CITY_C = ((0, -1), (0, 0))


def test_first_edition_page_farms_1_2_3():
    state, report = play(FARMS_123, players=4)
    assert report["scores_before_final"] == [0, 0, 0, 0]
    assert report["final_scores"] == [9, 15, 12, 0]  # RED 9, BLUE 6 + 9, YELLOW 12
    farm1, farm3, farm2 = sorted(
        (e for e in state.log if e.kind == "farm"), key=lambda e: len(e.tiles)
    )
    assert farm1.tiles == ((-1, 0), (0, 0), (1, 0), (2, 0))  # south of the road
    assert (1, -1) in farm2.tiles and len(farm2.tiles) == 8
    assert farm3.tiles == ((-2, 2), (-2, 3), (-1, 1), (-1, 2), (-1, 3), (0, 2))
    assert farm1.meeples == (0, 1, 0, 0) and set(farm1.cities) == {CITY_A, CITY_B}
    assert farm1.awarded == (0, 6, 0, 0)
    assert farm2.meeples == (1, 1, 0, 0) and set(farm2.cities) == {CITY_A, CITY_B, CITY_C}
    assert farm2.winners == (0, 1) and farm2.awarded == (9, 9, 0, 0)
    assert farm3.meeples == (0, 0, 2, 1) and farm3.winners == (2,)
    assert len(farm3.cities) == 4 and CITY_A in farm3.cities
    assert (0, 2) in farm3.tiles and all((0, 2) not in c for c in farm3.cities)
    assert farm3.points == 12 and farm3.awarded == (0, 0, 12, 0)


# The same board under the old editions (R7.4).
# 1st, per city (4 points to the most farmers on all farms touching it):
#   A: RED 1, BLUE 2, YELLOW 2, BLACK 1 -> BLUE and YELLOW; C: RED 1, BLUE 1 -> both;
#   B: RED 1, BLUE 2 -> BLUE; X, Y, Z: YELLOW 2, BLACK 1 -> YELLOW.
#   RED 4, BLUE 12, YELLOW 16, BLACK 0.
# 2nd, per farm but a city once per player: BLUE's farms 1 and 2 share A and B: BLUE
#   scores A, B, C once = 9; RED 9; YELLOW 12.
@pytest.mark.parametrize(
    ("edition", "expected"),
    [("3rd", [9, 15, 12, 0]), ("2nd", [9, 9, 12, 0]), ("1st", [4, 12, 16, 0])],
)
def test_first_edition_page_farms_1_2_3_in_each_edition(edition, expected):
    state, report = play(FARMS_123, players=4, farm=edition)
    assert report["final_scores"] == expected
    if edition == "1st":
        cities = [e.cities for e in state.log if e.kind == "farm"]
        assert len(cities) == 6 and len(set(cities)) == 6  # each city scored once


# "Differences between editions": BLUE (player 0) has farmers on two farms that both
# touch the city D + F1 0,-1 + E2 0,-2 (F1's east field, E2's field); YELLOW (player 1)
# one farmer (F1's west field + E3 -1,-1). 1st edition: BLUE alone scores (2 farmers
# against 1): 4. 3rd: both score, BLUE twice: 6 and 3. 2nd: BLUE only once: 3 and 3.
@pytest.mark.parametrize(
    ("edition", "expected"), [("1st", [4, 0]), ("2nd", [3, 3]), ("3rd", [6, 3])]
)
def test_first_edition_page_differences_between_editions(edition, expected):
    _, report = play("F1@0,-1:ENE E3@-1,-1:NNE E2@0,-2:NNW", players=2, farm=edition)
    assert report["final_scores"] == expected
