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

After each answer gunicorn closes "gracefully" (`util.close_graceful`, RFC 9112 section 9.6):
it sends its FIN, then reads until the client closes (up to 2 s), so that request bytes the
app never read cannot make the kernel reset the connection and lose the answer. With nothing
left unread there is nothing to lose, yet the worker still waited for the client's close: one
more client round trip a request (a client process waiting for a core on a busy machine), in
which a one-worker instance serves nobody. So when the request's body was read whole, the
first read after the answer finds out whether anything is there to drain; if not, it ends at
once. If bytes are there, or the body was not read whole (a body refused before it was read,
maybe still on its way: after `Expect: 100-continue` its bytes can arrive after the answer),
the client is still sending what the app never read, and the drain goes on as gunicorn's
does, waiting for the client's close.
"""

from __future__ import annotations

import os
import select
import socket

from gunicorn import util
from gunicorn.http.body import ChunkedReader, LengthReader
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

    __slots__ = ("_answered", "_owed")
    _answered: bool  # the answer is out: the next read is the drain's first
    _owed: bool  # the request's body was not read whole: bytes may still be on their way

    def shutdown(self, how: int) -> None:
        """Half-close; once the write side is (the answer is out), reads drain (see `recv`)."""
        super().shutdown(how)
        if how in (socket.SHUT_WR, socket.SHUT_RDWR):
            self._answered = True

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if self._answered:  # the first read of the drain after the answer (module docstring)
            self._answered = False
            if not self._owed and not _readable(self):
                return b""  # nothing unread, nothing to come: no reset can lose the answer
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            return b""


def _readable(sock: socket.socket) -> bool:
    """Whether a read would return at once (bytes, or the client's close)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def bounded(client: socket.socket, timeout: float | None) -> socket.socket:
    """The connection as a `_BoundedSocket` with `timeout` (blocking without one)."""
    if timeout is None:
        client.setblocking(True)
        return client
    wrapped = _BoundedSocket(client.family, client.type, client.proto, fileno=client.detach())
    wrapped._answered = wrapped._owed = False
    wrapped.settimeout(timeout)
    return wrapped


def body_owed(req: object) -> bool:
    """Whether the client may still be sending a body the app did not read whole: gunicorn's
    reader of it has not reached its end (a length not read to 0, a chunked body whose last
    chunk was not read; a body read to the client's close, or a reader not known here, is
    taken as owed: the drain then runs as gunicorn's own)."""
    reader = getattr(getattr(req, "body", None), "reader", None)
    if isinstance(reader, LengthReader):
        return reader.length > 0
    if isinstance(reader, ChunkedReader):
        return reader.parser is not None
    return True


class BoundedSyncWorker(SyncWorker):
    """gunicorn's sync worker whose every read from a client waits at most ``CLIENT_TIMEOUT``
    (see the module's docstring)."""

    client_timeout: float | None = DEFAULT_CLIENT_TIMEOUT

    def init_process(self) -> None:
        """Read ``CLIENT_TIMEOUT`` (a bad value stops the worker at boot, loudly)."""
        self.client_timeout = client_timeout()
        super().init_process()

    def handle_request(
        self, listener: socket.socket, req: object, client: socket.socket, addr: object
    ) -> None:
        """Serve the request, then note whether its body is still owed (see `recv`)."""
        try:
            super().handle_request(listener, req, client, addr)
        finally:
            if isinstance(client, _BoundedSocket):
                client._owed = body_owed(req)

    def accept(self, listener: socket.socket) -> None:
        """Accept one connection and serve it, its reads bounded."""
        client, addr = listener.accept()
        client = bounded(client, self.client_timeout)
        util.close_on_exec(client.fileno())
        self.handle(listener, client, addr)
