"""A private PostgreSQL server for tests and benchmarks, as tests/redis_server.py starts a
private Redis: its own `initdb` cluster in a temp dir, on a free port of 127.0.0.1, its socket
in that dir, stopped and removed afterwards. It never touches the machine's own PostgreSQL.

initdb refuses to run as root: as root the cluster belongs to the ``postgres`` user (run
through ``runuser``), which the server package creates. When no server is installed and this
runs as root with apt-get (CI), ``postgresql`` is installed first (as `make run` installs
nginx: deploy/local/host.py's `installed`); otherwise `postgres_missing()` says why, for a
visible skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from deploy.local.host import free_port, installed
from deploy.local.postgres import bin_dir

_TRIED: list[str] = []
HINT = "apt-get install postgresql (or put initdb and pg_ctl in PATH)"


def _bin_dir() -> str | None:
    """The directory of initdb, pg_ctl and postgres (deploy/local/postgres.py's search)."""
    return bin_dir()


def postgres_missing() -> str:
    """ "" when a private server can be started here, else why not (installing it first when
    root with apt-get)."""
    found, why = installed("postgresql", _bin_dir, _TRIED, HINT)
    if found is None:
        return why
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run initdb as"
    return ""


@dataclass
class PrivatePostgres:
    """A running private server: its URL, data directory and how to stop or start it."""

    url: str
    datadir: str
    port: int
    bindir: str

    def _as_owner(self, *argv: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)

    def start(self) -> None:
        """Start (again) on the same port and data."""
        options = f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            self._as_owner(f"{self.bindir}/pg_ctl", "-D", f"{self.datadir}/data", "-o", options,
                           "-l", f"{self.datadir}/log", "-w", "-t", "60", "start"),
            check=True, capture_output=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self, mode: str = "fast") -> None:
        """Stop it (`immediate`: as a crash would)."""
        subprocess.run(
            self._as_owner(f"{self.bindir}/pg_ctl", "-D", f"{self.datadir}/data", "-m", mode,
                           "-w", "stop"),
            check=False, capture_output=True,
        )  # fmt: skip


def start_postgres() -> PrivatePostgres:
    """initdb a cluster in a temp dir and start it on a free port (see the module docstring)."""
    why = postgres_missing()
    if why:
        raise RuntimeError(why)
    bindir = _bin_dir()
    assert bindir is not None
    workdir = tempfile.mkdtemp(prefix="cc-postgres-")
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(workdir, owner.pw_uid, owner.pw_gid)
    os.chmod(workdir, 0o755)
    server = PrivatePostgres("", workdir, free_port(), bindir)
    subprocess.run(
        server._as_owner(f"{bindir}/initdb", "-D", f"{workdir}/data", "-U", "postgres",
                         "-A", "trust", "-E", "UTF8", "--no-locale"),
        check=True, capture_output=True,
    )  # fmt: skip
    for attempt in range(3):  # a free port can be taken by another process before the bind
        server.url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        try:
            server.start()
            return server
        except subprocess.CalledProcessError:
            log = Path(workdir, "log")
            taken = log.exists() and "Address already in use" in log.read_text(errors="replace")
            if not taken or attempt == 2:
                raise
            server.port = free_port()
    raise AssertionError("unreachable")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A private PostgreSQL server for a `with` block: stopped and its directory removed after."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(server.datadir, ignore_errors=True)
