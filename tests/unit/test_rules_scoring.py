"""Scoring of roads, cities and monasteries during play (R6) and at the end (R7.1, R7.2, R10.1).

Every board is written in the compact notation (README): the start tile D lies at 0,0
(city N, road W-E, field S); x grows east, y grows south; players move 0, 1, 0, 1, ...
Expected points are computed by hand from RULES.md and the tile table in TILES.md.
"""

from __future__ import annotations

import pytest

from carcassonne.notation import parse_record
from carcassonne.record import replay, score_report
from carcassonne.scoring import ScoreEvent, ranks
from carcassonne.state import GameState


def play(
    turns: str, players: int = 2, incomplete: str = "on", tileset: str = "base", farm: str = "3rd"
) -> tuple[GameState, dict]:
    """Replay a record given by its turns; returns the final state and the score report."""
    head = (
        f"carcassonne-record/1 {tileset} players={players} farmers=on farm={farm} "
        f"incomplete={incomplete}"
    )
    state = replay(parse_record(head + "\n" + turns))
    return state, score_report(state)


def scored(state: GameState, kind: str, final: bool | None = None) -> list[ScoreEvent]:
    """The score explanations of one feature kind (optionally only in-play or only final)."""
    return [e for e in state.log if e.kind == kind and (final is None or e.final == final)]


# ------------------------------------------------------------------------ R6.1 roads


# T3 at -1,0: road E ends at its city; the road runs through D; the junction tile at 1,0
# (L, W or X: every arm ends at the junction) closes it. Road of 3 tiles = 3 points.
@pytest.mark.parametrize("junction", ["L0", "W0", "X0"])
def test_r6_1_road_closed_by_city_end_and_junction(junction):
    state, report = play(f"T3@-1,0:E {junction}@1,0")
    assert report["final_scores"] == [3, 0]
    (road,) = scored(state, "road")
    assert road.rule == "R6.1" and road.complete and not road.final
    assert road.tiles == ((-1, 0), (0, 0), (1, 0))
    assert road.meeples == (1, 0) and road.winners == (0,)
    assert road.points == 3 and road.awarded == (3, 0) and road.returned == (1, 0)
    assert road.turn == 2


# L0 at -1,0: junction closes the west end (player 0's highwayman on its E arm);
# A1 at 1,0: monastery with its road W, which ends at the monastery. 3 tiles = 3.
def test_r6_1_road_closed_by_monastery():
    state, report = play("L0@-1,0:E A1@1,0")
    assert report["final_scores"] == [3, 0]
    (road,) = scored(state, "road", final=False)
    assert road.tiles == ((-1, 0), (0, 0), (1, 0)) and road.points == 3
    # the monastery itself is incomplete and unoccupied: no final score for it
    assert scored(state, "monastery") == []


# T3 at -1,0 and S1 at 1,0: the road through D ends at a city on both sides. 3 points.
def test_r6_1_road_between_two_cities():
    state, report = play("T3@-1,0:E S1@1,0")
    assert report["final_scores"] == [3, 0]
    assert scored(state, "road")[0].tiles == ((-1, 0), (0, 0), (1, 0))


# A loop of 6 tiles around D's south field: V0 1,0 (W-S), V1 1,1 (N-W), U0 0,1 (W-E),
# V2 -1,1 (N-E), V3 -1,0 (E-S). The last tile joins the road to itself on both its
# edges; each tile counts once: 6 points for player 0's highwayman on V0.
def test_r6_1_road_loop_counts_each_tile_once():
    state, report = play("V0@1,0:W V1@1,1 U0@0,1 V2@-1,1 V3@-1,0")
    assert report["final_scores"] == [6, 0]
    (road,) = scored(state, "road")
    assert road.complete and road.turn == 5
    assert road.tiles == ((-1, 0), (-1, 1), (0, 0), (0, 1), (1, 0), (1, 1))
    assert road.points == 6 and road.awarded == (6, 0)


