"""The whole suite as `make run` starts it (deploy/local/run.py): real processes, real Redis.

A game played through HTTP survives a crash of Redis (kill -9, restarted from its append-only
file): every move acknowledged before the crash is still in the move stream, a turn sent while
Redis is down is acknowledged once it is back (its retries carry one Idempotency-Key), the
game finishes, and the worker scores every move exactly once. The runner's supervisor restarts
any part that dies — Redis, a Celery part, an HTTP service, nginx — says so, and gives up on
one that keeps dying (issue 13, finding 10). The command line leaves no process behind: on
SIGTERM, when it gives up, or when it is itself killed. With nginx installed the HTTP services
are reached through it, as `make run` does.

Every run gets free ports and its own var directory: nothing here touches the machine's Redis
or another run.
"""

from __future__ import annotations

import itertools
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from carcassonne.state import GameState
from deploy.local import run
from eventstore.envelope import MOVES, SCORES
from eventstore.score_stream import GAME_SCORED, score_events
from services.redis_store import RedisEventStore
from tools import gameclient as demo

from .http_client import free_port

RUN_PY = run.ROOT / "deploy" / "local" / "run.py"
STOP = 30.0  # seconds a whole stop may take (the worker's warm shutdown is the slow part)


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports."""
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def config(var: Path) -> run.Config:
    """A small suite on free ports with its own var directory."""
    redis_port, command_port, query_port = free_ports(3)
    return run.Config(
        var=var,
        redis_port=redis_port,
        command_port=command_port,
        query_port=query_port,
        web_concurrency=2,
        worker_concurrency=2,
        sweep_seconds=0.5,  # a notification lost in the crash is re-sent within half a second
        timeout=40.0,
    )


def gone(pgid: int) -> bool:
    """Whether no process of that process group is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def supervise(worker: run.Part, suite: run.Suite) -> None:
    """Restart the worker if it exited, as Docker Compose and Kubernetes would.

    Celery 5.7 with kombu 5.7 exits ("Unrecoverable error: AttributeError: 'NoneType' object
    has no attribute 'hostname'") instead of reconnecting when the broker connection drops
    while it holds an unacknowledged task; whether it holds one at the crash is chance. Its
    task is not lost: the sweep sends it again (and Redis would restore it after the
    visibility timeout).
    """
    if worker.exit_code() is None:
        return
    warnings.warn(
        f"the worker exited ({worker.exit_code()}) when Redis crashed; restarted", stacklevel=2
    )
    worker.reap()
    worker.start()
    suite.wait_healthy([worker])


@pytest.fixture
def suite(tmp_path: Path) -> Iterator[run.Suite]:
    lines: list[str] = []
    s = run.Suite(config(tmp_path / "var"), lines.append)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def test_a_game_survives_a_redis_crash_and_is_scored_in_full(suite: run.Suite) -> None:
    command = suite.url("command")
    store = RedisEventStore(redis.Redis.from_url(suite.config.store_url()))
    game = demo.create_game(command, ["Ada", "Brunel", "Curie"])
    rng = random.Random(2024)
    demo.play_game(command, game, rng, meeple_chance=0.5, stop_after=25)
    assert not game.view["over"] and len(game.turns) == 25
    acknowledged = [event for turn in game.turns for event in turn["events"]]

    # Crash: no SHUTDOWN, no fsync on exit; only what appendfsync always put on disk remains.
    redis_part = suite.part("redis")
    os.kill(redis_part.pid, signal.SIGKILL)
    assert redis_part.wait_exit(10)
    redis_part.reap()
    web = [suite.url(name) for name in ("command", "query") if suite.has(name)]
    for base in web:  # alive, but not ready while Redis is down
        assert wait_status(base + "/readyz", 503), f"{base}/readyz stayed ready"
        assert http_status(base + "/healthz") == 200
    # A turn sent while Redis is down: it waits or fails (5xx) and is retried with the same
    # Idempotency-Key until Redis is back; either way it is acknowledged once.
    seq_at_crash = game.view["seq"]
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(demo.play_turn, command, game, demo.choose(game.view, rng, 0.5))
        time.sleep(0.5)
        redis_part.start()  # same port, same directory: it loads the append-only file
        suite.wait_healthy([redis_part])
        assert pending.result(timeout=30) is not None
    for base in web:
        assert wait_status(base + "/readyz", 200), f"{base}/readyz did not become ready again"

    stored = store.read(game.game_id, MOVES)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert stored[-1].seq == game.turns[-1]["seq"] > seq_at_crash
    for event in acknowledged:
        kept = stored[event["seq"] - 1]
        assert (kept.type, kept.payload, kept.command_id) == (
            event["type"],
            event["payload"],
            event["command_id"],
        )

    demo.turn_view(command, game)  # the command service reconnects to the restarted Redis
    demo.play_game(command, game, rng, meeple_chance=0.5)
    assert game.view["over"]

    # The move stream holds the game as acknowledged: creation events, then each turn's.
    moves = store.read(game.game_id, MOVES)
    acknowledged = [event for turn in game.turns for event in turn["events"]]
    first = acknowledged[0]["seq"]
    assert [e.seq for e in moves] == list(range(1, len(moves) + 1))
    assert [(e.seq, e.type, e.payload) for e in moves[first - 1 :]] == [
        (e["seq"], e["type"], e["payload"]) for e in acknowledged
    ]
    assert moves[-1].type == "GameEnded"

    # The worker scores every move, once, as the engine does.
    deadline = time.monotonic() + 30
    while int(store.marker(game.game_id, SCORES) or 0) < moves[-1].seq:
        supervise(suite.part("worker"), suite)
        assert time.monotonic() < deadline, "the worker did not score every move"
        time.sleep(0.1)
    expected = [(e.type, e.payload) for e in score_events(GameState(), moves)]
    actual = [(e.type, e.payload) for e in store.read(game.game_id, SCORES)]
    assert actual == expected
    final = actual[-1]
    assert final[0] == GAME_SCORED and final[1]["final_scores"] == game.view["scores"]

    if suite.has("query"):
        query = suite.url("query")
        assert run.http_ok(query + run.HEALTH_PATH)
        # The query service catches up from the streams: its totals become the final scores.
        body = demo.query_scores(query, game, game.view["scores"], wait=20.0)
        assert body is not None, "the query service has no score view of the game"
        totals = demo.totals(body)
        assert totals is None or totals == game.view["scores"]

    assert suite.stop() == []  # nothing had to be killed
    assert all(gone(part.pid) for part in suite.parts)
    assert (suite.config.var / "redis" / "appendonly.aof").stat().st_size > 0


