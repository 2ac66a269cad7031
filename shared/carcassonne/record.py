"""Game records (`carcassonne-record/1`): the public interchange format.

A record holds the ruleset, the player count, the start tile and the turns, each a placed
tile (with an optional meeple) or a discard. Reading a record checks its shape; replaying
it checks every turn against the rules and reports the first illegal one by index.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from .errors import GameError, MalformedError, RecordError
from .events import (
    DiscardTile,
    DrawTile,
    EndGame,
    Event,
    GameStarted,
    PlayTurn,
    StartGame,
    TileDiscarded,
    TilePlaced,
    TileReturned,
    meeple_from_dict,
    meeple_to_dict,
)
from .game import decide
from .ruleset import Ruleset
from .scoring import ranks
from .state import OVER, GameState
from .tiles import Meeple

FORMAT = "carcassonne-record/1"
MAX_TURNS = 1_000  # far more than any tile set holds; bounds the work a record can ask for


@dataclass(frozen=True)
class Turn:
    """One turn of a record: a tile placed (with an optional meeple), or discarded (R4.4)."""

    tile: str
    x: int = 0
    y: int = 0
    rotation: int = 0
    meeple: Meeple | None = None
    discard: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The turn as JSON."""
        if self.discard:
            return {"tile": self.tile, "discard": True}
        return {
            "tile": self.tile,
            "x": self.x,
            "y": self.y,
            "rotation": self.rotation,
            "meeple": meeple_to_dict(self.meeple),
        }


@dataclass(frozen=True)
class Record:
    """A whole game: ruleset, players and turns (the start tile is fixed by R2.1)."""

    ruleset: Ruleset
    players: int
    turns: tuple[Turn, ...]

    def to_dict(self) -> dict[str, Any]:
        """The record as `carcassonne-record/1` JSON."""
        return {
            "format": FORMAT,
            "ruleset": self.ruleset.to_dict(),
            "players": self.players,
            "start": {"tile": self.ruleset.tiles.start, "x": 0, "y": 0, "rotation": 0},
            "turns": [t.to_dict() for t in self.turns],
        }


