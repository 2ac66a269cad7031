"""Redis clients with bounded, named connection pools: one per process and role.

redis-py's defaults are a design decision we make here, not inherit:

- `redis.Redis.from_url` gives a `ConnectionPool` that opens up to 100 connections (redis-py
  8.1) and then raises `MaxConnectionsError: Too many connections` at once. We use a
  `BlockingConnectionPool` of an explicit size, derived from the process's concurrency by
  the caller: a request that finds every connection busy waits up to `pool_timeout` for one
  instead of failing, and a process can never hold more than `max_connections`.
- The default socket timeout (5 s in redis-py 8.1, `None` before) must be longer than any
  blocking command sent on that client (`XREAD BLOCK`): such readers get their own client
  with `socket_timeout = block + margin` (see `blocking_read_timeout`).
- Every connection is named (`CLIENT SETNAME cc:<role>`), so `CLIENT LIST` shows who holds
  what, and tests count a role's connections.

A client is made once per process and role (`shared_client`): a forked child makes its own
(connections are not fork-safe), everything in one process shares it.

Redis Cluster: `redis+cluster://[user:password@]host:port[,host:port…]` (seed nodes; any
reachable one is enough, the client learns the others from CLUSTER SLOTS; the one user serves
every node) gives a `redis.cluster.RedisCluster`.
It keeps one pool per node, so `max_connections` bounds each node's pool (the same
`BlockingConnectionPool`, same timeouts and names): a process holds at most
`max_connections` × nodes. Reads go to primaries only (no `read_from_replicas`: the event
store reads what it just wrote). MOVED (a slot moved for good) updates the client's slot map
and retries on the new owner; ASK (a slot being migrated) sends that one command to the
importing node; connection errors and CLUSTERDOWN re-read the topology and retry with backoff
(`CLUSTER_RETRIES`) — so a slot migration is invisible to callers and a primary's failover
costs the commands sent during it an error, not a wrong answer. Multi-key commands must touch
one slot (CROSSSLOT otherwise); a non-transactional pipeline is split by node.
`SCRIPT LOAD` goes to every primary and EVALSHA to the keys' node (NOSCRIPT there → loaded).
The cluster client is typed as `redis.Redis` for callers (same command methods); code that
must know the difference asks `is_cluster`.
"""

from __future__ import annotations

import os
import threading
from typing import cast

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

CLUSTER_SCHEME = "redis+cluster://"
# Cluster-level retries of a command that met a connection error, a timeout or CLUSTERDOWN
# (each re-reads the topology first): ~0.05+0.1+0.2+… s, enough to ride over a slot
# migration's hand-over, not to hide a dead primary for longer than a client's own retry.
CLUSTER_RETRIES = 5
DEFAULT_SOCKET_TIMEOUT = 5.0  # seconds; a plain command answers in well under 1 ms
DEFAULT_CONNECT_TIMEOUT = 2.0
DEFAULT_POOL_TIMEOUT = 5.0  # how long a caller waits for a free connection of its pool


def connect(
    url: str,
    *,
    role: str,
    max_connections: int,
    socket_timeout: float | None = DEFAULT_SOCKET_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    pool_timeout: float = DEFAULT_POOL_TIMEOUT,
) -> redis.Redis:
    """A new client of `url` whose pool holds at most `max_connections`, named `cc:<role>`.

    For a `redis+cluster://` URL: a `RedisCluster` whose pool of each node holds at most
    `max_connections`.
    """
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    if is_cluster_url(url):
        nodes = cluster_nodes(url)
        (host, port), rest = nodes[0], nodes[1:]
        cluster = RedisCluster(
            # The `url` form makes every node's pool a `connection_pool_class` (redis-py
            # 8.1 builds a plain ConnectionPool per node otherwise); the rest are seeds too.
            # Its credentials (a Redis user: services/redis_store/acl.py) serve every node.
            url=f"redis://{cluster_userinfo(url)}{host}:{port}/0",
            startup_nodes=[ClusterNode(h, p) for h, p in rest],
            connection_pool_class=redis.BlockingConnectionPool,
            max_connections=max_connections,
            timeout=pool_timeout,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            socket_keepalive=True,
            client_name=client_name(role),
            retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), CLUSTER_RETRIES),
        )
        return cast(redis.Redis, cluster)  # same command methods; see the module's docstring
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=pool_timeout,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        socket_keepalive=True,
        health_check_interval=30,  # a connection idle that long is PINGed before reuse
        client_name=client_name(role),
    )
    return redis.Redis(connection_pool=pool)


