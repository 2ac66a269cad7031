"""The Redis Streams adapter of the `EventStore` port (used by every service)."""

from .keys import game_keys, hook_keys, hooks_key, lease_key, secrets_key
from .store import RedisEventStore

__all__ = [
    "RedisEventStore",
    "game_keys",
    "hook_keys",
    "hooks_key",
    "lease_key",
    "secrets_key",
]
