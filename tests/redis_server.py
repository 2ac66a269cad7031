"""A private redis-server for tests and benchmarks: its own free port and directory, so it
never touches the machine's own Redis (one already listens on 6379 here)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from deploy.local.host import free_port, redis_server_binary  # the ones `make run` uses

__all__ = ["free_port", "private_redis", "start_redis"]


def start_redis() -> tuple[subprocess.Popen[bytes], str, str]:
    """Start one without persistence; returns (process, URL of db 0, its directory)."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="cc-redis-")
    proc = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return proc, url, workdir
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("a private redis-server did not start") from None
            time.sleep(0.05)


@contextmanager
def private_redis() -> Iterator[str]:
    """A private redis-server for a `with` block (a fixture's life): its URL; stopped and its
    directory removed afterwards."""
    proc, url, workdir = start_redis()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
