"""Each vacation's pause and end name the vacation (docs/clocks.md, "Vacations"): an end cuts
its own window alone, whatever else the seat has declared and whatever order the pause and the
end reach a game in; logs from before pauses carried their vacation replay as they did."""

from __future__ import annotations

from typing import Any

import pytest

from carcassonne.events import (
    ClockPaused,
    ClockResumed,
    DrawTile,
    PauseClock,
    PlayTurn,
    ResumeClock,
    StartGame,
    TileDrawn,
    TilePlaced,
)
from carcassonne.game import actions, decide
from carcassonne.pauses import Absences
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from eventstore.envelope import StoredEvent
from eventstore.errors import SchemaError
from eventstore.schemas import CURRENT, to_engine, to_new, upcast, validate_payload
from tests.unit.engine_steps import NOW, run, started

DAY = 86_400_000


def test_calling_off_a_vacation_leaves_the_one_declared_over_it_in_an_edit():
    """An edit: V (days 10-20) called off and V2 (days 12-25) declared at once; in this game
    V2's pause lands before V's call-off. The call-off ends V alone: V2 still pauses."""
    state, _ = started(initial_seconds=15 * DAY // 1000)  # seat 0's turn: 15 days of clock
    v, v2 = (NOW + 10 * DAY, NOW + 20 * DAY), (NOW + 12 * DAY, NOW + 25 * DAY)
    run(state, PauseClock(0, NOW, v[1], v[0], "v"))
    assert state.deadline_ms == NOW + 25 * DAY  # 10 days before V, 5 after
    run(state, PauseClock(0, NOW + 1, v2[1], v2[0], "v2"))
    assert state.deadline_ms == NOW + 30 * DAY and state.pauses_ms[0] == [(v[0], v2[1])]
    events = run(state, ResumeClock(0, NOW + 2, v[0], "v"))
    # 12 days before V2, 3 after: V2's window is whole
    assert events == [ClockResumed(0, v[0], NOW + 28 * DAY, "v")]
    assert state.pauses_ms[0] == [v2] and state.away_until_ms[0] == v2[1]
    assert decide(state, ResumeClock(0, NOW + 3, v[0], "v")) == []  # ended already


def test_a_call_off_that_reaches_a_game_before_its_pause_drops_the_pause():
    state, _ = started(initial_seconds=300)
    start, until = NOW + 200_000, NOW + 200_000 + 2 * DAY
    events = run(state, ResumeClock(0, NOW + 1_000, start, "v"))
    # logged though nothing is paused yet: for the pause to come; no deadline moves
    assert events == [ClockResumed(0, start, None, "v")]
    assert state.pauses_ms == [[], []] and state.deadline_ms == NOW + 300_000
    assert decide(state, PauseClock(0, NOW + 2_000, until, start, "v")) == []
    assert decide(state, ResumeClock(0, NOW + 3_000, start, "v")) == []  # once


def test_an_end_that_reaches_a_game_before_its_pause_cuts_the_pause_there():
    state, _ = started(initial_seconds=300)
    start, until = NOW + 100_000, NOW + 100_000 + DAY
    back = start + 3_600_000
    assert run(state, ResumeClock(0, back, start, "v")) == [ClockResumed(0, back, None, "v")]
    (paused,) = run(state, PauseClock(0, back + 1_000, until, start, "v"))
    # the pause stands from its start to the end: 100 s of the turn before, 200 s after
    assert paused == ClockPaused(0, start, back, back + 200_000, "v")
    assert state.pauses_ms[0] == [(start, back)] and state.deadline_ms == back + 200_000


def test_a_vacation_paused_already_or_over_is_not_paused_or_ended_again():
    state, _ = started(initial_seconds=300)
    start, until = NOW + 100_000, NOW + 200_000
    run(state, PauseClock(1, NOW, until, start, "v"))
    assert decide(state, PauseClock(1, NOW + 1, until, NOW + 1, "v")) == []  # one window
    assert decide(state, ResumeClock(1, until + 1, start, "v")) == []  # it ran to its end
    assert state.pauses_ms[1] == [(start, until)]


def test_absences_keep_each_vacations_window_and_their_union_for_the_clock():
    seat = Absences().paused("a", (10, 20)).paused("b", (12, 25)).paused(None, (30, 40))
    assert seat.windows() == [(10, 25), (30, 40)]
    assert seat.resumed("a", 10).windows() == [(12, 25), (30, 40)]
    assert seat.resumed("b", 15).windows() == [(10, 20), (30, 40)]
    later = Absences().resumed("c", 15)
    assert later.paused("c", (10, 20)).windows() == [(10, 15)]
    assert later.paused("c", (15, 20)).windows() == []  # called off at its start
    assert later.paused("c", (5, 9)).windows() == [(5, 9)]  # ended after its end: whole
    # an end of a vacation whose pause was logged anonymous (before ids) cuts that window
    assert Absences().paused(None, (10, 20)).resumed("d", 12).windows() == [(10, 12)]


# An old log, as the engine logged it before pauses named their vacation (stored payloads of
# ClockPaused / ClockResumed v1): seat 0 away, then a vacation overlapping it (merged), back
# early; seat 1's later vacation called off and another declared; seat 0 plays, seat 1 drawn
# while away. The deadlines logged, and those decided after it, are the old engine's.
OLD_LOG: list[tuple[str, int, dict[str, Any]]] = [
    ("TileDrawn", 1, {"tile": "E", "deadline_ms": 1800000300000}),
    ("ClockPaused", 1, {"player": 0, "from_ms": 1800000100000, "until_ms": 1800086500000,
                        "deadline_ms": 1800086700000}),
    ("ClockPaused", 1, {"player": 0, "from_ms": 1800043200000, "until_ms": 1800172800000,
                        "deadline_ms": 1800173000000}),
    ("ClockPaused", 1, {"player": 1, "from_ms": 1800432000000, "until_ms": 1800518400000,
                        "deadline_ms": None}),
    ("ClockResumed", 1, {"player": 0, "at_ms": 1800003600000, "deadline_ms": 1800003800000}),
    ("ClockResumed", 1, {"player": 1, "at_ms": 1800432000000, "deadline_ms": None}),
    ("ClockPaused", 1, {"player": 1, "from_ms": 1800172800000, "until_ms": 1800259200000,
                        "deadline_ms": None}),
    ("TilePlaced", 3, {"player": 0, "tile": "E", "x": 0, "y": -1, "rotation": 2,
                       "meeple": None, "bank_ms": 150000}),
    ("TileDrawn", 1, {"tile": "E", "deadline_ms": 1800259500000}),
]  # fmt: skip


def test_an_old_log_without_vacation_ids_replays_to_the_same_deadlines():
    state = GameState()
    run(state, StartGame(Ruleset(initial_seconds=300), 2))
    for seq, (kind, version, payload) in enumerate(OLD_LOG, start=1):
        validate_payload(kind, version, payload)
        stored = upcast(StoredEvent("g", "moves", seq, kind, version, 0, "c", payload))
        if kind.startswith("Clock"):
            assert stored.version == 2 and stored.payload["vacation"] is None
        state.apply(to_engine(stored))
    assert state.pauses_ms == [[(1800000100000, 1800003600000)], [(1800172800000, 1800259200000)]]
    assert state.away_until_ms == [1800003600000, 1800259200000]
    assert state.deadline_ms == 1800259500000 and state.banks_ms == [150000, 300000]
    x, y, rotation, _ = actions(state)[0]
    (played,) = run(state, PlayTurn(1, x, y, rotation, now_ms=NOW + 3 * DAY + 5_000))
    assert isinstance(played, TilePlaced) and played.bank_ms == 295000
    drawn = decide(state, DrawTile("E", NOW + 3 * DAY + 5_000))
    assert drawn == [TileDrawn("E", 1800259355000)]


def test_the_clock_events_name_their_vacation_in_version_2():
    assert CURRENT["ClockPaused"] == CURRENT["ClockResumed"] == 2
    for event in (ClockPaused(0, NOW, NOW + 1, None, "v1"), ClockResumed(1, NOW, 5, "v1"),
                  ClockPaused(0, NOW, NOW + 1), ClockResumed(0, NOW)):  # fmt: skip
        new = to_new(event)
        assert new.version == 2 and new.payload["vacation"] == event.vacation
        validate_payload(new.type, new.version, new.payload)
    with pytest.raises(SchemaError):  # version 2 says which vacation, if any
        validate_payload("ClockResumed", 2, {"player": 0, "at_ms": 1, "deadline_ms": None})