def http_status(url: str) -> int:
    """The status of a GET (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=3) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def wait_status(url: str, status: int, timeout: float = 10.0) -> bool:
    """Whether `url` answers `status` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http_status(url) == status:
            return True
        time.sleep(0.1)
    return False


class Cli:
    """`run.py` as `make run` starts it, its output read line by line."""

    def __init__(self, var: Path) -> None:
        self.config = c = config(var)
        args = [
            *(sys.executable, str(RUN_PY), "--var", str(var), "--timeout", "40"),
            *("--redis-port", str(c.redis_port), "--command-port", str(c.command_port)),
            *("--query-port", str(c.query_port), "--web-concurrency", "1", "--concurrency", "1"),
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "BROKER_URL")}
        self.var = var
        self.proc = subprocess.Popen(
            args,
            cwd=run.ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # signals from the test reach the runner alone
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 45) -> None:
        """Wait until a line of output contains `text`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} in:\n" + "\n".join(self.output)) from None
            self.output.append(line)
            if text in line:
                return

    def pids(self) -> dict[str, int]:
        """Each part's process (group) id, from its pid file."""
        return {p.stem: int(p.read_text()) for p in (self.var / "run").glob("*.pid")}

    def up_pid(self, name: str, timeout: float = 60) -> int:
        """The pid of part `name` once it is up. A part that died (a Celery part exits when
        Redis goes away) has no pid file until the runner restarts it: when the runner's last
        word on it is that it exited, wait until it says `<name> healthy again`."""
        while not self.lines.empty():  # what the runner has said so far
            self.output.append(self.lines.get())
        said = [line for line in self.output if line.startswith(f"{name} ")]
        news = [line for line in said if " exited" in line or " healthy again" in line
                or " not healthy" in line]  # fmt: skip
        if news and " healthy again" not in news[-1]:
            self.wait_for(f"{name} healthy again", timeout)
        return self.pids()[name]

    def finish(self, timeout: float = STOP) -> int:
        """Wait for the runner to exit; its exit code (all output read)."""
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return code

    def clean_up(self, pids: dict[str, int]) -> None:
        """Whatever a failed test left running: the runner and every part's group."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pgid in pids.values():
            if not gone(pgid):
                os.killpg(pgid, signal.SIGKILL)


def expected_parts() -> set[str]:
    """The parts `make run` starts here."""
    return (
        {"redis", "command", "worker", "beat", "bots", "bots-beat"}
        | ({"query"} if run.query_service_present() else set())
        | ({"nginx"} if run.nginx_binary() else set())
    )


@pytest.mark.parametrize("how", ["sigterm", "parts die", "the runner is killed"])
def test_make_run_leaves_no_process_behind(tmp_path: Path, how: str) -> None:
    """SIGTERM: exit 0; a dead Celery part and a dead HTTP service: restarted, then SIGTERM
    stops everything (exit 0); the runner killed with -9: every part gets SIGTERM from the
    kernel (PR_SET_PDEATHSIG) and stops by itself."""
    cli = Cli(tmp_path / "var")
    pids: dict[str, int] = {}
    try:
        cli.wait_for("all healthy")
        pids = cli.pids()
        assert set(pids) == expected_parts()
        # make run allows loopback webhook/subscription URLs, and says so loudly.
        assert any("DEVELOPMENT SETTING: WEBHOOK_ALLOW_PRIVATE=1" in line for line in cli.output)
        if how == "the runner is killed":
            cli.proc.kill()
            cli.finish()
            deadline = time.monotonic() + STOP
            while not all(gone(pgid) for pgid in pids.values()):
                assert time.monotonic() < deadline, "parts outlived the runner"
                time.sleep(0.1)
        else:
            if how == "sigterm":
                cli.proc.send_signal(signal.SIGTERM)
                assert cli.finish() == 0
            else:
                os.kill(pids["beat"], signal.SIGKILL)  # a Celery part is restarted ...
                cli.wait_for("beat exited")
                cli.wait_for("beat healthy again")
                os.kill(pids["command"], signal.SIGKILL)  # ... and so is an HTTP service
                cli.wait_for("command exited")
                cli.wait_for("command healthy again")
                restarted = cli.pids()
                assert restarted["command"] != pids["command"] and gone(pids["command"])
                pids = restarted
                cli.proc.send_signal(signal.SIGTERM)
                assert cli.finish() == 0
            assert cli.output[-1] == "stopped"
            assert not any(line.startswith("had to kill") for line in cli.output), cli.output
            assert all(gone(pgid) for pgid in pids.values())
            assert not list((tmp_path / "var" / "run").glob("*.pid"))
        redis_log = (tmp_path / "var" / "log" / "redis.log").read_text()
        assert "Calling fsync() on the AOF file" in redis_log  # a clean Redis shutdown
    finally:
        cli.clean_up(pids)


def wait_restarted(cli: Cli, name: str, old_pid: int) -> int:
    """Wait until the runner says `name` is healthy again under a new pid; that pid."""
    deadline = time.monotonic() + 60
    while True:
        cli.wait_for(f"{name} healthy again", timeout=max(1.0, deadline - time.monotonic()))
        pid = cli.pids().get(name)
        if pid is not None and pid != old_pid:
            return pid


def test_make_run_restarts_what_dies_and_a_game_stays_playable(tmp_path: Path) -> None:
    """Finding 10: Redis killed with -9 is restarted from its append-only file, a killed worker
    (and nginx, when it runs) is restarted, the runner says so, and a game played through the
    public port goes on to the end and is scored in full. (Before, the runner stopped
    everything when Redis died.)"""
    cli = Cli(tmp_path / "var")
    pids: dict[str, int] = {}
    try:
        cli.wait_for("all healthy")
        pids = cli.pids()
        command = f"http://127.0.0.1:{cli.config.command_port}"  # nginx's when it runs
        store = RedisEventStore(redis.Redis.from_url(cli.config.store_url()))
        rng = random.Random(13)
        game = demo.create_game(command, ["Ada", "Brunel"])
        demo.play_game(command, game, rng, stop_after=10)
        acknowledged = [event for turn in game.turns for event in turn["events"]]

        os.kill(pids["redis"], signal.SIGKILL)
        cli.wait_for("redis exited (code -9); restarting it")
        pids["redis"] = wait_restarted(cli, "redis", pids["redis"])
        moves = store.read(game.game_id, MOVES)  # nothing acknowledged was lost
        assert [(e.seq, e.payload) for e in moves[-len(acknowledged) :]] == [
            (e["seq"], e["payload"]) for e in acknowledged
        ]
        demo.turn_view(command, game)
        demo.play_game(command, game, rng, stop_after=20)

        for name in ("worker", "nginx"):
            if name not in pids:
                continue  # no nginx on this machine
            # The worker may have exited when Redis was killed (Celery 5.7 does, see
            # `supervise`) and be waiting for its restart: kill it once it is up again.
            pids[name] = cli.up_pid(name)
            os.kill(pids[name], signal.SIGKILL)
            pids[name] = wait_restarted(cli, name, pids[name])
            demo.turn_view(command, game)
            demo.play_game(command, game, rng, stop_after=len(game.turns) + 5)
        demo.play_game(command, game, rng)
        assert game.view["over"]

        last = store.read(game.game_id, MOVES)[-1].seq
        deadline = time.monotonic() + 30
        while int(store.marker(game.game_id, SCORES) or 0) < last:
            assert time.monotonic() < deadline, "the restarted worker did not score every move"
            time.sleep(0.1)
        assert store.read(game.game_id, SCORES)[-1].type == GAME_SCORED

        cli.proc.send_signal(signal.SIGTERM)
        assert cli.finish() == 0
        assert cli.output[-1] == "stopped"
        assert all(gone(pgid) for pgid in pids.values())
        log = (tmp_path / "var" / "log" / "redis.log").read_text()
        assert "=== redis restarting (restart 1 in a row)" in log  # the log says so too
    finally:
        cli.clean_up({**pids, **cli.pids()})


def test_a_part_that_keeps_dying_is_restarted_ever_more_slowly_then_given_up(
    tmp_path: Path,
) -> None:
    """A crash loop does not spin: the pauses between restarts double, and after `give_up`
    restarts in a row the supervisor stops the run with the part's last lines."""
    lines: list[str] = []
    suite = run.Suite(config(tmp_path / "var"), lines.append)
    beat = suite.part("beat")
    beat.argv = [sys.executable, "-c", "print('beat: cannot start'); raise SystemExit(3)"]
    supervisor = run.Supervisor(suite)
    supervisor.first_pause, supervisor.give_up = 0.1, 4
    beat.start()  # only this part: the others are not needed to watch it die
    suite.parts = [beat]
    starts: list[float] = []
    try:
        deadline = time.monotonic() + 20
        with pytest.raises(run.SuiteError, match=r"beat .* giving up after 4 restarts in a row"):
            while time.monotonic() < deadline:
                before = beat.proc
                supervisor.tick()
                if beat.proc is not before:
                    starts.append(time.monotonic())
                time.sleep(0.01)
        assert "beat: cannot start" in "\n".join(lines)
    finally:
        beat.reap()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(starts) == 4
    # Restart n comes at least pause(n) after the one before died: 0.2, 0.4, 0.8 s.
    assert [supervisor.pause(n) for n in (2, 3, 4)] == [0.2, 0.4, 0.8]
    assert all(gap >= supervisor.pause(n) for gap, n in zip(gaps, (2, 3, 4), strict=True)), gaps


