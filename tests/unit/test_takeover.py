"""Bots take over a seat that is out (ruleset `on_leave: "bot:<level>"`, docs/takeover.md):
the takeover is a fact of the log (`SeatTakenOver`, decided by the engine in the same
append as the `PlayerResigned` or `PlayerTimedOut`), the seat keeps its turns and scores
(R6, R7), and still ranks after the seats still in (docs/lifecycle.md; R7.5 for ties)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

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
    TakeoverRefused,
    TilePlaced,
    TimeOutTurn,
    TurnTimedOut,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import command_for_action, fold, is_unplaceable
from carcassonne.ruleset import TAKEOVER_LEVELS, Ruleset
from carcassonne.simulate import bag_order
from carcassonne.state import OVER, RESIGNED, TIMED_OUT, GameState
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_engine, to_new, validate_payload
from eventstore.score_stream import score_events
from services.bots.player import GONE, PLAYED, BotPlayer
from services.bots.player import OVER as GAME_OVER
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService
from tests.unit.engine_steps import NOW, run, started


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
        # moved at the draws' time, as the services do (a placement carries a bank then)
        log += run(state, replace(command_for_action(state, choice.action), now_ms=NOW))
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


# ------------------------------------------------------------------ command side and bot worker
# (in-memory store; the real gunicorn, Redis and workers: tests/integration/test_takeover.py)


def test_a_resignation_appends_the_takeover_and_the_bot_worker_plays_the_seat_to_the_end():
    service, store, secrets = make()
    game_id, seats = service.create_game(
        ["ann", "bob"], Ruleset(tileset="demo", on_leave="bot:random"), [0, 1]
    )
    assert secrets.get(game_id)["on_leave"] == "bot:random"  # the feed follows such games
    bots = BotPlayer(store, secrets.get)
    assert bots.play(game_id).kind == GONE  # nobody has left: nothing for a bot to do yet
    done = service.resign(game_id, seats[1]["token"])
    assert [e.type for e in done.events][:2] == ["PlayerResigned", "SeatTakenOver"]
    view = service.turn_view(game_id)
    assert view["taken_over"] == [None, "random"] and view["out"] == [None, "resigned"]
    assert not view["over"] and view["player"] == 0
    while not (view := service.turn_view(game_id))["over"]:
        if view["player"] == 0:
            spot = view["placements"][0]
            service.play_turn(
                game_id, seats[0]["token"], spot["x"], spot["y"], spot["rotation"], None
            )
            continue
        with pytest.raises(GameError) as refused:  # the old token may not play for the bot
            service.play_turn(game_id, seats[1]["token"], 0, 0, 0, None)
        assert refused.value.code == "player_out"
        assert refused.value.details["taken_over"] == "random"
        assert bots.play(game_id).kind == PLAYED
    events = store.read(game_id, MOVES)
    by_bot = [e for e in events if e.type == "TilePlaced" and e.payload["player"] == 1]
    assert len(by_bot) >= 20  # 48 demo tiles: the bot played seat 1's turns
    assert all(e.command_id == f"bot:{game_id}:{e.seq - 1}" for e in by_bot)
    assert bots.play(game_id).kind == GAME_OVER


def test_a_skip_game_is_not_followed_by_the_bot_worker():
    service, store, secrets = make()
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(), [0, 1])
    assert "on_leave" not in secrets.get(game_id)
    done = service.resign(game_id, seats[1]["token"])
    assert [e.type for e in done.events] == ["PlayerResigned", "GameEnded"]
    assert BotPlayer(store, secrets.get).play(game_id).kind == GONE


def make() -> tuple[GameService, InMemoryEventStore, MemorySecrets]:
    store, secrets = InMemoryEventStore(), MemorySecrets()
    return GameService(store, secrets), store, secrets


def test_ratings_rank_the_seat_that_left_last_whatever_its_bot_scored():
    """docs/ratings.md: a seat out by resignation ranks last; the bot that played on for it
    earns the player who left nothing (here the greedy bot outscores the random player who
    stayed, and still the one who left is rated as the loser)."""
    from services.scoring.ratings import outcome, updates

    state, log = started(on_leave="bot:greedy")
    log += run(state, Resign(1))
    bag = bag_order(state, random.Random(5))
    while not state.over:
        if state.drawn is None:
            log += run(state, DrawTile(bag.pop(), NOW))
        elif is_unplaceable(state):
            log += run(state, DiscardTile(state.current))
        else:
            level = "greedy" if state.current == 1 else "random"
            choice = choose(level, player_view(state), len(log))
            log += run(state, command_for_action(state, choice.action))
    assert state.scores[1] > state.scores[0]  # the bot played the better game
    store, game_id = InMemoryEventStore(), "g1"
    moves = [to_new(e) for e in log]
    seats = [{"name": "Ana", "player_id": "ana"}, {"name": "Ben", "player_id": "ben"}]
    moves[0] = type(moves[0])(
        moves[0].type, moves[0].version, {**moves[0].payload, "players": seats}
    )
    store.append(game_id, MOVES, moves, expected=0, command_id="c")
    scores = score_events(GameState(), store.read(game_id, MOVES))
    store.append(game_id, SCORES, scores, expected=0, command_id="s")
    game = outcome(store, {"key_id": "k1", "names": [], "on_leave": "bot:greedy"}, game_id)
    assert game is not None and game.seats == ((0, "ana", 1), (1, "ben", 2))
    ana, ben = updates(game, [None, None])
    assert (ana.player, ben.player) == ("ana", "ben")
    assert ana.after.mu > 25 > ben.after.mu  # the leaver loses rating, as without a bot


def test_the_old_token_of_a_seat_taken_over_may_not_undo_its_bots_placement():
    service, store, secrets = make()
    rules = Ruleset(tileset="demo", undo="free", on_leave="bot:random")
    game_id, seats = service.create_game(["ann", "bob"], rules, [0, 1])
    service.resign(game_id, seats[1]["token"])
    spot = service.turn_view(game_id)["placements"][0]
    service.play_turn(game_id, seats[0]["token"], spot["x"], spot["y"], spot["rotation"], None)
    assert BotPlayer(store, secrets.get).play(game_id).kind == PLAYED  # the bot's placement
    with pytest.raises(GameError) as refused:
        service.request_undo(game_id, seats[1]["token"])
    assert refused.value.code == "player_out"
    assert service.turn_view(game_id)["player"] == 0  # nothing undone


def test_a_hand_game_seat_taken_over_is_played_from_its_own_hand_to_the_end():
    """R10.3: the bot that took a seat over plays the seat's secret hand (the worker opens it
    from the seed, as for a bot seat); the game ends once every hand that plays is empty."""
    service, store, secrets = make()
    rules = Ruleset(tileset="demo", hand=3, on_leave="bot:random")
    game_id, seats = service.create_game(
        ["robot", "bob"], rules, [0, 1], None, bots=[{"level": "greedy", "think_ms": 1}, None]
    )
    bots = BotPlayer(store, secrets.get)
    assert bots.play(game_id).kind == PLAYED  # the bot seat moves first
    done = service.resign(game_id, seats[1]["token"])
    assert [e.type for e in done.events][:2] == ["PlayerResigned", "SeatTakenOver"]
    while (outcome := bots.play(game_id)).kind == PLAYED:
        pass
    assert outcome.kind == GAME_OVER
    state = fold(to_engine(e) for e in store.read(game_id, MOVES))
    assert state.over and state.bag_size == 0 and state.taken_over == [None, "random"]
    placed = [e for e in store.read(game_id, MOVES) if e.type == "TilePlaced"]
    assert sum(e.payload["player"] == 1 for e in placed) >= 20


def test_an_mcts_bot_that_took_over_thinks_a_bot_seats_default_within_the_workers_ceilings():
    from services.bots.player import TAKEOVER_THINK_MS, seats_played

    state, _ = started(players=3, on_leave="bot:mcts")
    run(state, Resign(2))
    played = seats_played([None, None, None], state)
    assert played[:2] == [None, None] and played[2] is not None
    assert played[2]["level"] == "mcts" and played[2]["think_ms"] == TAKEOVER_THINK_MS == 1000
    worker = BotPlayer(InMemoryEventStore(), lambda _: None, max_think_ms=600)
    assert worker.think_ms(state, played, played[2]) == 600  # the worker's MAX_THINK_MS
    run(state, Resign(1))
    played = seats_played([{"level": "greedy", "think_ms": 1}, None, None], state)
    capped = BotPlayer(InMemoryEventStore(), lambda _: None, bot_only_max_think_ms=300)
    assert capped.think_ms(state, played, played[2]) == 300  # no human seat still in


def test_the_lobby_preset_classic_async_bots_has_a_greedy_bot_take_over():
    from services.command.rulesets import preset

    rules = preset("classic-async-bots")
    assert rules.on_leave == "bot:greedy" and rules.turn_seconds == 86_400


def test_a_seat_taken_over_in_a_banked_game_plays_on_its_own_bank():
    """Clocks (docs/clocks.md) and takeovers together: the bot's moves for the seat that
    left are charged to that seat's Fischer bank like any move (on their placements), and the
    log replays."""
    from carcassonne.events import BankCharged

    state, log = started(on_leave="bot:random", initial_seconds=300, increment_seconds=5)
    log += run(state, Resign(1))
    taken = len(log)
    play_out(state, log)
    charged = [e for e in log[taken:] if isinstance(e, TilePlaced) and e.bank_ms is not None]
    assert {e.player for e in charged} == {0, 1}  # the bot's moves are charged to seat 1
    assert not any(isinstance(e, BankCharged) for e in log)
    assert fold(log).snapshot() == state.snapshot()


def test_the_bot_worker_charges_a_banked_seat_on_its_own_placements():
    """The bot worker's move for a seat taken over is timed when it is made, as a human's
    (docs/clocks.md): its placement carries the seat's bank, which `/turn` shows; no
    `BankCharged` is logged."""
    service, store, secrets = make()
    rules = Ruleset(on_leave="bot:random", initial_seconds=300, increment_seconds=5)
    game_id, seats = service.create_game(["ann", "bob"], rules, [0, 1])
    bots = BotPlayer(store, secrets.get)
    service.resign(game_id, seats[1]["token"])
    for _ in range(3):
        spot = service.turn_view(game_id)["placements"][0]
        service.play_turn(game_id, seats[0]["token"], spot["x"], spot["y"], spot["rotation"], None)
        assert bots.play(game_id).kind == PLAYED
    events = store.read(game_id, MOVES)
    by_bot = [e.payload["bank_ms"] for e in events if e.type == "TilePlaced"
              and e.payload["player"] == 1]  # fmt: skip
    assert len(by_bot) == 3 and by_bot == sorted(by_bot) and by_bot[0] > 300_000
    assert service.turn_view(game_id)["banks_ms"][1] == by_bot[-1]
    assert not any(e.type == "BankCharged" for e in events)


# ------------------------------------------------------------------ who pays (docs/takeover.md)

LEFT = "fewer than two players left"


def test_a_takeover_the_key_cannot_pay_for_is_logged_as_refused_and_the_seat_is_skipped():
    state, log = started(players=3, turn_seconds=30, max_timeouts=1, on_leave="bot:greedy")
    refused = run(state, TimeOutTurn(0, NOW + 30_000, takeover=False))
    assert refused == [TurnTimedOut(0, "E"), PlayerTimedOut(0, 1), TakeoverRefused(0, "greedy")]
    assert state.taken_over == [None, None, None] and state.playing == [1, 2]
    log += refused
    log += run(state, DrawTile("E", NOW + 30_000))
    ended = run(state, Resign(2, takeover=False))  # as under skip: one player is left in
    assert ended == [PlayerResigned(2), TakeoverRefused(2, "greedy"), GameEnded(LEFT)]
    for event in refused:  # the store's schemas and the JSON form keep the fact
        new = to_new(event)
        validate_payload(new.type, new.version, new.payload)
        stored = StoredEvent("g", "moves", 1, new.type, new.version, 0, "c", new.payload)
        assert to_engine(stored) == event
        assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event


def test_a_refused_takeover_replays_from_the_record_and_notation_without_the_budget():
    from carcassonne.notation import format_record, parse_record
    from carcassonne.record import load_record, record_from_events, replay

    state, log = started(players=3, turn_seconds=30, max_timeouts=1, on_leave="bot:random")
    log += run(state, TimeOutTurn(0, NOW + 30_000, takeover=False))
    log += run(state, DrawTile("E", NOW + 30_000))
    log += run(state, Resign(2))
    play_out(state, log, seed=11)
    record = record_from_events(log)
    assert [t.takeover_refused for t in record.turns[:2]] == [True, False]
    assert record.turns[0].to_dict() == {"tile": "E", "timeout": True, "takeover_refused": True}
    assert load_record(json.loads(json.dumps(record.to_dict()))) == record
    text = format_record(record)
    assert "E!/skip resign:2 " in text and parse_record(text) == record
    again = replay(record)  # the refusal is replayed, not decided again
    assert again.snapshot() == state.snapshot() and again.taken_over == [None, None, "random"]


def refused_record(players: int, turns: list[dict[str, Any]], **rules: Any) -> dict[str, Any]:
    """A record of the demo set (JSON) whose turns are `turns`."""
    ruleset = {"tileset": "demo", **rules}
    return {"format": "carcassonne-record/1", "ruleset": ruleset, "players": players,
            "turns": turns}  # fmt: skip


REFUSED = {"takeover_refused": True}
GREEDY_LEAVE = {"on_leave": "bot:greedy"}
TIMEOUTS = {"turn_seconds": 30, "max_timeouts": 3}
NOT_REFUSED = [  # players, turns, ruleset, the turn refused
    pytest.param(3, [{"resign": 1, **REFUSED}], {}, 0, id="no bot under skip"),
    pytest.param(3, [{"tile": "E", "timeout": True, **REFUSED}], {**GREEDY_LEAVE, **TIMEOUTS},
                 0, id="a timeout that leaves the seat in"),
    pytest.param(2, [{"tile": "E", "timeout": True, **REFUSED}], {**TIMEOUTS, "max_timeouts": 1},
                 0, id="a timeout under skip"),
    pytest.param(3, [{"resign": 2}, {"resign": 1}, {"resign": 0, **REFUSED}], GREEDY_LEAVE, 2,
                 id="the last seat still in leaving"),
]  # fmt: skip


@pytest.mark.parametrize(("players", "turns", "rules", "index"), NOT_REFUSED)
def test_a_records_takeover_refused_that_its_replay_does_not_log_is_refused(
    players, turns, rules, index
):
    """A record's `takeover_refused` is a fact of its game: a turn that replays without the
    `TakeoverRefused` would lose the flag in the re-export, so the record is refused."""
    from carcassonne.errors import RecordError
    from carcassonne.notation import format_record, parse_record
    from carcassonne.record import load_record, replay

    record = load_record(refused_record(players, turns, **rules))  # its shape is fine
    for form in (record, parse_record(format_record(record))):  # JSON and the notation
        with pytest.raises(RecordError) as refused:
            replay(form)
        error = refused.value
        assert (error.code, error.index, error.rule) == ("no_takeover_to_refuse", index, None)
        assert "docs/takeover.md" in error.message and error.details["player"] in (0, 1)
    plain = [{k: v for k, v in t.items() if k != "takeover_refused"} for t in turns]
    replay(load_record(refused_record(players, plain, **rules)))  # legal without the flag


def test_the_notations_skip_suffix_is_read_once():
    from carcassonne.errors import MalformedError
    from carcassonne.notation import format_turn, parse_turn

    assert format_turn(parse_turn("resign:1/skip")) == "resign:1/skip"
    assert format_turn(parse_turn("E!/skip")) == "E!/skip"
    for text in ("resign:1/skip/skip", "E!/skip/skip", "Q1@0,-1/skip", "undo/skip"):
        with pytest.raises(MalformedError) as refused:
            parse_turn(text)
        assert refused.value.code == "bad_notation" and repr(text) in refused.value.message


def test_a_takeovers_seconds_are_its_paced_move_times_the_seats_share_of_the_tiles_left():
    from services.common.takeover import takeover_seconds

    two, _ = started()  # the base game: 71 tiles to place, the first drawn
    assert takeover_seconds(two, "mcts", 250) == 36.0  # 36 moves of TAKEOVER_THINK_MS
    assert takeover_seconds(two, "greedy", 250) == 9.0  # the move floor, as bot seats
    four, _ = started(players=4)
    assert takeover_seconds(four, "mcts", 250) == 18.0  # (b) at creation: 3 seats, 54 s
    service, store, _ = make()  # R10.3: the tiles in hands are left to place too
    game_id, _ = service.create_game(["ann", "bob"], Ruleset(tileset="demo", hand=3), [0, 1])
    hands = fold(to_engine(e) for e in store.read(game_id, MOVES))
    assert hands.bag_size == 44 and [len(h) for h in hands.hands] == [3, 0]
    assert takeover_seconds(hands, "random", 250) == 6.0  # 24 of the demo's 47 tiles
