"""Small helpers for the rule tests: build boards from compact notation.

`state_after(turns)` replays the turns of a record written in notation and returns the
state *before* final scoring (the trailing `GameEnded` is dropped), optionally with a tile
drawn for the next player, so that legal-move queries (`placements`, `meeple_spots`,
`actions`) can be asked mid-game. Header options (`opts`) are written as in the notation:
``"meeples=1 area=3x3 unplaceable=return"``.
"""

from __future__ import annotations

import pytest

from carcassonne.errors import GameError, RecordError
from carcassonne.events import Command, DrawTile, Event, GameEnded, StartGame
from carcassonne.game import decide, fold
from carcassonne.notation import parse_record
from carcassonne.record import Record, record_events, replay
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState


def record(turns: str, players: int = 2, farmers: str = "on", opts: str = "",
           tileset: str = "base") -> Record:  # fmt: skip
    """A record from its turns in notation."""
    head = (
        f"carcassonne-record/1 {tileset} players={players} farmers={farmers} farm=3rd"
        f" incomplete=on {opts}"
    )
    return parse_record(head.strip() + "\n" + turns + "\n")


def state_after(turns: str, draw: str | None = None, players: int = 2, farmers: str = "on",
                opts: str = "", tileset: str = "base") -> GameState:  # fmt: skip
    """The state after `turns`, before final scoring; then `draw` drawn if given."""
    events = record_events(record(turns, players, farmers, opts, tileset))
    if isinstance(events[-1], GameEnded):
        events = events[:-1]
    state = fold(events)
    if draw is not None:
        run(state, DrawTile(draw))
    return state


def final_state(turns: str, players: int = 2, farmers: str = "on", opts: str = "") -> GameState:
    """The state after the whole record, final scoring included."""
    return replay(record(turns, players, farmers, opts))


def record_error(turns: str, players: int = 2, farmers: str = "on",
                 opts: str = "") -> RecordError:  # fmt: skip
    """The `RecordError` raised by replaying the record (the test fails if none is raised)."""
    with pytest.raises(RecordError) as info:
        replay(record(turns, players, farmers, opts))
    return info.value


def run(state: GameState, command: Command) -> list[Event]:
    """Decide `command` and apply its events to `state` (in place)."""
    events = decide(state, command)
    for event in events:
        state.apply(event)
    return events


def fresh(players: int = 2, ruleset: Ruleset | None = None, draw: str | None = None) -> GameState:
    """A started game with only the start tile on the table; then `draw` drawn if given."""
    state = GameState()
    run(state, StartGame(ruleset or Ruleset(), players))
    if draw is not None:
        run(state, DrawTile(draw))
    return state


def refused(state: GameState, command: Command) -> GameError:
    """The error `decide` raises for `command` (the test fails if it is accepted)."""
    with pytest.raises(GameError) as info:
        decide(state, command)
    return info.value
