"""A private Redis Cluster for tests and benchmarks, on free ports, formed by
deploy/local/cluster.py as `make run-cluster` forms its own.

Use the fixtures by importing them into a test module (or a conftest):

    from tests.redis_cluster import redis_cluster, redis_cluster_url  # noqa: F401

`redis_cluster_url` is a `redis+cluster://127.0.0.1:<port>,…` URL (what REDIS_URL takes) of
3 primaries without replicas, started once per test session and stopped at its end;
`redis_cluster` is the same cluster's `Cluster` (ports, node clients, slot owners).

By hand, a cluster with replicas until Ctrl-C (it prints its REDIS_URL):

    python -m tests.redis_cluster --primaries 3 --replicas 1
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from deploy.local.cluster import ClusterError, form_cluster, redis_argv
from deploy.local.host import free_ports

__all__ = ["Cluster", "flush_cluster", "redis_cluster", "redis_cluster_url", "start_cluster"]
DEFAULT_NODE_TIMEOUT_MS = 2000  # how long a primary may be silent before its replica takes over


def _client(host: str, port: int) -> redis.Redis:
    return redis.Redis(
        host=host,
        port=port,
        socket_connect_timeout=1.0,
        socket_timeout=5.0,
        retry=Retry(NoBackoff(), 0),
    )


def _slot_owners(host: str, port: int) -> list[tuple[int, int, int]]:
    """(first slot, last slot, primary's port) as the node at `port` sees them."""
    slots = _client(host, port).execute_command("CLUSTER", "SLOTS")
    return sorted((int(s[0]), int(s[1]), int(s[2][1])) for s in slots)


@dataclass
class Cluster:
    """Cluster-mode redis-servers started by `start_cluster`, children of this process."""

    host: str
    ports: list[int]
    directory: Path
    replicas: int
    persist: bool = False
    node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    remove_directory: bool = False  # stop() removes it (start_cluster made it)

    @property
    def url(self) -> str:
        """`redis+cluster://host:port,…` with every node as a seed (what REDIS_URL takes)."""
        return "redis+cluster://" + ",".join(f"{self.host}:{p}" for p in self.ports)

    def node_client(self, port: int) -> redis.Redis:
        """A plain client of one node (no redirection: for CLUSTER commands and checks)."""
        return _client(self.host, port)

    def primary_ports(self) -> list[int]:
        """The ports of the nodes that serve slots now (after failovers too)."""
        for port in self.ports:
            if self.alive(port):
                with contextlib.suppress(redis.RedisError):
                    return sorted({owner for _, _, owner in _slot_owners(self.host, port)})
        raise ClusterError("no node answers")

    def replicas_of(self, primary_port: int) -> list[int]:
        """Ports of the online replicas of the primary at `primary_port`."""
        raw = self.node_client(primary_port).info("replication")
        return [
            int(v["port"]) for k, v in raw.items() if k.startswith("slave") and isinstance(v, dict)
        ]

    def port_of_slot(self, slot: int) -> int:
        """The primary serving `slot` now."""
        for port in self.ports:
            if self.alive(port):
                with contextlib.suppress(redis.RedisError):
                    for first, last, owner in _slot_owners(self.host, port):
                        if first <= slot <= last:
                            return owner
        raise ClusterError(f"nobody serves slot {slot}")

    def start_node(self, port: int) -> None:
        """Start (or start again) the node of `port`, with the files it had."""
        if self.alive(port):
            return
        node_dir, aof = self.directory / str(port), "always" if self.persist else "no"
        argv = redis_argv(
            port, node_dir, self.host, aof=aof, cluster=True, node_timeout_ms=self.node_timeout_ms
        )
        with (node_dir / "redis.log").open("ab") as log:
            self.procs[port] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def alive(self, port: int) -> bool:
        """Whether the node's process runs."""
        proc = self.procs.get(port)
        return proc is not None and proc.poll() is None

    def kill_node(self, port: int, sig: int = signal.SIGKILL) -> None:
        """Kill one node at once (a crashed primary)."""
        proc = self.procs.get(port)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(timeout=10)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until every node sees the same slot owners and each primary has its replicas online
        (so that WAIT is answered at once)."""
        deadline = time.monotonic() + timeout
        while not self._ready():
            if time.monotonic() > deadline:
                raise ClusterError("the cluster's nodes disagree or its replicas are not online")
            time.sleep(0.05)

    def _ready(self) -> bool:
        try:
            views = {tuple(_slot_owners(self.host, p)) for p in self.ports}
            if len(views) != 1:
                return False
            owners = {owner for _, _, owner in views.pop()}
            return all(len(self._online(port)) >= self.replicas for port in owners)
        except redis.RedisError:
            return False

    def _online(self, port: int) -> list[dict[str, object]]:
        raw = self.node_client(port).info("replication")
        return [
            v
            for k, v in raw.items()
            if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
        ]

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after 10 s) and remove a made directory."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self.remove_directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_cluster(
    directory: Path | str | None = None,
    *,
    primaries: int = 3,
    replicas: int = 0,
    ports: Sequence[int] | None = None,
    host: str = "127.0.0.1",
    persist: bool = False,
    node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS,
    timeout: float = 30.0,
) -> Cluster:
    """Start `primaries * (1 + replicas)` nodes and make them one cluster; returns when it is
    ready. `ports`: the nodes' ports (primaries first), default free ones; `directory`
    default: a new temporary one, removed by `stop()`."""
    count = primaries * (1 + replicas)
    for _ in range(PORT_TRIES if ports is None else 1):
        chosen = list(ports) if ports is not None else free_ports(count, bus=True)
        if len(chosen) != count:
            raise ClusterError(f"{count} nodes need {count} ports, got {len(chosen)}")
        made = directory is None
        where = tempfile.mkdtemp(prefix="cc-cluster-") if directory is None else directory
        cluster = Cluster(host, chosen, Path(where), replicas, persist, node_timeout_ms)
        cluster.remove_directory = made
        try:
            for port in chosen:
                cluster.start_node(port)
            if not _listening(cluster, timeout):
                cluster.stop()  # a node could not bind its port: other free ones
                continue
            form_cluster(host, chosen, replicas, timeout)
            cluster.wait_ready(timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster
    raise ClusterError(f"no node set of {count} started on free ports in {PORT_TRIES} tries")


# A port found free may be taken before its node binds it (or its bus port, +10000, which can
# lie in the kernel's range for clients' ephemeral ports): then that node exits at once.
PORT_TRIES = 3


def _listening(cluster: Cluster, timeout: float) -> bool:
    """Until every node answers a PING: True; False as soon as one's process has exited."""
    deadline, waiting = time.monotonic() + timeout, set(cluster.ports)
    while waiting:
        for port in sorted(waiting):
            if not cluster.alive(port):
                return False
            with contextlib.suppress(redis.RedisError), cluster.node_client(port) as node:
                node.ping()
                waiting.discard(port)
        if waiting and time.monotonic() > deadline:
            return True  # running but silent: form_cluster's error names the ports
        time.sleep(0.05)
    return True


def flush_cluster(cluster: Cluster) -> None:
    """Empty every primary (a test's data only: the cluster is the session's own)."""
    for port in cluster.primary_ports():
        cluster.node_client(port).flushall()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    """3 primaries, no replicas, in a temporary directory removed at the end."""
    cluster = start_cluster(primaries=3, replicas=0)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_cluster_url(redis_cluster: Cluster) -> str:
    """`redis+cluster://127.0.0.1:<port>,…` of the session's cluster."""
    return redis_cluster.url


def main(argv: Sequence[str] | None = None) -> int:
    """Start a cluster and keep it until Ctrl-C."""
    parser = argparse.ArgumentParser(description="A local Redis Cluster until Ctrl-C.")
    parser.add_argument("--dir", help="where the nodes keep their files (default: temporary)")
    parser.add_argument("--primaries", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=0, help="per primary")
    parser.add_argument("--persist", action="store_true", help="append-only file, fsync always")
    args = parser.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    cluster = start_cluster(
        args.dir, primaries=args.primaries, replicas=args.replicas, persist=args.persist
    )
    print(f"REDIS_URL={cluster.url}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
