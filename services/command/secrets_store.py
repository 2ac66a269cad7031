"""Per-game secrets in Redis, under the game's hash tag: ``{g:<id>}:secrets``."""

from __future__ import annotations

import json
from typing import Any

import redis

from services.redis_store import secrets_key


class RedisSecrets:
    """`Secrets` in a Redis string per game."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @staticmethod
    def key(game_id: str) -> str:
        """The key of a game's secrets."""
        return secrets_key(game_id)

    def put(self, game_id: str, data: dict[str, Any]) -> None:
        """See `Secrets.put`."""
        self.client.set(self.key(game_id), json.dumps(data))

    def put_new(self, game_id: str, data: dict[str, Any]) -> bool:
        """See `Secrets.put_new` (SET NX: atomic, so two racing requests cannot both win)."""
        return bool(self.client.set(self.key(game_id), json.dumps(data), nx=True))

    def get(self, game_id: str) -> dict[str, Any] | None:
        """See `Secrets.get`."""
        raw = self.client.get(self.key(game_id))
        return None if raw is None else dict(json.loads(raw))
