"""The Redis Streams adapter of the `EventStore` port (used by every service)."""

from .keys import game_keys, hook_keys, hooks_key, lease_key, secrets_key
from .pending import add_pending, clear_scheduled, mark_pending, take_pending
from .store import RedisEventStore

__all__ = [
    "RedisEventStore",
    "add_pending",
    "clear_scheduled",
    "game_keys",
    "hook_keys",
    "hooks_key",
    "lease_key",
    "mark_pending",
    "secrets_key",
    "take_pending",
]
