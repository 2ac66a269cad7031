"""The engine driven by hand in unit tests: commands decided and applied one at a time, and a
game started with its first tile drawn (the `E` tile, at a fixed time: the engine reads no
clock)."""

from __future__ import annotations

from carcassonne.events import DrawTile, Event, StartGame
from carcassonne.game import decide
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState

NOW = 1_800_000_000_000  # Unix ms of every draw these tests make unless they say otherwise


def run(state: GameState, command: object) -> list[Event]:
    """Decide `command` on `state` and apply its events; the events."""
    events = decide(state, command)  # type: ignore[arg-type]
    for event in events:
        state.apply(event)
    return events


def started(players: int = 2, **rules: object) -> tuple[GameState, list[Event]]:
    """A game of `players` under `rules`, its first tile (`E`) drawn at `NOW`; its log."""
    state = GameState()
    log = run(state, StartGame(Ruleset(**rules), players))  # type: ignore[arg-type]
    log += run(state, DrawTile("E", NOW))
    return state, log