# R11 T-junction: W0 at 1,0 with player 0 on its E arm; L0 at -1,0 with player 1 on its
# E arm. The road L0-D-W0 (W arm) is a different road from W0's E arm, so player 1 may
# place there; it is closed by the two junctions: 3 points to player 1. Player 0's arm
# stays open: 1 point at the end (R7.2).
def test_r11_t_junction_arms_are_separate_roads():
    state, report = play("W0@1,0:E L0@-1,0:E")
    assert report["scores_before_final"] == [0, 3]
    assert report["final_scores"] == [1, 3]
    closed, open_arm = scored(state, "road")
    assert closed.meeples == (0, 1) and closed.awarded == (0, 3)
    assert open_arm.final and not open_arm.complete and open_arm.rule == "R7.2"
    assert open_arm.tiles == ((1, 0),) and open_arm.awarded == (1, 0)


# ------------------------------------------------------------------------ R6.2 cities


# E2 at 0,-1 (city S) closes D's city: a 2-tile city is worth 4 (no "small city" rule).
def test_r6_2_two_tile_city_is_worth_4():
    state, report = play("E2@0,-1:S")
    assert report["final_scores"] == [4, 0]
    (city,) = scored(state, "city")
    assert city.rule == "R6.2" and city.tiles == ((0, -1), (0, 0))
    assert city.pennants == 0 and city.points == 4 and city.awarded == (4, 0)


# F1 at 0,-1 (city N-S with pennant), E2 at 0,-2 closes: 3 tiles + 1 pennant = 6 + 2 = 8.
def test_r6_2_city_with_pennant():
    state, report = play("F1@0,-1:N E2@0,-2")
    assert report["final_scores"] == [8, 0]
    (city,) = scored(state, "city")
    assert city.tiles == ((0, -2), (0, -1), (0, 0)) and city.pennants == 1
    assert city.points == 8 and city.turn == 2


# A ring of 4 tiles south of D: M2 0,1 (city E+S, pennant), N3 1,1 (city S+W),
# N1 0,2 (city N+E), I0 1,2 (two caps N and W). I0's two caps both join the ring, so one
# city holds both segments of I0: 4 tiles (I0 once) x 2 + 1 pennant x 2 = 10.
def test_r6_2_tile_with_two_segments_of_one_city_counts_once():
    state, report = play("M2@0,1:E N3@1,1 N1@0,2 I0@1,2")
    assert report["final_scores"] == [10, 0]
    (city,) = scored(state, "city")
    assert city.tiles == ((0, 1), (0, 2), (1, 1), (1, 2))
    assert city.pennants == 1 and city.points == 10 and city.turn == 4


# U0 at 1,0 supports F0 at 1,-1 (city E-W, pennant; player 1's knight). I2 at 0,-1 has
# two caps: S closes D's city (player 0's knight), E joins F0's city. The pennant lies in
# F0's city only: D's city scores 2 tiles x 2 = 4 (not 6); F0's city stays open and scores
# 2 tiles + 1 pennant = 3 at the end (R7.2).
def test_r6_2_pennant_counts_only_for_its_own_city():
    state, report = play("U0@1,0 F0@1,-1:E I2@0,-1:S")
    assert report["scores_before_final"] == [4, 0]
    assert report["final_scores"] == [4, 3]
    done, open_city = scored(state, "city")
    assert done.tiles == ((0, -1), (0, 0)) and done.pennants == 0 and done.points == 4
    assert open_city.tiles == ((0, -1), (1, -1)) and open_city.pennants == 1
    assert open_city.points == 3 and open_city.awarded == (0, 3)


# ------------------------------------------------------------------- R6.3 monastery


# B0 at 0,1 with player 0's monk, then its 8 neighbours: U0 at +-1,0, E tiles with their
# cities facing outwards at +-1,1, 0,2 and +-1,2. The 8th neighbour completes it: 9.
def test_r6_3_monastery_with_8_neighbours_is_worth_9():
    state, report = play("B0@0,1:M U0@1,0 U0@-1,0 E1@1,1 E3@-1,1 E2@0,2 E1@1,2 E3@-1,2")
    assert report["final_scores"] == [9, 0]
    (monastery,) = scored(state, "monastery")
    assert monastery.rule == "R6.3" and monastery.complete and monastery.turn == 8
    assert len(monastery.tiles) == 9 and (0, 1) in monastery.tiles
    assert monastery.points == 9 and monastery.returned == (1, 0)
    assert state.supply == [7, 7]


