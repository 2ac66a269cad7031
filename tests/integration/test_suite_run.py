"""`make run` (deploy/local/run.py) under supervisord (deploy/local/supervise.py).

The supervisor's behaviour is shown on stand-in parts (stub_run.py: a redis-server and small
Python programs, a few seconds a test): a stop request (Ctrl-C, SIGTERM) stops the parts in the
reverse order of their stages and leaves no process; a part that dies is restarted at once
(Redis from its append-only file) and what its process group left behind is killed; a part that
keeps dying is restarted after 1 s, then 2 s …, then given up on, and the run stops (exit 1);
`make` killed, or the runner itself, stops everything; a second stop request kills everything.

One test starts the whole suite with the command `make run` runs: a game played through the
public port survives a crash of Redis (kill -9; its port held for a moment so that the outage
is seen), is finished, and the worker scores every move exactly once. Every run gets free ports
and its own var directory: nothing here touches the machine's Redis or another run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.state import GameState
from deploy.local.host import command_line, free_port, free_ports, nginx_binary
from deploy.local.supervise import connect
from eventstore.envelope import MOVES, SCORES
from eventstore.score_stream import GAME_SCORED, score_events
from services.redis_store import RedisEventStore
from services.redis_store.acl import local_url
from tools import gameclient

pytestmark = pytest.mark.slow  # whole suites and supervisord: processes killed and restarted

ROOT = Path(__file__).resolve().parents[2]
STOP = 45.0  # seconds a whole stop may take (a worker's warm shutdown is the slow part)
UP = ("STARTING", "RUNNING")  # supervisord's states of a started program


def alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone(pids: set[int]) -> bool:
    """Whether none of `pids` runs."""
    return not any(map(alive, pids))


def descendants(pid: int) -> set[int]:
    """`pid` and every process below it."""
    found = {pid}
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split() if children.exists() else ():
            found |= descendants(int(child))
    return found


def wait_until(what: str, condition: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.05)


class Runner:
    """A command run as `make run` runs it (a session of its own: the test's signals reach it
    alone), its output read line by line."""

    def __init__(self, argv: list[str], var: Path) -> None:
        self.var = var
        # As a user runs it: not on the tests' Redis, nor with their rate limits off.
        own = ("REDIS_URL", "BROKER_URL", "ADDRESS_WRITE_RATE", "API_KEY_RATE")
        env = {k: v for k, v in os.environ.items() if k not in own}
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 90) -> None:
        """Wait until a line of output contains `text`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() < deadline and self.proc.poll() is None:
                    continue
                raise AssertionError(f"no {text!r} in:\n" + "\n".join(self.output)) from None
            self.output.append(line)
            if text in line:
                return

    def finish(self, timeout: float = STOP) -> int:
        """Wait for the runner to exit; its exit code (all output read)."""
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return code

    def text(self) -> str:
        """The output read so far."""
        return "\n".join(self.output)

    def info(self, name: str) -> dict[str, Any]:
        """What supervisord says of program `name` (state, pid …)."""
        infos = connect(self.var).supervisor.getAllProcessInfo()
        return next(i for i in infos if i["name"] == name)

    def pid(self, name: str, *states: str, other_than: int = 0) -> int:
        """The pid of `name` once supervisord reports it in one of `states` (default RUNNING:
        it has stayed up `startsecs`; STARTING: just started), and not `other_than`."""

        def up() -> bool:
            info = self.info(name)
            return info["statename"] in (states or ("RUNNING",)) and info["pid"] not in (
                0,
                other_than,
            )

        wait_until(f"{name} {states}", up)
        return int(self.info(name)["pid"])

    def family(self) -> set[int]:
        """The runner, supervisord and every process below them now."""
        return descendants(self.proc.pid)

    def clean_up(self, pids: set[int]) -> None:
        """Whatever a failed test left running: `pids`, and every process below the runner
        now (a part supervisord restarted after `pids` was taken; seen left behind after a
        failed crash test)."""
        now = self.family() if self.proc.poll() is None else set()
        for pid in [self.proc.pid, *pids, *now]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()


