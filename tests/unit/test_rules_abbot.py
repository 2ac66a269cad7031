"""R9.2 The Abbot (TILES.md §4): gardens on 2nd-edition tiles, one abbot per player on a
monastery or garden, gardens scored like monasteries, taking the abbot back.

Boards are written in notation with `abbot=on edition=2nd`: `Ug0@1,0:G` is the garden copy of
U placed with its player's abbot in the garden, `B0@0,1:A` the abbot on a monastery, `:M` a
monk, and `~A` after a placement takes the abbot back instead of placing a meeple. The start
tile D (city N, road W–E, field S) lies at (0,0).
"""

from __future__ import annotations

import random

import pytest

from carcassonne.errors import MalformedError
from carcassonne.events import AbbotRecalled, DrawTile, PlayTurn, RecallAbbot
from carcassonne.game import RECALL_ABBOT, actions, command_for_action, decide
from carcassonne.notation import format_record, parse_record
from carcassonne.record import load_record, record_events, record_from_events, replay
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.tiles import GARDEN, MONASTERY, ROAD, Meeple

from .boards import final_state, record, record_error, refused, state_after

ABBOT = "abbot=on edition=2nd"
# T1 P0 puts the garden tile Ug east of the start with the abbot in its garden; T2 P1 plays
# far west; then tiles close in around the garden (1,0): after T8 it has 7 neighbours and
# only (2,1) is missing.
AROUND = "Ug0@1,0:G V3@-1,0 B0@1,-1 E2@0,-1 B0@2,-1 U0@2,0 B0@1,1 B0@0,1"


def test_r9_2_tile_editions() -> None:
    """R9.2/TILES.md §4: 2nd-edition tiles show gardens on one copy each of E H I M N R U V
    (named Eg … Vg) and on river J; 1st-edition tiles have none (and no Eg is drawn)."""
    second = Ruleset(abbot=True, tile_edition="2nd").tiles
    gardens = sorted(n for n in second.types if n.endswith("g"))
    assert gardens == ["Eg", "Hg", "Ig", "Mg", "Ng", "Rg", "Ug", "Vg"]
    assert (second.types["E"].count, second.types["Eg"].count, second.size) == (4, 1, 72)
    assert all(second.types[n].orientations[0].surrounded >= 0 for n in gardens)
    river = Ruleset(abbot=True, tile_edition="2nd", river=True).tiles.types["RIVJ"]
    assert river.orientations[0].segments[-1].kind == GARDEN
    first = Ruleset(abbot=True).tiles
    assert "Eg" not in first.types and first.types["E"].count == 5
    assert refused(state_after("", opts="abbot=on"), DrawTile("Eg")).code == "unknown_tile"


def test_r9_2_the_abbot_goes_in_a_garden_a_meeple_never() -> None:
    """R9.2: after placing Ug0@1,0 the abbot may stand in its garden; a meeple may not
    (garden_abbot_only), and the abbot may not stand on the road (abbot_spot)."""
    state = state_after("", draw="Ug", opts=ABBOT)
    spots = {m for x, y, r, m in actions(state) if (x, y, r) == (1, 0, 0)}
    assert Meeple(GARDEN, GARDEN, True) in spots
    assert Meeple(GARDEN, GARDEN) not in spots
    err = refused(state, PlayTurn(0, 1, 0, 0, Meeple(GARDEN, GARDEN)))
    assert (err.code, err.rule) == ("garden_abbot_only", "R9.2")
    assert refused(state, PlayTurn(0, 1, 0, 0, Meeple(ROAD, "E", True))).code == "abbot_spot"
    placed = state_after("Ug0@1,0:G", opts=ABBOT)
    assert placed.abbots == [False, True] and placed.supply == [7, 7]


def test_r9_2_one_abbot_each() -> None:
    """R9.2: each player has one abbot: with it on the board, a second is refused
    (abbot_in_play) and no action offers it."""
    state = state_after("Ug0@1,0:G V3@-1,0", draw="B", opts=ABBOT)
    assert not any(m is not None and m.abbot for *_, m in actions(state))
    err = refused(state, PlayTurn(0, 0, 1, 0, Meeple(MONASTERY, MONASTERY, True)))
    assert (err.code, err.rule) == ("abbot_in_play", "R9.2")
    assert Meeple(MONASTERY, MONASTERY) in {m for *_, m in actions(state)}  # a monk still may


