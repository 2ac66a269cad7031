"""A private redis-server for tests and benchmarks: its own free port and directory, so it
never touches the machine's own Redis (one already listens on 6379 here)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

from deploy.local.host import free_port, redis_server_binary  # the ones `make run` uses
from services.redis_store.acl import new_passwords, server_version, with_user, write_acl

__all__ = ["acl_redis", "free_port", "private_redis", "start_redis"]


def start_redis(
    args: Sequence[str] = (), probe: Callable[[str], str] = str, binary: str | None = None
) -> tuple[subprocess.Popen[bytes], str, str]:
    """Start one without persistence (and `args`); returns (process, URL of db 0, its
    directory). `probe`: the URL it is PINGed at until it answers (credentials added);
    `binary`: another redis-server than `make run`'s."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="cc-redis-")
    proc = subprocess.Popen(
        [binary or redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", workdir, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(probe(url))
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


@contextmanager
def acl_redis(binary: str | None = None) -> Iterator[dict[str, str]]:
    """A private redis-server (`make run`'s, or `binary`) with the suite's Redis users
    (services/redis_store/acl.py; the default user off): each role's URL of db 0, and
    "broker" the broker's of db 1."""
    binary = binary or redis_server_binary()
    passwords = new_passwords()
    acl_dir = Path(tempfile.mkdtemp(prefix="cc-acl-"))
    acl = write_acl(acl_dir, passwords, server_version(binary))
    proc, url, workdir = start_redis(
        ["--aclfile", str(acl)], lambda u: with_user(u, "admin", passwords["admin"]), binary
    )
    urls = {role: with_user(url, role, password) for role, password in passwords.items()}
    urls["broker"] = urls["broker"].rsplit("/", 1)[0] + "/1"
    try:
        yield urls
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(acl_dir, ignore_errors=True)
