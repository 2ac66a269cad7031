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
"""

from __future__ import annotations

import os
import threading

import redis

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
    """A new client of `url` whose pool holds at most `max_connections`, named `cc:<role>`."""
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
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


def client_name(role: str) -> str:
    """The `CLIENT SETNAME` of a role's connections (what `CLIENT LIST` shows)."""
    return f"cc:{role}"


def blocking_read_timeout(block_seconds: float) -> float:
    """Socket timeout for a client that sends `XREAD BLOCK <block_seconds>`: longer than the
    block, so a quiet stream is not mistaken for a dead server."""
    return block_seconds + max(5.0, block_seconds * 0.5)


_clients: dict[tuple[int, str, str], redis.Redis] = {}
_lock = threading.Lock()


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
    """The most connections `client` may hold at once."""
    return int(client.connection_pool.max_connections)
