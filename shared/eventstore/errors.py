"""Event-store errors."""

from __future__ import annotations


class StoreError(Exception):
    """Base class of event-store errors."""


class ConcurrencyError(StoreError):
    """The stream moved on: it is at `actual`, the append expected `expected`."""

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"expected sequence {expected}, stream is at {actual}")
        self.expected = expected
        self.actual = actual


class MarkerConflict(ConcurrencyError):
    """The stream's marker is not the one the append expected (another consumer moved on)."""

    def __init__(self, expected: str, actual: str) -> None:
        StoreError.__init__(self, f"expected marker {expected!r}, found {actual!r}")
        self.expected_marker = expected
        self.actual_marker = actual
        self.expected = self.actual = -1


class CommandReused(StoreError):
    """A command id already appended with a different request fingerprint: an idempotency
    key reused for another request (nothing was appended)."""

    def __init__(self, command_id: str, stored: str, given: str) -> None:
        super().__init__(f"command id {command_id!r} was used for a different request")
        self.command_id = command_id
        self.stored_fingerprint = stored
        self.given_fingerprint = given


class SchemaError(StoreError):
    """A payload that does not match its event type's schema."""
