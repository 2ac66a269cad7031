"""`make run-cluster`'s archive of finished games: a PostgreSQL server of the run's own when
one is installed (issue 28), else the SQLite file `make run` uses.

Its cluster lives in the run's var (``<var>/postgres``, made by ``initdb`` on the first run,
kept after), it listens on 127.0.0.1 at a free port and its socket stays in that directory:
the machine's own PostgreSQL, if any, is never touched. initdb and the server refuse to run as
root, so as root they run as the ``postgres`` user the server package creates (``runuser``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from .supervise import Program, Stage

READY = "log:ready to accept connections"


def bin_dir() -> str | None:
    """The directory of initdb and postgres: PATH's, else Debian's newest version's."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    for found_dir in reversed(dirs):
        if os.access(os.path.join(found_dir, "initdb"), os.X_OK):
            return found_dir
    return None


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def missing() -> str:
    """ "" when a server can be run here, else why not (the run then archives to SQLite)."""
    if bin_dir() is None:
        return "no PostgreSQL server installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run it as"
    return ""


def unreachable(var: Path) -> str:
    """ "" when the server's user can reach the run's var, else why not (as root the server
    runs as ``postgres``, which cannot enter a directory private to root)."""
    if os.geteuid() != 0:
        return ""
    done = subprocess.run(_as_owner(["test", "-x", str(var.resolve())]), check=False, timeout=30)
    return "" if done.returncode == 0 else f"the postgres user cannot enter {var}"


def archive_stage(var: Path, port: int) -> tuple[Stage, str]:
    """The server's stage and the archive's URL; its cluster is made first if it is new
    (`RuntimeError` saying why it could not be)."""
    bindir = bin_dir()
    assert bindir is not None, missing()
    home = var / "postgres"
    home.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(home, owner.pw_uid, owner.pw_gid)
    if not (home / "data" / "PG_VERSION").exists():
        made = subprocess.run(
            _as_owner([f"{bindir}/initdb", "-D", str(home / "data"), "-U", "postgres",
                       "-A", "trust", "-E", "UTF8", "--no-locale"]),
            check=False, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed: {made.stderr.strip()[-300:]}")
    argv = _as_owner([f"{bindir}/postgres", "-D", str(home / "data"), "-p", str(port),
                      "-k", str(home), "-c", "listen_addresses=127.0.0.1"])  # fmt: skip
    # SIGTERM: smart shutdown, once the parts that use it stopped (they stop first); runuser
    # passes SIGTERM on to the server (not SIGINT).
    server = Program("postgres", argv, READY, stopsignal="TERM", stopwaitsecs=30)
    return Stage("archive", [server]), f"postgresql://postgres@127.0.0.1:{port}/postgres"
