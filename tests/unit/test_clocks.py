"""Clocks in the engine (docs/clocks.md): Fischer time banks and vacations as facts of the
log. The engine reads no clock: the caller's time comes in as data (`DrawTile.now_ms`,
`PauseClock.now_ms`), and what it decides — each deadline, each bank, each pause — is an
event, so a replay of the log alone gives the same banks and deadlines."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carcassonne.errors import GameError, MalformedError
from carcassonne.events import (
    BankCharged,
    ClockPaused,
    ClockResumed,
    DrawTile,
    Event,
    GameEnded,
    PauseClock,
    PlayTurn,
    RecallAbbot,
    Resign,
    ResumeClock,
    StartGame,
    TileDrawn,
    TilePlaced,
    TimeOutTurn,
    TurnTimedOut,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import actions, decide, fold
from carcassonne.ruleset import MAX_BANK_SECONDS, Ruleset
from carcassonne.state import DRAW, OVER, PLACE, GameState
from eventstore.envelope import MOVES, StoredEvent
from eventstore.errors import SchemaError
from eventstore.port import InMemoryEventStore
from eventstore.schemas import CURRENT, to_engine, to_new, upcast, validate_payload
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService
from tests.unit.engine_steps import NOW, run, started

DAY = 86_400


def play(state: GameState, at_ms: int, tile: str = "E", clocked: bool = True) -> list[Event]:
    """The player to move places the drawn tile (first legal action) at `at_ms`, then the next
    draw at `at_ms` (as the services do: the placement and the draw in one append, one clock).
    `clocked` False: the placement is decided without a clock (charged by the draw)."""
    x, y, rotation, _ = actions(state)[0]
    now = at_ms if clocked else None
    events = run(state, PlayTurn(state.current, x, y, rotation, now_ms=now))
    return events + run(state, DrawTile(tile, at_ms))


def charged(events: list[Event]) -> tuple[int, int | None]:
    """The seat that placed in `events` and the bank its placement carries; no `BankCharged`
    (the move pressed the clock itself, docs/clocks.md)."""
    assert not any(isinstance(e, BankCharged) for e in events)
    (placed,) = [e for e in events if isinstance(e, TilePlaced)]
    return placed.player, placed.bank_ms


# --------------------------------------------------------------------------- the ruleset


@pytest.mark.parametrize(
    ("rules", "code"),
    [
        ({"initial_seconds": 0}, "bad_initial_seconds"),
        ({"initial_seconds": -5}, "bad_initial_seconds"),
        ({"initial_seconds": MAX_BANK_SECONDS + 1}, "bad_initial_seconds"),
        ({"initial_seconds": 1.5}, "bad_initial_seconds"),
        ({"initial_seconds": True}, "bad_initial_seconds"),
        ({"initial_seconds": 300, "increment_seconds": -1}, "bad_increment_seconds"),
        ({"initial_seconds": 300, "increment_seconds": 10**12}, "bad_increment_seconds"),
        ({"increment_seconds": 5}, "increment_without_bank"),
        ({"initial_seconds": 300, "turn_seconds": 60}, "bank_with_turn_limit"),
        ({"initial_seconds": 300, "undo": "free"}, "bank_with_undo"),
        ({"initial_seconds": 300, "hand": 3}, "hand_with_bank"),
    ],
)
def test_a_bad_or_incompatible_bank_is_refused_with_its_code(rules, code):
    with pytest.raises(MalformedError) as refused:
        Ruleset(**rules)
    assert refused.value.code == code


@pytest.mark.parametrize(("bank", "step"), [(300, 5), (3 * DAY, DAY), (1, 0)])
def test_blitz_and_correspondence_banks_round_trip_through_the_record(bank, step):
    rules = Ruleset(initial_seconds=bank, increment_seconds=step)
    recorded = rules.to_dict()
    assert recorded["initial_seconds"] == bank and recorded["increment_seconds"] == step
    assert Ruleset.from_dict(recorded) == rules
    assert "initial_seconds" not in Ruleset().to_dict()  # a game without a bank: as before


# ------------------------------------------------------------------------------ banks


def test_each_seat_starts_with_its_bank_and_the_first_draw_carries_it_as_deadline():
    state, log = started(players=3, initial_seconds=300, increment_seconds=5)
    assert state.banks_ms == [300_000] * 3
    assert log[-1] == TileDrawn("E", NOW + 300_000)
    assert state.pauses_ms == [[], [], []]


def test_a_move_charges_the_time_used_and_adds_the_increment():
    state, _ = started(initial_seconds=300, increment_seconds=5)
    events = play(state, NOW + 40_000)  # seat 0 used 40 s
    assert charged(events) == (0, 300_000 - 40_000 + 5_000)
    assert events[-1] == TileDrawn("E", NOW + 40_000 + 300_000)  # seat 1's full bank
    events = play(state, NOW + 40_000 + 100_000)  # seat 1 used 100 s
    assert charged(events) == (1, 205_000)
    assert events[-1] == TileDrawn("E", NOW + 140_000 + 265_000)  # seat 0's bank now
    assert state.banks_ms == [265_000, 205_000]


def test_a_move_after_the_deadline_leaves_only_the_increment():
    """A move that races the timer and wins is played (docs/lifecycle.md); its bank is spent."""
    state, _ = started(initial_seconds=10, increment_seconds=2)
    events = play(state, NOW + 60_000)
    assert charged(events) == (0, 2_000)


def test_an_exhausted_bank_is_a_timeout_with_the_max_timeouts_consequence():
    state, _ = started(players=3, initial_seconds=2, increment_seconds=0, max_timeouts=2)
    with pytest.raises(GameError) as early:
        decide(state, TimeOutTurn(0, NOW + 1_999))
    assert early.value.code == "turn_not_expired"
    assert run(state, TimeOutTurn(0, NOW + 2_000)) == [TurnTimedOut(0, "E")]
    assert state.banks_ms == [0, 2_000, 2_000]  # spent; no increment in this game
    play_seat = run(state, DrawTile("E", NOW + 2_000))
    assert play_seat == [TileDrawn("E", NOW + 4_000)]  # seat 1's own bank
    play(state, NOW + 2_500)
    play(state, NOW + 3_000)  # seat 2, then seat 0 draws with an empty bank
    assert state.current == 0 and state.deadline_ms == NOW + 3_000
    events = run(state, TimeOutTurn(0, NOW + 3_000))
    assert [type(e).__name__ for e in events] == ["TurnTimedOut", "PlayerTimedOut"]
    assert state.out[0] == "timed_out"


def test_a_timed_out_turn_gives_back_the_increment_only():
    state, _ = started(initial_seconds=60, increment_seconds=30)
    run(state, TimeOutTurn(0, NOW + 60_000))
    assert state.banks_ms == [30_000, 60_000]


def test_a_resignation_on_ones_turn_charges_nothing():
    state, _ = started(players=3, initial_seconds=60)
    run(state, Resign(0))
    events = run(state, DrawTile("E", NOW + 10_000))
    assert events == [TileDrawn("E", NOW + 70_000)] and state.banks_ms == [60_000] * 3


def test_banks_are_kept_in_the_state_copy_not_shared():
    state, _ = started(initial_seconds=60)
    twin = state.copy()
    play(twin, NOW + 1_000)
    assert state.banks_ms == [60_000, 60_000] and twin.banks_ms != state.banks_ms


def test_a_game_without_a_clock_logs_what_it_always_did():
    state, log = started()
    assert log[-1] == TileDrawn("E") and state.banks_ms == []
    events = play(state, NOW + 5_000)
    assert charged(events) == (0, None)


def test_a_turn_limit_game_keeps_its_fixed_deadline():
    state, _ = started(turn_seconds=60)
    events = play(state, NOW + 5_000)
    assert events[-1] == TileDrawn("E", NOW + 65_000)
    assert charged(events) == (0, None)  # a turn limit has no bank to carry


def test_a_placement_decided_without_a_clock_is_charged_by_the_next_clocked_draw():
    """The one path that still logs `BankCharged`: a placement whose command had no time
    (`now_ms` None) carries no bank, and the clocked draw after it charges it as every draw
    did before placements carried the bank, with the same value."""
    state, _ = started(initial_seconds=300, increment_seconds=5)
    events = play(state, NOW + 40_000, clocked=False)
    assert [type(e).__name__ for e in events] == ["TilePlaced", "BankCharged", "TileDrawn"]
    assert events[0].bank_ms is None
    assert events[1:] == [BankCharged(0, 265_000), TileDrawn("E", NOW + 340_000)]
    assert state.banks_ms == [265_000, 300_000] and state.charge is None
    events = play(state, NOW + 50_000)  # the next one, clocked: on the placement again
    assert charged(events) == (1, 295_000)


def test_taking_the_abbot_back_carries_the_bank_as_any_placement():
    """R9.2 with a bank: `RecallAbbot` places the tile too (`TilePlaced`, then `AbbotRecalled`),
    so it carries the placer's bank at its time. A record's moves are made at time 0 (its
    draws' time): each keeps the whole bank, plus the increment."""
    from carcassonne.record import record_events
    from tests.unit.boards import record

    turns = "Ug0@1,0:G V3@-1,0 B0@1,-1 E2@0,-1"
    events = record_events(record(turns, opts="abbot=on edition=2nd bank=300+5"))
    assert [e.bank_ms for e in events if isinstance(e, TilePlaced)] == [
        305_000, 305_000, 310_000, 310_000
    ]  # fmt: skip
    assert not any(isinstance(e, BankCharged) for e in events)
    assert isinstance(events[-1], GameEnded)  # the record ends there: play on before it
    state = fold(events[:-1])
    run(state, DrawTile("B", NOW))  # seat 0's turn: its 310 s from now
    recalled = run(state, RecallAbbot(0, 2, -1, 0, NOW + 10_000))
    assert [type(e).__name__ for e in recalled] == ["TilePlaced", "AbbotRecalled"]
    assert charged(recalled) == (0, 310_000 - 10_000 + 5_000)
    assert state.banks_ms == [305_000, 310_000]


def test_the_last_placement_carries_no_bank_as_no_draw_charged_it_before():
    """The game's last placement ends it: no turn follows, and the draw that charged every
    other placement never came, so the banks stay as the last charge left them."""
    from services.common.draws import draw_until_placeable

    state, log = started(initial_seconds=300, increment_seconds=5)
    now = NOW
    while not state.over:
        now += 1_000
        banks = list(state.banks_ms)
        x, y, rotation, _ = actions(state)[0]
        log += run(state, PlayTurn(state.current, x, y, rotation, now_ms=now))
        if not state.over:
            log += draw_until_placeable(state, "seed", now)
    last, ended = log[-2:]
    assert isinstance(last, TilePlaced) and isinstance(ended, GameEnded)
    assert last.bank_ms is None and state.banks_ms == banks
    placed = [e for e in log if isinstance(e, TilePlaced)]
    assert all(e.bank_ms is not None for e in placed[:-1])
    assert not any(isinstance(e, BankCharged) for e in log)


# ---------------------------------------------------------------------------- vacation


def test_a_pause_on_ones_running_turn_moves_the_deadline_by_the_absence():
    state, _ = started(initial_seconds=300)
    # 100 s into the turn seat 0 goes away for a day: 200 s are left after it
    events = run(state, PauseClock(0, NOW + 100_000, NOW + 100_000 + DAY * 1000))
    assert events == [ClockPaused(0, NOW + 100_000, NOW + 100_000 + DAY * 1000,
                                  NOW + 300_000 + DAY * 1000)]  # fmt: skip
    assert state.deadline_ms == NOW + 300_000 + DAY * 1000
    with pytest.raises(GameError):
        decide(state, TimeOutTurn(0, NOW + 300_000))  # no longer due
    # back early, seat 0 plays an hour after leaving: none of the absence is charged
    events = play(state, NOW + 100_000 + 3_600_000)
    assert charged(events) == (0, 200_000)


def test_a_turn_drawn_while_away_starts_its_clock_when_the_absence_ends():
    state, _ = started(initial_seconds=300)
    until = NOW + 5 * DAY * 1000
    assert run(state, PauseClock(1, NOW, until)) == [ClockPaused(1, NOW, until, None)]
    assert state.deadline_ms == NOW + 300_000  # seat 0's turn is not paused
    events = play(state, NOW + 10_000)
    assert events[-1] == TileDrawn("E", until + 300_000)


def test_a_pause_pauses_a_fixed_turn_limit_too():
    state, _ = started(turn_seconds=DAY)
    until = NOW + 2 * DAY * 1000
    events = run(state, PauseClock(0, NOW + 1_000, until))
    assert events == [ClockPaused(0, NOW + 1_000, until, until + DAY * 1000 - 1_000)]


def test_a_pause_is_refused_for_a_seat_out_a_game_over_or_an_empty_interval():
    state, _ = started(players=3, initial_seconds=60)
    run(state, Resign(2))
    for command, code in [
        (PauseClock(2, NOW, NOW + 1), "player_out"),
        (PauseClock(0, NOW, NOW), "bad_vacation"),
        (PauseClock(7, NOW, NOW + 1), "bad_player"),
    ]:
        with pytest.raises(GameError) as refused:
            decide(state, command)
        assert refused.value.code == code
    run(state, Resign(1))
    assert state.phase == OVER
    with pytest.raises(GameError) as over:
        decide(state, PauseClock(0, NOW, NOW + 1))
    assert over.value.code == "game_over"


def test_back_early_the_running_turns_clock_runs_again_from_the_return():
    state, _ = started(initial_seconds=300)
    away_at, until = NOW + 100_000, NOW + 100_000 + 5 * DAY * 1000
    run(state, PauseClock(0, away_at, until))
    back = away_at + 3_600_000  # an hour later: 200 s of the turn left, counted from now
    events = run(state, ResumeClock(0, back))
    assert events == [ClockResumed(0, back, back + 200_000)]
    assert state.deadline_ms == back + 200_000 and state.away_until_ms[0] == back
    (timed_out, *_) = decide(state, TimeOutTurn(0, back + 200_000))
    assert timed_out == TurnTimedOut(0, "E")
    events = play(state, back + 50_000)  # 50 s of it used: 150 s + no increment left
    assert charged(events) == (0, 150_000)


def test_back_early_on_anothers_turn_the_next_own_turn_starts_at_once():
    state, _ = started(initial_seconds=300)
    until = NOW + 5 * DAY * 1000
    run(state, PauseClock(1, NOW, until))
    assert run(state, ResumeClock(1, NOW + 1_000)) == [ClockResumed(1, NOW + 1_000, None)]
    assert state.deadline_ms == NOW + 300_000  # seat 0's turn never paused
    events = play(state, NOW + 10_000)
    assert events[-1] == TileDrawn("E", NOW + 10_000 + 300_000)  # not after `until`


def test_back_early_from_a_turn_limit_pause_and_a_seat_not_away_changes_nothing():
    state, _ = started(turn_seconds=DAY)
    until = NOW + 3 * DAY * 1000
    run(state, PauseClock(0, NOW + 1_000, until))
    back = NOW + 2_000
    assert run(state, ResumeClock(0, back)) == [ClockResumed(0, back, back + DAY * 1000 - 1_000)]
    assert decide(state, ResumeClock(0, back + 1)) == []  # back already: nothing
    assert decide(state, ResumeClock(1, back)) == []  # never away
    with pytest.raises(GameError) as refused:
        decide(state, ResumeClock(5, back))
    assert refused.value.code == "bad_player"


def test_clock_events_round_trip_and_fit_their_stored_schemas():
    for event in (BankCharged(1, 5_000), TilePlaced(0, "E", 0, -1, 2, None, None, 5_000),
                  TilePlaced(1, "E", 0, 1, 1, bank_ms=0), ClockPaused(0, NOW, NOW + 1, None),
                  ClockPaused(1, NOW, NOW + 9, NOW + 20), ClockResumed(0, NOW, None),
                  ClockResumed(1, NOW + 5, NOW + 30)):  # fmt: skip
        assert event_from_dict(event_to_dict(event)) == event
        new = to_new(event)
        validate_payload(new.type, new.version, new.payload)
        stored = StoredEvent("g", "moves", 1, new.type, new.version, 0, "c", new.payload)
        assert to_engine(stored) == event
    (game_started,) = decide(GameState(), StartGame(Ruleset(initial_seconds=3), 2))
    stored_start = to_new(game_started)
    validate_payload(stored_start.type, stored_start.version, stored_start.payload)


def _service_game(rules: Ruleset) -> tuple[GameService, InMemoryEventStore, str, list[str]]:
    """The command service on an in-memory store with a new 2-seat game of `rules`: (service,
    store, game id, tokens by seat)."""
    store = InMemoryEventStore()
    service = GameService(store, MemorySecrets())
    game_id, seats = service.create_game(["ann", "bob"], rules, seat_order=[0, 1])
    return service, store, game_id, [seat["token"] for seat in seats]


def test_a_new_banked_games_placements_carry_the_banks_its_views_show():
    """Through the command service (its clock, one append a turn): no `BankCharged` in the
    move stream; each placement's `bank_ms` is the placer's bank in `/turn` right after it,
    and the bank `turn_started` gives that seat at its next turn."""
    from services.scoring.feed import feed_items

    service, store, game_id, tokens = _service_game(
        Ruleset(initial_seconds=DAY, increment_seconds=60)
    )
    banks = []
    for _ in range(6):
        view = service.turn_view(game_id)
        spot = view["placements"][0]
        seat, before = view["player"], view["banks_ms"][view["player"]]
        service.play_turn(game_id, tokens[seat], spot["x"], spot["y"], spot["rotation"], None)
        placed = next(e for e in reversed(store.read(game_id, MOVES)) if e.type == "TilePlaced")
        assert placed.version == 3 and placed.payload["player"] == seat
        banks.append((seat, placed.payload["bank_ms"]))
        assert service.turn_view(game_id)["banks_ms"][seat] == placed.payload["bank_ms"]
        # what was left at the move (a few ms used, at most), plus the 60 s increment
        assert before + 55_000 < placed.payload["bank_ms"] <= before + 60_000
    log = store.read(game_id, MOVES)
    assert not any(e.type == "BankCharged" for e in log)
    shown = [(i.seq, i.data["seat"], i.data["bank_ms"]) for i in feed_items(log, [])
             if i.kind == "turn_started"]  # fmt: skip
    carried = [DAY * 1000] * 2  # each seat's bank as its placements carried it
    for event in log:
        if event.type == "TilePlaced":
            carried[event.payload["player"]] = event.payload["bank_ms"]
        for seq, seat, bank in shown:
            if seq == event.seq:
                assert bank == carried[seat]
    assert {seat for seat, _ in banks} == {0, 1} and len(shown) > len(banks)


def test_the_command_services_abbot_recall_carries_the_bank_too():
    """R9.2 through the command service: a turn that takes the abbot back is timed as any
    other (its `TilePlaced` carries the bank; no `BankCharged`)."""
    from carcassonne.game import RECALL_ABBOT

    rules = Ruleset(abbot=True, tile_edition="2nd", initial_seconds=DAY, increment_seconds=60)
    service, store, game_id, tokens = _service_game(rules)
    for _ in range(70):  # seat 0 puts its abbot out, then takes it back at its next turn
        state = service.load(game_id).state
        mine = actions(state) if state.current == 0 else []
        recall = [a for a in mine if a[3] == RECALL_ABBOT]
        abbot = [a for a in mine if a[3] is not None and a[3].abbot and not recall]
        x, y, rotation, meeple = (recall or abbot or actions(state))[0]
        if recall:
            service.play_turn(game_id, tokens[0], x, y, rotation, None, recall=True)
            break
        meeple = meeple if abbot else None
        service.play_turn(game_id, tokens[state.current], x, y, rotation, meeple)
    log = store.read(game_id, MOVES)
    assert log[-1].type == "TileDrawn" and recall  # the recall was played, and a draw after it
    placed, recalled = [e for e in log if e.type in ("TilePlaced", "AbbotRecalled")][-2:]
    assert recalled.type == "AbbotRecalled" and placed.payload["player"] == 0
    assert placed.payload["bank_ms"] == service.turn_view(game_id)["banks_ms"][0]
    assert not any(e.type == "BankCharged" for e in log)


# ------------------------------------------------------------------ replay is a fold


def _paused_ms(start: int, end: int, windows: list[tuple[int, int]]) -> int:
    """The model's own count: how much of [start, end) the union of `windows` covers."""
    covered, reach = 0, start
    for w_from, w_until in sorted(windows):
        lo, hi = max(w_from, reach), min(w_until, end)
        if hi > lo:
            covered += hi - lo
            reach = hi
    return covered


def _model_cut(windows: list[tuple[int, int]], at: int) -> list[tuple[int, int]]:
    """The model's back early / call-off: every window holding `at` ends at `at`."""
    out = [(f, at if f <= at < u else u) for f, u in windows]
    return [(f, u) for f, u in out if u > f]


def _clocked_game(seed: int, clocked: bool = True) -> tuple[GameState, list[Event], list[int]]:
    """A random game of a banked ruleset played on a random clock: moves after random
    delays, timeouts when a bank runs out, and random vacations — from now or later, some
    ended early or called off before they start. Returns the live state, the log and the
    banks a reference model kept beside the engine (it counts the clock time each turn
    used, its absences left out, and checks each deadline leaves exactly the bank).
    `clocked` False: the placements are decided without the time, as the services did
    before a placement carried its bank (the draws charge them: `BankCharged`)."""
    rng = random.Random(seed)
    players = rng.randint(2, 4)
    bank, step = rng.choice([(2, 0), (300, 5), (3 * DAY, DAY)])
    rules = Ruleset(initial_seconds=bank, increment_seconds=step, max_timeouts=3)
    state = GameState()
    log = run(state, StartGame(rules, players))
    model = [bank * 1000] * players
    away: list[list[tuple[int, int]]] = [[] for _ in range(players)]
    # each pause and end naming its vacation (by its start), or none (as logs before ids)
    named = rng.random() < 0.5
    now = NOW
    from services.common.draws import draw_until_placeable

    log += draw_until_placeable(state, "seed", now)
    drawn_at = now
    for _ in range(40):
        if state.phase == OVER:
            break
        assert state.phase == PLACE and state.deadline_ms is not None
        seat = state.current
        if rng.random() < 0.2:  # someone declares a few days away, from now or later
            who = rng.choice(state.still_in)
            start = now + rng.choice([0, rng.randint(1, 2 * bank * 1000)])
            until = start + rng.randint(1, 3) * DAY * 1000
            if not any(f < until and start < u for f, u in away[who]):  # as the service
                vacation = f"v{who}-{start}" if named else None
                log += run(state, PauseClock(who, now, until, start, vacation))
                away[who].append((start, until))
        if rng.random() < 0.1 and away[seat]:  # back early, or called off before its start
            chosen = rng.choice(away[seat])
            start = chosen[0]
            vacation = f"v{seat}-{start}" if named else None
            log += run(state, ResumeClock(seat, now, start, vacation))
            if named:  # its own window alone (one over: nothing; the service's 409)
                rest = [w for w in away[seat] if w != chosen]
                away[seat] = sorted(rest + _model_cut([chosen], max(now, start)))
            else:  # whatever window the end falls in
                away[seat] = _model_cut(away[seat], max(now, start))
        deadline = state.deadline_ms
        # the deadline leaves exactly the bank on the clock, absences left out
        ran = deadline - drawn_at - _paused_ms(drawn_at, deadline, away[seat])
        assert ran == model[seat]
        now += rng.randint(0, 2 * (deadline - now) if deadline > now else 1_000)
        if now >= deadline and rng.random() < 0.7:
            log += run(state, TimeOutTurn(seat, now))
            model[seat] = step * 1000
        else:
            x, y, rotation, meeple = rng.choice(actions(state))
            moved_at = now if clocked else None
            log += run(state, PlayTurn(seat, x, y, rotation, meeple, now_ms=moved_at))
            if state.phase == DRAW:
                used = now - drawn_at - _paused_ms(drawn_at, now, away[seat])
                model[seat] = max(0, model[seat] - used) + step * 1000
        if state.phase != OVER:
            log += draw_until_placeable(state, "seed", now)
            drawn_at = now
    return state, log, model


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_replaying_the_log_gives_the_live_banks_and_deadlines(seed):
    live, log, model = _clocked_game(seed)
    assert live.banks_ms == model
    stored = [to_new(e) for e in log]
    for new in stored:
        validate_payload(new.type, new.version, new.payload)
    read = [
        to_engine(StoredEvent("g", "moves", i, n.type, n.version, 0, "c", n.payload))
        for i, n in enumerate(stored, start=1)
    ]
    replayed = fold(read)
    assert replayed.banks_ms == live.banks_ms
    assert replayed.away_until_ms == live.away_until_ms
    assert replayed.deadline_ms == live.deadline_ms
    assert replayed.pauses_ms == live.pauses_ms
    assert replayed.out == live.out and replayed.timeouts == live.timeouts


def _stored(log: list[Event], placed_version: int = 3) -> list[StoredEvent]:
    """`log` as stored; with `placed_version` 2 its placements as games logged them before
    they carried a bank (no `bank_ms`: TilePlaced v2), which reading upcasts."""
    stored = []
    for seq, event in enumerate(log, start=1):
        new = to_new(event)
        version = new.version
        if new.type == "TilePlaced" and placed_version == 2:
            assert "bank_ms" not in new.payload  # a v2 placement never carried one
            version = 2
        validate_payload(new.type, version, new.payload)
        stored.append(StoredEvent("g", "moves", seq, new.type, version, 0, "c", new.payload))
    return stored


def _clocks(state: GameState) -> tuple[object, ...]:
    """What the views show of a game's clocks (docs/clocks.md, "Where the banks show")."""
    return state.banks_ms, state.deadline_ms, state.away_until_ms, state.current, state.phase


def _clocks_at_each_draw(stored: list[StoredEvent]) -> list[tuple[object, ...]]:
    """The clocks a fold of `stored` shows after each draw (a turn as the views see it)."""
    state, seen = GameState(), []
    for event in stored:
        state.apply(to_engine(event))
        if event.type in ("TileDrawn", "TurnTimedOut"):
            seen.append(_clocks(state))
    return [*seen, _clocks(state)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_a_game_logged_before_placements_carried_the_bank_replays_to_the_same_clocks(seed):
    """The same moves at the same times, decided as today (each placement carries its bank)
    and as before (TilePlaced v2, the draw's `BankCharged` after it): every turn's banks and
    deadline come out alike, and only the old log holds `BankCharged`, one per bank."""
    _, new_log, _ = _clocked_game(seed)
    _, old_log, _ = _clocked_game(seed, clocked=False)
    charges = [e.bank_ms for e in old_log if isinstance(e, BankCharged)]
    banks = [e.bank_ms for e in new_log if isinstance(e, TilePlaced) and e.bank_ms is not None]
    assert charges == banks and not any(isinstance(e, BankCharged) for e in new_log)
    old, new = _stored(old_log, placed_version=2), _stored(new_log)
    assert _clocks_at_each_draw(old) == _clocks_at_each_draw(new)


_RULES = {"tileset": "base", "farmers": True, "farm_scoring": "3rd", "incomplete_score": True,
          "initial_seconds": 300, "increment_seconds": 5}  # fmt: skip
_SEATS = [{"name": None, "player_id": None}] * 2


def _placed(player: int, tile: str, x: int, y: int, rotation: int, **bank: int) -> dict[str, Any]:
    return {"player": player, "tile": tile, "x": x, "y": y, "rotation": rotation,
            "meeple": None, **bank}  # fmt: skip


# One game written both ways: 300 s + 5 s; seat 0 moves 40 s in (265 s left), seat 1 after
# its deadline (the increment only), seat 0 60 s into 265 s (210 s); the draws' deadlines.
_OLD_LOG = [
    ("GameStarted", 2, {"ruleset": _RULES, "players": _SEATS}),
    ("TileDrawn", 1, {"tile": "E", "deadline_ms": NOW + 300_000}),
    ("TilePlaced", 2, _placed(0, "E", 0, -1, 2)),
    ("BankCharged", 1, {"player": 0, "bank_ms": 265_000}),
    ("TileDrawn", 1, {"tile": "E", "deadline_ms": NOW + 340_000}),
    ("TilePlaced", 2, _placed(1, "E", 0, 1, 1)),
    ("BankCharged", 1, {"player": 1, "bank_ms": 5_000}),
    ("TileDrawn", 1, {"tile": "D", "deadline_ms": NOW + 705_000}),
    ("TilePlaced", 2, _placed(0, "D", 1, 0, 0)),
    ("BankCharged", 1, {"player": 0, "bank_ms": 210_000}),
    ("TileDrawn", 1, {"tile": "V", "deadline_ms": NOW + 505_000}),
]
_NEW_LOG = [
    ("GameStarted", 2, {"ruleset": _RULES, "players": _SEATS}),
    ("TileDrawn", 1, {"tile": "E", "deadline_ms": NOW + 300_000}),
    ("TilePlaced", 3, _placed(0, "E", 0, -1, 2, bank_ms=265_000)),
    ("TileDrawn", 1, {"tile": "E", "deadline_ms": NOW + 340_000}),
    ("TilePlaced", 3, _placed(1, "E", 0, 1, 1, bank_ms=5_000)),
    ("TileDrawn", 1, {"tile": "D", "deadline_ms": NOW + 705_000}),
    ("TilePlaced", 3, _placed(0, "D", 1, 0, 0, bank_ms=210_000)),
    ("TileDrawn", 1, {"tile": "V", "deadline_ms": NOW + 505_000}),
]


def _read(log: list[tuple[str, int, dict[str, Any]]]) -> list[StoredEvent]:
    """Stored events as a store holds them (each payload checked against its schema)."""
    out = []
    for seq, (kind, version, payload) in enumerate(log, start=1):
        validate_payload(kind, version, payload)
        out.append(StoredEvent("g", "moves", seq, kind, version, 0, "c", payload))
    return out


def test_an_old_log_with_bank_charges_folds_to_the_same_banks_as_the_new_one():
    """Docs/clocks.md: a game logged before the placement carried its bank (TilePlaced v2,
    then `BankCharged`) reads as it always did: every turn's banks and deadlines are those of
    the same game logged today, and the engine decides today's log from the same moves."""
    old, new = _read(_OLD_LOG), _read(_NEW_LOG)
    assert _clocks_at_each_draw(old) == _clocks_at_each_draw(new)
    assert fold(to_engine(e) for e in old).banks_ms == [210_000, 5_000]
    assert fold(to_engine(e) for e in new).deadline_ms == NOW + 505_000
    state, log = started(initial_seconds=300, increment_seconds=5)
    for at, tile in [(NOW + 40_000, "E"), (NOW + 440_000, "D"), (NOW + 500_000, "V")]:
        log += play(state, at, tile)
    assert [(n.type, n.version, n.payload) for n in map(to_new, log)] == _NEW_LOG


def test_a_v2_placement_is_upcast_to_v3_without_a_bank():
    """TilePlaced v2 -> v3 (shared/eventstore/schemas.py): the payload as it was, no
    `bank_ms`; v1's `rot` reaches v3 through both steps. Only v3 takes a bank, never < 0."""
    v2 = StoredEvent("g", "moves", 3, "TilePlaced", 2, 0, "c", _placed(0, "E", 0, -1, 2))
    up = upcast(v2)
    assert (up.version, up.payload) == (3, _placed(0, "E", 0, -1, 2)) and up.seq == 3
    assert v2.payload == _placed(0, "E", 0, -1, 2)  # the stored event itself is left alone
    v1_payload = {"player": 0, "tile": "E", "x": 0, "y": -1, "rot": 2, "meeple": None}
    v1 = StoredEvent("g", "moves", 3, "TilePlaced", 1, 0, "c", v1_payload)
    assert upcast(v1).payload == up.payload and to_engine(v1) == to_engine(v2)
    assert to_engine(v2) == TilePlaced(0, "E", 0, -1, 2) and CURRENT["TilePlaced"] == 3
    validate_payload("TilePlaced", 3, _placed(0, "E", 0, -1, 2, bank_ms=0))
    for version, payload in [(2, _placed(0, "E", 0, -1, 2, bank_ms=5)),
                             (3, _placed(0, "E", 0, -1, 2, bank_ms=-1))]:  # fmt: skip
        with pytest.raises(SchemaError):
            validate_payload("TilePlaced", version, payload)


def test_a_banked_record_round_trips_through_its_notation():
    """The notation's header writes a bank as bank=INITIAL+INCREMENT (docs/clocks.md)."""
    from carcassonne.notation import format_record, parse_record
    from carcassonne.record import record_from_events

    _, log, _ = _clocked_game(3)
    record = record_from_events(log)
    text = format_record(record)
    assert " bank=" in text.splitlines()[0]
    assert parse_record(text) == record
    with pytest.raises(MalformedError):
        parse_record(text.replace(" bank=", " bank=x", 1))


# ------------------------------------------------------- the turn timer's deadline index


def test_the_timer_index_follows_a_pause_of_the_seat_to_move_and_ignores_the_others():
    """A `ClockPaused` with a deadline (the away seat's running turn) moves the game's entry
    in the deadline index; one without (another seat away) leaves it as the draw set it,
    whether it comes in the same batch as the draw or in a later one."""
    from services.redis_store.changes import Change, Write
    from services.redis_store.keys import deadlines_key
    from services.scoring.timer import TimerIndex

    store = InMemoryEventStore()
    index = TimerIndex.__new__(TimerIndex)
    index.store = store
    appended: list[Change] = []

    def append(events: list[Event]) -> Change:
        seq = len(store.read("g", "moves"))
        result = store.append("g", "moves", [to_new(e) for e in events], expected=seq,
                              command_id=f"c{seq}")  # fmt: skip
        change = Change(f"{seq}-0", "g", "moves", result.first_seq, result.last_seq, NOW,
                        tuple(to_new(e).type for e in events))  # fmt: skip
        appended.append(change)
        return change

    state = GameState()
    start = append(run(state, StartGame(Ruleset(initial_seconds=60), 2)))
    draw = append(run(state, DrawTile("E", NOW)))
    other = append(run(state, PauseClock(1, NOW, NOW + DAY * 1000)))
    mine = append(run(state, PauseClock(0, NOW + 10_000, NOW + DAY * 1000)))
    key = deadlines_key(0)

    def deadline(changes: list[Change]) -> list[Write]:
        return [w for w in index.writes(0, changes) if w.key == key]

    assert deadline([start, draw]) == [Write("zadd", key, "g", NOW + 60_000)]
    assert deadline([start, draw, other]) == [Write("zadd", key, "g", NOW + 60_000)]
    assert deadline([other]) == []  # a later batch: the entry stays as it was
    moved = NOW + DAY * 1000 + 50_000
    assert state.deadline_ms == moved
    assert deadline([other, mine]) == [Write("zadd", key, "g", moved)]
    assert deadline([draw, mine, other]) == [Write("zadd", key, "g", moved)]
    back = append(run(state, ResumeClock(0, NOW + 20_000)))  # back early: brought forward
    assert state.deadline_ms == NOW + 70_000
    assert deadline([back]) == [Write("zadd", key, "g", NOW + 70_000)]
    assert deadline([mine, back]) == [Write("zadd", key, "g", NOW + 70_000)]


def test_a_shorter_pause_inside_a_longer_one_changes_nothing():
    """The engine takes overlapping pauses (the service allows one vacation at a time): the
    clock resumes at the later end, and nothing of the absence is charged."""
    state, _ = started(initial_seconds=300)
    long_until, short_until = NOW + 5 * DAY * 1000, NOW + 2 * DAY * 1000
    run(state, PauseClock(0, NOW + 100_000, long_until))
    moved = state.deadline_ms
    assert moved == long_until + 200_000
    events = run(state, PauseClock(0, NOW + 200_000, short_until))
    assert events == [ClockPaused(0, NOW + 200_000, short_until, moved)]
    assert state.deadline_ms == moved and state.pauses_ms[0] == [(NOW + 100_000, long_until)]
    events = play(state, long_until + 50_000)
    assert charged(events) == (0, 150_000)


# ------------------------------------------------------ a vacation that starts later


def test_a_later_vacation_pauses_exactly_its_window():
    """Declared now for later: turns before it run on their normal clock; a running turn
    whose deadline crosses its start keeps its remainder (moved by the overlap); a turn
    drawn during it starts its clock at its end."""
    state, _ = started(initial_seconds=300)
    start, until = NOW + 200_000, NOW + 200_000 + 2 * DAY * 1000
    (paused,) = run(state, PauseClock(0, NOW + 10_000, until, start))
    # seat 0's running turn: 200 s of its clock before the start, 100 s after the end
    assert paused == ClockPaused(0, start, until, until + 100_000)
    assert state.deadline_ms == until + 100_000 and state.away_until_ms == [until, 0]
    events = play(state, NOW + 50_000)  # before the start: 50 s used, as without a vacation
    assert charged(events) == (0, 250_000)
    assert events[-1] == TileDrawn("E", NOW + 350_000)  # seat 1 is not away
    events = play(state, NOW + 60_000)  # seat 0's turn drawn 140 s before the start
    assert events[-1] == TileDrawn("E", until + 250_000 - 140_000)
    events = play(state, start + 3_600_000)  # played while away: only the 140 s charged
    assert charged(events) == (0, 110_000)
    events = play(state, start + 7_200_000)  # seat 0 drawn while away: from the end
    assert events[-1] == TileDrawn("E", until + 110_000)


def test_a_later_vacation_leaves_a_turn_that_ends_before_it_alone():
    state, _ = started(turn_seconds=60)
    start, until = NOW + DAY * 1000, NOW + 2 * DAY * 1000
    paused = run(state, PauseClock(0, NOW, until, start))
    assert paused == [ClockPaused(0, start, until, NOW + 60_000)]  # its deadline: as it was
    events = play(state, NOW + 1_000)
    assert events[-1] == TileDrawn("E", NOW + 61_000)  # seat 1, never away
    events = play(state, NOW + 2_000)
    assert events[-1] == TileDrawn("E", NOW + 62_000)  # seat 0: ends a day before it starts


def test_a_later_vacation_called_off_before_its_start_undoes_its_effect():
    state, _ = started(initial_seconds=300)
    start, until = NOW + 200_000, NOW + 200_000 + 2 * DAY * 1000
    run(state, PauseClock(0, NOW, until, start))
    assert state.deadline_ms == until + 100_000
    events = run(state, ResumeClock(0, NOW + 20_000, start))  # called off 20 s in
    # the event says the absence that was to start at `start` ends there: it never begins
    assert events == [ClockResumed(0, start, NOW + 300_000)]
    assert state.deadline_ms == NOW + 300_000 and state.pauses_ms == [[], []]
    assert state.away_until_ms == [0, 0]
    assert decide(state, ResumeClock(0, NOW + 30_000, start)) == []  # again: nothing
    play(state, NOW + 40_000)
    events = play(state, NOW + 50_000)
    assert events[-1] == TileDrawn("E", NOW + 50_000 + 260_000)  # seat 0's clock runs on


def test_back_early_from_one_vacation_keeps_the_next_one():
    state, _ = started(initial_seconds=300)
    first = (NOW + 1_000, NOW + DAY * 1000)
    second = (NOW + 5 * DAY * 1000, NOW + 6 * DAY * 1000)
    run(state, PauseClock(1, NOW + 1_000, first[1]))
    run(state, PauseClock(1, NOW + 1_000, second[1], second[0]))
    back = NOW + 3_600_000
    assert run(state, ResumeClock(1, back)) == [ClockResumed(1, back, None)]
    assert state.pauses_ms[1] == [(first[0], back), second]
    assert state.away_until_ms[1] == second[1]  # the views: the end of the last declared
    events = play(state, second[0] - 100_000)  # seat 1 drawn 100 s before the second
    assert events[-1] == TileDrawn("E", second[1] + 200_000)


def test_a_pause_that_arrives_after_its_start_counts_from_its_start():
    """A retry that pauses a game the declaration did not reach: the turn's clock stands
    still from the vacation's start, not from the retry."""
    state, _ = started(initial_seconds=300)
    start, until = NOW + 100_000, NOW + DAY * 1000
    (paused,) = run(state, PauseClock(0, NOW + 150_000, until, start))
    assert paused == ClockPaused(0, start, until, until + 200_000)


def test_the_pause_windows_arithmetic():
    from carcassonne.pauses import added, advanced, containing, cut, running_ms

    windows = added([(10, 20)], (30, 40))
    assert windows == [(10, 20), (30, 40)]
    assert added(windows, (15, 35)) == [(10, 40)]  # overlapping: one absence
    assert added(windows, (20, 30)) == [(10, 20), (20, 30), (30, 40)]  # touching: kept apart
    assert running_ms(0, 50, windows) == 30 and running_ms(15, 35, windows) == 10
    assert running_ms(50, 40, windows) == 0
    assert advanced(0, 10, windows) == 10  # runs out right as the first starts
    assert advanced(0, 11, windows) == 21
    assert advanced(12, 5, windows) == 25  # started inside: held until its end
    assert advanced(0, 25, windows) == 45
    assert containing(windows, 20) is None and containing(windows, 30) == (30, 40)
    assert cut(windows, 35) == [(10, 20), (30, 35)]
    assert cut(windows, 30) == [(10, 20)]  # not begun: gone


def test_an_undone_turn_keeps_the_absences_declared_since_and_its_clock_skips_them():
    """Undo (a turn limit): the turn given back starts its clock on the placer's clock, and
    the pause declared after the placement is not taken back with it."""
    from carcassonne.events import RequestUndo, TurnUndone

    state, _ = started(turn_seconds=60, undo="free")
    play(state, NOW + 1_000)  # seat 0 places; seat 1's turn is drawn
    start, until = NOW + 10_000, NOW + DAY * 1000
    run(state, PauseClock(0, NOW + 2_000, until, start))
    events = run(state, RequestUndo(0, NOW + 3_000))
    (undone,) = [e for e in events if isinstance(e, TurnUndone)]
    assert undone.deadline_ms == until + 60_000 - 7_000  # 7 s of it before the start
    assert state.pauses_ms[0] == [(start, until)] and state.away_until_ms[0] == until
