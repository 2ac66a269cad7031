"""A Redis Cluster of cluster-mode redis-servers (`make run-cluster`, tests/redis_cluster.py).

Each node keeps its `nodes.conf` in its own directory: started again it keeps its identity and
slots, and a cluster formed once is found formed on the next run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import redis

from deploy.local.host import redis_cli_binary, redis_server_binary

# Run by path, not `-m`: it needs only the standard library, whatever the working directory.
AOF_REPAIR = Path(__file__).with_name("aof.py")


class ClusterError(RuntimeError):
    """The cluster could not be formed or was not ready in time."""


def redis_argv(
    port: int,
    directory: Path,
    host: str = "127.0.0.1",
    *,
    aof: str = "no",
    cluster: bool = False,
    node_timeout_ms: int = 2000,
    acl: Path | None = None,
) -> list[str]:
    """A redis-server on host:port with its files in `directory` (made here) and no RDB
    snapshots; `aof`: "no", or how often the append-only file is fsynced ("always": before each
    reply, "everysec"), started through deploy/local/aof.py, which first cuts a script torn
    by a crash off the file's end (Redis would half apply it at a later restart). `cluster`:
    a cluster node, replaced by its replica (if it has one) after `node_timeout_ms` of
    silence. `acl`: its users' ACL file (services/redis_store/acl.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    argv = [redis_server_binary(), "--port", str(port), "--bind", host, "--dir", str(directory)]
    argv += ["--save", "", "--daemonize", "no", "--appendonly", "no" if aof == "no" else "yes"]
    argv += [] if aof == "no" else ["--appendfsync", aof]
    if cluster:
        argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        argv += ["--cluster-node-timeout", str(node_timeout_ms)]
    argv += [] if acl is None else ["--aclfile", str(acl)]
    return argv if aof == "no" else [sys.executable, str(AOF_REPAIR), *argv]


Auth = tuple[str, ...]  # (user, password) of a node with an ACL; () without


def _state(host: str, port: int, auth: Auth = ()) -> str:
    """The node's cluster_state ("ok", "fail"), or "" while it does not answer."""
    user, password = auth or (None, None)
    try:
        with redis.Redis(host=host, port=port, socket_timeout=2, username=user,
                         password=password) as node:  # fmt: skip
            info = node.execute_command("CLUSTER", "INFO")
    except redis.RedisError:
        return ""
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "ok" if "cluster_state:ok" in text else "none" if "slots_assigned:0" in text else "fail"


def form_cluster(
    host: str, ports: Sequence[int], replicas: int, timeout: float = 30.0, auth: Auth = ()
) -> str:
    """Make the nodes one cluster with `redis-cli --cluster create` (3 primaries or more, then
    their replicas) unless they are one already; wait until every node says cluster_state:ok.
    `auth`: an admin user of nodes with an ACL. Returns "created" or "found"."""
    deadline, done = time.monotonic() + timeout, "found"
    while "" in (states := [_state(host, p, auth) for p in ports]):
        if time.monotonic() > deadline:
            raise ClusterError(f"the nodes on {list(ports)} do not answer")
        time.sleep(0.05)
    if states[0] == "none":
        argv = [redis_cli_binary(), "--cluster", "create", *(f"{host}:{p}" for p in ports)]
        login = ["--user", auth[0], "--no-auth-warning"] if auth else []
        run = subprocess.run(
            [*argv, "--cluster-replicas", str(replicas), "--cluster-yes", *login],
            capture_output=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "REDISCLI_AUTH": auth[1]} if auth else None,  # not in argv
        )
        if run.returncode != 0:
            raise ClusterError(f"{' '.join(argv)}:\n{(run.stdout + run.stderr).decode()}")
        done = "created"
    while any(_state(host, p, auth) != "ok" for p in ports):
        if time.monotonic() > deadline:
            raise ClusterError(f"the cluster on {list(ports)} is not ready")
        time.sleep(0.05)
    return done
