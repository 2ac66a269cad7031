"""`make run` with stand-in parts, for the supervisor tests: a redis-server with an append-only
file (stage "store"), then a sleeper that keeps a child process, and on request a part that
exits at once or one that ignores SIGTERM (stage "app"). deploy/local/supervise.py runs them
exactly as it runs the real suite, so what the tests see of restarts and stops is what
`make run` does.

    python -m tests.integration.stub_run VAR REDIS_PORT [--crasher RETRIES] [--stubborn SECONDS]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from deploy.local.cluster import redis_argv
from deploy.local.supervise import Program, Stage, serve


def sleeper() -> None:
    """On SIGTERM it stops its child and exits 0, as gunicorn or Celery do; killed with -9 it
    leaves the child behind, as a gunicorn master or nginx's master leaves its workers."""
    child = subprocess.Popen(["sleep", "600"])

    def stop(*_: object) -> None:
        child.terminate()
        child.wait()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    print("sleeper: up, child", child.pid, flush=True)
    while True:
        time.sleep(1)


def crasher(starts: str) -> None:
    """Notes the time of its start, then exits at once."""
    with open(starts, "a") as f:
        f.write(f"{time.time()}\n")
    print("crasher: cannot start", flush=True)
    sys.exit(3)


def stubborn() -> None:
    """Ignores SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)


def main() -> int:
    """Run the stand-in suite until a stop request, as `make run` would."""
    if sys.argv[1] == "part":  # one of the parts, as supervisord starts it
        run = {"sleeper": sleeper, "stubborn": stubborn}.get(sys.argv[2])
        run() if run else crasher(sys.argv[3])
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("var", type=Path)
    parser.add_argument("redis_port", type=int)
    parser.add_argument("--crasher", type=int, metavar="RETRIES")
    parser.add_argument("--stubborn", type=int, metavar="STOPWAITSECS")
    a = parser.parse_args()
    url = f"redis://127.0.0.1:{a.redis_port}/0"  # `make run`'s Redis, on a free port
    argv = redis_argv(a.redis_port, a.var / "redis", aof="always")
    store = Stage("store", [Program("redis", argv, url, stopwaitsecs=30)])
    part = [sys.executable, "-m", "tests.integration.stub_run", "part"]
    app = Stage("app", [Program("sleeper", [*part, "sleeper"], "log:sleeper: up")])
    if a.crasher is not None:
        argv = [*part, "crasher", str(a.var / "crasher-starts")]
        app.programs.append(Program("crasher", argv, startretries=a.crasher))
    if a.stubborn is not None:
        argv = [*part, "stubborn"]
        app.programs.append(Program("stubborn", argv, stopwaitsecs=a.stubborn))
    say = partial(print, flush=True)
    return serve([store, app], a.var, dict(os.environ), say, where=f"redis {url}")


if __name__ == "__main__":
    sys.exit(main())
