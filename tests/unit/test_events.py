"""Events and the event-sourced core: `evolve` is pure, `fold` rebuilds any prefix, JSON forms."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from carcassonne.errors import GameError, MalformedError
from carcassonne.events import (
    DiscardTile,
    DrawTile,
    EndGame,
    GameEnded,
    GameStarted,
    PlayTurn,
    StartGame,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
    TileReturned,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import decide, evolve, fold
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from carcassonne.tiles import CITY, FIELD, MONASTERY, ROAD, Meeple

from .samples import fingerprint

GAMES = [
    (11, 2, Ruleset()),
    (12, 3, Ruleset(tileset="demo", farm_scoring="1st")),
    (13, 5, Ruleset(area=(5, 4), unplaceable="return", farmers=False)),
    (14, 6, Ruleset(area=(4, 4), incomplete_score=False, farm_scoring="2nd")),
]


def game(index: int):
    seed, players, ruleset = GAMES[index]
    return random_game(random.Random(seed), players, ruleset)


@pytest.mark.parametrize("index", range(len(GAMES)))
def test_evolve_is_pure_and_its_results_stay_independent(index):
    final, events = game(index)
    states = [GameState()]
    prints = [fingerprint(states[0])]
    for event in events:
        before = fingerprint(states[-1])
        after = evolve(states[-1], event)
        assert fingerprint(states[-1]) == before, f"evolve changed its input on {event}"
        assert after is not states[-1]
        states.append(after)
        prints.append(fingerprint(after))
    # later evolves must not have reached back into earlier states through shared parts
    for i, state in enumerate(states):
        assert fingerprint(state) == prints[i], f"state {i} changed after it was made"
        assert fingerprint(state) == fingerprint(fold(events, upto=i))
    assert fingerprint(states[-1]) == fingerprint(final)


@pytest.mark.parametrize("index", range(len(GAMES)))
def test_fold_upto_i_is_the_state_after_i_events(index):
    final, events = game(index)
    running = GameState()
    assert fold(events, upto=0).snapshot() == running.snapshot()
    for i, event in enumerate(events, start=1):
        running.apply(event)
        assert fold(events, upto=i).snapshot() == running.snapshot(), f"after {i} events"
    assert fold(events).snapshot() == final.snapshot()
    assert fold(events, upto=len(events) + 5).snapshot() == final.snapshot()
    assert fold(iter(events)).snapshot() == final.snapshot()  # any iterable


def test_evolve_of_each_event_kind_changes_only_the_result():
    state = GameState()
    started = evolve(state, GameStarted(Ruleset(), 2))
    assert state.phase == "new" and state.players == 0 and not state.board.tiles
    assert started.phase == "draw" and list(started.board.tiles) == [(0, 0)]
    drawn = evolve(started, TileDrawn("E"))
    assert started.drawn is None and started.bag["E"] == 5
    assert drawn.drawn == "E" and drawn.bag["E"] == 4 and drawn.drawn_count == 1
    placed = evolve(drawn, TilePlaced(0, "E", 0, -1, 2, Meeple(CITY, "S")))
    assert drawn.drawn == "E" and (0, -1) not in drawn.board.tiles and drawn.supply == [7, 7]
    assert drawn.scores == [0, 0] and drawn.current == 0
    # E turned twice closes D's city at once (R5.6): 4 points, the knight comes back
    assert placed.scores == [4, 0] and placed.supply == [7, 7] and placed.current == 1
    assert len(placed.log) == 1 and not drawn.log
    ended = evolve(placed, GameEnded("test"))
    assert placed.phase == "draw" and placed.scores_before_final is None
    assert ended.over and ended.scores_before_final == (4, 0)


def test_decide_returns_events_and_never_changes_the_state():
    state = GameState()
    for command in (StartGame(Ruleset(), 2), DrawTile("E")):
        before = fingerprint(state)
        events = decide(state, command)
        assert fingerprint(state) == before
        for event in events:
            state.apply(event)
    before = fingerprint(state)
    for bad in (
        PlayTurn(0, 5, 5, 0),  # not adjacent
        PlayTurn(1, 0, -1, 2),  # not your turn
        PlayTurn(0, 0, -1, 0),  # edge mismatch
        PlayTurn(0, 0, -1, 2, Meeple(ROAD, "S")),  # no road there
        DiscardTile(0),  # the tile fits
        DrawTile("E"),  # a tile is already drawn
    ):
        with pytest.raises(GameError):
            decide(state, bad)
        assert fingerprint(state) == before, bad
    assert decide(state, PlayTurn(0, 0, -1, 2)) == [TilePlaced(0, "E", 0, -1, 2, None)]
    assert fingerprint(state) == before


def started(players: int = 2, **rules: Any) -> GameState:
    state = GameState()
    for event in decide(state, StartGame(Ruleset(**rules), players)):
        state.apply(event)
    return state


def drawn(tile: str, **rules: Any) -> GameState:
    state = started(**rules)
    state.apply(decide(state, DrawTile(tile))[0])
    return state


def c_placed() -> GameState:
    state = started()
    for command in (DrawTile("C"), PlayTurn(0, 0, -1, 0)):
        for event in decide(state, command):
            state.apply(event)
    return state


@pytest.mark.parametrize(
    ("state", "command", "code", "rule"),
    [
        (GameState(), DrawTile("E"), "game_not_started", "R2"),
        (GameState(), StartGame(Ruleset(), 1), "bad_players", "R1.3"),
        (GameState(), StartGame(Ruleset(), 7), "bad_players", "R1.3"),
        (started(), StartGame(Ruleset(), 2), "game_started", "R2"),
        (started(), PlayTurn(0, 0, -1, 2), "no_tile_drawn", "R3"),
        (started(), DrawTile("Z"), "unknown_tile", "R1"),
        (started(tileset="demo"), DrawTile("X"), "unknown_tile", "R1"),  # no X in the demo set
        (started(tileset="demo"), DrawTile("M"), "unknown_tile", "R1"),
        (c_placed(), DrawTile("C"), "tile_not_in_bag", "R1.1"),  # the only C is on the board
        (drawn("E"), DrawTile("E"), "tile_already_drawn", "R3"),
        (drawn("E"), PlayTurn(1, 0, -1, 2), "not_your_turn", "R2.2"),
        (drawn("E"), PlayTurn(0, 0, -1, 4), "bad_rotation", "R4.3"),
        (drawn("E"), PlayTurn(0, 0, 0, 2), "square_taken", "R4.1"),
        (drawn("E"), PlayTurn(0, 1, 1, 0), "not_adjacent", "R4.1"),  # corner contact only
        (drawn("E"), PlayTurn(0, 0, -1, 0), "edge_mismatch", "R4.2"),
        (drawn("E"), PlayTurn(0, 0, -1, 2, Meeple(MONASTERY, MONASTERY)),
         "no_such_feature", "R5.1"),
        (drawn("E", farmers=False), PlayTurn(0, 0, -1, 2, Meeple(FIELD, "NNW")),
         "farmers_disabled", "R5.2"),
        (drawn("E", meeples=0), PlayTurn(0, 0, -1, 2, Meeple(CITY, "S")), "no_meeple_left", "R5.5"),
        (drawn("E", area=(1, 1)), PlayTurn(0, 0, -1, 2), "out_of_bounds", "R10.5"),
        (drawn("E"), DiscardTile(0), "tile_fits", "R4.4"),
    ],
)  # fmt: skip
def test_decide_refuses_with_a_stable_code_and_rule(state, command, code, rule):
    with pytest.raises(GameError) as err:
        decide(state, command)
    assert err.value.code == code
    assert err.value.rule == rule
    assert err.value.to_dict()["code"] == code


def test_a_finished_game_refuses_every_move():
    final, _ = game(0)
    for command in (DrawTile("E"), PlayTurn(0, 5, 5, 0), DiscardTile(0), EndGame()):
        with pytest.raises(GameError) as err:
            decide(final, command)
        assert err.value.code == "game_over"


def test_discard_and_return_events_of_an_unplaceable_tile():
    # A 1x1 table: the start tile fills it, nothing else fits (R4.4, R10.5).
    state = drawn("E", area=(1, 1))
    assert decide(state, DiscardTile(0)) == [TileDiscarded(0, "E")]
    returning = drawn("E", area=(1, 1), unplaceable="return")
    events = decide(returning, DiscardTile(0))
    # R10.4 and the README decision: nothing left can ever be placed, so the game ends
    assert events == [TileReturned(0, "E"), GameEnded("no placeable tile left")]


@pytest.mark.parametrize(
    ("event", "data"),
    [
        (
            GameStarted(Ruleset(), 2),
            {"type": "GameStarted", "players": 2, "ruleset": {
                "tileset": "base", "farmers": True, "farm_scoring": "3rd",
                "incomplete_score": True}},
        ),
        (
            GameStarted(Ruleset("demo", False, "1st", False, 3, "return", (5, 4)), 6),
            {"type": "GameStarted", "players": 6, "ruleset": {
                "tileset": "demo", "farmers": False, "farm_scoring": "1st",
                "incomplete_score": False, "meeples": 3, "unplaceable": "return",
                "area": {"width": 5, "height": 4}}},
        ),
        (TileDrawn("LRFR"), {"type": "TileDrawn", "tile": "LRFR"}),
        (
            TilePlaced(1, "I", 0, 1, 2, Meeple(CITY, "E")),
            {"type": "TilePlaced", "player": 1, "tile": "I", "x": 0, "y": 1, "rotation": 2,
             "meeple": {"feature": "city", "edge": "E"}},
        ),
        (
            TilePlaced(0, "E", -1, -1, 2, Meeple(FIELD, "NNW")),
            {"type": "TilePlaced", "player": 0, "tile": "E", "x": -1, "y": -1, "rotation": 2,
             "meeple": {"feature": "field", "half_edge": "NNW"}},
        ),
        (
            TilePlaced(0, "A", 0, 1, 0, Meeple(MONASTERY, MONASTERY)),
            {"type": "TilePlaced", "player": 0, "tile": "A", "x": 0, "y": 1, "rotation": 0,
             "meeple": {"feature": "monastery"}},
        ),
        (
            TilePlaced(0, "Q", 0, -1, 1),
            {"type": "TilePlaced", "player": 0, "tile": "Q", "x": 0, "y": -1, "rotation": 1,
             "meeple": None},
        ),
        (TileDiscarded(1, "B"), {"type": "TileDiscarded", "player": 1, "tile": "B"}),
        (TileReturned(0, "C"), {"type": "TileReturned", "player": 0, "tile": "C"}),
        (GameEnded("last tile placed"), {"type": "GameEnded", "reason": "last tile placed"}),
    ],
)  # fmt: skip
def test_event_json_forms(event, data):
    assert event_to_dict(event) == data
    assert event_from_dict(data) == event
    assert event_from_dict(json.loads(json.dumps(data))) == event


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"type": "TileExploded"}, "bad_event"),
        ({"tile": "E"}, "bad_event"),
        ({"type": "TileDrawn"}, "bad_event"),
        ({"type": "TileDrawn", "tile": "E", "colour": "red"}, "bad_event"),
        ({"type": "GameStarted", "players": 2}, "bad_event"),
        ({"type": "GameStarted", "players": 1, "ruleset": {}}, "bad_players"),
        ({"type": "GameStarted", "players": "2", "ruleset": {}}, "bad_players"),
        ({"type": "GameStarted", "players": 2, "ruleset": {"bishops": 1}}, "bad_ruleset"),
        ({"type": "TilePlaced", "player": 0, "tile": "E", "x": 0, "y": -1}, "bad_event"),
        (
            {"type": "TilePlaced", "player": 0, "tile": "E", "x": 0, "y": -1, "rotation": 2,
             "meeple": {"feature": "castle", "edge": "S"}},
            "bad_meeple",
        ),
        (
            {"type": "TilePlaced", "player": 0, "tile": "E", "x": 0, "y": -1, "rotation": 2,
             "meeple": {"feature": "city", "half_edge": "NNW"}},
            "bad_meeple",
        ),
    ],
)  # fmt: skip
def test_malformed_event_dicts_are_rejected(data, code):
    with pytest.raises(MalformedError) as err:
        event_from_dict(data)
    assert err.value.code == code


def test_event_from_dict_does_not_change_its_argument():
    data = {"type": "TilePlaced", "player": 0, "tile": "E", "x": 0, "y": -1, "rotation": 2,
            "meeple": {"feature": "city", "edge": "S"}}  # fmt: skip
    copy = json.loads(json.dumps(data))
    event_from_dict(data)
    assert data == copy