# The same 3x3 block with the monastery placed last into the hole (player 1's monk):
# complete the moment it is placed, 9 at once.
def test_r6_3_monastery_placed_into_a_hole_scores_at_once():
    state, report = play("U0@1,0 U0@-1,0 E1@1,1 E3@-1,1 E1@1,2 E3@-1,2 E2@0,2 B0@0,1:M")
    assert report["scores_before_final"] == [0, 9]
    assert scored(state, "monastery")[0].turn == 8


# Two monasteries side by side (B0 0,1 player 0, B0 1,1 player 1) in a 4x3 block; E2 at
# 1,2 is the last neighbour of both: one tile completes both, 9 each (R6.3, R6.5).
def test_r6_3_adjacent_monasteries_completed_by_one_tile():
    turns = "B0@0,1:M B0@1,1:M U0@-1,0 U0@1,0 U0@2,0 E3@-1,1 E1@2,1 E3@-1,2 E2@0,2 B0@2,2 E2@1,2"
    state, report = play(turns)
    assert report["scores_before_final"] == [9, 9]
    first, second = scored(state, "monastery")
    assert first.turn == second.turn == 11
    assert first.awarded == (9, 0) and second.awarded == (0, 9)


# ------------------------------------------------------------------- R6.4 majority


# Player 0: T3 at -1,0 (road E into D). Player 1: V3 at 0,1 (road E-S, not yet joined).
# V1 at 1,1 and A2 at 0,2 (monastery closing V3's south end); V0 at 1,0 joins both parts:
# road T3-D-V0-V1-V3-A2, 6 tiles, one highwayman each: a tie, both score the full 6.
def test_r6_4_tie_both_score_full():
    state, report = play("T3@-1,0:E V3@0,1:E V1@1,1 A2@0,2 V0@1,0")
    assert report["final_scores"] == [6, 6]
    (road,) = scored(state, "road")
    assert road.tiles == ((-1, 0), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1))
    assert road.meeples == (1, 1) and road.winners == (0, 1)
    assert road.points == 6 and road.awarded == (6, 6) and road.returned == (1, 1)
    assert report["winners"] == [0, 1] and report["ranks"] == [1, 1]


# Knights in three separate city parts, joined by C0 at 0,-1 (4 city edges, pennant):
# player 0 on E3 1,-1 (city W) and on E2 0,-2 (city S), player 1 on E1 -1,-1 (city E).
# U0 at +-1,0 and E0 at 1,-2 carry the caps; V0 at 2,0 is a filler. City D, C0, E3, E1,
# E2: 5 tiles + 1 pennant = 12. Player 0 has the majority (2 to 1): 12 once, not 24
# (R11); player 1 (minority) scores nothing. All three knights go home (R6.6).
def test_r6_4_majority_and_two_meeples_score_once():
    turns = "U0@1,0 U0@-1,0 E3@1,-1:W E1@-1,-1:E E0@1,-2 V0@2,0 E2@0,-2:S C0@0,-1"
    state, report = play(turns)
    assert report["final_scores"] == [12, 0]
    (city,) = scored(state, "city")
    assert city.tiles == ((-1, -1), (0, -2), (0, -1), (0, 0), (1, -1))
    assert city.pennants == 1 and city.meeples == (2, 1) and city.winners == (0,)
    assert city.points == 12 and city.awarded == (12, 0) and city.returned == (2, 1)
    assert state.supply == [7, 7] and state.meeples == {}


# The same tie road with three players: player 2 places V1 without a highwayman and
# scores nothing; players 0 and 1 share the full 6 and the first rank (R7.5).
def test_r6_4_tie_with_three_players_the_absent_player_scores_nothing():
    _, report = play("T3@-1,0:E V3@0,1:E V1@1,1 A2@0,2 V0@1,0", players=3)
    assert report["final_scores"] == [6, 6, 0]
    assert report["ranks"] == [1, 1, 3] and report["winners"] == [0, 1]


# -------------------------------------------------------- R6.5 several features at once


