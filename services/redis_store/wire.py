"""`Wire`: the event store's hot commands sent straight down a redis-py connection.

A turn sends two commands (the catch-up XRANGE and the append script). Through
`redis.Redis.execute_command` each one costs about 50-80 µs of Python on this project's
machines — pool checkout and release, the retry wrapper, observability hooks, response
callbacks — against well under 10 µs to pack it, write it and read the reply. `Wire` keeps
one connection of the client's own pool per thread (and per process: a fork gets its own)
and uses hiredis's packer and the connection's hiredis parser directly, so the raw reply comes back
(no response callbacks: callers parse it). Connection settings, TLS and authentication are
the client's, since the connection is built by its pool.

Only commands that are safe to send twice go through here: a lost connection is retried
once on a new one (the append script is idempotent by command id).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import redis
from hiredis import pack_command  # str (as UTF-8), bytes, int and float arguments
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError, NoScriptError, TimeoutError


class Wire:
    """Idempotent commands on a per-thread connection; raw replies."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._pool = client.connection_pool
        self._local = threading.local()

    def _connection(self) -> AbstractConnection:
        local = self._local
        conn: AbstractConnection | None = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            # Taken from the pool once and kept: this thread is its only user.
            conn = self._pool.get_connection()
            local.conn, local.pid = conn, os.getpid()
        return conn

    def call(self, *args: Any) -> Any:
        """Send one command and return its raw reply (a Redis error reply raises)."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.send_packed_command([pack_command(args)], check_health=False)
                return conn.read_response()
            except (ConnectionError, TimeoutError, OSError):
                conn.disconnect()  # reconnects on next use
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def evalsha(self, sha: str, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a script by its hash, loading it first if this server does not know it yet."""
        try:
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
        except NoScriptError:
            self._client.script_load(script)
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
