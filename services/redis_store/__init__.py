"""The Redis Streams adapter of the `EventStore` port (used by every service)."""

from .pending import add_pending, clear_scheduled, mark_pending, take_pending
from .store import RedisEventStore, game_keys

__all__ = [
    "RedisEventStore",
    "add_pending",
    "clear_scheduled",
    "game_keys",
    "mark_pending",
    "take_pending",
]
