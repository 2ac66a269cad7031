"""Programs kept running by supervisord, started stage by stage and stopped in reverse order.

`serve` fills supervisord.conf.template (a group per stage, its rank the priority) and runs
supervisord in the foreground, in a session of its own, as a child that gets SIGTERM from the
kernel when this process dies, even by SIGKILL; it starts each stage once the ones before are
ready, then watches. What supervisord does with these settings: deploy/README.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import xmlrpc.client
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import Any

import redis
from supervisor.xmlrpc import SupervisorTransport

from deploy.local.host import parent_pid

TEMPLATE = Path(__file__).with_name("supervisord.conf.template")
ROOT = TEMPLATE.parents[2]  # where every program runs
RPC_ERRORS = (OSError, HTTPException, xmlrpc.client.Error)  # supervisord is not there (yet)
# Looked up here, not in the forked child, where loading a library could deadlock.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class RunError(RuntimeError):
    """A stage was not ready in time, a program kept dying, or supervisord is gone."""


@dataclass
class Program:
    """A program, when it is ready (see `probe`) and how it stops. An exit within 5 s of its
    start is a failed start, retried after 1 s, 2 s …; after `startretries` it is FATAL."""

    name: str
    argv: list[str]
    ready: str = ""
    env: dict[str, str] = field(default_factory=dict)  # on top of supervisord's environment
    stopsignal: str = "TERM"
    stopwaitsecs: int = 15  # then SIGKILL to its process group
    startretries: int = 5


@dataclass
class Stage:
    """Programs started together (a supervisord group) once the stages before are ready, and
    stopped before them. `ready` must hold too; then `then` runs (what it returns is shown)."""

    group: str
    programs: list[Program]
    ready: str = ""
    then: Callable[[], str] | None = None


def probe(ready: str, log: Path | None = None, since: int = 0) -> bool:
    """Whether `ready` holds: "" always; Redis answers PING at a redis:// URL (not while it
    loads its append-only file); GET answers 200 at every http:// URL (space-separated); or
    "log:<pattern>" shows in `log` after its first `since` bytes."""
    try:
        if ready.startswith("redis://"):
            with redis.Redis.from_url(ready, socket_connect_timeout=1, socket_timeout=2) as r:
                return bool(r.ping())
        if ready.startswith("http://"):
            return all(urllib.request.urlopen(u, timeout=2).status == 200 for u in ready.split())
        if ready.startswith("log:"):
            pattern = ready.removeprefix("log:").encode()
            return log is not None and re.search(pattern, log.read_bytes()[since:]) is not None
        return not ready
    except (OSError, redis.RedisError):
        return False


def socket_url(var: Path) -> str:
    """supervisord's control socket, in /tmp: a socket's path must be short."""
    return f"unix://{tempfile.gettempdir()}/cc-supervisord-{zlib.crc32(bytes(var)):08x}.sock"


def connect(var: Path) -> Any:
    """An XML-RPC client of the supervisord of `var`, as supervisorctl is."""
    transport = SupervisorTransport(None, None, socket_url(var))
    return xmlrpc.client.ServerProxy("http://localhost", transport=transport)


def running(var: Path) -> dict[str, Any] | None:
    """What the suite running from `var` recorded when it started (`pid`: its runner, `where`:
    its URLs; {} when it wrote nothing), or None when no supervisord of `var` answers."""
    try:
        connect(var).supervisor.getPID()
    except RPC_ERRORS:
        return None
    try:
        found = json.loads((var / "run" / "suite.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def suite_of(pid: int) -> Path | None:
    """The var directory of the running suite that process `pid` is part of (the supervisord
    of <var>/supervisord.conf among its ancestors, and answering), or None."""
    while pid > 1:
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            pid = parent_pid(pid)
        except OSError:
            return None
        if any(w.endswith(b"supervisord") for w in words) and b"-c" in words[:-1]:
            conf = Path(os.fsdecode(words[words.index(b"-c") + 1]))
            if conf.name == "supervisord.conf" and running(conf.parent) is not None:
                return conf.parent
    return None


def render(stages: Sequence[Stage], var: Path) -> Path:
    """Fill the template into <var>/supervisord.conf (the first stage starts with supervisord,
    `serve` starts the others); returns its path."""
    header, group, program = re.split(r";;; \w+\n", TEMPLATE.read_text())
    url = socket_url(var)
    text = header.format(var=var, url=url, socket=url.removeprefix("unix://"))
    for rank, stage in enumerate(s for s in stages if s.programs):
        names = ",".join(p.name for p in stage.programs)
        text += group.format(group=stage.group, programs=names, priority=rank * 10 + 10)
        for p in stage.programs:
            env = ",".join(f'{k}="{v}"' for k, v in p.env.items())
            fields = {**vars(p), "command": shlex.join(p.argv), "env": env, "cwd": ROOT}
            text += program.format(**fields, var=var, autostart=str(stage is stages[0]).lower())
    (var / "run").mkdir(parents=True, exist_ok=True)
    (conf := var / "supervisord.conf").write_text(text.replace("%", "%%"))  # % expands there
    return conf


def _stop_with_parent() -> None:
    """In supervisord's process before exec: SIGTERM it when this process dies (Linux)."""
    if _LIBC is not None:
        parent = os.getppid()
        _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # we died before prctl: nobody would signal it
            os._exit(1)


