"""`Wire`: the event store's two hot commands sent straight down a pooled connection.

Every turn sends the append script (and, when its cached state may be stale, a catch-up
XRANGE). Through `redis.Redis.execute_command` a command costs ~25-30 µs of CPU here — pool
checkout and release under a lock with a readiness poll, the retry wrapper, observability
hooks, response callbacks — against ~7 µs to pack it with hiredis, write it and read the raw
reply; `make bench` (tests/bench/bench_redis_client.py) prints both beside a turn's CPU.

Connections are checked out per command and given back as soon as the reply is read, to a
LIFO queue of its own (~1 µs each way, no readiness poll): it makes a connection (with the
client's connection settings) only when none is free and fewer than `max_connections`
exist, and otherwise waits for one to come back. So it holds at most `max_connections`
(callers in a command at the same time), never takes a connection the client's own
commands need, and its connections are named after the client's plus ":wire". A forked
child starts with none of its parent's.

Only commands that are safe to send twice go through here: a lost connection is retried
once on a new one (the append script is idempotent by command id).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, cast

import redis
from hiredis import pack_command  # str (as UTF-8), bytes, int and float arguments
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError


def _name(kwargs: dict[str, Any]) -> str | None:
    """The wire's connections are named after the client's, plus ":wire" (CLIENT LIST)."""
    name = kwargs.get("client_name")
    return f"{name}:wire" if name else None


class Wire:
    """Idempotent commands on connections of a bounded pool of its own; raw replies."""

    def __init__(self, client: redis.Redis, max_connections: int | None = None) -> None:
        self._client = client
        base = client.connection_pool
        self._size = max_connections or int(getattr(base, "max_connections", 0) or 0) or 8
        self._wait = float(getattr(base, "timeout", None) or 5.0)
        self._make = lambda: base.connection_class(
            **{**base.connection_kwargs, "client_name": _name(base.connection_kwargs)}
        )
        self._reset()

    def _reset(self) -> None:
        # LIFO: the most recently used connection is reused, the others may idle out.
        self._free: queue.LifoQueue[AbstractConnection] = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @property
    def max_connections(self) -> int:
        """The most connections this wire may hold."""
        return self._size

    def _take(self) -> AbstractConnection:
        if self._pid != os.getpid():  # a forked child never uses its parent's sockets
            self._reset()
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._made < self._size:
                self._made += 1
                return cast(AbstractConnection, self._make())  # connects on first use
        try:  # every connection is in a command: wait for one to come back
            return self._free.get(timeout=self._wait)
        except queue.Empty:
            raise ConnectionError(f"no free connection within {self._wait} s") from None

    def close(self) -> None:
        """Close the idle connections' sockets (a wire being replaced). They stay on the list
        and reconnect if used again; one in a command now is left to its caller."""
        idle: list[AbstractConnection] = []
        while True:
            try:
                idle.append(self._free.get_nowait())
            except queue.Empty:
                break
        for conn in idle:
            conn.disconnect()
            self._free.put(conn)

    def call(self, *args: Any) -> Any:
        """Send one command and return its raw reply (a Redis error reply raises)."""
        for attempt in (1, 2):
            conn = self._take()
            try:
                conn.send_packed_command([pack_command(args)], check_health=False)
                return conn.read_response()
            except ResponseError:
                raise  # an error reply: the connection is in a clean state
            except (ConnectionError, TimeoutError, OSError):
                conn.disconnect()  # reconnects on its next use
                if attempt == 2:
                    raise
            except BaseException:
                conn.disconnect()  # interrupted mid-command: its reply may still arrive
                raise
            finally:
                self._free.put(conn)  # back on the list whatever happened
        raise AssertionError("unreachable")

    def evalsha(self, sha: str, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a script by its hash, loading it first if this server does not know it yet."""
        try:
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
        except NoScriptError:
            self._client.script_load(script)
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
