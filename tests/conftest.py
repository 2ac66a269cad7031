"""Shared fixtures: a private redis-server on a free port (never the machine's own Redis)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.redis_server import private_redis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a redis-server started for this test session, on its own port and directory."""
    with private_redis() as url:
        yield url


@pytest.fixture
def redis_client(redis_url: str) -> redis.Redis:
    """A client of the session's private Redis."""
    return redis.Redis.from_url(redis_url)
