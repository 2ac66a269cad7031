"""Undo as a compensating event (docs/undo.md): the engine's decisions, the command service on
its in-memory adapters, the score stream's `ScoreReverted`, records and notation, and the
property that a game with undos ends as the same game without the undone placements."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carcassonne.errors import GameError
from carcassonne.events import (
    AnswerUndo,
    RequestUndo,
    TimeOutTurn,
    TurnUndone,
    UndoAccepted,
    UndoRefused,
    UndoRequested,
    event_from_dict,
    event_to_dict,
    meeple_from_dict,
)
from carcassonne.game import actions, decide, fold
from carcassonne.notation import format_record, parse_record
from carcassonne.record import Record, load_record, record_events, record_from_events, replay
from carcassonne.ruleset import Ruleset
from carcassonne.undo import request_view
from eventstore.envelope import MOVES, SCORES
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_engine, to_new, validate_payload
from eventstore.score_stream import FEATURE_SCORED, SCORE_REVERTED
from services.command.records import replay_record, score_body
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService
from services.common.draws import draw_until_placeable
from services.common.moves import append_moves
from services.scoring.scorer import Scorer
from tests.undo_games import CityJoin, city_join

NOW = 1_800_000_000_000


def service_at(clock_ms: list[int]) -> tuple[GameService, InMemoryEventStore]:
    store = InMemoryEventStore()
    service = GameService(store, MemorySecrets(), undo_seconds=30, clock=lambda: clock_ms[0] / 1000)
    return service, store


def play(service: GameService, game_id: str, token: str, move: dict[str, Any]) -> None:
    service.play_turn(
        game_id,
        token,
        move["x"],
        move["y"],
        move["rotation"],
        meeple_from_dict(move["meeple"]),
    )


def up_to_goal(
    mode: str, clock: list[int]
) -> tuple[GameService, InMemoryEventStore, str, dict[int, str], CityJoin]:
    """A game (ruleset undo `mode`) right before its two-meeple city join."""
    join = city_join(Ruleset(undo=mode))
    service, store = service_at(clock)
    game_id, seats = service.create_game(["Ann", "Bob"], Ruleset(undo=mode), [0, 1], seed=join.seed)
    tokens = {s["seat"]: s["token"] for s in seats}
    for move in join.moves:
        play(service, game_id, tokens[service.load(game_id).state.current], move)
    return service, store, game_id, tokens, join


def code(exc: pytest.ExceptionInfo[GameError]) -> tuple[str, int]:
    return exc.value.code, exc.value.status


# -- the engine and the command service ------------------------------------------------


def test_free_undo_restores_the_state_before_the_placement_and_draws_afresh() -> None:
    """The undone placement completed a city with a meeple of each player (12 points each):
    after the undo the state is the one before it exactly (meeples back on the board, scores
    back, the next player's tile back in the bag), the same player holds the same tile, and
    placing it the same way again gives the same game but for the next draw, which is a
    fresh one (docs/undo.md): the tile the undo showed is not the next one by rule. The
    placement made again stands: one undo a turn."""
    clock = [NOW]
    service, store, game_id, tokens, join = up_to_goal("free", clock)
    before = service.load(game_id).state.snapshot()
    placer = before["current"]
    play(service, game_id, tokens[placer], join.goal)
    placed = service.load(game_id).state
    assert [placed.scores[p] - before["scores"][p] for p in (0, 1)] == [join.points] * 2
    assert len(placed.meeples) == len(before["meeples"]) - 2  # both went home (R6.6)
    placed = placed.copy()

    result = service.request_undo(game_id, tokens[placer])
    assert [e.type for e in result.events] == ["UndoRequested", "TurnUndone"]
    undone = service.load(game_id).state
    assert undone.snapshot() == before
    assert fold(to_engine(e) for e in store.read(game_id, MOVES)).snapshot() == before

    play(service, game_id, tokens[placer], join.goal)  # the same placement again
    again = service.load(game_id).state
    assert but_the_draw(again.snapshot()) == but_the_draw(placed.snapshot())
    assert (again.drawn_count, again.bag_size, again.undos) == (
        placed.drawn_count, placed.bag_size, 1)  # fmt: skip
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[placer])
    assert code(info) == ("undo_not_allowed", 409)
    assert "one undo a turn" in str(info.value)


def but_the_draw(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot without the tile in hand and the bag (a fresh draw changes only those)."""
    return {k: v for k, v in snapshot.items() if k not in ("drawn", "bag")}


def test_consent_undo_needs_every_other_player_and_refusal_is_final() -> None:
    clock = [NOW]
    service, store, game_id, tokens, join = up_to_goal("consent", clock)
    placer = service.load(game_id).state.current
    other = 1 - placer
    before = service.load(game_id).state.snapshot()
    play(service, game_id, tokens[placer], join.goal)
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[other])
    assert code(info) == ("undo_not_allowed", 409)  # not their placement

    asked = service.request_undo(game_id, tokens[placer])
    (requested,) = [to_engine(e) for e in asked.events]
    assert requested == UndoRequested(1, placer, NOW + 30_000)
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[placer])
    assert code(info) == ("undo_pending", 409)
    with pytest.raises(GameError) as info:
        service.answer_undo(game_id, tokens[placer], 1, True)
    assert code(info) == ("own_undo_request", 409)
    with pytest.raises(GameError) as info:
        service.answer_undo(game_id, tokens[other], 7, True)
    assert code(info) == ("no_such_request", 404)
    seq = store.last_seq(game_id, MOVES)

    refused = service.answer_undo(game_id, tokens[other], 1, False)
    assert [to_engine(e) for e in refused.events] == [UndoRefused(1, other)]
    for attempt in (
        lambda: service.answer_undo(game_id, tokens[other], 1, True),
        lambda: service.request_undo(game_id, tokens[placer]),
    ):
        with pytest.raises(GameError) as info:
            attempt()
        assert info.value.code in ("undo_closed", "undo_not_allowed")
    assert store.last_seq(game_id, MOVES) == seq + 1  # only the refusal was appended
    assert service.load(game_id).state.snapshot()["tiles"] != before["tiles"]


