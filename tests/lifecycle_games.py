"""A short 3-player game with every lifecycle fact in its log, for the query views and the
viewer's browser tests: a timed-out turn, an undone placement (free undo), a resignation
and an abandoned end (docs/lifecycle.md, docs/undo.md).

Seats 0, 1, 2, turn limit 60 s (3 timeouts put a seat out), undo `free`:

turn 1  seat 0 places (a meeple where it can)
turn 2  seat 1 places
        seat 2's turn times out (`TurnTimedOut`): seat 0 draws next
turn 3  seat 0 places, then takes it back (`UndoRequested`, `TurnUndone`)
turn 4  seat 0 places the same tile again
        seat 1 resigns on its turn (`PlayerResigned`): seat 2 draws
turn 5  seat 2 places
turn 6  seat 0 places
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
DRAWS = ["E", "U", "V", "B", "K", "D", "W", "L", "J", "T"]
TIMED_OUT_SEAT, UNDONE_TURN, RESIGNED_SEAT = 2, 3, 1


def _run(state: GameState, log: list[Event], command: object) -> None:
    for event in decide(state, command):  # type: ignore[arg-type]
        state.apply(event)
        log.append(event)


def lifecycle_game() -> tuple[GameState, list[Event]]:
    """The game above: its final state and its engine events."""
    state = GameState()
    log: list[Event] = []
    draws = iter(DRAWS)
    _run(state, log, StartGame(Ruleset(turn_seconds=60, undo="free"), 3))

    def draw() -> None:
        _run(state, log, DrawTile(next(draws), NOW))

    def place() -> None:
        legal = actions(state)
        with_meeple = [a for a in legal if a[3] is not None]
        x, y, rotation, meeple = (with_meeple or legal)[0]
        _run(state, log, PlayTurn(state.current, x, y, rotation, meeple))

    draw()
    place()  # turn 1, seat 0
    draw()
    place()  # turn 2, seat 1
    draw()
    assert state.current == TIMED_OUT_SEAT
    _run(state, log, TimeOutTurn(TIMED_OUT_SEAT, NOW + TURN_MS))
    draw()
    assert state.current == 0
    place()  # turn 3, seat 0: taken back
    _run(state, log, RequestUndo(0, NOW))
    place()  # turn 4, seat 0 again, the same tile
    draw()
    assert state.current == RESIGNED_SEAT
    _run(state, log, Resign(RESIGNED_SEAT))
    draw()
    place()  # turn 5, seat 2
    draw()
    place()  # turn 6, seat 0
    draw()
    _run(state, log, AbandonGame(30 * 86_400_000))
    assert state.abandoned and state.out == [None, "resigned", None]
    assert state.timeouts == [0, 0, 1]
    return state, log