def _int(data: dict[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if type(value) is not int or not low <= value <= high:
        raise MalformedError("bad_turn", f"{key} must be an integer from {low} to {high}")
    return value


def turn_from_dict(data: Any) -> Turn:
    """Read one turn (shape only; legality is checked on replay)."""
    if not isinstance(data, dict):
        raise MalformedError("bad_turn", "a turn must be an object")
    tile = data.get("tile")
    if not isinstance(tile, str):
        raise MalformedError("bad_turn", "a turn needs a tile name")
    if data.get("discard", False) is True:
        if set(data) != {"tile", "discard"}:
            raise MalformedError("bad_turn", "a discard turn has only tile and discard")
        return Turn(tile, discard=True)
    extra = set(data) - {"tile", "x", "y", "rotation", "meeple", "discard"}
    if extra or data.get("discard", False) is not False:
        raise MalformedError("bad_turn", f"unexpected keys in a turn: {sorted(extra)}")
    return Turn(
        tile,
        _int(data, "x", -10_000, 10_000),
        _int(data, "y", -10_000, 10_000),
        _int(data, "rotation", 0, 3),
        meeple_from_dict(data.get("meeple")),
    )


def load_record(data: Any) -> Record:
    """Read a record from its JSON value; a bad field raises `RecordError` (index of the turn)."""
    try:
        if not isinstance(data, dict):
            raise MalformedError("bad_record", "a record must be a JSON object")
        if data.get("format") != FORMAT:
            raise MalformedError("bad_format", f"format must be {FORMAT!r}")
        extra = set(data) - {"format", "ruleset", "players", "start", "turns"}
        if extra:
            raise MalformedError("bad_record", f"unknown record keys: {sorted(extra)}")
        ruleset = Ruleset.from_dict(data.get("ruleset", {}))
        players = data.get("players")
        if type(players) is not int or not 2 <= players <= 6:
            raise MalformedError("bad_players", "players must be an integer from 2 to 6", "R1.3")
        start = data.get("start", {"tile": ruleset.tiles.start, "x": 0, "y": 0, "rotation": 0})
        if start != {"tile": ruleset.tiles.start, "x": 0, "y": 0, "rotation": 0}:
            raise MalformedError(
                "bad_start", f"the start tile is {ruleset.tiles.start} at 0,0 unrotated", "R2.1"
            )
        turns = data.get("turns")
        if not isinstance(turns, list):
            raise MalformedError("bad_record", "turns must be a list")
        if len(turns) > MAX_TURNS:
            raise MalformedError("too_many_turns", f"a record holds at most {MAX_TURNS} turns")
    except GameError as exc:
        raise RecordError(None, exc) from exc
    parsed = []
    for index, turn in enumerate(turns):
        try:
            parsed.append(turn_from_dict(turn))
        except GameError as exc:
            # The first bad turn is the one reported: an earlier illegal turn wins.
            record_events(Record(ruleset, players, tuple(parsed)))
            raise RecordError(index, exc) from exc
    return Record(ruleset, players, tuple(parsed))


class Step(NamedTuple):
    """One step of a record's replay: the start, a turn, or the closing `EndGame`."""

    turn: int | None  # index of the record turn (None: the start, or the end when turns ran out)
    player: int | None  # whose turn it was (None for the start and the end)
    events: list[Event]  # what the step appended


def play_record(record: Record, state: GameState) -> Iterator[Step]:
    """Replay `record` on a fresh `state`, a step at a time, each turn checked by `decide`.

    `state` stands after each step when it is yielded; `RecordError` names the first bad turn.
    """

    def run(command: Any) -> list[Event]:
        events = decide(state, command)
        for event in events:
            state.apply(event)
        return events

    try:
        started = run(StartGame(record.ruleset, record.players))
    except GameError as exc:
        raise RecordError(None, exc) from exc
    yield Step(None, None, started)
    for index, turn in enumerate(record.turns):
        player = state.current
        try:
            events = run(DrawTile(turn.tile))
            if turn.discard:
                events += run(DiscardTile(player))
            else:
                events += run(PlayTurn(player, turn.x, turn.y, turn.rotation, turn.meeple))
        except GameError as exc:
            raise RecordError(index, exc) from exc
        yield Step(index, player, events)
    if state.phase != OVER:
        yield Step(None, None, run(EndGame()))


def record_events(record: Record) -> list[Event]:
    """Every event of the recorded game, each turn checked (`RecordError` on the first bad one)."""
    return [event for step in play_record(record, GameState()) for event in step.events]


def replay(record: Record) -> GameState:
    """The final state of a recorded game (every turn checked)."""
    state = GameState()
    for _ in play_record(record, state):
        pass
    return state


def score_report(state: GameState) -> dict[str, Any]:
    """Final scores, scores before final scoring, ranks, winners and every explanation."""
    rank, winners = ranks(state.scores)
    return {
        "final_scores": list(state.scores),
        "scores_before_final": list(state.scores_before_final or state.scores),
        "ranks": list(rank),
        "winners": list(winners),
        "events": [s.to_dict() for s in state.log],
    }


def score_record(record: Record) -> dict[str, Any]:
    """Score a record: what `carcassonne score` prints."""
    return score_report(replay(record))


def record_from_events(events: Iterable[Event]) -> Record:
    """The record of a game from its events (for export and replay elsewhere)."""
    ruleset, players, turns = Ruleset(), 2, []
    for event in events:
        match event:
            case GameStarted():
                ruleset, players = event.ruleset, event.players
            case TilePlaced():
                turns.append(Turn(event.tile, event.x, event.y, event.rotation, event.meeple))
            case TileDiscarded() | TileReturned():
                turns.append(Turn(event.tile, discard=True))
    return Record(ruleset, players, tuple(turns))
