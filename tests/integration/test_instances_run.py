"""`make run-cluster` (deploy/local/run.py --cluster): a 3-primary Redis Cluster, a broker, a
command instance per core (at least 2) and 2 query instances behind nginx, 2 worker processes
and beat, started by the command line on free ports in a directory of its own; `make demo`
plays a game against it, scored and shown by the query service; SIGTERM stops everything.
(Slow: ~30 s.)"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from deploy.local import postgres
from deploy.local.host import free_ports
from tests.nginx import find_nginx

from .test_suite_run import STOP, alive, suite_runner

pytestmark = pytest.mark.slow  # a whole cluster suite started and stopped


def test_run_cluster_starts_plays_a_demo_game_and_stops(tmp_path: Path) -> None:
    if find_nginx()[0] is None:
        pytest.skip(find_nginx()[1])
    # REDIS_PORT, +1, +2 (the primaries, their bus ports 10000 higher) and +3 (the broker).
    redis_port = free_ports(4, bus=True, consecutive=True)[0]
    command_port, query_port = free_ports(2)
    # A var the server's user can enter (as root PostgreSQL runs as postgres; pytest's own
    # directories are private to root): removed after.
    home = Path(tempfile.mkdtemp(prefix="cc-run-cluster-"))
    home.chmod(0o755)
    var = home / "var"
    run = suite_runner(var, (redis_port, command_port, query_port), "--cluster",
                       "--web-concurrency", "1", "--sweep-seconds", "1")  # fmt: skip
    family = set[int]()
    try:
        run.wait_for("all healthy")
        out = run.text()
        # A command instance per core, at least as many as of the query service (run.py).
        commands = ", ".join(f"command-{i}" for i in range(1, max(2, os.cpu_count() or 1) + 1))
        # The archive: a PostgreSQL server of the run's own where one is installed.
        pg = "" if postgres.missing() else "postgres, "
        parts = f"redis-1, redis-2, redis-3, broker, {pg}{commands}, query-1, query-2, "
        assert parts + "worker-1, worker-2, bots, beat, bots-beat, nginx" in out, out
        archive = re.search(r"archive of finished games (\S+)", out)
        assert archive is not None, out
        if pg:
            assert archive[1].startswith("postgresql://"), out
            with psycopg.connect(archive[1], connect_timeout=10) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        else:
            assert archive[1].startswith("sqlite:///") and "no PostgreSQL" in out, out
        assert "redis+cluster://" in out and "store: cluster created" in out, out
        # nginx started after every instance behind it was ready: it never found one refusing
        # connections (which marks it failed for 5 s: 502 "no live upstreams").
        proxy_log = (var / "log" / "nginx.log").read_text()
        assert "connect() failed" not in proxy_log, proxy_log
        family = run.family()
        demo = subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.demo",
                f"--command-url=http://127.0.0.1:{command_port}",  # the one base URL
                "--seed=3",
            ],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert demo.returncode == 0, demo.stdout + demo.stderr
        # The query service showed the score track through the one public URL: the worker
        # scored every move.
        assert f"(query service http://127.0.0.1:{command_port})" in demo.stdout, demo.stdout
        run.proc.send_signal(signal.SIGTERM)
        assert run.finish(STOP) == 0, run.text()
        assert run.output[-1] == "stopped"
        assert not [pid for pid in family if alive(pid)]
    finally:
        run.clean_up(family)
        shutil.rmtree(home, ignore_errors=True)
