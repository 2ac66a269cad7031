"""A Lua script torn in the append-only file is never half applied (deploy/local/aof.py).

Each case makes a real AOF with a real redis-server (make run's, and the machine's own when it
is another version: Redis 7 keeps a manifest and several files), tears its last script's
MULTI block as a kill in the middle of the write does, and restarts Redis twice, with a new
script in between."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from deploy.local.aof import aof_of
from deploy.local.cluster import AOF_REPAIR
from deploy.local.host import free_port, redis_server_binary
from services.redis_store.acl import server_version

pytestmark = pytest.mark.integration


def _binaries() -> list[str]:
    """make run's redis-server, and the machine's when it is another version."""
    ours, system = redis_server_binary(), shutil.which("redis-server")
    if system and server_version(system) != server_version(ours):
        return [ours, system]
    return [ours]


@pytest.fixture(params=_binaries(), ids=lambda b: ".".join(map(str, server_version(b))))
def binary(request) -> str:
    return request.param


class Server:
    """One redis-server with an AOF (fsync always) in `directory`, started and stopped again
    and again, bare or through deploy.local.aof."""

    def __init__(self, binary: str, directory: Path, wrapped: bool, *args: str) -> None:
        self.binary, self.directory, self.wrapped, self.args = binary, directory, wrapped, args
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> redis.Redis:
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            str(self.directory),
            *self.args,
        ]
        argv = [sys.executable, str(AOF_REPAIR), *argv] if self.wrapped else argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client = redis.Redis(port=self.port, decode_responses=True)
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                return client
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: {self.stop()}") from None
                time.sleep(0.02)

    def stop(self) -> str:
        """Shut it down (the AOF fsynced); its stderr (the wrapper's report)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            redis.Redis(port=self.port).shutdown(nosave=True)
        _, err = self.proc.communicate(timeout=15)
        return err.decode()


@pytest.fixture
def servers(tmp_path) -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)


SCRIPT = "for i, key in ipairs(KEYS) do redis.call('SET', key, ARGV[1]) end"


def torn_aof(server: Server) -> Path:
    """An AOF whose last write is a three-key script cut in the middle of its third SET (the
    file as a kill mid-write leaves it); returns the file that was cut."""
    client = server.start()
    client.set("before", "1")
    client.eval(SCRIPT, 3, "torn:a", "torn:b", "torn:c", "x")
    server.stop()
    aof = aof_of(server.directory)
    assert aof is not None
    files = sorted((server.directory / "appendonlydir").glob("*.incr.aof")) or [aof]
    last = files[-1]
    data = last.read_bytes()
    third = data.rindex(b"torn:c")
    last.write_bytes(data[: third + 3])  # ends in the middle of "torn:c"
    return last


def restart_twice(server: Server) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Start on the torn file, run a new script, stop; start again. The keys each start saw,
    and what the first start said on stderr (the wrapper's report)."""
    keys = ["before", "torn:a", "torn:b", "torn:c", "after:a", "after:b"]
    client = server.start()
    first = dict(zip(keys, client.mget(keys), strict=True))
    client.eval(SCRIPT, 2, "after:a", "after:b", "y")
    report = server.stop()
    client = server.start()
    second = dict(zip(keys, client.mget(keys), strict=True))
    server.stop()
    return first, second, report


WHOLE = {"before": "1", "torn:a": None, "torn:b": None, "torn:c": None}


def test_bare_redis_half_applies_a_torn_script_at_the_second_restart(
    binary, tmp_path, servers
) -> None:
    """Why deploy/local/aof.py exists: Redis alone drops the torn script at the first start
    and applies two of its three writes at the next. (When a redis-server here stops doing
    this, the wrapper can go.)"""
    server = Server(binary, tmp_path, wrapped=False)
    servers.append(server)
    torn_aof(server)
    first, second, _ = restart_twice(server)
    assert first == {**WHOLE, "after:a": None, "after:b": None}
    assert second == {**WHOLE, "torn:a": "x", "torn:b": "x", "after:a": "y", "after:b": "y"}


def test_the_wrapper_cuts_the_torn_script_and_every_start_sees_it_whole(
    binary, tmp_path, servers
) -> None:
    server = Server(binary, tmp_path, wrapped=True)
    servers.append(server)
    last = torn_aof(server)
    size = last.stat().st_size
    first, second, report = restart_twice(server)
    assert first == {**WHOLE, "after:a": None, "after:b": None}
    assert second == {**WHOLE, "after:a": "y", "after:b": "y"}
    assert "torn MULTI block" in report, report
    cut = int(report.split("cut ")[1].split(" bytes")[0])
    assert 0 < cut < size


def test_damage_before_the_end_is_left_to_redis(binary, tmp_path, servers) -> None:
    """A file broken in its middle (a complete script after the damage) is not the wrapper's
    to cut: cutting there would drop acknowledged writes. It leaves every byte, and Redis
    refuses to start as it would without it."""
    server = Server(binary, tmp_path, wrapped=True)
    servers.append(server)
    client = server.start()
    client.eval(SCRIPT, 2, "one:a", "one:b", "x")
    client.eval(SCRIPT, 2, "two:a", "two:b", "x")
    server.stop()
    aof = aof_of(server.directory)
    assert aof is not None
    last = (sorted((server.directory / "appendonlydir").glob("*.incr.aof")) or [aof])[-1]
    data = last.read_bytes()
    broken = data.replace(b"one:b", b"one:bbbbb", 1)  # a length prefix that no longer fits
    last.write_bytes(broken)
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    assert last.read_bytes() == broken


def test_a_whole_file_is_not_touched(binary, tmp_path, servers) -> None:
    server = Server(binary, tmp_path, wrapped=True)
    servers.append(server)
    client = server.start()
    client.eval(SCRIPT, 2, "k:a", "k:b", "x")
    server.stop()
    aof = aof_of(server.directory)
    assert aof is not None
    before = {p: p.read_bytes() for p in server.directory.rglob("*.aof")}
    client = server.start()
    assert client.mget(["k:a", "k:b"]) == ["x", "x"]
    assert server.stop() == ""
    assert {p: p.read_bytes() for p in before} == before


def test_docker_composes_redis_refuses_a_torn_file_until_redis_check_aof_cuts_it(
    binary, tmp_path, servers
) -> None:
    """docker-compose's Redis (no wrapper in its image) runs with `aof-load-truncated no`: it
    refuses to start on a torn file instead of half applying it later, and deploy/README's
    step, `redis-check-aof --fix` answered yes, cuts the block whole."""
    server = Server(binary, tmp_path, False, "--aof-load-truncated", "no")
    servers.append(server)
    torn_aof(server)
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    aof = aof_of(tmp_path)
    assert aof is not None
    subprocess.run(["redis-check-aof", "--fix", str(aof)], executable=binary, input=b"y\n",
                   capture_output=True, timeout=60, check=True)  # fmt: skip
    first, second, _ = restart_twice(server)
    assert first == {**WHOLE, "after:a": None, "after:b": None}
    assert second == {**WHOLE, "after:a": "y", "after:b": "y"}