def test_consent_accepted_undoes_and_a_late_answer_is_refused() -> None:
    clock = [NOW]
    service, _, game_id, tokens, join = up_to_goal("consent", clock)
    placer = service.load(game_id).state.current
    before = service.load(game_id).state.snapshot()
    play(service, game_id, tokens[placer], join.goal)
    service.request_undo(game_id, tokens[placer])
    accepted = service.answer_undo(game_id, tokens[1 - placer], 1, True)
    assert [e.type for e in accepted.events] == ["UndoAccepted", "TurnUndone"]
    assert service.load(game_id).state.snapshot() == before

    play(service, game_id, tokens[placer], join.goal)  # placed again: it stands
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[placer])
    assert code(info) == ("undo_not_allowed", 409)
    state = service.load(game_id).state
    other = state.current
    x, y, rotation, _ = actions(state)[0]
    service.play_turn(game_id, tokens[other], x, y, rotation, None)
    service.request_undo(game_id, tokens[other])  # request 2, of the next placement
    clock[0] += 30_001  # past its deadline: refused by implication, no event needed
    with pytest.raises(GameError) as info:
        service.answer_undo(game_id, tokens[placer], 2, True)
    assert code(info) == ("undo_expired", 409)
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[other])
    assert code(info) == ("undo_not_allowed", 409)


