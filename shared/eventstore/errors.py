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


class GameArchived(ConcurrencyError):
    """The game was moved to the archive (its tombstone is in the store): an append that
    would start its stream again is refused, so a finished game never gets a second life in
    the hot store beside its archived copy (nothing was appended). A `ConcurrencyError`
    (its stream is at 0, not where the append expected): a writer that catches up on a
    conflict reads the game again and finds it archived."""

    def __init__(self, game_id: str, expected: int) -> None:
        StoreError.__init__(self, f"game {game_id} is archived")
        self.game_id = game_id
        self.expected = expected
        self.actual = 0


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