def stub(var: Path, redis_port: int, *extra: str) -> list[str]:
    """The stand-in suite's command line."""
    return [sys.executable, "-m", "tests.integration.stub_run", str(var), str(redis_port), *extra]


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["ctrl-c", "sigterm", "sighup"]
)
def test_a_stop_request_stops_the_parts_in_reverse_order_and_leaves_no_process(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP alike: the app stage stops before Redis, each part
    with its stop signal (Redis fsyncs its append-only file), none is killed, nothing is left."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port), var), set[int]()
    try:
        run.wait_for("all healthy")
        wait_until("the sleeper's child", lambda: len(descendants(run.pid("sleeper", *UP))) == 2)
        family = run.family()
        assert len(family) >= 5  # runner, supervisord, redis, sleeper and its child
        run.proc.send_signal(sig)
        assert run.finish() == 0
        out = run.text()
        assert run.output[-1] == "stopped" and "stopping: app, then store" in out
        assert out.index("stopped: sleeper (exit status 0)") < out.index("stopped: redis")
        assert "with SIGKILL" not in out, out
        assert not [pid for pid in family if alive(pid)]
        log = (var / "log" / "redis.log").read_text()
        assert "Calling fsync() on the AOF file" in log  # a clean Redis shutdown
    finally:
        run.clean_up(family)


def test_a_part_that_dies_is_restarted_at_once_redis_from_its_append_only_file(
    tmp_path: Path,
) -> None:
    """A part killed with -9 after it has run `startsecs` is started again at once; what it
    left in its process group (the sleeper's child, like nginx's workers) is killed; Redis
    comes back with every write it acknowledged (appendfsync always)."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port), var), set[int]()
    client = redis.Redis(port=port, socket_timeout=2)
    try:
        run.wait_for("all healthy")
        client.set("acknowledged", "before the crash")
        for name in ("sleeper", "redis"):
            old = run.pid(name)
            left = descendants(old) - {old}  # the sleeper's child
            family |= run.family()
            killed = time.monotonic()
            os.kill(old, signal.SIGKILL)
            new = run.pid(name, *UP, other_than=old)
            assert time.monotonic() - killed < 3.0, "not restarted at once"
            wait_until(f"{name}'s leftovers killed", partial(gone, left))
            run.wait_for(f"exited: {name} (terminated by SIGKILL; not expected)")
            family.add(new)
        wait_until("Redis back", lambda: redis_answers(client))
        assert client.get("acknowledged") == b"before the crash"
        family |= run.family()
        run.proc.send_signal(signal.SIGTERM)
        assert run.finish() == 0 and run.output[-1] == "stopped"
        assert not [pid for pid in family if alive(pid)]
    finally:
        client.close()
        run.clean_up(family)


def test_a_part_that_keeps_dying_is_restarted_ever_more_slowly_then_given_up(
    tmp_path: Path,
) -> None:
    """A part that exits within `startsecs` of each start is started again after 1 s, then
    2 s …; after `startretries` (here 2) such restarts in a row supervisord gives up on it
    (FATAL), and the run shows its last lines, stops everything and exits 1."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port, "--crasher", "2"), var), set[int]()
    try:
        run.wait_for("all healthy")
        family = run.family()
        assert run.finish(timeout=60) == 1
        out = run.text()
        assert "gave up: crasher entered FATAL state, too many start retries" in out, out
        assert "make run: crasher keeps dying: supervisord gave up on it (FATAL)" in out
        assert "crasher: cannot start" in out  # the end of its log
        assert run.output[-1] == "stopped"
        starts = [float(t) for t in (var / "crasher-starts").read_text().split()]
        assert len(starts) == 3  # the first start and 2 restarts
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        assert gaps[0] >= 1.0 and gaps[1] >= 2.0, gaps
        assert not [pid for pid in family if alive(pid)]
    finally:
        run.clean_up(family)


def test_make_killed_stops_everything(tmp_path: Path) -> None:
    """`make` passes no SIGTERM on when it is killed: the runner sees that its parent is gone
    and stops everything in order."""
    var, port = tmp_path / "var", free_port()
    out, runner_pid = tmp_path / "out.log", tmp_path / "runner.pid"
    # A shell stands in for make: the runner is its child, as under `make run`.
    script = 'out=$1; pidfile=$2; shift 2; "$@" >"$out" 2>&1 & echo $! >"$pidfile"; wait'
    shell = subprocess.Popen(
        ["sh", "-c", script, "sh", str(out), str(runner_pid), *stub(var, port)],
        cwd=ROOT,
        start_new_session=True,
    )
    family = set[int]()
    try:
        wait_until(
            "all healthy", lambda: "all healthy" in (out.read_text() if out.exists() else "")
        )
        family = descendants(int(runner_pid.read_text()))
        assert len(family) >= 5
        os.kill(shell.pid, signal.SIGKILL)  # make killed: the runner is left to itself
        shell.wait(timeout=10)
        wait_until("every part stopped", lambda: not any(alive(p) for p in family), STOP)
        text = out.read_text()
        assert "(make) is gone: stopping" in text and text.rstrip().endswith("stopped"), text
        assert text.index("stopped: sleeper") < text.index("stopped: redis")
    finally:
        for pid in family:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_runner_killed_stops_everything(tmp_path: Path) -> None:
    """The runner killed with -9: the kernel sends supervisord SIGTERM (PR_SET_PDEATHSIG), and
    supervisord stops the parts in order by itself."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port), var), set[int]()
    try:
        run.wait_for("all healthy")
        wait_until("the sleeper's child", lambda: len(descendants(run.pid("sleeper", *UP))) == 2)
        family = run.family()
        run.proc.kill()
        run.finish()
        wait_until("every part stopped", lambda: not any(alive(p) for p in family), STOP)
        log = (var / "log" / "supervisord.log").read_text()
        assert "received SIGTERM indicating exit request" in log
        assert log.index("stopped: sleeper") < log.index("stopped: redis")
    finally:
        run.clean_up(family)


def test_a_part_that_does_not_stop_in_its_stopwaitsecs_is_killed(tmp_path: Path) -> None:
    """A part that ignores SIGTERM gets SIGKILL (its whole process group) `stopwaitsecs` (here
    1 s) later; the stop goes on with the next stage."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port, "--stubborn", "1"), var), set[int]()
    try:
        run.wait_for("all healthy")
        run.pid("stubborn", *UP)
        family = run.family()
        run.proc.send_signal(signal.SIGTERM)
        assert run.finish() == 0
        out = run.text()
        assert "killing 'stubborn'" in out and "with SIGKILL" in out, out
        assert out.index("stopped: stubborn (terminated by SIGKILL)") < out.index("stopped: redis")
        assert not [pid for pid in family if alive(pid)]
    finally:
        run.clean_up(family)


def test_a_second_stop_request_kills_everything_at_once(tmp_path: Path) -> None:
    """A part that ignores SIGTERM holds up the stop (up to its `stopwaitsecs`, 60 s here);
    a second Ctrl-C kills every part at once."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port, "--stubborn", "60"), var), set[int]()
    try:
        run.wait_for("all healthy")
        run.pid("stubborn", *UP)
        family = run.family()
        run.proc.send_signal(signal.SIGINT)
        run.wait_for("stubborn to die")  # supervisord waits up to its stopwaitsecs
        run.proc.send_signal(signal.SIGINT)
        assert run.finish(timeout=10) == 0
        assert "second stop request: killing everything now" in run.text()
        assert not [pid for pid in family if alive(pid)]
    finally:
        run.clean_up(family)


def test_a_second_run_says_where_the_running_suite_is_and_disturbs_nothing(
    tmp_path: Path,
) -> None:
    """A second `make run` while a suite runs exits 1 at once saying that the suite runs and
    where (found by its supervisord's socket in the same var directory, or as the holder of a
    port it needs from another), not naming the suite's processes as leftovers to kill; the
    running suite is left as it was. A port held by a process that is no suite is named by its
    pid and command."""
    var, port = tmp_path / "var", free_port()
    run, family = Runner(stub(var, port), var), set[int]()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "BROKER_URL")}

    def second(var: Path, redis_port: int) -> subprocess.CompletedProcess[str]:
        command_port, query_port = free_ports(2)
        argv = [sys.executable, "-m", "deploy.local.run", "--var", str(var), "--no-proxy",
                "--redis-port", str(redis_port), "--command-port", str(command_port),
                "--query-port", str(query_port)]  # fmt: skip
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    def programs(var: Path) -> set[tuple[str, int, str]]:
        infos = connect(var).supervisor.getAllProcessInfo()
        return {(i["name"], i["pid"], i["statename"]) for i in infos}

    try:
        run.wait_for("all healthy")
        family = run.family()
        # Healthy may come before supervisord counts a part RUNNING (its startsecs): the
        # snapshot compared at the end is taken once every part is.
        deadline = time.monotonic() + 30
        states = programs(var)
        while {state for *_, state in states} != {"RUNNING"}:
            assert time.monotonic() < deadline, states
            time.sleep(0.1)
            states = programs(var)
        conf, record = (var / "supervisord.conf").read_bytes(), var / "run" / "suite.json"
        suite = f"Carcassonne Cloud, already running from {var} (make run, pid {run.proc.pid})"
        where = f"{suite}: redis redis://127.0.0.1:{port}/0. Use it, or stop it first"

        same = second(var, free_port())  # the same var directory, other ports
        assert same.returncode == 1, same.stdout + same.stderr
        assert (
            same.stdout == f"make run: {where} (Ctrl-C where it runs); this run started nothing\n"
        )

        other = second(tmp_path / "other", port)  # another var directory, the suite's Redis port
        assert other.returncode == 1, other.stdout + other.stderr
        assert f"make run: port {port} (REDIS_PORT) is in use by {where}" in other.stdout
        assert "or set REDIS_PORT to another port" in other.stdout
        assert not (tmp_path / "other").exists()  # nothing written

        with socket.socket() as held:  # a port held by this test: no suite
            held.bind(("127.0.0.1", 0))
            held.listen()
            third = second(tmp_path / "third", held.getsockname()[1])
        assert third.returncode == 1, third.stdout + third.stderr
        holder = f"is in use by pid {os.getpid()} ({command_line(os.getpid())[:40]}"
        assert holder in third.stdout and "already running" not in third.stdout, third.stdout

        # The running suite is as it was: the same processes in the same states, its
        # configuration and its record untouched, its supervisord still answering.
        assert programs(var) == states
        assert (var / "supervisord.conf").read_bytes() == conf and record.exists()
        run.proc.send_signal(signal.SIGTERM)
        assert run.finish() == 0 and run.output[-1] == "stopped"
        assert not record.exists()  # a later run will not read a stopped suite's record
    finally:
        run.clean_up(family)


def suite_runner(var: Path, ports: tuple[int, int, int], *options: str) -> Runner:
    """`python -m deploy.local.run` (what `make run` runs) on these Redis, command and query
    ports, 2 worker threads and a 60 s start timeout, plus `options`; not waited for."""
    redis_port, command_port, query_port = (str(port) for port in ports)
    argv = [sys.executable, "-m", "deploy.local.run", "--var", str(var),
            "--redis-port", redis_port, "--command-port", command_port,
            "--query-port", query_port, "--concurrency", "2", "--timeout", "60",
            *options]  # fmt: skip
    return Runner(argv, var)


@contextmanager
def outage(port: int, pid: int, current: Callable[[], int]) -> Iterator[None]:
    """Kill Redis (-9) and hold its port for the `with` block, so that its restart fails
    (supervisord tries again after 1 s, 2 s …) and the outage lasts: connections are accepted
    and closed at once, as by a Redis that is not there. `current` is supervisord's pid of
    Redis now (0: none): on a loaded machine supervisord's immediate restart can bind the port
    first, and that Redis is killed too (it then exits too soon, so the next try waits 1 s)."""
    os.kill(pid, signal.SIGKILL)
    killed = {pid}
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    deadline = time.monotonic() + 10
    while True:  # until the dead Redis's listening socket is gone (before a new one binds)
        try:
            sock.bind(("127.0.0.1", port))
            break
        except OSError:
            assert time.monotonic() < deadline, "Redis's port was not released"
            again = current()
            if again and again not in killed:  # restarted before we could hold the port
                with contextlib.suppress(ProcessLookupError):
                    os.kill(again, signal.SIGKILL)
                killed.add(again)
            time.sleep(0.001)
    sock.listen(64)
    sock.settimeout(0.1)
    held = threading.Event()

    def refuse() -> None:
        while not held.is_set():
            try:
                sock.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    try:
        yield
    finally:
        held.set()
        thread.join(timeout=5)
        sock.close()


def redis_answers(client: redis.Redis) -> bool:
    """Whether Redis answers PING."""
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def http_status(url: str) -> int:
    """The status of a GET (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=3) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def instance_bases(var: Path, service: str) -> list[str]:
    """The base URLs of a service's instances behind nginx, from its rendered upstream."""
    conf = (var / "nginx" / "conf" / "sites" / f"{service}.conf").read_text()
    return [f"http://{a}" for a in re.findall(r"^\s*server (\S+) ", conf, re.MULTILINE)]


def answers(url: str, status: int) -> bool:
    """Whether GET `url` answers `status`."""
    return http_status(url) == status


def test_a_game_survives_a_redis_crash_and_is_scored_in_full(tmp_path: Path) -> None:
    """The whole suite as `make run` starts it, every part listed; a game through the public
    ports; Redis killed with -9 mid-game and kept down a moment: the services stay alive but
    not ready, a turn sent meanwhile is acknowledged once Redis is back from its append-only
    file with every acknowledged move; the worker and nginx killed with -9 come back; the game
    is finished and scored exactly once per move; SIGTERM stops everything, nothing killed,
    nothing left."""
    var = tmp_path / "var"
    redis_port, command_port, query_port = free_ports(3)
    run = suite_runner(var, (redis_port, command_port, query_port), "--web-concurrency", "2",
                       "--sweep-seconds", "0.5")  # fmt: skip
    family = set[int]()
    try:
        run.wait_for("all healthy")
        out = run.text()
        # Behind nginx, a command instance of one worker per core (deploy/local/run.py).
        cores = (os.cpu_count() or 1) if nginx_binary() else 1
        commands = [f"command-{i}" for i in range(1, cores + 1)] if cores > 1 else ["command"]
        parts = {"redis", *commands, "query", "worker", "beat", "bots", "bots-beat"}
        parts |= {"nginx"} if nginx_binary() else set()
        order = ["redis", *commands, "query", "worker", "bots", "beat", "bots-beat", "nginx"]
        assert {i["name"] for i in connect(var).supervisor.getAllProcessInfo()} == parts
        assert f"under supervisord: {', '.join(sorted(parts, key=order.index))}" in out, out
        assert "DEVELOPMENT SETTING: WEBHOOK_ALLOW_PRIVATE=1" in out  # said loudly
        assert "DEVELOPMENT SETTING: ANONYMOUS_GAMES=1" in out  # games without a key: too
        command, query = f"http://127.0.0.1:{command_port}", f"http://127.0.0.1:{query_port}"
        # What a second `make run` says of this one: where it serves (see the test above).
        urls = f"command {command}, query {query}"  # without nginx: two base URLs
        if "nginx" in parts:  # the one public URL, every path; the query service alone
            urls = f"API {command} (every path), query service alone {query}"
        where = f"{urls}, event store redis://127.0.0.1:{redis_port}/0"
        record = json.loads((var / "run" / "suite.json").read_text())
        assert record == {"pid": run.proc.pid, "where": where}
        admin = local_url("admin", var / "redis-users")  # its Redis has users: the admin's
        assert admin is not None and admin.endswith(f"@127.0.0.1:{redis_port}/0")
        store = RedisEventStore(redis.Redis.from_url(admin))
        game = gameclient.create_game(command, ["Ada", "Brunel", "Curie"])
        rng = random.Random(2024)
        gameclient.play_game(command, game, rng, meeple_chance=0.5, stop_after=25)
        assert not game.view["over"] and len(game.turns) == 25
        acknowledged = [event for turn in game.turns for event in turn["events"]]
        seq_at_crash = game.view["seq"]

        family = run.family()
        with ThreadPoolExecutor(1) as pool:
            # Readiness is for operators: each instance's own port (the query service's
            # operator port is its only instance); through the public URL it is a 404.
            assert http_status(command + "/readyz") == (404 if "nginx" in parts else 200)
            operators = [command, query]
            if "nginx" in parts:
                operators = [*instance_bases(var, "command"), query]
            with outage(redis_port, run.pid("redis"), lambda: int(run.info("redis")["pid"])):
                for base in operators:  # alive, but not ready while Redis is down
                    wait_until(f"{base} not ready", partial(answers, base + "/readyz", 503))
                    assert http_status(base + "/healthz") == 200
                # A turn sent while Redis is down fails (5xx) and is retried with the same
                # Idempotency-Key until Redis is back: acknowledged once.
                move = gameclient.choose(game.view, rng, 0.5)
                pending = pool.submit(gameclient.play_turn, command, game, move)
                run.wait_for("exited: redis (exit status 1; not expected)")  # its port is held
            assert pending.result(timeout=30) is not None
        for base in operators:
            wait_until(f"{base} ready again", partial(answers, base + "/readyz", 200))

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
        # The scoring worker and nginx killed with -9 are restarted too, and what nginx's
        # master leaves behind (its workers, which would keep the public ports) is killed.
        for name in ("worker", "nginx") if "nginx" in parts else ("worker",):
            old = run.pid(name, *UP)
            left = descendants(old) - {old}
            os.kill(old, signal.SIGKILL)
            family.add(run.pid(name, *UP, other_than=old))
            wait_until(f"{name}'s leftovers killed", partial(gone, left))
            gameclient.turn_view(command, game)
            gameclient.play_game(command, game, rng, stop_after=len(game.turns) + 5)
        gameclient.play_game(command, game, rng, meeple_chance=0.5)
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
        # The worker scores every move, once, as the engine does (supervisord restarts it if
        # it exited while Redis was down: Celery 5.7 does, see deploy/README.md).
        wait_until(
            "every move scored",
            lambda: int(store.marker(game.game_id, SCORES) or 0) >= moves[-1].seq,
        )
        expected = [(e.type, e.payload) for e in score_events(GameState(), moves)]
        actual = [(e.type, e.payload) for e in store.read(game.game_id, SCORES)]
        assert actual == expected
        final = actual[-1]
        assert final[0] == GAME_SCORED and final[1]["final_scores"] == game.view["scores"]
        # The query service catches up from the streams: its totals become the final scores.
        public = command if "nginx" in parts else query  # behind nginx: the one base URL
        body = gameclient.query_scores(public, game, game.view["scores"], wait=20.0)
        assert body is not None, "the query service has no score view of the game"
        assert gameclient.totals(body) in (None, game.view["scores"])

        family |= run.family()
        run.proc.send_signal(signal.SIGTERM)
        assert run.finish() == 0 and run.output[-1] == "stopped"
        assert "with SIGKILL" not in run.text()  # nothing had to be killed
        assert not [pid for pid in family if alive(pid)]
        assert (var / "redis" / "appendonly.aof").stat().st_size > 0
    finally:
        run.clean_up(family)