def test_undo_is_refused_once_the_next_player_placed_and_when_the_ruleset_is_off() -> None:
    clock = [NOW]
    service, _, game_id, tokens, join = up_to_goal("free", clock)
    placer = service.load(game_id).state.current
    play(service, game_id, tokens[placer], join.goal)
    state = service.load(game_id).state
    x, y, rotation, _ = actions(state)[0]
    service.play_turn(game_id, tokens[state.current], x, y, rotation, None)
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[placer])
    assert code(info) == ("undo_not_allowed", 409)

    plain, _ = service_at(clock)
    game_id, seats = plain.create_game(["Ann", "Bob"], Ruleset(), [0, 1])
    state = plain.load(game_id).state
    x, y, rotation, _ = actions(state)[0]
    plain.play_turn(game_id, seats[0]["token"], x, y, rotation, None)
    with pytest.raises(GameError) as info:
        plain.request_undo(game_id, seats[0]["token"])
    assert code(info) == ("undo_disabled", 422)
    with pytest.raises(GameError) as info:
        plain.request_undo(game_id, "not-a-token")
    assert code(info) == ("bad_token", 403)


def test_undo_events_round_trip_through_their_stored_schemas() -> None:
    for event in (
        UndoRequested(3, 1, NOW),
        UndoRequested(1, 0, None),
        UndoAccepted(3, 0),
        UndoRefused(3, 2),
        TurnUndone(3, 1, "V", -2, 4, 3),
    ):
        new = to_new(event)
        validate_payload(new.type, new.version, new.payload)
        assert event_from_dict(event_to_dict(event)) == event
    with pytest.raises(GameError):
        Ruleset(undo="sometimes")


def test_a_request_number_is_checked_before_anything_else() -> None:
    """AnswerUndo with a request this game never had: 404 no_such_request, from the engine."""
    clock = [NOW]
    service, _, game_id, tokens, _ = up_to_goal("consent", clock)
    with pytest.raises(GameError) as info:
        service.answer_undo(game_id, tokens[0], 1, True)
    assert code(info) == ("no_such_request", 404)
    state = service.load(game_id).state
    from carcassonne.game import decide

    with pytest.raises(GameError):
        decide(state, AnswerUndo(0, 0, True))
    with pytest.raises(GameError):
        decide(state, RequestUndo(9))


# -- the score stream ------------------------------------------------------------------


def test_the_worker_reverts_exactly_the_undone_scoring_and_restores_the_meeples() -> None:
    clock = [NOW]
    service, store, game_id, tokens, join = up_to_goal("free", clock)
    placer = service.load(game_id).state.current
    Scorer(store).catch_up(game_id)
    totals_before = list(service.load(game_id).state.scores)
    play(service, game_id, tokens[placer], join.goal)
    Scorer(store).catch_up(game_id)
    (scored,) = [e for e in store.read(game_id, SCORES) if e.payload["move"] > 0][-1:]
    assert scored.type == FEATURE_SCORED and scored.payload["meeples"] == [1, 1]
    service.request_undo(game_id, tokens[placer])
    Scorer(store).catch_up(game_id)
    reverted = store.read(game_id, SCORES)[-1]
    assert reverted.type == SCORE_REVERTED
    assert reverted.payload["reverted"] == scored.payload["awarded"] == [join.points] * 2
    assert reverted.payload["restored"] == [1, 1]
    assert reverted.payload["totals"] == totals_before
    assert reverted.payload["move"] == store.last_seq(game_id, MOVES)


# -- records ---------------------------------------------------------------------------


def test_records_keep_undos_in_json_and_notation_and_replay_them() -> None:
    clock = [NOW]
    service, store, game_id, tokens, join = up_to_goal("consent", clock)
    placer = service.load(game_id).state.current
    play(service, game_id, tokens[placer], join.goal)
    service.request_undo(game_id, tokens[placer])
    service.answer_undo(game_id, tokens[1 - placer], 1, True)
    state = service.load(game_id).state
    alternative = next(
        a for a in actions(state) if (a[0], a[1]) != (join.goal["x"], join.goal["y"])
    )
    service.play_turn(game_id, tokens[placer], *alternative[:3], None)
    events = [to_engine(e) for e in store.read(game_id, MOVES)]
    record = record_from_events(events)
    assert sum(t.undo for t in record.turns) == 1
    assert record.turns[-2].undo and record.turns[-3].tile == record.turns[-1].tile
    assert load_record(record.to_dict()) == record
    assert parse_record(format_record(record)) == record
    assert " undo " in format_record(record).replace("\n", " ")
    final = replay(record)
    assert final.board.tiles.keys() == state.board.tiles.keys() | {alternative[:2]}
    replayed = replay_record(record)
    undo_step = [t for t in replayed.timeline if t["action"] == "undone"]
    assert len(undo_step) == 1 and undo_step[0]["tile"] == record.turns[-1].tile
    body = score_body(replayed)
    assert body["final_scores"] == final.scores


