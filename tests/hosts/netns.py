"""Hosts on one machine: a Linux network namespace per host, each joined to a bridge by a veth
pair, processes started inside with `ip netns exec`, partitions as nftables drop rules.

Everything this module makes is named with one prefix per run (`cc<pid in hex>`), so runs in
parallel never collide; `Network.close()` (also registered with atexit) kills every process
left in its namespaces and deletes them. The bridge lives in a namespace of its own, so the
addresses (10.77.0.0/24) exist only inside namespaces this run made: the machine's own
network never sees them.

The test process itself joins the network by moving one thread into a host's namespace
(`Network.enter`): a network namespace is per thread on Linux, and threads and child
processes started from that thread inherit it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.77.0"  # inside the run's own namespaces only (the bridge is not in the root one)
CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)


class NetnsUnavailable(RuntimeError):
    """This machine (or user) cannot make network namespaces or nftables rules."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run iproute2's `ip` (raises with its stderr when `check` and it fails)."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def why_unavailable() -> str:
    """Why namespaces and nft cannot be used here (a skip reason); "" when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (tests/hosts run as root, as CI does)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if shutil.which("nft") is None:
        return "nftables' `nft` is not installed (`make test-hosts` installs it as root)"
    probe = f"cc{os.getpid():x}probe"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    try:
        table = "add table inet t\nadd chain inet t c { type filter hook input priority 0; }\n"
        done = subprocess.run(
            ["ip", "netns", "exec", probe, "nft", "-f", "-"],
            input=table, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return f"nft does not work in a namespace: {done.stderr.strip()}"
    finally:
        ip("netns", "del", probe, check=False)
    return ""


def _setns(path: str) -> None:
    """Move the calling thread into the network namespace at `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _LIBC.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


@dataclass
class Host:
    """One namespace on the bridge: its name, namespace and address."""

    name: str
    netns: str
    address: str


@dataclass
class Network:
    """A bridge and the hosts on it; `block`/`heal` cut and restore traffic between hosts."""

    workdir: Path
    prefix: str = field(default_factory=lambda: f"cc{os.getpid():x}")
    hosts: dict[str, Host] = field(default_factory=dict)
    blocked: set[tuple[str, str]] = field(default_factory=set)  # (from, to): dropped at `to`
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    closed: bool = False

    def __post_init__(self) -> None:
        self.bridge_ns = f"{self.prefix}-net"
        self.bridge = f"{self.prefix}b"
        self.workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.close)
        ip("netns", "add", self.bridge_ns)
        ip("-n", self.bridge_ns, "link", "add", self.bridge, "type", "bridge")
        ip("-n", self.bridge_ns, "link", "set", self.bridge, "up")
        ip("-n", self.bridge_ns, "link", "set", "lo", "up")

    def add_host(self, name: str) -> Host:
        """A new namespace with one interface on the bridge and the next address."""
        index = len(self.hosts) + 10
        netns, veth, inside = f"{self.prefix}-{name}", f"{self.prefix}v{index}", f"{self.prefix}e"
        host = Host(name, netns, f"{SUBNET}.{index}")
        ip("netns", "add", netns)
        self.hosts[name] = host
        ip("-n", self.bridge_ns, "link", "add", veth, "type", "veth", "peer", "name", inside,
           "netns", netns)  # fmt: skip
        ip("-n", self.bridge_ns, "link", "set", veth, "master", self.bridge, "up")
        ip("-n", netns, "addr", "add", f"{host.address}/24", "dev", inside)
        ip("-n", netns, "link", "set", inside, "up")
        ip("-n", netns, "link", "set", "lo", "up")
        self._nft(host, self._table(host))
        return host

    # -- processes ---------------------------------------------------------------------------

    def start(
        self,
        host: str,
        argv: Sequence[str],
        name: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` inside `host`'s namespace in a process group of its own (`ip netns
        exec` execs it: the pid is the program's), its output in <workdir>/<name>.log."""
        log = (self.workdir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.hosts[host].netns, *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        """What the process started as `name` wrote so far."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @contextlib.contextmanager
    def enter(self, host: str) -> Iterator[None]:
        """Run the calling thread (and the threads and processes it starts) inside `host`'s
        namespace for the `with` block."""
        original = f"/proc/self/task/{threading.get_native_id()}/ns/net"
        fd = os.open(original, os.O_RDONLY)
        try:
            _setns(f"/var/run/netns/{self.hosts[host].netns}")
            try:
                yield
            finally:
                if _LIBC.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "could not return to the original netns")
        finally:
            os.close(fd)

    # -- partitions --------------------------------------------------------------------------

    def block(self, sources: Sequence[str], targets: Sequence[str], both: bool = True) -> None:
        """Drop every packet from each of `sources` to each of `targets` (and back: `both`),
        at the receiving host's input hook: a silent loss, as a cut cable (no reset)."""
        pairs = {(s, t) for s in sources for t in targets if s != t}
        pairs |= {(t, s) for s, t in pairs} if both else set()
        self.blocked |= pairs
        for name in {t for _, t in pairs}:
            self._nft(self.hosts[name], self._rules(name))

    def heal(self) -> None:
        """Remove every drop rule."""
        touched = {t for _, t in self.blocked}
        self.blocked.clear()
        for name in touched:
            self._nft(self.hosts[name], self._rules(name))

    def _table(self, host: Host) -> str:
        return (
            f"add table inet {self.prefix}\n"
            f"add chain inet {self.prefix} cut "
            "{ type filter hook input priority 0; policy accept; }\n"
        )

    def _rules(self, name: str) -> str:
        lines = [f"flush chain inet {self.prefix} cut"]
        for source, target in sorted(self.blocked):
            if target == name:
                lines.append(
                    f"add rule inet {self.prefix} cut ip saddr {self.hosts[source].address} drop"
                )
        return "\n".join(lines) + "\n"

    def _nft(self, host: Host, script: str) -> None:
        done = subprocess.run(
            ["ip", "netns", "exec", host.netns, "nft", "-f", "-"],
            input=script, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"nft in {host.netns}: {done.stderr.strip()}\n{script}")

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every process in the run's namespaces (ours and any they started), delete the
        namespaces (their interfaces go with them). Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        for proc in self.procs:  # SIGCONT first: a stopped process cannot die of SIGTERM
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        names = [h.netns for h in self.hosts.values()] + [self.bridge_ns]
        for netns in names:
            pids = ip("netns", "pids", netns, check=False).stdout.split()
            for pid in pids:  # anything still there, e.g. a gunicorn worker orphaned
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        for netns in names:
            ip("netns", "del", netns, check=False)


def leftover_namespaces(prefix: str) -> list[str]:
    """This run's namespaces still listed (a check for the tests' own cleanup)."""
    listed = ip("netns", "list", check=False).stdout.split("\n")
    return [line.split()[0] for line in listed if line.startswith(prefix)]
