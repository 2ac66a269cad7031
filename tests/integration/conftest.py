"""Every integration test is a contract test: each HTTP response it gets, from an app's test
client or a real server (`http_client.call`), is validated against docs/openapi.json."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from flask import Flask

from services.redis_store.changes import consumers, retire
from tests.integration import http_client
from tests.integration.http_client import gunicorn
from tests.integration.openapi_client import ValidatingClient
from tests.postgres_server import postgres_missing, private_postgres


@pytest.fixture(scope="package", autouse=True)
def contract_checked() -> Iterator[None]:
    """Package scope: in force before any fixture of these tests makes a client, and only
    for them (the unit tests keep Flask's own client)."""
    before = Flask.test_client_class, http_client.VALIDATE
    Flask.test_client_class = ValidatingClient
    http_client.VALIDATE = True
    yield
    Flask.test_client_class, http_client.VALIDATE = before


WORKER_CONSUMERS = {"directory", "timer", "scoring", "subscriptions", "bots", "archive", "ratings"}


@pytest.fixture
def own_consumers(redis_client: redis.Redis) -> Iterator[None]:
    """Retire, after the test, every change-feed consumer it registered on the session's
    Redis (its own test consumers; never the worker's): a stopped consumer left registered
    would hold the feed's trim back for every later test on this Redis."""
    before = consumers(redis_client)
    yield
    for name in consumers(redis_client) - before - WORKER_CONSUMERS:
        retire(redis_client, name)


@pytest.fixture(params=["sqlite", "postgres"])
def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty archive for each adapter of the suite: the embedded SQLite file, and a
    private PostgreSQL (tests/postgres_server.py; skipped with the reason when there is
    none and it cannot be installed)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'archive.sqlite3'}"
        return
    why = postgres_missing()
    if why:
        pytest.skip(why)
    with private_postgres() as server:
        yield server.url


@pytest.fixture(scope="module")
def two_commands(redis_url: str) -> Iterator[list[str]]:
    """Two command instances (two gunicorn masters of 2 workers) on the session's Redis: a
    lobby's or a queue's requests spread over both, as behind a proxy without affinity."""
    env = {"REDIS_URL": redis_url}
    config = "deploy/gunicorn/command.py"
    with (
        gunicorn("services.command.wsgi:app", config, env, workers=2) as one,
        gunicorn("services.command.wsgi:app", config, env, workers=2) as two,
    ):
        yield [one, two]