def test_r9_2_a_surrounded_garden_scores_9() -> None:
    """R9.2: A0@2,1 fills the garden's ring: 9 points to P0 at once (rule R9.2), the abbot
    counted as P0's one follower, and it comes home."""
    state = state_after(AROUND + " A0@2,1", opts=ABBOT)
    garden = [s for s in state.log if s.kind == GARDEN]
    assert [(s.rule, s.points, s.meeples, s.awarded, s.complete) for s in garden] == [
        ("R9.2", 9, (1, 0), (9, 0), True)
    ]
    assert state.abbots == [True, True] and not state.meeples


def test_r9_2_taking_the_abbot_back_scores_at_once() -> None:
    """R9.2: T5 P0 places B0@2,-1 and takes the abbot back instead of a meeple: the garden at
    (1,0) has (0,-1), (1,-1), (2,-1) and D around it: 1 + 4 = 5 points at once; the abbot is
    back in P0's supply and may go out again."""
    state = state_after("Ug0@1,0:G V3@-1,0 B0@1,-1 E2@0,-1 B0@2,-1~A", opts=ABBOT)
    assert state.scores == [5, 0]
    (scored,) = [s for s in state.log if s.kind == GARDEN]
    assert (scored.rule, scored.points, scored.final, scored.complete) == ("R9.2", 5, False, False)
    assert state.abbots == [True, True] and not state.meeples
    events = record_events(record("Ug0@1,0:G V3@-1,0 B0@1,-1 E2@0,-1 B0@2,-1~A", opts=ABBOT))
    assert AbbotRecalled(0, 1, 0) in events


def test_r9_2_taking_back_needs_an_abbot_on_the_board() -> None:
    """R9.2: with the abbot in the supply there is nothing to take back (abbot_not_placed)."""
    state = state_after("", draw="V", opts=ABBOT)
    err = refused(state, RecallAbbot(0, -1, 0, 3))
    assert (err.code, err.rule) == ("abbot_not_placed", "R9.2")
    assert RECALL_ABBOT not in {m for *_, m in actions(state)}


def test_r9_2_no_taking_back_when_the_tile_completes_the_abbots_feature() -> None:
    """R9.2 decision: A0@2,1 completes P0's garden (9 points, the abbot comes home), so it
    cannot also take the abbot back (abbot_feature_completed); elsewhere it can."""
    state = state_after(AROUND, draw="A", opts=ABBOT)
    assert refused(state, RecallAbbot(0, 2, 1, 0)).code == "abbot_feature_completed"
    recalls = {(x, y) for x, y, r, m in actions(state) if m == RECALL_ABBOT}
    assert (2, 1) not in recalls and recalls
    err = record_error(AROUND + " A0@2,1~A", opts=ABBOT)
    assert (err.index, err.code) == (8, "abbot_feature_completed")


def test_r9_2_abbot_on_a_monastery_scores_as_a_monk() -> None:
    """R9.2: the abbot on a monastery scores as a monk at the end: B0@0,1 has D above it,
    1 + 1 = 2 (R7.2), counted as one follower."""
    state = final_state("B0@0,1:A", opts="abbot=on")
    (scored,) = state.log
    assert (scored.kind, scored.rule, scored.points, scored.meeples) == (
        MONASTERY,
        "R7.2",
        2,
        (1, 0),
    )


def test_r9_2_abbot_rules_are_refused_without_the_abbot() -> None:
    """R9.2 is an option: without it the abbot is refused (abbot_disabled)."""
    state = state_after("", draw="B")
    assert refused(state, PlayTurn(0, 0, 1, 0, Meeple(MONASTERY, MONASTERY, True))).code == (
        "abbot_disabled"
    )
    assert refused(state, RecallAbbot(0, 0, 1, 0)).code == "abbot_disabled"


def test_r9_2_bad_combinations_are_refused() -> None:
    """R1.2: the demo set has no 2nd edition (edition_not_in_tileset); an unknown edition is
    unknown_tile_edition."""
    with pytest.raises(MalformedError) as demo:
        Ruleset(tileset="demo", tile_edition="2nd")
    assert demo.value.code == "edition_not_in_tileset"
    with pytest.raises(MalformedError) as bad:
        Ruleset.from_dict({"tile_edition": "3rd"})
    assert bad.value.code == "unknown_tile_edition"


