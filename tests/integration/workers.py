"""Real Celery processes for tests and benchmarks: the scoring worker and beat."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from eventstore.envelope import MOVES, SCORES
from eventstore.port import EventStore

ROOT = Path(__file__).resolve().parents[2]
APP = "services.scoring.celery_app"
BOTS_APP = "services.bots.celery_app"


class Process:
    """A started Celery process with its log file."""

    def __init__(self, args: list[str], env: dict[str, str], name: str) -> None:
        self.log = Path(tempfile.mkdtemp(prefix=f"cc-{name}-")) / "log.txt"
        self.args, self.env, self.name = args, env, name
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready: str | None = None, timeout: float = 30) -> Process:
        """Start it; with `ready`, wait until that text is in its log."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill() reaches the children
            )
        deadline = time.monotonic() + timeout
        while ready is not None and ready not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group: the main process and its pool children."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """A warm shutdown (SIGTERM), then SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


def celery_env(redis_url: str, **extra: str) -> dict[str, str]:
    """The worker's environment: the event store on db 0 of `redis_url`, the broker on db 1,
    an archive of its own (a SQLite file in a temporary directory: beat runs `archive.run`,
    ARCHIVE_RUN being on by default, though no test game is due within ARCHIVE_AFTER)."""
    broker = redis_url.rsplit("/", 1)[0] + "/1"
    archive = f"sqlite:///{tempfile.mkdtemp(prefix='cc-archive-')}/archive.sqlite3"
    return {"REDIS_URL": redis_url, "BROKER_URL": broker, "ARCHIVE_URL": archive, **extra}


def worker(
    env: dict[str, str],
    name: str = "w1",
    concurrency: int = 2,
    pool: str = "threads",
    queues: str = "scoring",
    app: str = APP,
) -> Process:
    """A scoring worker, not started (the pool `deploy/` runs it with: see celery_app);
    `queues` as for `-Q` (e.g. "webhooks" or "scoring,webhooks"); `app` another worker's."""
    args = [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues, "-l", "info",
            "--concurrency", str(concurrency), "--pool", pool, "-n", f"{name}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    return Process(args, env, name)


def beat(env: dict[str, str], app: str = APP) -> Process:
    """Celery beat of `app` (runs its sweeps), not started."""
    schedule = Path(tempfile.mkdtemp(prefix="cc-beat-")) / "schedule"
    args = [sys.executable, "-m", "celery", "-A", app, "beat", "-s", str(schedule), "-l", "info"]
    return Process(args, env, "beat")


@contextmanager
def running(*processes: Process, ready: str | None = "ready.") -> Iterator[None]:
    """Start the processes (workers wait for their "ready." line) and stop them afterwards."""
    try:
        for p in processes:
            p.start(ready if p.name != "beat" else None)
        yield
    finally:
        for p in processes:
            p.stop()


def scored_up_to(client: redis.Redis, store: EventStore, game_id: str) -> tuple[int, int]:
    """(last move, last move scored) of a game."""
    progress = store.marker(game_id, SCORES)
    return store.last_seq(game_id, MOVES), int(progress or 0)


def wait_scored(
    client: redis.Redis, store: EventStore, games: list[str], timeout: float = 60
) -> None:
    """Wait until every move of every game is scored."""
    deadline = time.monotonic() + timeout
    pending = list(games)
    while pending:
        pending = [g for g in pending if len(set(scored_up_to(client, store, g))) > 1]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(pending)} games not scored, e.g. {pending[:3]}")
        time.sleep(0.05)


def broker_messages(client: redis.Redis, about: str | None = None) -> list[dict[str, Any]]:
    """The task messages in a Redis broker (with `about`: only those whose arguments name
    it, e.g. a game id; the session's broker holds other tests' tasks too): queued (its
    lists) or held by a worker (kombu's ``unacked`` hash: with `task_acks_late` a task
    leaves it only once it is done)."""
    held = [json.loads(raw) for raw in client.hvals("unacked")]
    queued = [json.loads(raw) for key in client.scan_iter(_type="list")
              for raw in client.lrange(key, 0, -1)]  # fmt: skip
    messages = [m[0] if isinstance(m, list) else m for m in held + queued]
    if about is None:
        return messages
    return [m for m in messages if about in str(m.get("headers", {}).get("argsrepr", ""))]


def wait_tasks_done(
    broker_url: str, task_ids: set[str] | None, timeout: float = 60, about: str | None = None
) -> None:
    """Wait until no task of `task_ids` (None: no task whose arguments name `about`) is left
    in the broker, queued or being run: then every one of them has run to its end."""
    client = redis.Redis.from_url(broker_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            ids = {m.get("headers", {}).get("id") for m in broker_messages(client, about)}
            left = ids if task_ids is None else task_ids & ids
            if not left:
                return
            assert time.monotonic() < deadline, f"{len(left)} tasks not done in {timeout:g} s"
            time.sleep(0.05)
    finally:
        client.close()