def is_cluster_url(url: str) -> bool:
    """Whether `url` names a Redis Cluster (`redis+cluster://host:port[,host:port…]`)."""
    return url.startswith(CLUSTER_SCHEME)


def broker_url(broker: str, redis_url: str) -> str:
    """The Celery broker: `BROKER_URL`, or the event store's Redis when that is a single one.

    Celery's Redis transport cannot use a cluster, so with `REDIS_URL=redis+cluster://…` the
    broker must be named: refusing to start says so instead of a transport error later.
    """
    if broker:
        return broker
    if is_cluster_url(redis_url):
        raise SystemExit(
            "BROKER_URL must name a single Redis (redis://host:port/db) when REDIS_URL is a "
            "Redis Cluster: Celery's broker cannot run on a cluster"
        )
    return redis_url


def cluster_userinfo(url: str) -> str:
    """The ``user:password@`` of a `redis+cluster://user:password@host:port,…` URL, or ""."""
    netloc = url[len(CLUSTER_SCHEME) :].split("/", 1)[0]
    return netloc.rpartition("@")[0] + "@" if "@" in netloc else ""


def cluster_nodes(url: str) -> list[tuple[str, int]]:
    """The seed nodes of a `redis+cluster://[user:password@]host:port[,host:port…]` URL."""
    rest = url[len(CLUSTER_SCHEME) :].split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
    nodes: list[tuple[str, int]] = []
    for item in filter(None, rest.split(",")):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"{url!r}: expected redis+cluster://host:port[,host:port…]")
        nodes.append((host.strip("[]"), int(port)))
    if not nodes:
        raise ValueError(f"{url!r}: expected redis+cluster://host:port[,host:port…]")
    return nodes


def is_cluster(client: object) -> bool:
    """Whether `client` is a Redis Cluster client (commands are routed by slot)."""
    return isinstance(client, RedisCluster)


def client_name(role: str) -> str:
    """The `CLIENT SETNAME` of a role's connections (what `CLIENT LIST` shows)."""
    return f"cc:{role}"


def blocking_read_timeout(block_seconds: float) -> float:
    """Socket timeout for a client that sends `XREAD BLOCK <block_seconds>`: longer than the
    block, so a quiet stream is not mistaken for a dead server."""
    return block_seconds + max(5.0, block_seconds * 0.5)


_clients: dict[tuple[int, str, str], redis.Redis] = {}
_lock = threading.Lock()


def _unlock_in_child() -> None:
    """A child forked while another thread of its parent made a client would inherit `_lock`
    held, and wait on it for ever (the prefork bot worker forks beside its feed watcher)."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_unlock_in_child)


def shared_client(
    url: str,
    *,
    role: str,
    max_connections: int,
    socket_timeout: float | None = DEFAULT_SOCKET_TIMEOUT,
) -> redis.Redis:
    """This process's client for (`url`, `role`), made on first use with these settings.

    Keyed by process id too: after a fork the child makes its own instead of sharing the
    parent's sockets.
    """
    key = (os.getpid(), url, role)
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = connect(
                    url, role=role, max_connections=max_connections, socket_timeout=socket_timeout
                )
                _clients[key] = client
    return client


def pool_size(client: redis.Redis) -> int:
    """The most connections `client` may hold at once (per node, for a cluster)."""
    if is_cluster(client):
        kwargs = cast(RedisCluster, client).nodes_manager.connection_kwargs
        return int(kwargs["max_connections"])
    return int(client.connection_pool.max_connections)