def test_a_record_refuses_an_undo_its_ruleset_does_not_allow_or_a_different_tile() -> None:
    base = {"format": "carcassonne-record/1", "players": 2}
    turns = [{"tile": "V", "x": 0, "y": 1, "rotation": 0, "meeple": None}, {"undo": True}]
    with pytest.raises(GameError) as info:
        record_events(load_record({**base, "turns": turns}))
    assert info.value.code == "undo_disabled" and info.value.details["index"] == 1
    free = {**base, "ruleset": {"tileset": "base", "farmers": True, "farm_scoring": "3rd",
                                "incomplete_score": True, "undo": "free"}}  # fmt: skip
    again = [*turns, {"tile": "E", "x": 0, "y": 1, "rotation": 0, "meeple": None}]
    with pytest.raises(GameError) as info:
        record_events(load_record({**free, "turns": again}))
    assert info.value.code == "undo_same_tile"
    with pytest.raises(GameError):
        load_record({**free, "turns": [{"undo": True, "tile": "V"}]})
    ok = load_record({**free, "turns": [*turns, turns[0]]})
    assert replay(ok).turn == 1


# -- the property ----------------------------------------------------------------------


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), rate=st.sampled_from([0.15, 0.4]), players=st.integers(2, 4))
def test_a_game_with_undos_ends_as_the_game_without_the_undone_placements(
    seed: int, rate: float, players: int
) -> None:
    """Random games through the command service with random free undos: the board ends with
    exactly the placements that were kept (the undone ones gone), the cached state equals a
    fresh fold of the log, and the score stream's running totals end at the final scores."""
    rng = random.Random(seed)
    clock = [NOW]
    names = ["Ann", "Bob", "Cy", "Di"][:players]
    rules = Ruleset(undo="free")
    service, store = service_at(clock)
    game_id, seats = service.create_game(names, rules, list(range(players)), seed=str(seed))
    tokens = {s["seat"]: s["token"] for s in seats}
    kept: list[tuple[int, int, int, Any]] = []
    while not (state := service.load(game_id).state).over and len(kept) < 40:
        player = state.current  # the cached state changes in place as turns are played
        action = rng.choice(actions(state))
        service.play_turn(game_id, tokens[player], *action)
        if rng.random() < rate and not service.load(game_id).state.over:
            service.request_undo(game_id, tokens[player])
            action = rng.choice(actions(service.load(game_id).state))
            service.play_turn(game_id, tokens[player], *action)
        kept.append(action)
    final = service.load(game_id).state
    assert fold(to_engine(e) for e in store.read(game_id, MOVES)).snapshot() == final.snapshot()

    # The draws after an undo are fresh ones: the game is not the one of the same seed
    # without the undos, but its board holds the kept placements and nothing else.
    placed = {(x, y, r) for (x, y), _, r in final.snapshot()["tiles"]} - {(0, 0, 0)}
    assert placed == {(x, y, r) for x, y, r, _ in kept}

    Scorer(store, batch=7).catch_up(game_id)
    totals = [0] * players
    for event in store.read(game_id, SCORES):
        if event.type in (FEATURE_SCORED, SCORE_REVERTED):
            totals = event.payload["totals"]
    assert totals == final.scores


