"""Bots take over a seat that is out (ruleset `on_leave: "bot:<level>"`, docs/takeover.md):
the takeover is a fact of the log (`SeatTakenOver`, decided by the engine in the same
append as the `PlayerResigned` or `PlayerTimedOut`), the seat keeps its turns and scores
(R6, R7), and still ranks after the seats still in (docs/lifecycle.md; R7.5 for ties)."""

from __future__ import annotations

import json
import random

import pytest

from carcassonne.bots import LEVELS, choose, player_view
from carcassonne.errors import GameError
from carcassonne.events import (
    DiscardTile,
    DrawTile,
    Event,
    GameEnded,
    PlayerResigned,
    PlayerTimedOut,
    Resign,
    SeatTakenOver,
    StartGame,
    TimeOutTurn,
    TurnTimedOut,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import command_for_action, decide, fold, is_unplaceable
from carcassonne.ruleset import TAKEOVER_LEVELS, Ruleset
from carcassonne.simulate import bag_order
from carcassonne.state import OVER, RESIGNED, TIMED_OUT, GameState
from eventstore.envelope import StoredEvent
from eventstore.schemas import to_engine, to_new, validate_payload
from eventstore.score_stream import score_events

NOW = 1_800_000_000_000


def run(state: GameState, command: object) -> list[Event]:
    events = decide(state, command)  # type: ignore[arg-type]
    for event in events:
        state.apply(event)
    return events


def started(players: int = 2, **rules: object) -> tuple[GameState, list[Event]]:
    state = GameState()
    log = run(state, StartGame(Ruleset(**rules), players))  # type: ignore[arg-type]
    log += run(state, DrawTile("E", NOW))
    return state, log


def play_out(state: GameState, log: list[Event], seed: int = 7) -> list[int]:
    """Play the game to its end with random bots for every seat that has turns (the draws
    from one shuffled bag); the seats that moved, in order."""
    bag = bag_order(state, random.Random(seed))
    movers = []
    while not state.over:
        if state.drawn is None:
            log += run(state, DrawTile(bag.pop(), NOW))
            continue
        if is_unplaceable(state):  # R4.4
            log += run(state, DiscardTile(state.current))
            continue
        movers.append(state.current)
        choice = choose("random", player_view(state), f"t:{len(log)}")
        log += run(state, command_for_action(state, choice.action))
    return movers


def test_the_levels_on_leave_names_are_the_bots_levels():
    assert TAKEOVER_LEVELS == LEVELS


def test_on_leave_is_recorded_with_the_ruleset_and_unknown_bots_are_refused():
    rules = Ruleset(on_leave="bot:greedy")
    assert rules.takeover == "greedy" and rules.to_dict()["on_leave"] == "bot:greedy"
    assert Ruleset.from_dict(rules.to_dict()) == rules
    assert "on_leave" not in Ruleset().to_dict() and Ruleset().takeover is None  # skip
    for bad in ("bot:grandmaster", "bot:", "zombie", "", "bot:Random", 3, None):
        with pytest.raises(GameError) as refused:
            Ruleset(on_leave=bad)
        assert refused.value.code == "unknown_on_leave"
        assert "bot:mcts" in refused.value.details["choices"]


def test_skip_is_todays_behaviour_the_game_ends_when_one_player_is_left():
    state, _ = started()
    assert run(state, Resign(1)) == [PlayerResigned(1), GameEnded("fewer than two players left")]
    assert state.phase == OVER and state.taken_over == [None, None]


def test_a_resigned_seat_is_taken_over_and_plays_on_to_the_end():
    state, log = started(on_leave="bot:random")
    assert state.current == 0
    log += run(state, Resign(1))  # out of turn: seat 0 keeps its tile
    assert log[-2:] == [PlayerResigned(1), SeatTakenOver(1, "random")]
    assert state.out == [None, RESIGNED] and state.taken_over == [None, "random"]
    assert state.still_in == [0] and state.playing == [0, 1] and state.phase != OVER
    movers = play_out(state, log)
    assert state.over and movers[:4] == [0, 1, 0, 1]  # seat 1 keeps its turns
    assert sum(m == 1 for m in movers) >= 30
    assert isinstance(log[-1], GameEnded) and log[-1].reason == "last tile placed"  # R7.1
    # replay is a fold: the log alone gives the same game
    assert fold(log).snapshot() == state.snapshot()
    assert state.snapshot()["taken_over"] == [None, "random"]


def test_the_bot_scores_for_the_seat_but_the_seat_still_ranks_last():
    state, log = started(on_leave="bot:random")
    log += run(state, Resign(1))
    play_out(state, log, seed=3)
    stored = [
        StoredEvent("g", "moves", seq, n.type, n.version, 0, "c", n.payload)
        for seq, n in enumerate((to_new(e) for e in log), start=1)
    ]
    result = score_events(GameState(), stored)[-1].payload
    assert result["final_scores"] == state.scores and state.scores[1] > 0  # its bot scored
    assert result["ranks"][0] == 1 and result["ranks"][1] == 2 and result["winners"] == [0]


def test_resigning_on_ones_turn_skips_that_turn_then_the_bot_plays_the_next():
    state, _ = started(players=3, on_leave="bot:greedy")
    bag = state.bag_size
    assert run(state, Resign(0)) == [PlayerResigned(0), SeatTakenOver(0, "greedy")]
    assert state.current == 1 and state.bag_size == bag + 1  # as without a takeover
    for seat in (1, 2):
        run(state, DrawTile("E", NOW))
        assert state.current == seat
        x, y, rotation, _ = choose("random", player_view(state), 1).action
        run(state, command_for_action(state, (x, y, rotation, None)))
    run(state, DrawTile("E", NOW))
    assert state.current == 0  # the bot's turn


def test_a_timed_out_seat_is_taken_over_and_its_bots_timeouts_only_skip_turns():
    state, log = started(turn_seconds=10, max_timeouts=1, on_leave="bot:mcts")
    events = run(state, TimeOutTurn(0, NOW + 10_000))
    assert events == [TurnTimedOut(0, "E"), PlayerTimedOut(0, 1), SeatTakenOver(0, "mcts")]
    assert state.out == [TIMED_OUT, None] and state.current == 1
    log += events
    log += run(state, DrawTile("E", NOW))
    x, y, rotation, _ = choose("random", player_view(state), 1).action
    log += run(state, command_for_action(state, (x, y, rotation, None)))
    log += run(state, DrawTile("E", NOW))
    assert state.current == 0  # the bot's turn; if it too runs out, it is only skipped
    assert run(state, TimeOutTurn(0, NOW + 10_000)) == [TurnTimedOut(0, "E")]
    assert state.current == 1 and state.out == [TIMED_OUT, None]


def test_the_last_seat_still_in_leaving_ends_the_game():
    state, _ = started(players=3, on_leave="bot:random")
    assert run(state, Resign(2))[-1] == SeatTakenOver(2, "random")
    assert run(state, Resign(1))[-1] == SeatTakenOver(1, "random")
    ended = run(state, Resign(0))
    assert ended == [PlayerResigned(0), GameEnded("fewer than two players left")]
    assert state.over and state.taken_over == [None, "random", "random"]


def test_takeover_events_round_trip_through_the_store_schemas_records_and_notation():
    from carcassonne.notation import format_record, parse_record
    from carcassonne.record import load_record, record_from_events, replay, score_report

    state, log = started(players=3, turn_seconds=30, on_leave="bot:random")
    log += run(state, TimeOutTurn(0, NOW + 30_000))
    log += run(state, DrawTile("E", NOW + 30_000))
    log += run(state, Resign(2))
    for event in log:
        new = to_new(event)
        validate_payload(new.type, new.version, new.payload)
        stored = StoredEvent("g", "moves", 1, new.type, new.version, 0, "c", new.payload)
        assert to_engine(stored) == event
        assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event
    play_out(state, log, seed=11)
    record = record_from_events(log)
    assert record.ruleset.on_leave == "bot:random"
    assert load_record(json.loads(json.dumps(record.to_dict()))) == record
    text = format_record(record)
    assert "leave=bot:random" in text and parse_record(text) == record
    again = replay(record)  # the record's turns replay with the seat taken over, exactly
    assert again.snapshot() == state.snapshot()
    report = score_report(again)
    assert report["taken_over"] == [None, None, "random"]
    assert report["out"] == [None, None, "resigned"]
