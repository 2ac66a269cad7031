"""A short 4-player game with every lifecycle fact in its log, for the query views and the
viewer's browser tests: timed-out turns (one, then a second that puts the seat out), an
undone placement (free undo), a resignation and an abandoned end (docs/lifecycle.md,
docs/undo.md).

Seats 0-3, turn limit 60 s, 2 timed-out turns put a seat out, undo `free`:

turn 1  seat 0 places (a meeple wherever it can)
turn 2  seat 1 places
        seat 2's turn times out (`TurnTimedOut`): seat 3 draws
turn 3  seat 3 places
turn 4  seat 0 places, then takes it back (`UndoRequested`, `TurnUndone`)
turn 5  seat 0 places the same tile again
        seat 1 resigns on its turn (`PlayerResigned`): seat 2 draws
        seat 2's turn times out again: `PlayerTimedOut`, it is out; seat 3 draws
turn 6  seat 3 places
turn 7  seat 0 places
        nobody moves: `GameAbandoned`
"""

from __future__ import annotations

from carcassonne.events import (
    AbandonGame,
    DrawTile,
    Event,
    PlayTurn,
    RequestUndo,
    Resign,
    StartGame,
    TimeOutTurn,
)
from carcassonne.game import actions, decide
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState

NOW = 1_800_000_000_000
TURN_MS = 60_000
# Tiles of the base set, drawn in this order (each fits somewhere on these small boards).
DRAWS = ["E", "U", "V", "B", "K", "D", "W", "L", "J", "T", "A", "C"]
TIMED_OUT_SEAT, UNDONE_TURN, RESIGNED_SEAT = 2, 4, 1


def _run(state: GameState, log: list[Event], command: object) -> None:
    for event in decide(state, command):  # type: ignore[arg-type]
        state.apply(event)
        log.append(event)


def lifecycle_game() -> tuple[GameState, list[Event]]:
    """The game above: its final state and its engine events."""
    state = GameState()
    log: list[Event] = []
    draws = iter(DRAWS)
    _run(state, log, StartGame(Ruleset(turn_seconds=60, max_timeouts=2, undo="free"), 4))

    def draw() -> None:
        _run(state, log, DrawTile(next(draws), NOW))

    def place() -> None:
        legal = actions(state)
        with_meeple = [a for a in legal if a[3] is not None]
        x, y, rotation, meeple = (with_meeple or legal)[0]
        _run(state, log, PlayTurn(state.current, x, y, rotation, meeple))

    def time_out() -> None:
        _run(state, log, TimeOutTurn(state.current, NOW + TURN_MS))

    draw()
    place()  # turn 1, seat 0
    draw()
    place()  # turn 2, seat 1
    draw()
    assert state.current == TIMED_OUT_SEAT
    time_out()
    draw()
    place()  # turn 3, seat 3
    draw()
    assert state.current == 0
    place()  # turn 4, seat 0: taken back
    _run(state, log, RequestUndo(0, NOW))
    place()  # turn 5, seat 0 again, the same tile
    draw()
    assert state.current == RESIGNED_SEAT
    _run(state, log, Resign(RESIGNED_SEAT))
    draw()
    assert state.current == TIMED_OUT_SEAT
    time_out()  # the second: out
    draw()
    assert state.current == 3
    place()  # turn 6, seat 3
    draw()
    place()  # turn 7, seat 0
    draw()
    _run(state, log, AbandonGame(30 * 86_400_000))
    assert state.abandoned and state.out == [None, "resigned", "timed_out", None]
    assert state.timeouts == [0, 0, 2, 0]
    return state, log