def test_a_record_of_a_game_with_undos_replays_to_its_final_state() -> None:
    rng = random.Random(5)
    clock = [NOW]
    service, store = service_at(clock)
    game_id, seats = service.create_game(["Ann", "Bob"], Ruleset(undo="consent"), [0, 1])
    tokens = {s["seat"]: s["token"] for s in seats}
    while not (state := service.load(game_id).state).over and state.turn < 30:
        player = state.current
        service.play_turn(game_id, tokens[player], *rng.choice(actions(state)))
        if rng.random() < 0.3 and service.load(game_id).state.undo_point is not None:
            result = service.request_undo(game_id, tokens[player])
            request = result.events[0].payload["request"]
            service.answer_undo(game_id, tokens[1 - player], request, rng.random() < 0.7)
    events = [to_engine(e) for e in store.read(game_id, MOVES)]
    record: Record = record_from_events(events)
    assert replay(record).snapshot()["tiles"] == service.load(game_id).state.snapshot()["tiles"]


# -- with the lifecycle (docs/lifecycle.md) --------------------------------------------


def test_an_undo_gives_the_turn_back_with_a_fresh_deadline_and_stops_at_a_resignation() -> None:
    """With a turn limit the turn given back has its own deadline (from the undo's clock, in
    TurnUndone: the timer's index follows it); a resignation after the placement ends the
    undo window (undoing would bring the seat back); the consent of a seat that is out is
    not asked."""
    clock = [NOW]
    service, store = service_at(clock)
    rules = Ruleset(undo="consent", turn_seconds=60)
    game_id, seats = service.create_game(["Ann", "Bob", "Cy"], rules, [0, 1, 2])
    tokens = {s["seat"]: s["token"] for s in seats}
    state = service.load(game_id).state
    service.play_turn(game_id, tokens[0], *actions(state)[0][:3], None)
    service.resign(game_id, tokens[2])  # Cy leaves: only Bob's consent is needed
    with pytest.raises(GameError) as info:
        service.request_undo(game_id, tokens[0])
    assert code(info) == ("undo_not_allowed", 409)  # the resignation closed the window

    state = service.load(game_id).state
    player = state.current
    service.play_turn(game_id, tokens[player], *actions(state)[0][:3], None)
    clock[0] += 5_000
    service.request_undo(game_id, tokens[player])
    voter = service.load(game_id).state.still_in
    (other,) = [p for p in voter if p != player]
    done = service.answer_undo(game_id, tokens[other], 1, True)
    undone = to_engine(done.events[-1])
    assert isinstance(undone, TurnUndone) and undone.deadline_ms == NOW + 5_000 + 60_000
    assert service.load(game_id).state.deadline_ms == undone.deadline_ms
    assert fold(to_engine(e) for e in store.read(game_id, MOVES)).deadline_ms == undone.deadline_ms


def test_the_notification_feed_tells_of_the_undo_the_reverted_score_and_the_turn_given_back() -> (
    None
):
    """Subscriptions (services/scoring/feed.py): the undo is a move_made (TurnUndone), the
    reverted scoring a `score` item (ScoreReverted), and the seat that placed gets a new
    turn_started with the same tile."""
    from services.scoring.feed import feed_items

    clock = [NOW]
    service, store, game_id, tokens, join = up_to_goal("free", clock)
    placer = service.load(game_id).state.current
    play(service, game_id, tokens[placer], join.goal)
    tile = service.load(game_id).state.undo_point.drawn  # type: ignore[union-attr]
    service.request_undo(game_id, tokens[placer])
    Scorer(store).catch_up(game_id)
    items = feed_items(store.read(game_id, MOVES), store.read(game_id, SCORES))
    undone_seq = store.last_seq(game_id, MOVES)
    last = [i for i in items if i.seq == undone_seq]
    assert [i.kind for i in last] == ["move_made", "score", "turn_started"]
    assert last[0].data["event"] == "TurnUndone" and last[0].data["seat"] == placer
    assert last[1].data["reverted"] == [join.points] * 2
    assert (last[2].data["seat"], last[2].data["tile"]) == (placer, tile)