def _killpg(*pgids: int) -> None:
    for pgid in (g for g in pgids if g > 0):  # 0 would be our own group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def serve(
    stages: Sequence[Stage],
    var: Path,
    env: dict[str, str],
    say: Callable[[str], None],
    timeout: float = 60.0,
    done: str = "",
    where: str = "",
) -> int:
    """Run the stages until SIGINT, SIGTERM, SIGHUP or the loss of this process's parent
    (`make` killed passes no signal on): 0; or until a stage is not ready within `timeout` or a
    program keeps dying: 1. A second stop request kills everything at once. `where` (its URLs)
    is recorded with this process's pid for a second run to tell (`running`)."""
    log, pids, stops = var / "log", dict[str, int](), list[int]()
    parent, started = os.getppid(), time.monotonic()
    log.mkdir(parents=True, exist_ok=True)
    sizes = {
        p.name: f.stat().st_size if (f := log / f"{p.name}.log").exists() else 0
        for s in stages
        for p in s.programs
    }
    argv = [sys.executable, "-m", "supervisor.supervisord", "-c", str(render(stages, var))]
    record = var / "run" / "suite.json"  # render made var/run
    record.write_text(json.dumps({"pid": os.getpid(), "where": where}))
    supervisord = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_stop_with_parent,
    )

    def on_signal(signum: int, _frame: object) -> None:
        stops.append(signum)
        if len(stops) > 1:  # no waiting here: `finally` below may be waiting already
            say("second stop request: killing everything now")
            _killpg(supervisord.pid, *pids.values())

    def stopping() -> bool:
        """Whether to stop; kills what is left of a program's process group once it died
        (nginx's workers after its master); raises RunError on a FATAL program."""
        if not stops and os.getppid() != parent:
            say("the process that started this one (make) is gone: stopping")
            stops.append(0)
        if supervisord.poll() is not None and not stops:
            raise RunError(f"supervisord exited ({supervisord.returncode}): see {log}")
        infos: list[dict[str, Any]] = []
        with contextlib.suppress(*RPC_ERRORS):
            infos = [] if stops else connect(var).supervisor.getAllProcessInfo()
        for info in infos:
            if pids.setdefault(info["name"], info["pid"]) != info["pid"]:
                _killpg(pids[info["name"]])
                pids[info["name"]] = info["pid"]
            if info["statename"] == "FATAL":
                end = Path(info["stdout_logfile"]).read_text(errors="replace").splitlines()[-9:]
                why = f"{info['name']} keeps dying: supervisord gave up on it (FATAL); its log:"
                raise RunError("\n    ".join([why, *end]))
        return bool(stops)

    def ready(stage: Stage) -> bool:
        parts = [probe(p.ready, log / f"{p.name}.log", sizes[p.name]) for p in stage.programs]
        return probe(stage.ready) and all(parts)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    code = 0
    try:
        for stage in stages:
            going, deadline = stage is stages[0] or not stage.programs, time.monotonic() + timeout
            while not stopping() and not (going and ready(stage)):
                with contextlib.suppress(*RPC_ERRORS):  # until supervisord answers
                    going = going or connect(var).supervisor.startProcessGroup(stage.group, False)
                if time.monotonic() > deadline:
                    raise RunError(f"{stage.group}: not ready after {timeout:g} s (see {log})")
                time.sleep(0.1)
            if stage.then is not None and not stops:
                say(f"  {stage.group}: {stage.then()}")
        if not stops:
            say(f"all healthy in {time.monotonic() - started:.1f} s{done}")
        while not stopping():
            time.sleep(0.2)
    except (RuntimeError, *RPC_ERRORS) as exc:  # and what `then` raised
        say(f"make run: {exc}")
        code = 1
    finally:
        say(f"stopping: {', then '.join(s.group for s in reversed(stages) if s.programs)}")
        supervisord.terminate()  # it stops the groups in reverse order, then exits
        wait = sum(max(p.stopwaitsecs for p in s.programs) + 5 for s in stages if s.programs)
        try:
            supervisord.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            _killpg(supervisord.pid)
        supervisord.wait()
        _killpg(*pids.values())  # whatever outlived supervisord
        Path(socket_url(var).removeprefix("unix://")).unlink(missing_ok=True)  # if it was killed
        record.unlink(missing_ok=True)
        say("stopped")
    return code
