"""A local Redis Cluster from the redis-server `make run` uses: N primaries, R replicas each.

Each node is a redis-server in cluster mode with its own directory (`<dir>/<port>/`, where
its `nodes.conf` lives, so a node stopped and started again keeps its identity and slots).
The cluster is created with `redis-cli --cluster create … --cluster-yes` (the redis-cli
shipped beside that redis-server, else one in PATH); without redis-cli the same is done by
hand (CLUSTER ADDSLOTS, MEET, REPLICATE). It is ready when every node says
`cluster_state:ok`, agrees on who serves every slot, and every primary has its replicas
connected (so `WAIT` can be answered at once).

Tests use `start_cluster`/`Cluster.stop` (tests/redis_cluster.py); deploy/local/run.py can
use `node_argv` for its own restartable parts and `create_cluster`/`wait_ready` once they run.

    python -m deploy.local.cluster --dir /tmp/cc-cluster --primaries 3 --replicas 1
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from deploy.local.run import redis_server_binary

SLOTS = 16384
DEFAULT_NODE_TIMEOUT_MS = 2000  # how long a primary may be silent before its replica takes over


class ClusterError(RuntimeError):
    """The cluster could not be started or did not become ready in time."""


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` ports nobody listens on now, whose cluster bus port (+10000) is free too."""
    ports: list[int] = []
    for _ in range(count * 50):
        if len(ports) == count:
            break
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port + 10000 > 65535 or port in ports or not _free(host, port + 10000):
            continue
        ports.append(port)
    if len(ports) < count:
        raise ClusterError(f"could not find {count} free ports")
    return ports


def _free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def redis_cli_binary() -> str | None:
    """The redis-cli beside the redis-server we run, else one in PATH, else None."""
    beside = Path(redis_server_binary()).with_name("redis-cli")
    if beside.is_file():
        return str(beside)
    return shutil.which("redis-cli")


def node_argv(
    port: int,
    directory: Path,
    *,
    host: str = "127.0.0.1",
    persist: bool = False,
    node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS,
    binary: str | None = None,
) -> list[str]:
    """The command line of one cluster node serving `host:port`, its files in `directory`.

    `persist`: append-only file with `appendfsync always` (as `make run`'s single Redis);
    otherwise nothing is written but `nodes.conf`.
    """
    persistence = ("--appendonly", "yes", "--appendfsync", "always") if persist else (
        "--appendonly", "no")  # fmt: skip
    return [
        binary or redis_server_binary(),
        *("--port", str(port), "--bind", host, "--dir", str(directory)),
        *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
        *("--cluster-node-timeout", str(node_timeout_ms)),
        *persistence,
        *("--save", "", "--daemonize", "no"),
    ]


def _client(host: str, port: int) -> redis.Redis:
    return redis.Redis(
        host=host,
        port=port,
        socket_connect_timeout=1.0,
        socket_timeout=5.0,
        retry=Retry(NoBackoff(), 0),
    )


def _info(client: redis.Redis) -> dict[str, str]:
    raw = client.execute_command("CLUSTER", "INFO")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return dict(line.split(":", 1) for line in text.split() if ":" in line)


