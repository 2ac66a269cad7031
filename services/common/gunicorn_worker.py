"""The command service's gunicorn worker: the sync worker, with every read from a client bounded.

A sync worker serves one connection at a time, so a client that connects and sends nothing, or
stops half-way through its request, would block it in gunicorn's reads until the master kills
it for silence (``timeout``, 30 s), with the other connections waiting in the listen queue.
Every read from a client therefore waits at most ``CLIENT_TIMEOUT`` seconds (2 by default), and
a read that times out counts as the client having gone: a connection that sent nothing by then
is closed without an answer, a request cut short is treated like one whose client closed
(gunicorn drops it; a body shorter than its ``Content-Length`` is never executed). A slow
client that trickles a byte now and then is not bounded by this: that is the job of the
buffering proxy in front (deploy/nginx/), which hands gunicorn only complete requests.
"""

from __future__ import annotations

import os
import socket

from gunicorn import util
from gunicorn.workers.sync import SyncWorker

DEFAULT_CLIENT_TIMEOUT = 2.0  # seconds; a client behind the proxy sends its request at once


def client_timeout(environ: dict[str, str] | None = None) -> float | None:
    """Seconds a worker waits for a client's next bytes (``CLIENT_TIMEOUT``; 0: forever)."""
    raw = (os.environ if environ is None else environ).get("CLIENT_TIMEOUT", "")
    try:
        seconds = float(raw) if raw.strip() else DEFAULT_CLIENT_TIMEOUT
    except ValueError:
        raise ValueError(f"CLIENT_TIMEOUT={raw!r} is not a number of seconds") from None
    return seconds if seconds > 0 else None


class _BoundedSocket(socket.socket):
    """A client connection whose reads give up after its timeout, as if the client had closed.

    gunicorn's parser and body readers treat an empty read as the client's end (the request is
    dropped, a short body is never executed, the connection closed); a timeout raised instead
    would reach the application or gunicorn's error log as a traceback for every slow client.
    """

    __slots__ = ()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            return b""


def bounded(client: socket.socket, timeout: float | None) -> socket.socket:
    """The connection as a `_BoundedSocket` with `timeout` (blocking without one)."""
    if timeout is None:
        client.setblocking(True)
        return client
    wrapped = _BoundedSocket(client.family, client.type, client.proto, fileno=client.detach())
    wrapped.settimeout(timeout)
    return wrapped


class BoundedSyncWorker(SyncWorker):
    """gunicorn's sync worker whose every read from a client waits at most ``CLIENT_TIMEOUT``
    (see the module's docstring)."""

    client_timeout: float | None = DEFAULT_CLIENT_TIMEOUT

    def init_process(self) -> None:
        """Read ``CLIENT_TIMEOUT`` (a bad value stops the worker at boot, loudly)."""
        self.client_timeout = client_timeout()
        super().init_process()

    def accept(self, listener: socket.socket) -> None:
        """Accept one connection and serve it, its reads bounded."""
        client, addr = listener.accept()
        client = bounded(client, self.client_timeout)
        util.close_on_exec(client.fileno())
        self.handle(listener, client, addr)
