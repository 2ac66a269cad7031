"""Game records from third parties: read a request body safely, replay and score it turn by
turn, and turn it into the events of a stored game.

Pure functions of the bytes they are given (no Redis, no Flask): the integration blueprint,
the tests and the benchmark call them alike. Every turn is checked by the engine's own
replay (`carcassonne.record.play_record`), in one pass that also keeps the score timeline
(a second replay would double the cost of `POST /v1/score`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from carcassonne.errors import GameError, RecordError
from carcassonne.events import Event, GameEnded, TurnUndone
from carcassonne.explain import explain
from carcassonne.notation import parse_record
from carcassonne.record import FORMAT, Record, Turn, load_record, play_record
from carcassonne.scoring import ranks
from carcassonne.state import OVER, GameState
from services.common.body import (
    MAX_DEPTH,
    BodyError,
    UnsupportedMediaType,
    check_depth,
    is_json,
    parse_json,
)

__all__ = [  # the body helpers were born here; tests and callers still import them from here
    "MAX_DEPTH",
    "BodyError",
    "check_depth",
    "check_record_type",
    "parse_json",
    "read_record",
]

NOTATION_TYPES = ("text/plain", "text/x-carcassonne-record")
RECORD_TYPES = "application/json or text/plain (the notation)"


def check_record_type(mimetype: str) -> None:
    """`UnsupportedMediaType` unless `mimetype` is JSON or the notation's text type."""
    if mimetype not in NOTATION_TYPES and not is_json(mimetype):
        raise UnsupportedMediaType(
            "unsupported_media_type",
            f"a record is sent as {RECORD_TYPES} (got {mimetype[:100] or 'no Content-Type'})",
            None,
            expected=RECORD_TYPES,
            got=mimetype[:100] or None,
        )


def read_record(
    raw: bytes, mimetype: str, extra: tuple[str, ...] = ()
) -> tuple[Record, dict[str, Any]]:
    """A record from a request body (JSON, or the notation as text/plain), and the values of
    the `extra` top-level keys the caller allows beside the record's own (e.g. "names").
    Any other `mimetype` (or none) is `UnsupportedMediaType`; a JSON value that is not an
    object is `bad_record` (R-less, 422), like any malformed record."""
    if mimetype in NOTATION_TYPES:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError("invalid_notation", "the request body is not UTF-8 text") from None
        try:
            return parse_record(text), {}
        except GameError as exc:
            raise RecordError(None, exc) from exc
    check_record_type(mimetype)
    data = parse_json(raw)
    found: dict[str, Any] = {}
    if isinstance(data, dict) and extra:
        data = dict(data)
        found = {key: data.pop(key) for key in extra if key in data}
    return load_record(data), found


@dataclass
class Replayed:
    """A checked record: its events, final state, and what each turn did to the scores."""

    record: Record
    events: list[Event] = field(default_factory=list)
    state: GameState = field(default_factory=GameState)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    caused_by: list[int | None] = field(default_factory=list)  # record turn of each score


def replay_record(record: Record) -> Replayed:
    """Replay every turn through the engine (`play_record`); `RecordError` names the first bad
    one. One pass gives the events, the final state and the score timeline."""
    out = Replayed(record)
    state = out.state
    for step in play_record(record, state):
        out.events += step.events
        # The turn that places the last tile also ends the game: its final scoring (R7) is
        # reported apart, so the timeline shows the scores of play (R6) only. An undo takes
        # back the scorings of the placement it undoes (the state's log is cut back).
        del out.caused_by[len(state.log) :]
        new = state.log[len(out.caused_by) :]
        out.caused_by += [None if s.final else step.turn for s in new]
        if step.turn is None:
            continue
        turn = record.turns[step.turn]
        scores = state.scores_before_final if state.phase == OVER else state.scores
        undone = next((e for e in step.events if isinstance(e, TurnUndone)), None)
        out.timeline.append(
            {
                "index": step.turn,
                "player": step.player,
                "tile": undone.tile
                if undone is not None
                else None
                if turn.resign is not None
                else turn.tile,
                "action": "undone" if undone is not None else _action(record, turn),
                "scores": list(scores or state.scores),
            }
        )
    return out


def _action(record: Record, turn: Turn) -> str:
    if turn.resign is not None:
        return "resigned"
    if turn.timeout:
        return "timed_out"
    if not turn.discard:
        return "placed"
    return "returned" if record.ruleset.unplaceable == "return" else "discarded"


def score_body(replayed: Replayed, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The answer of `POST /v1/score`: timeline, explained score events (the engine's
    `explain`, the same sentence as the CLI and `/scores`), final scoring, result."""
    record, state = replayed.record, replayed.state
    during: list[dict[str, Any]] = []
    final: list[dict[str, Any]] = []
    totals = [0] * record.players
    for scored, index in zip(state.log, replayed.caused_by, strict=True):
        totals = [t + a for t, a in zip(totals, scored.awarded, strict=True)]
        item = scored.to_dict()
        item.update(index=index, totals=totals, explanation=explain(scored, names))
        (final if scored.final else during).append(item)
    rank, winners = ranks(state.scores, [why is not None for why in state.out])
    ended = next((e.reason for e in reversed(replayed.events) if isinstance(e, GameEnded)), None)
    if state.abandoned:
        ended = "abandoned"
    return {
        "format": FORMAT,
        "players": record.players,
        "ruleset": record.ruleset.to_dict(),
        "turns": len(record.turns),
        "tiles_placed": state.turn,
        "ended": ended,
        "out": list(state.out),
        "taken_over": list(state.taken_over),
        "timeline": replayed.timeline,
        "events": during,
        "final_scoring": final,
        "scores_before_final": list(state.scores_before_final or state.scores),
        "final_scores": list(state.scores),
        "ranks": list(rank),
        "winners": list(winners),
    }


def player_names(value: Any, players: int) -> list[str]:
    """The names of an import (seat order), or "Player 1".."Player N" when none are given."""
    if value is None:
        return [f"Player {i + 1}" for i in range(players)]
    if (
        not isinstance(value, list)
        or len(value) != players
        or not all(isinstance(n, str) and 1 <= len(n.strip()) <= 40 for n in value)
    ):
        raise GameError(
            "bad_names",
            f"names must list {players} names of 1-40 characters, in seat order",
            "R1.3",
        )
    return [n.strip() for n in value]