def test_r9_2_records_and_notation_round_trip() -> None:
    """R9.2 in the record: the abbot is `"abbot": true` on its meeple (`:A`, `:G`), taking it
    back `"recall_abbot": true` (`~A`); the ruleset keys `abbot` and `tile_edition`."""
    rec = record("Ug0@1,0:G V3@-1,0 B0@1,-1 E2@0,-1 B0@2,-1~A B0@1,1:A", opts=ABBOT)
    data = rec.to_dict()
    assert data["ruleset"]["abbot"] is True and data["ruleset"]["tile_edition"] == "2nd"
    assert data["turns"][0]["meeple"] == {"feature": "garden", "abbot": True}
    assert data["turns"][4]["recall_abbot"] is True and data["turns"][4]["meeple"] is None
    assert data["turns"][5]["meeple"] == {"feature": "monastery", "abbot": True}
    assert load_record(data) == rec
    assert parse_record(format_record(rec)) == rec
    assert "Ug0@1,0:G" in format_record(rec) and "B0@2,-1~A" in format_record(rec)
    assert record_from_events(record_events(rec)) == rec


def test_r9_2_every_action_is_a_command_decide_accepts() -> None:
    """The engine's legal actions include the abbot and taking it back; `command_for_action`
    makes each a command, and `decide` accepts them all."""
    state = state_after("Ug0@1,0:G V3@-1,0 B0@1,-1", draw="B", opts=ABBOT)
    for action in actions(state):
        decide(state, command_for_action(state, action))
    assert any(m == RECALL_ABBOT for *_, m in actions(state)) is False  # P1's abbot is home
    state = state_after("Ug0@1,0:G V3@-1,0", draw="B", opts=ABBOT)
    assert any(m == RECALL_ABBOT for *_, m in actions(state))
    recall = next(a for a in actions(state) if a[3] == RECALL_ABBOT)
    assert isinstance(command_for_action(state, recall), RecallAbbot)


def test_r9_2_random_games_replay() -> None:
    """Random River+Abbot games (2nd edition) replay from their records to the same state."""
    rules = Ruleset(river=True, abbot=True, tile_edition="2nd")
    recalled = 0
    for seed in range(10):
        state, events = random_game(random.Random(seed), 3, rules)
        recalled += sum(isinstance(e, AbbotRecalled) for e in events)
        assert replay(record_from_events(events)).snapshot() == state.snapshot()
    assert recalled > 0


def test_r9_2_r9_1_the_abbot_on_the_river_monastery() -> None:
    """R9.2 with R9.1 (TILES.md §3: meeples go on a river tile's other features): RIVH0@1,0
    (monastery, river W-E, road S ending at the monastery) continues the spring; its
    monastery takes the abbot or a monk, its road a highwayman, its river nothing. At the
    end the abbot scores as a monk: 1 + the spring beside it = 2 (R7.2)."""
    opts = "river=on abbot=on"
    state = state_after("", draw="RIVH", opts=opts)
    offered = {mm for x, y, r, mm in actions(state) if (x, y, r) == (1, 0, 0)}
    assert {
        Meeple(MONASTERY, MONASTERY, True),
        Meeple(MONASTERY, MONASTERY),
        Meeple(ROAD, "S"),
    } <= offered
    assert not any(mm is not None and mm.spot in ("E", "W") for mm in offered)
    final = final_state("RIVH0@1,0:A", opts=opts)
    (scored,) = final.log
    assert (scored.kind, scored.rule, scored.points, scored.awarded) == (
        MONASTERY,
        "R7.2",
        2,
        (2, 0),
    )


@pytest.mark.parametrize(
    ("tile", "opts", "square", "meeple"),
    [
        ("B", "abbot=on", (0, 1), Meeple(GARDEN, MONASTERY, True)),
        ("B", "abbot=on", (0, 1), Meeple(GARDEN, GARDEN, True)),
        ("Ug", ABBOT, (1, 0), Meeple(MONASTERY, GARDEN, True)),
        ("Ug", ABBOT, (1, 0), Meeple(MONASTERY, MONASTERY, True)),
    ],
)
def test_r9_2_the_abbot_names_the_feature_the_tile_has(
    tile: str, opts: str, square: tuple[int, int], meeple: Meeple
) -> None:
    """R9.2: the abbot goes on the placed tile's monastery or garden, the one it has. An abbot
    named a garden on a monastery tile (B) or a monastery on a garden tile (Ug) was taken,
    as the feature it named, and the event then broke the fold (no such spot on the tile):
    refused as abbot_spot; the right feature is taken."""
    state = state_after("", draw=tile, opts=opts)
    err = refused(state, PlayTurn(0, *square, 0, meeple))
    assert (err.code, err.rule) == ("abbot_spot", "R9.2")
    kind = MONASTERY if tile == "B" else GARDEN
    (placed,) = decide(state, PlayTurn(0, *square, 0, Meeple(kind, kind, True)))
    state.apply(placed)
    assert [m.meeple for m in state.meeples.values()] == [Meeple(kind, kind, True)]
