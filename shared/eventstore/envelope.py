"""Stored events: the envelope every event carries in a stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MOVES, SCORES = "moves", "scores"
STREAMS = (MOVES, SCORES)


@dataclass(frozen=True)
class NewEvent:
    """An event about to be appended: its type, schema version and JSON payload."""

    type: str
    version: int
    payload: dict[str, Any]


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored: envelope fields plus the payload (already upcast on read)."""

    game_id: str
    stream: str
    seq: int  # 1-based position in its stream
    type: str
    version: int
    time_ms: int
    command_id: str
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The envelope as JSON."""
        return {
            "game_id": self.game_id,
            "stream": self.stream,
            "seq": self.seq,
            "type": self.type,
            "version": self.version,
            "time_ms": self.time_ms,
            "command_id": self.command_id,
            "payload": self.payload,
        }


@dataclass(frozen=True)
class AppendResult:
    """Where a command's events landed; `duplicate` when the command id was seen before."""

    first_seq: int
    last_seq: int
    duplicate: bool = False
    time_ms: int = 0  # the events' time (0 for a duplicate)
    fingerprint: str = ""  # the request fingerprint stored with the command id ("" = none)
