"""A game's NDJSON export (`GET /games/{id}/events?format=ndjson`) read back as a record.

Each line is one event of the game's merged log: ``{"game_id", "stream", "seq", "type",
"version", "payload", "cursor", …}``. The move stream's events (``"stream": "moves"``) are the
game; score events are the scoring worker's (derived from the moves) and are skipped. The
export must hold the whole game: its moves numbered 1, 2, 3… from `GameStarted` on, of one
game. A line that is not such an event is reported by its number (1-based).

Standard library only, like the rest of the engine: the services' schemas are not needed
because every move is replayed by the engine anyway when the record is scored.
"""

from __future__ import annotations

import json

from .errors import GameError, MalformedError
from .events import Event, GameStarted, event_from_dict
from .record import Record, record_from_events

ENVELOPE = ("stream", "seq", "type", "payload")


def looks_like_export(text: str) -> bool:
    """Whether `text` starts with a line that is an event of an export (not a record)."""
    first = text.lstrip().split("\n", 1)[0]
    try:
        data = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and all(key in data for key in ENVELOPE)


def _bad(line: int, message: str) -> MalformedError:
    return MalformedError("bad_export", f"line {line}: {message}")


def record_from_export(text: str) -> Record:
    """The record of the game an NDJSON export holds (names and player ids from its
    `GameStarted` when it carries them). `MalformedError` `bad_export` names the first bad
    line; the turns themselves are checked when the record is replayed."""
    events: list[Event] = []
    game_id, last = None, 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(number, f"not valid JSON ({exc.msg}, column {exc.colno})") from None
        except (RecursionError, ValueError):
            raise _bad(number, "JSON too deeply nested or a number too long") from None
        if not isinstance(data, dict) or not all(key in data for key in ENVELOPE):
            raise _bad(number, "not an event of an export (an object with stream, seq, type, "
                       "payload)")  # fmt: skip
        if game_id is not None and data.get("game_id") != game_id:
            raise _bad(number, "an event of another game")
        game_id = data.get("game_id")
        if data["stream"] != "moves":
            continue  # score events: derived from the moves, scored again here
        seq, payload = data["seq"], data["payload"]
        if type(seq) is not int or not isinstance(payload, dict):
            raise _bad(number, "seq must be an integer and payload an object")
        if seq != last + 1:
            if last == 0:
                raise _bad(number, f"the export starts at move {seq}: export the whole game "
                           "(without ?after= or limit)")  # fmt: skip
            raise _bad(number, f"move {seq} follows move {last}: moves are missing")
        last = seq
        payload = dict(payload)
        if data["type"] == "TilePlaced" and "rot" in payload:  # schema version 1
            payload["rotation"] = payload.pop("rot")
        try:
            event = event_from_dict({**payload, "type": data["type"]})
        except GameError as exc:
            raise _bad(number, exc.message) from None
        if (seq == 1) != isinstance(event, GameStarted):
            raise _bad(number, "a game's first move, and only it, is GameStarted")
        events.append(event)
    if not events:
        raise MalformedError("bad_export", "the export holds no moves")
    return record_from_events(events)  # names and ids: the GameStarted's own