# U0 at +-1,0; A3 at -1,-1 (monastery, road E; player 0's highwayman); A1 at 1,-1
# (monastery, road W). D2 at 0,-1 (city S, road W-E) with player 0's knight closes both
# D's city (2 tiles = 4) and the road A3-D2-A1 (3 tiles = 3): 7 points in one turn.
def test_r6_5_one_tile_completes_road_and_city():
    state, report = play("U0@-1,0 U0@1,0 A3@-1,-1:E A1@1,-1 D2@0,-1:S")
    assert report["final_scores"] == [7, 0]
    city, road = sorted(scored(state, "city") + scored(state, "road"), key=lambda e: e.kind)
    assert city.turn == road.turn == 5
    assert city.tiles == ((0, -1), (0, 0)) and city.points == 4
    assert road.tiles == ((-1, -1), (0, -1), (1, -1)) and road.points == 3
    assert state.supply == [7, 7]  # R5.6/R6.6: both meeples came back the same turn


# ---------------------------------------------------------- R5.6, R6.6, R11 meeples


# E2 at 0,-1 completes D's city with nobody in it: no points for anyone.
def test_r5_6_completing_an_unoccupied_feature_scores_nothing():
    state, report = play("E2@0,-1")
    assert report["final_scores"] == [0, 0]
    assert all(e.winners == () and e.awarded == (0, 0) for e in state.log)


# R5.6/R11: I2 at 0,-1 has two caps; S closes D's city. A knight on S scores 4 and comes
# back at once; a knight on the open cap E leaves the small city unscored and stays.
@pytest.mark.parametrize(
    ("spot", "before", "final", "supply"),
    [("S", [4, 0], [4, 0], [7, 7]), ("E", [0, 0], [1, 0], [6, 7])],
)
def test_r5_6_two_city_tile_meeple_scores_and_returns(spot, before, final, supply):
    state, report = play(f"I2@0,-1:{spot}")
    assert report["scores_before_final"] == before
    assert report["final_scores"] == final
    assert state.supply == supply


# E2 at 0,-1 with player 0's farmer on its field completes D's city (unoccupied): the
# farmer stays (fields are not scored during play); V0 at 1,0 with player 1's highwayman.
# Supplies after play: 6 and 6; the final scoring leaves meeples where they stand.
def test_r6_6_farmers_never_return():
    state, report = play("E2@0,-1:NNW V0@1,0:W")
    assert state.supply == [6, 6]
    assert sorted(m.player for m in state.meeples.values()) == [0, 1]
    assert report["final_scores"] == [3, 2]  # farm 3 (R7.3), incomplete road 2 (R7.2)


# ------------------------------------------------------------------ R7.1 game end


# Player 0: V0 at 1,0 (road D-V0, open). Player 1 in the last turn: E2 at 0,-1 closes
# D's city: scored as usual (4) before the final scoring, which then adds the open road.
def test_r7_1_feature_completed_in_last_turn_is_scored_as_usual():
    state, report = play("V0@1,0:W E2@0,-1:S")
    assert state.over
    assert report["scores_before_final"] == [0, 4]
    assert report["final_scores"] == [2, 4]
    city, road = scored(state, "city")[0], scored(state, "road")[0]
    assert not city.final and city.turn == 2
    assert road.final and road.turn == 2 and road.points == 2


# ------------------------------------------------------- R7.2 incomplete features


# F1 at 0,-1 (player 0's knight): city D-F1, 2 tiles + 1 pennant = 3. V0 at 1,0 (player
# 1's highwayman): road D-V0 = 2. B0 at 0,1 (player 0's monk): neighbours D and V0 = 1+2.
def test_r7_2_incomplete_road_city_monastery():
    state, report = play("F1@0,-1:N V0@1,0:W B0@0,1:M")
    assert report["scores_before_final"] == [0, 0]
    assert report["final_scores"] == [6, 2]
    (city,) = scored(state, "city")
    assert city.final and not city.complete and city.rule == "R7.2"
    assert city.tiles == ((0, -1), (0, 0)) and city.pennants == 1 and city.points == 3
    (road,) = scored(state, "road")
    assert road.tiles == ((0, 0), (1, 0)) and road.points == 2 and road.awarded == (0, 2)
    (monastery,) = scored(state, "monastery")
    assert monastery.tiles == ((0, 0), (0, 1), (1, 0)) and monastery.points == 3


# The tie road above without its last tile A2: T3-D-V0-V1-V3 is joined but open at 0,2.
# One highwayman each: both score 5 (1 per tile) at the end.
def test_r7_2_incomplete_tie_both_score():
    state, report = play("T3@-1,0:E V3@0,1:E V1@1,1 V0@1,0")
    assert report["final_scores"] == [5, 5]
    (road,) = scored(state, "road")
    assert road.meeples == (1, 1) and road.winners == (0, 1) and road.awarded == (5, 5)


