"""`make run-cluster` (deploy/local/run.py --cluster): a 3-primary Redis Cluster, a broker, 2
command and 2 query instances behind nginx, 2 worker processes and beat, started by the command
line on free ports in a directory of its own; `make demo` plays a game against it, scored and
shown by the query service; SIGTERM stops everything. (Slow: ~30 s.)"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from deploy.local import run
from tests.nginx import find_nginx
from tools import demo

RUN_PY = run.ROOT / "deploy" / "local" / "run.py"


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(rng: random.Random) -> int:
    """A first port p with p…p+3 (3 primaries and the broker) and p+10000…p+10002 (their
    cluster bus) free."""
    for _ in range(200):
        first = rng.randrange(20000, 30000)
        wanted = [first + i for i in range(4)] + [first + 10000 + i for i in range(3)]
        if all(_free(p) for p in wanted):
            return first
    raise RuntimeError("no free run of ports for a cluster")


def _two_free_ports() -> tuple[int, int]:
    ports: list[int] = []
    while len(ports) < 2:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in ports:
            ports.append(port)
    return ports[0], ports[1]


def test_run_cluster_starts_plays_a_demo_game_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if find_nginx()[0] is None:
        pytest.skip(find_nginx()[1])
    redis_port = cluster_ports(random.Random(os.getpid()))
    command_port, query_port = _two_free_ports()
    argv = [
        sys.executable, str(RUN_PY), "--cluster", "--var", str(tmp_path / "var"),
        "--redis-port", str(redis_port), "--command-port", str(command_port),
        "--query-port", str(query_port), "--web-concurrency", "1", "--concurrency", "2",
        "--sweep-seconds", "1", "--timeout", "60",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    lines: list[str] = []
    healthy = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append(raw.decode(errors="replace").rstrip())
            if "all healthy" in lines[-1]:
                healthy.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 75
        while not healthy.wait(0.2):
            assert proc.poll() is None, "\n".join(lines)
            assert time.monotonic() < deadline, "\n".join(lines)
        out = "\n".join(lines)
        for part in ("redis-1", "redis-3", "broker", "command-2", "query-2", "worker-2", "beat"):
            assert f"  {part} " in out, out
        assert "redis+cluster://" in out and "cluster  created" in out, out
        # nginx started after every instance behind it was healthy: it never found one
        # refusing connections (which marks it failed for 5 s: 502 "no live upstreams").
        proxy_log = (tmp_path / "var" / "log" / "nginx.log").read_text()
        assert "connect() failed" not in proxy_log, proxy_log
        capsys.readouterr()
        code = demo.main(
            [
                f"--command-url=http://127.0.0.1:{command_port}",
                f"--query-url=http://127.0.0.1:{query_port}",
                "--seed=3",
            ]
        )
        shown = capsys.readouterr().out
        assert code == 0, shown
        # The query service showed the score track: the worker scored every move.
        assert f"(query service http://127.0.0.1:{query_port})" in shown, shown
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        reader.join(timeout=5)
    assert code == 0, "\n".join(lines)
    assert lines[-1] == "stopped", "\n".join(lines)