def _wait(what: str, ok: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ok():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out waiting for {what}")
        time.sleep(0.05)


def create_cluster(host: str, ports: Sequence[int], replicas: int, timeout: float = 30.0) -> None:
    """Make running, empty cluster-mode nodes one cluster: the first `len(ports) // (replicas
    + 1)` are primaries with the slots spread evenly, the rest their replicas."""
    if len(ports) % (replicas + 1):
        raise ClusterError("the number of nodes must be a multiple of replicas + 1")
    for port in ports:
        _wait(f"node {port}", partial(_ping, host, port), timeout)
    cli = redis_cli_binary()
    if cli is not None and len(ports) // (replicas + 1) >= 3:  # it refuses fewer primaries
        argv = [cli, "--cluster", "create", *(f"{host}:{p}" for p in ports)]
        argv += ["--cluster-replicas", str(replicas), "--cluster-yes"]
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            out = (done.stdout + done.stderr).decode(errors="replace")
            raise ClusterError(f"redis-cli --cluster create failed:\n{out}")
    else:
        _create_by_hand(host, ports, replicas, timeout)
    wait_ready(host, ports, replicas, timeout)


def _create_by_hand(host: str, ports: Sequence[int], replicas: int, timeout: float) -> None:
    """What redis-cli --cluster create does, for a machine without redis-cli (Redis 6.2 has
    no ADDSLOTSRANGE: ADDSLOTS takes the slots one by one)."""
    n = len(ports) // (replicas + 1)
    primaries, others = list(ports[:n]), list(ports[n:])
    for i, port in enumerate(primaries):
        first, last = i * SLOTS // n, (i + 1) * SLOTS // n - 1
        _client(host, port).execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
        _client(host, port).execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
    for port in ports[1:]:
        _client(host, port).execute_command("CLUSTER", "MEET", host, ports[0])
    _wait("every node to know every other", lambda: all(
        len(_client(host, p).execute_command("CLUSTER", "NODES").splitlines()) == len(ports)
        for p in ports), timeout)  # fmt: skip
    for j, port in enumerate(others):
        primary = _client(host, primaries[j % n]).execute_command("CLUSTER", "MYID")
        node_id = primary.decode() if isinstance(primary, bytes) else str(primary)
        _wait(f"node {port} to replicate", partial(_replicate, host, port, node_id), timeout)


def _ping(host: str, port: int) -> bool:
    return bool(_client(host, port).ping())


def _replicate(host: str, port: int, node_id: str) -> bool:
    return bool(_client(host, port).execute_command("CLUSTER", "REPLICATE", node_id))


def _slot_owners(host: str, port: int) -> list[tuple[int, int, int]]:
    """(first slot, last slot, primary's port) as the node at `port` sees it."""
    slots = _client(host, port).execute_command("CLUSTER", "SLOTS")
    return sorted((int(s[0]), int(s[1]), int(s[2][1])) for s in slots)


def wait_ready(host: str, ports: Sequence[int], replicas: int, timeout: float = 30.0) -> None:
    """Until every node says cluster_state:ok and shows the same slot owners, and every
    primary has `replicas` replicas online."""

    def ready() -> bool:
        if not all(_info(_client(host, p)).get("cluster_state") == "ok" for p in ports):
            return False
        views = {tuple(_slot_owners(host, p)) for p in ports}
        if len(views) != 1:
            return False
        for port in {owner for _, _, owner in next(iter(views))}:
            raw = _client(host, port).info("replication")
            if int(raw.get("connected_slaves", 0)) < replicas:
                return False
            online = [v for k, v in raw.items() if k.startswith("slave") and isinstance(v, dict)]
            if sum(1 for v in online if v.get("state") == "online") < replicas:
                return False
        return True

    _wait("cluster_state:ok on every node", ready, timeout)


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
        return [int(v["port"]) for k, v in raw.items()
                if k.startswith("slave") and isinstance(v, dict)]  # fmt: skip

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
        node_dir = self.directory / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        argv = node_argv(port, node_dir, host=self.host, persist=self.persist,
                         node_timeout_ms=self.node_timeout_ms)  # fmt: skip
        log = (node_dir / "redis.log").open("ab")
        self.procs[port] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)  # fmt: skip
        log.close()

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
    if primaries < 1 or replicas < 0:
        raise ClusterError("at least one primary, and no negative number of replicas")
    chosen = list(ports) if ports is not None else free_ports(count, host)
    if len(chosen) != count:
        raise ClusterError(f"{count} nodes need {count} ports, got {len(chosen)}")
    made = directory is None
    if directory is None:
        import tempfile

        directory = tempfile.mkdtemp(prefix="cc-cluster-")
    cluster = Cluster(host, chosen, Path(directory), replicas, persist, node_timeout_ms)
    cluster.remove_directory = made
    try:
        for port in chosen:
            cluster.start_node(port)
        create_cluster(host, chosen, replicas, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def main(argv: Sequence[str] | None = None) -> int:
    """Start a cluster and keep it until Ctrl-C."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="where the nodes keep their files")
    parser.add_argument("--primaries", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=0, help="per primary")
    parser.add_argument("--port", type=int, default=None, help="first node's port (then +1…)")
    parser.add_argument("--persist", action="store_true", help="append-only file, fsync always")
    args = parser.parse_args(argv)
    count = args.primaries * (1 + args.replicas)
    ports = None if args.port is None else list(range(args.port, args.port + count))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    cluster = start_cluster(args.dir, primaries=args.primaries, replicas=args.replicas,
                            ports=ports, persist=args.persist)  # fmt: skip
    print(f"REDIS_URL={cluster.url}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