# The caps E3 at 1,-1 (player 0) and E1 at -1,-1 (player 1) of the R6.4 test, never
# joined (0,-1 stays empty): two separate open cities of 1 tile each, 1 point each.
def test_r7_2_separate_pieces_score_separately():
    state, report = play("U0@1,0 U0@-1,0 E3@1,-1:W E1@-1,-1:E")
    assert report["final_scores"] == [1, 1]
    assert sorted(e.tiles for e in scored(state, "city")) == [((-1, -1),), ((1, -1),)]


# The ring of the R6.2 test with R0 at 0,2 (city N, E, W) instead of N1: I0's two caps
# still join one city, which stays open at R0's W edge. Incomplete: 4 tiles (I0 once)
# + 1 pennant = 5.
def test_r7_2_incomplete_city_counts_a_two_segment_tile_once():
    state, report = play("M2@0,1:E N3@1,1 R0@0,2 I0@1,2")
    assert report["final_scores"] == [5, 0]
    (city,) = scored(state, "city")
    assert city.tiles == ((0, 1), (0, 2), (1, 1), (1, 2)) and city.pennants == 1


# ------------------------------------------------------------------- R7.5 winners


# Highest total wins; ties share the victory and the rank (competition ranking).
def test_r7_5_ties_share_the_victory():
    assert ranks([10, 5, 10]) == ((1, 3, 1), (0, 2))
    assert ranks([3, 7, 5]) == ((3, 1, 2), (1,))
    assert ranks([0, 0, 0]) == ((1, 1, 1), (0, 1, 2))


# The joined open road of the R7.2 tie test: 5 each at the end, both rank 1. One more
# turn (player 0 closes D's city with E2 at 0,-1: 4) breaks the tie.
def test_r7_5_report_winners_after_final_scoring():
    _, report = play("T3@-1,0:E V3@0,1:E V1@1,1 V0@1,0")
    assert report["final_scores"] == [5, 5]
    assert report["winners"] == [0, 1] and report["ranks"] == [1, 1]
    _, report = play("T3@-1,0:E V3@0,1:E V1@1,1 V0@1,0 E2@0,-1:S")
    assert report["final_scores"] == [9, 5]  # player 0 also closes D's city: 4
    assert report["winners"] == [0] and report["ranks"] == [1, 2]


# ------------------------------------------------------------------ R10.1 house rule


# E2 at 0,-1 with player 0's farmer closes D's city; V0 at 1,0 (player 1's highwayman);
# B0 at 0,1 (player 0's monk). With R7.2: 3 (farm) + 3 (monastery) and 2 (road).
# With R10.1 the incomplete road and monastery score nothing; the farm still scores 3.
@pytest.mark.parametrize(
    ("incomplete", "expected", "rule"), [("on", [6, 2], "R7.2"), ("off", [3, 0], "R10.1")]
)
def test_r10_1_incomplete_features_score_nothing_but_farms_do(incomplete, expected, rule):
    state, report = play("E2@0,-1:NNW V0@1,0:W B0@0,1:M", incomplete=incomplete)
    assert report["final_scores"] == expected
    for kind in ("road", "monastery"):
        (event,) = scored(state, kind, final=True)
        assert event.rule == rule
    (farm,) = scored(state, "farm")
    assert farm.rule == "R7.3" and farm.awarded == (3, 0)
    if incomplete == "off":
        assert all(e.points == 0 for e in state.log if e.final and e.kind != "farm")


# ------------------------------------------------------------------- demo tile set


# Demo set (R1.2, 5 meeples): LRFR0 at -1,0 (both roads end at its monastery) and CFR1 at
# 1,0 (road W ends at its city E): road LRFR-D-CFR closed on both sides, 3 points.
def test_r6_1_demo_tiles_close_roads():
    state, report = play("LRFR0@-1,0:E CFR1@1,0", tileset="demo")
    assert report["final_scores"] == [3, 0]
    (road,) = scored(state, "road")
    assert road.tiles == ((-1, 0), (0, 0), (1, 0)) and road.complete
    assert state.supply == [5, 5]
