"""The game lifecycle in the engine: turn deadlines as facts, timed-out turns, resigning,
abandoned games, and how seats that are out rank (docs/lifecycle.md; R7.5 for ties)."""

from __future__ import annotations

import json

import pytest

from carcassonne.errors import GameError
from carcassonne.events import (
    AbandonGame,
    DrawTile,
    Event,
    GameAbandoned,
    GameEnded,
    PlayerResigned,
    PlayerTimedOut,
    PlayTurn,
    Resign,
    TileDrawn,
    TimeOutTurn,
    TurnTimedOut,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import actions, decide, fold
from carcassonne.ruleset import Ruleset
from carcassonne.scoring import ranks
from carcassonne.state import OVER, RESIGNED, TIMED_OUT, GameState
from eventstore.envelope import StoredEvent
from eventstore.schemas import to_engine, to_new, validate_payload
from eventstore.score_stream import score_events
from tests.unit import engine_steps as steps
from tests.unit.engine_steps import NOW, run


def started(players: int = 3, **rules: object) -> tuple[GameState, list[Event]]:
    return steps.started(players, **rules)


def test_a_draw_carries_its_deadline_only_with_a_turn_limit():
    state, log = started(turn_seconds=60)
    assert log[-1] == TileDrawn("E", NOW + 60_000)
    assert state.deadline_ms == NOW + 60_000
    unlimited, log = started()
    assert log[-1] == TileDrawn("E", None) and unlimited.deadline_ms is None
    assert event_to_dict(TileDrawn("E")) == {"type": "TileDrawn", "tile": "E"}  # as before
    as_dict = event_to_dict(TileDrawn("E", 5))
    assert as_dict == {"type": "TileDrawn", "tile": "E", "deadline_ms": 5}
    assert event_from_dict(as_dict) == TileDrawn("E", 5)


def test_a_turn_times_out_only_at_its_deadline_and_only_for_the_player_to_move():
    state, _ = started(turn_seconds=60)
    with pytest.raises(GameError) as early:
        decide(state, TimeOutTurn(0, NOW + 59_999))
    assert early.value.code == "turn_not_expired"
    with pytest.raises(GameError) as other:
        decide(state, TimeOutTurn(1, NOW + 60_000))
    assert other.value.code == "not_your_turn"
    bag = state.bag_size
    assert run(state, TimeOutTurn(0, NOW + 60_000)) == [TurnTimedOut(0, "E")]
    # skipped: the tile went back into the bag and the next player draws
    assert state.bag_size == bag + 1 and state.current == 1 and state.drawn is None
    assert state.timeouts == [1, 0, 0] and state.deadline_ms is None


def test_a_game_without_turn_limit_never_times_out():
    state, _ = started()
    with pytest.raises(GameError) as refused:
        decide(state, TimeOutTurn(0, NOW + 10**9))
    assert refused.value.code == "turn_not_expired"


def test_max_timeouts_put_a_seat_out_and_it_is_skipped_from_then_on():
    state, _ = started(turn_seconds=10, max_timeouts=2)
    run(state, TimeOutTurn(0, NOW + 10_000))  # seat 0's first
    for seat in (1, 2):
        run(state, DrawTile("E", NOW))
        run(state, PlayTurn(seat, *_first_action(state)))
    run(state, DrawTile("E", NOW))
    assert state.current == 0
    events = run(state, TimeOutTurn(0, NOW + 10_000))
    assert events == [TurnTimedOut(0, "E"), PlayerTimedOut(0, 2)]
    assert state.out == [TIMED_OUT, None, None] and state.still_in == [1, 2]
    run(state, DrawTile("E", NOW))
    run(state, PlayTurn(1, *_first_action(state)))
    assert state.current == 2  # and after seat 2 comes seat 1: 0 is skipped
    run(state, DrawTile("E", NOW))
    run(state, PlayTurn(2, *_first_action(state)))
    assert state.current == 1


def _first_action(state: GameState) -> tuple[int, int, int]:
    x, y, rotation, _ = actions(state)[0]
    return x, y, rotation


def test_resigning_on_ones_turn_returns_the_tile_and_passes_the_turn():
    state, _ = started()
    bag = state.bag_size
    assert run(state, Resign(0)) == [PlayerResigned(0)]
    assert state.out[0] == RESIGNED and state.current == 1 and state.bag_size == bag + 1
    with pytest.raises(GameError) as again:
        decide(state, Resign(0))
    assert again.value.code == "player_out"


def test_resigning_out_of_turn_keeps_the_turn_where_it_is():
    state, _ = started()
    assert run(state, Resign(2)) == [PlayerResigned(2)]
    assert state.current == 0 and state.drawn == "E"


def test_the_game_ends_with_final_scoring_when_one_player_is_left():
    state, _ = started(players=2)
    events = run(state, Resign(1))
    assert events == [PlayerResigned(1), GameEnded("fewer than two players left")]
    assert state.phase == OVER and state.scores_before_final is not None
    with pytest.raises(GameError) as over:
        decide(state, Resign(0))
    assert over.value.code == "game_over"


def test_an_abandoned_game_ends_without_final_scoring():
    state, _ = started()
    assert run(state, AbandonGame(5_000)) == [GameAbandoned(5_000)]
    assert state.phase == OVER and state.abandoned and state.scores_before_final is None
    with pytest.raises(GameError):
        decide(state, AbandonGame(5_000))


def test_seats_out_rank_after_every_seat_still_in_and_ties_share_r7_5():
    # seat 0 resigned with the most points: it still ranks after both seats in
    assert ranks([30, 10, 10], [True, False, False]) == ((3, 1, 1), (1, 2))
    assert ranks([5, 9, 7, 9], [True, False, True, False]) == ((4, 1, 3, 1), (1, 3))
    assert ranks([4, 4]) == ((1, 1), (0, 1))  # no one out: R7.5 as before


def test_lifecycle_events_round_trip_through_the_store_schemas_and_fold():
    state, log = started(players=2, turn_seconds=30)
    log += run(state, TimeOutTurn(0, NOW + 30_000))
    log += run(state, DrawTile("E", NOW + 30_000))
    log += run(state, Resign(0))
    for event in log:
        new = to_new(event)
        validate_payload(new.type, new.version, new.payload)
        stored = StoredEvent("g", "moves", 1, new.type, new.version, 0, "c", new.payload)
        assert to_engine(stored) == event
    assert fold(log).snapshot() == state.snapshot()


def test_the_score_stream_ranks_a_resigned_leader_last():
    state, log = started(players=2)
    log += run(state, Resign(0))
    stored = [
        StoredEvent("g", "moves", seq, n.type, n.version, 0, "c", n.payload)
        for seq, n in enumerate((to_new(e) for e in log), start=1)
    ]
    scored = score_events(GameState(), stored)
    result = scored[-1].payload
    assert result["ranks"] == [2, 1] and result["winners"] == [1]


def test_a_record_keeps_timeouts_resignations_and_abandonment_through_json_and_notation():
    from carcassonne.export import record_from_export
    from carcassonne.notation import format_record, parse_record
    from carcassonne.record import load_record, record_from_events, replay, score_report

    state, log = started(players=3, turn_seconds=30)
    log += run(state, TimeOutTurn(0, NOW + 30_000))
    log += run(state, DrawTile("E", NOW + 30_000))
    log += run(state, Resign(2))  # out of turn, while seat 1 holds a tile
    log += run(state, PlayTurn(1, *_first_action(state)))
    log += run(state, DrawTile("U", NOW + 40_000))
    log += run(state, AbandonGame(99))
    record = record_from_events(log)
    kinds = [t.to_dict() for t in record.turns]
    assert kinds[0] == {"tile": "E", "timeout": True} and kinds[1] == {"resign": 2}
    assert record.abandoned and record.to_dict()["abandoned"] is True
    assert load_record(record.to_dict()) == record
    text = format_record(record)
    assert "E! resign:2" in text and "turn=30" in text and "end=abandoned" in text
    assert parse_record(text) == record
    again = replay(record)
    assert again.out == state.out and again.abandoned and again.scores == state.scores
    report = score_report(again)
    assert report["abandoned"] is True and report["winners"] == []
    assert report["out"] == [None, None, "resigned"]
    export = "\n".join(
        json.dumps({"game_id": "g", "stream": "moves", "seq": i, **to_dict_envelope(e)})
        for i, e in enumerate(log, start=1)
    )
    assert record_from_export(export) == record


def to_dict_envelope(event: Event) -> dict[str, object]:
    body = event_to_dict(event)
    kind = body.pop("type")
    return {"type": kind, "version": 1, "payload": body}


def test_a_record_refuses_a_timeout_without_a_turn_limit():
    from carcassonne.errors import RecordError
    from carcassonne.record import load_record, replay

    record = load_record(
        {"format": "carcassonne-record/1", "players": 2, "turns": [{"tile": "E", "timeout": True}]}
    )
    with pytest.raises(RecordError) as refused:
        replay(record)
    assert refused.value.index == 0 and refused.value.code == "turn_not_expired"


def test_a_process_with_the_old_secrets_cached_refuses_the_old_token():
    from eventstore.port import InMemoryEventStore
    from services.command.secrets_store import MemorySecrets
    from services.command.service import GameService

    store, secrets = InMemoryEventStore(), MemorySecrets()
    serving, other = GameService(store, secrets), GameService(store, secrets)
    game_id, players = serving.create_game(["Ann", "Bob"], Ruleset(), [0, 1])
    secrets.put(game_id, {**secrets.get(game_id), "key_id": "k_1"})
    old = players[0]["token"]
    serving.load(game_id)  # cached, with the token hashes of now
    issued = other.reissue_token(game_id, 0, "k_1")
    state = serving.load(game_id).state
    x, y, rotation, _ = actions(state)[0]
    with pytest.raises(GameError) as refused:  # trusting its cache, it still learns
        serving.play_turn(game_id, old, x, y, rotation, None, trust_cache=True)
    assert refused.value.code == "bad_token"
    played = serving.play_turn(game_id, issued["token"], x, y, rotation, None, trust_cache=True)
    assert played.events[0].type == "TilePlaced"


def test_a_bot_seat_has_no_token_to_reissue():
    from eventstore.port import InMemoryEventStore
    from services.command.secrets_store import MemorySecrets
    from services.command.service import GameService

    secrets = MemorySecrets()
    service = GameService(InMemoryEventStore(), secrets)
    bot = {"level": "random", "think_ms": 0}
    game_id, _ = service.create_game(["Ann", "Bob"], Ruleset(), [0, 1], bots=[None, bot])
    secrets.put(game_id, {**(secrets.get(game_id) or {}), "key_id": "k_1"})
    with pytest.raises(GameError) as refused:
        service.reissue_token(game_id, 1, "k_1")
    assert refused.value.code == "bot_seat"
    assert service.reissue_token(game_id, 0, "k_1")["seat"] == 0