def test_the_tile_an_undo_showed_comes_next_only_by_its_share_of_the_bag() -> None:
    """Issue 32, finding 7: the undoing player saw the next player's tile (drawn after their
    placement). Were it the next tile again (the draw order kept), they could place again
    knowing it. The draw after an undo is a fresh one: over many games the tile shown comes
    next again only as often as its share of the bag says (before the change: every time),
    so seeing it tells the undoing player nothing of what comes."""
    trials, again, expected = 300, 0, 0.0
    for n in range(trials):
        service, _ = service_at([NOW])
        game_id, seats = service.create_game(
            ["Ann", "Bob"], Ruleset(undo="free"), [0, 1], seed=f"shown-{n}"
        )
        tokens = {s["seat"]: s["token"] for s in seats}
        state = service.load(game_id).state
        x, y, rotation, _ = actions(state)[0]
        service.play_turn(game_id, tokens[0], x, y, rotation, None)
        shown = service.load(game_id).state.drawn
        assert shown is not None
        service.request_undo(game_id, tokens[0])
        bag = service.load(game_id).state.bag  # the shown tile is back in it
        expected += bag[shown] / sum(bag.values())
        service.play_turn(game_id, tokens[0], x, y, rotation, None)
        again += service.load(game_id).state.drawn == shown
    sigma = (expected * (1 - expected / trials)) ** 0.5
    assert again <= expected + 4 * sigma, (again, expected)  # chance, not 300 of 300
    assert again < trials / 4


def test_an_answer_after_a_resignation_or_a_timeout_closed_the_window_is_undo_closed() -> None:
    """A `consent` request waits for Bob and Cy; meanwhile a resignation, or the next turn's
    timeout (the turn timer's append), closes the window (docs/undo.md): the placement stands
    for good. An answer then is 409 `undo_closed` and appends nothing — not a `TurnUndone`
    with no state to put back (it was an AssertionError: a 500)."""
    for closing in ("resignation", "timeout"):
        clock = [NOW]
        service, store = service_at(clock)
        rules = Ruleset(undo="consent", turn_seconds=60)
        game_id, seats = service.create_game(["Ann", "Bob", "Cy"], rules, [0, 1, 2], seed="s1")
        tokens = {s["seat"]: s["token"] for s in seats}
        service.play_turn(game_id, tokens[0], *actions(service.load(game_id).state)[0][:3], None)
        service.request_undo(game_id, tokens[0])
        assert service.turn_view(game_id)["undo"]["request"]["closed"] is False, closing
        if closing == "resignation":
            service.resign(game_id, tokens[2])
        else:  # Bob's turn runs out, as services/scoring/timer.py appends it
            clock[0] += 61_000
            state, seq = service.load(game_id).state.copy(), store.last_seq(game_id, MOVES)
            events = decide(state, TimeOutTurn(1, clock[0]))
            for event in events:
                state.apply(event)
            events += draw_until_placeable(state, "s1", clock[0])
            append_moves(store, game_id, events, expected=seq, command_id=f"timeout:{seq}")
        seq = store.last_seq(game_id, MOVES)
        for accept in (True, False):
            with pytest.raises(GameError) as info:
                service.answer_undo(game_id, tokens[1], 1, accept)
            assert code(info) == ("undo_closed", 409), closing
        assert store.last_seq(game_id, MOVES) == seq
        # The views say so: the request is shown, closed, though unrefused and in its time.
        request = service.turn_view(game_id)["undo"]["request"]
        assert (request["refused_by"], request["closed"]) == (None, True), closing
        assert request_view(service.load(game_id).state) == request, closing
        with pytest.raises(GameError) as info:
            service.request_undo(game_id, tokens[0])
        assert code(info) == ("undo_not_allowed", 409), closing
