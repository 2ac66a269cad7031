"""The command service's Redis client: one per worker process, its pool sized to the process."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import redis

from services.redis_store.connect import shared_client


def command_client(config: Mapping[str, Any]) -> redis.Redis:
    """This process's client (game service, integration routes and notifier share it): one
    connection per request thread (GUNICORN_THREADS, 1 for sync workers) plus two, unless
    REDIS_MAX_CONNECTIONS says otherwise."""
    size = config["REDIS_MAX_CONNECTIONS"] or int(os.environ.get("GUNICORN_THREADS", "1")) + 2
    return shared_client(config["REDIS_URL"], role="command", max_connections=size)
