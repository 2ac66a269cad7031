"""The Redis Streams adapter of the `EventStore` port (used by every service)."""

from .store import RedisEventStore, game_keys

__all__ = ["RedisEventStore", "game_keys"]
