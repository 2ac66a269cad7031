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


class SchemaError(StoreError):
    """A payload that does not match its event type's schema."""
