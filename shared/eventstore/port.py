"""The `EventStore` port and its in-memory adapter.

Per game there are two streams: `moves` (written only by the command service) and `scores`
(written only by the scoring worker). An append is atomic and conditional: it checks the
expected sequence, skips a command id already appended (returning the first result), appends
all events, and sets a marker value (the move stream marks the game as having unscored moves;
the score stream saves the worker's progress) — all or nothing.

A consumer saving its progress makes the append conditional on the marker it started from
(`expected_marker`), and may append no events at all (moves that scored nothing still
advance the progress). Who is told of an append is the adapter's business, not the port's
(the Redis adapter adds an entry to a change feed in the same step).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from .envelope import STREAMS, AppendResult, NewEvent, StoredEvent
from .errors import CommandReused, ConcurrencyError, MarkerConflict, StoreError
from .schemas import known_schema, upcast, validate_payload

ANY = -1  # expected sequence that accepts any position


class EventStore(Protocol):
    """Where the events of games live."""

    def append(
        self,
        game_id: str,
        stream: str,
        events: Sequence[NewEvent],
        *,
        expected: int,
        command_id: str,
        marker: str | None = None,
        expected_marker: str | None = None,
        fingerprint: str = "",
        trace: str = "",
        after_command: str = "",
    ) -> AppendResult:
        """Append `events` if the stream is at `expected` (or `ANY`); idempotent by command id.

        `after_command` (with `expected` ≥ 1): the append also requires the event at
        `expected` to be that command's, else `ConcurrencyError`. A stream that lost its
        newest events to a failover and grew back to the same length with other commands'
        holds another history at that sequence; a state folded before the loss must not
        be played on (tests/integration/test_lost_suffix.py).

        `trace` (the id of the request that caused the append, or "") is passed on to whoever
        follows the appends, so their logs name it; it is not stored with the events.

        `fingerprint` (a digest of the request the command came from) is stored with the
        command id in the same step; a later append with the same command id and another
        non-empty fingerprint raises `CommandReused` (an idempotency key reused for a
        different request) instead of answering the first result.

        `marker` (a value, or "$seq" for the new last sequence) is stored in the game's
        marker for this stream in the same atomic step. With `expected_marker` the append
        also requires the marker to be that value ("" = no marker yet), else
        `MarkerConflict`.
        """

    def read(
        self, game_id: str, stream: str, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """Events with sequence > `after`, oldest first, upcast to current versions."""

    def last_seq(self, game_id: str, stream: str) -> int:
        """The sequence of the stream's last event (0 when empty)."""

    def marker(self, game_id: str, stream: str) -> str | None:
        """The stream's marker value, if any."""

    def command_result(self, game_id: str, stream: str, command_id: str) -> AppendResult | None:
        """Where a command id's events landed, if it was appended."""


# Whether every append runs each payload through its schema. Off in the services: what they
# append is the engine's (a property test holds it to the schemas: eventstore/schemas.py),
# and an imported record is checked before its append (services/command/imports.py), so a
# check here would cost 20-40 µs an event for nothing. On in the test suite (tests/conftest.py
# sets it for every process the tests start), where an event the schemas refuse fails the test.
CHECK_PAYLOADS = os.environ.get("EVENTSTORE_CHECK_PAYLOADS") == "1"


def check_append(
    stream: str, events: Sequence[NewEvent], command_id: str, marker: str | None = None
) -> None:
    """Refuse an append that could never be valid: unknown stream, no id, an event type and
    version without a schema, a payload that is not an object (each payload against its
    schema, too, where `CHECK_PAYLOADS` is on)."""
    if stream not in STREAMS:
        raise StoreError(f"unknown stream {stream!r}")
    if not command_id:
        raise StoreError("an append needs a command id")
    if not events and marker is None:
        raise StoreError("an append needs at least one event (or a marker to save)")
    check = validate_payload if CHECK_PAYLOADS else known_schema
    for event in events:
        check(event.type, event.version, event.payload)


def check_fingerprint(command_id: str, stored: str, given: str) -> None:
    """Raise `CommandReused` when a seen command id came from another request (both
    fingerprints known and different); an unknown one on either side is not a mismatch."""
    if stored and given and stored != given:
        raise CommandReused(command_id, stored, given)


class InMemoryEventStore:
    """An `EventStore` in a dict, for unit tests and the engine-only demo."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, str], list[StoredEvent]] = {}
        self._commands: dict[tuple[str, str, str], AppendResult] = {}
        self._markers: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def append(
        self,
        game_id: str,
        stream: str,
        events: Sequence[NewEvent],
        *,
        expected: int,
        command_id: str,
        marker: str | None = None,
        expected_marker: str | None = None,
        fingerprint: str = "",
        trace: str = "",
        after_command: str = "",
    ) -> AppendResult:
        """See `EventStore.append` (nobody follows this store: `trace` is dropped)."""
        check_append(stream, events, command_id, marker)
        with self._lock:
            seen = self._commands.get((game_id, stream, command_id))
            if seen is not None:
                check_fingerprint(command_id, seen.fingerprint, fingerprint)
                return AppendResult(
                    seen.first_seq, seen.last_seq, duplicate=True, fingerprint=seen.fingerprint
                )
            log = self._streams.setdefault((game_id, stream), [])
            if expected != ANY and expected != len(log):
                raise ConcurrencyError(expected, len(log))
            if after_command and expected > 0 and log[expected - 1].command_id != after_command:
                raise ConcurrencyError(expected, len(log))
            current_marker = self._markers.get((game_id, stream), "")
            if expected_marker is not None and expected_marker != current_marker:
                raise MarkerConflict(expected_marker, current_marker)
            now = int(time.time() * 1000)
            first = len(log) + 1
            for event in events:
                log.append(
                    StoredEvent(
                        game_id,
                        stream,
                        len(log) + 1,
                        event.type,
                        event.version,
                        now,
                        command_id,
                        dict(event.payload),
                    )
                )
            result = AppendResult(first, len(log), time_ms=now)
            self._commands[(game_id, stream, command_id)] = AppendResult(
                first, len(log), False, now, fingerprint=fingerprint
            )
            if marker is not None:
                self._markers[(game_id, stream)] = str(len(log)) if marker == "$seq" else marker
            return result

    def read(
        self, game_id: str, stream: str, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """See `EventStore.read`."""
        log = self._streams.get((game_id, stream), [])
        chosen = log[max(0, after) :]
        if limit is not None:
            chosen = chosen[:limit]
        return [upcast(e) for e in chosen]

    def last_seq(self, game_id: str, stream: str) -> int:
        """See `EventStore.last_seq`."""
        return len(self._streams.get((game_id, stream), []))

    def marker(self, game_id: str, stream: str) -> str | None:
        """See `EventStore.marker`."""
        return self._markers.get((game_id, stream))

    def command_result(self, game_id: str, stream: str, command_id: str) -> AppendResult | None:
        """See `EventStore.command_result`."""
        seen = self._commands.get((game_id, stream, command_id))
        if seen is None:
            return None
        return AppendResult(seen.first_seq, seen.last_seq, True, fingerprint=seen.fingerprint)

    def put_raw(self, event: StoredEvent) -> None:
        """Store an event as written by an older version (for upcaster tests)."""
        log = self._streams.setdefault((event.game_id, event.stream), [])
        log.append(event)