def test_make_run_stops_when_make_is_killed(tmp_path: Path) -> None:
    """`make` does not pass SIGTERM on to its children: killing it used to leave the runner
    and every part running with nobody to stop them. The runner now notices its parent is
    gone and stops everything cleanly."""
    var = tmp_path / "var"
    c = config(var)
    out, runner_pid = tmp_path / "out.log", tmp_path / "runner.pid"
    args = [
        *(sys.executable, str(RUN_PY), "--var", str(var), "--timeout", "40"),
        *("--redis-port", str(c.redis_port), "--command-port", str(c.command_port)),
        *("--query-port", str(c.query_port), "--web-concurrency", "1", "--concurrency", "1"),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "BROKER_URL")}
    # A shell stands in for make: the runner is its child, as under `make run`.
    script = 'out=$1; pidfile=$2; shift 2; "$@" >"$out" 2>&1 & echo $! >"$pidfile"; wait'
    shell = subprocess.Popen(
        ["sh", "-c", script, "sh", str(out), str(runner_pid), *args],
        cwd=run.ROOT,
        env=env,
        start_new_session=True,
    )
    pids: dict[str, int] = {}
    runner = 0
    try:
        deadline = time.monotonic() + 60
        while "all healthy" not in (out.read_text() if out.exists() else ""):
            assert time.monotonic() < deadline and shell.poll() is None, out.read_text()
            time.sleep(0.1)
        runner = int(runner_pid.read_text())
        pids = {p.stem: int(p.read_text()) for p in (var / "run").glob("*.pid")}
        assert set(pids) == expected_parts()
        os.kill(shell.pid, signal.SIGKILL)  # make killed: the runner is left to itself
        shell.wait(timeout=10)
        deadline = time.monotonic() + STOP
        while running(runner) or not all(gone(pgid) for pgid in pids.values()):
            assert time.monotonic() < deadline, "the suite outlived the process that ran it"
            time.sleep(0.1)
        text = out.read_text()
        assert "is gone: stopping" in text and text.rstrip().endswith("stopped"), text
        assert not list((var / "run").glob("*.pid"))
    finally:
        if shell.poll() is None:
            shell.kill()
        if runner and running(runner):
            os.kill(runner, signal.SIGKILL)
        for pgid in pids.values():
            if not gone(pgid):
                os.killpg(pgid, signal.SIGKILL)
