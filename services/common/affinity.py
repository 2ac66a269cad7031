"""Game affinity for gunicorn: all requests for one game are served by one worker process.

Why: the command service keeps each game's folded state in the worker's memory and catches
it up from the move stream before every command. With the kernel handing connections to
whichever sync worker accepts first, each worker has missed most of a game's moves since it
last served it, so every move was fetched, decoded, validated and applied by every worker
(about 0.1 ms of CPU per turn with 3 workers on 2 cores). Served by one worker, a game's
cached state is already current.

How: `GameAffinityWorker` is gunicorn's sync worker plus a handover step. After accepting a
connection it peeks (``MSG_PEEK``: nothing is consumed) at the request line; if the path is
``/games/<id>…`` and another worker owns that game (``crc32(id) % slots``), it passes the
connected socket to that worker over a Unix datagram socket (``SCM_RIGHTS``) and goes back
to accepting. The owner serves it like a connection of its own.

Affinity only saves work, it is never needed for correctness: every command still checks
the stream's sequence when it appends. So anything unusual falls back to serving the request
where it was accepted: a request line not yet complete in the first segment, an owner that is
restarting or whose queue is full (``EAGAIN``), a path that names no game.

No client holds a worker for long (`BoundedSyncWorker`, the base of both workers): a sync
worker serves one connection at a time, so a client that connects and sends nothing, or stops
half-way through its request, would block it — in the peek or in gunicorn's own reads — until
the master kills it for silence (``timeout``, 30 s), with the connections queued in its inbox.
Every read from a client therefore waits at most ``CLIENT_TIMEOUT`` seconds (2 by default), and
a read that times out counts as the client having gone: a connection that sent nothing by then
is closed without an answer (counted as ``idle``), a request cut short is treated like one
whose client closed (gunicorn drops it; a body shorter than its ``Content-Length`` is never
executed). A slow client that trickles a byte now and then is not bounded by this: that is the
job of the buffering proxy in front (deploy/nginx/), which hands gunicorn only complete requests.

Slots: the master gives each worker a slot number in `assign_slot` (gunicorn's ``pre_fork``
hook), the lowest one free. A worker restarted after ``max_requests`` gets its old slot back;
a reload, which starts the new workers before it stops the old ones, hands each new worker
the slot of the oldest old one (the new worker binds the slot's address in its place). A
worker that stops closes its inbox and then serves what is still queued in it. A worker that
is killed (SIGKILL, or by the master after its timeout) loses the connections queued in its
inbox along with the one it was serving; their clients see the connection reset, as for the
request in progress (a turn retried with its Idempotency-Key is safe).
"""

from __future__ import annotations

import array
import contextlib
import errno
import os
import re
import shutil
import socket
import tempfile
import zlib
from typing import Any

from gunicorn import util
from gunicorn.workers.sync import StopWaiting, SyncWorker

# WSGI environ key: True when the request's game is owned by the worker serving it, which then
# serves all of that game's requests (a handover that failed leaves it False).
OWNS_GAME = "carcassonne.owns_game"
# The request line's path, up to the game id: "POST /games/<32 hex>/turns HTTP/1.1".
ROUTED = re.compile(rb"[A-Z]{3,7} /games/([0-9a-f]{32})[/? ]")
PEEK_BYTES = 128  # enough for the method and the path up to the game id
_INBOX_DIR: str | None = None  # the master's private directory of worker inboxes
OUTCOMES = ("owner", "handed_over", "fallback", "no_game", "idle")  # of an accepted connection
DEFAULT_CLIENT_TIMEOUT = 2.0  # seconds; a client behind the proxy sends its request at once
_CONNECTIONS: Any = None  # the Prometheus counter, made in the worker (see `_connections`)
IDLE = -1  # `_owner`'s answer for a connection that sent nothing


def _connections() -> Any:
    """Accepted connections by outcome, so the affinity rate shows on /metrics.

    Made on first use in a worker, never at import: the master imports this module with the
    gunicorn config, before the config names the metrics directory, and prometheus_client
    fixes its multiprocess mode when it is first imported.
    """
    global _CONNECTIONS
    if _CONNECTIONS is None:
        from prometheus_client import Counter

        _CONNECTIONS = Counter(
            "carcassonne_affinity_connections_total",
            "Connections accepted by a command service worker: served by the game's owner "
            "(owner), handed to it (handed_over), served here because it could not take it "
            "(fallback), naming no game (no_game), or closed because the client sent nothing "
            "within CLIENT_TIMEOUT (idle)",
            ["outcome"],
        )
    return _CONNECTIONS


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


def owner_slot(game_id: bytes, slots: int) -> int:
    """The slot of the worker that serves a game: stable across processes and restarts."""
    return zlib.crc32(game_id) % slots


def assign_slot(server: Any, worker: Any) -> None:
    """gunicorn ``pre_fork`` hook (in the master): give the new worker a slot and the inboxes'
    directory."""
    global _INBOX_DIR
    if _INBOX_DIR is None:
        _INBOX_DIR = tempfile.mkdtemp(prefix="cc-affinity-")  # mode 0700: ours alone
        uid, gid = server.cfg.uid, server.cfg.gid
        if (uid, gid) != (os.geteuid(), os.getegid()):  # workers run as gunicorn's `user`
            os.chown(_INBOX_DIR, uid, gid)
    slots = max(1, int(server.num_workers))
    held = {w.slot: w for w in server.WORKERS.values() if getattr(w, "slot", None) is not None}
    free = [s for s in range(slots) if s not in held]
    if free:
        worker.slot = free[0]
    else:  # a reload: the new worker takes over the slot of the oldest worker
        oldest = min(held.values(), key=lambda w: w.age)
        worker.slot, oldest.slot = oldest.slot, None
    worker.slots = slots
    worker.inbox_dir = _INBOX_DIR


def remove_inboxes(server: Any) -> None:
    """gunicorn ``on_exit`` hook: remove the inboxes' directory."""
    if _INBOX_DIR is not None:
        shutil.rmtree(_INBOX_DIR, ignore_errors=True)


class BoundedSyncWorker(SyncWorker):
    """gunicorn's sync worker whose every read from a client waits at most ``CLIENT_TIMEOUT``
    (see the module's docstring); the command service's worker with ``AFFINITY=0``."""

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


class GameAffinityWorker(BoundedSyncWorker):
    """A sync worker that passes each game's connections to the game's owner worker."""

    slot: int | None = None  # set by `assign_slot`; without it this is a plain sync worker
    slots = 1
    inbox_dir = ""
    _owns_game = False  # of the connection being served
    wsgi: Any  # set by gunicorn's Worker
    wait_fds: list[Any]

    def load_wsgi(self) -> None:
        """Load the app, and tell it (in the environ) whether this worker owns the game."""
        super().load_wsgi()
        app = self.wsgi

        def tagged(environ: dict[str, Any], start_response: Any) -> Any:
            environ[OWNS_GAME] = self._owns_game
            return app(environ, start_response)

        self.wsgi = tagged

    def run(self) -> None:
        """The sync worker's loop, plus the inbox: handed-over connections come first."""
        if self.slot is None:  # no `assign_slot` hook in the config: a plain sync worker
            super().run()
            return
        try:
            self._inbox = self._open_inbox(self.slot)
        except OSError as exc:
            self.log.warning("no game affinity in this worker (its inbox: %s)", exc)
            self.slot = None  # a plain sync worker; the others serve its games as fallbacks
            super().run()
            return
        for listener in self.sockets:
            listener.setblocking(False)
        self._counted = {name: _connections().labels(name) for name in OUTCOMES}
        self._addresses = [self._address(slot) for slot in range(self.slots)]  # the inboxes
        self._outbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._outbox.setblocking(False)
        util.close_on_exec(self._inbox.fileno())
        util.close_on_exec(self._outbox.fileno())
        self.wait_fds = [*self.wait_fds, self._inbox]  # + the listeners and the wake-up pipe
        timeout = self.timeout or 0.5
        try:
            while self.alive:
                self.notify()
                if self._serve_inbox() or self._accept_any():
                    continue  # keep serving while there is work, as the sync worker does
                if not self.is_parent_alive():
                    return
                try:
                    self.wait(timeout)
                except StopWaiting:
                    return
        finally:
            self._close_inbox()

    # -- accepting ------------------------------------------------------------------------
    def _accept_any(self) -> bool:
        served = False
        for listener in self.sockets:
            try:
                self.accept(listener)
                served = True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                    raise
        return served

    def accept(self, listener: socket.socket) -> None:
        """Accept one connection; serve it here or hand it to its game's owner."""
        client, addr = listener.accept()
        client = bounded(client, self.client_timeout)
        util.close_on_exec(client.fileno())
        if self.slot is None:  # a plain sync worker (see `run`)
            self._serve(listener, client, addr, owns_game=False)
            return
        owner = self._owner(client)
        if owner == IDLE:  # nothing arrived within the client timeout (or the client left)
            self._counted["idle"].inc()
            client.close()
            return
        if owner is None:
            outcome = "no_game"
        elif owner == self.slot:
            outcome = "owner"
        elif self._hand_over(client, listener, owner):
            self._counted["handed_over"].inc()
            client.close()  # our copy only: the connection lives on in the owner
            return
        else:
            outcome = "fallback"
        self._counted[outcome].inc()
        self._serve(listener, client, addr, owns_game=outcome == "owner")

    def _serve(
        self, listener: socket.socket, client: socket.socket, addr: Any, owns_game: bool
    ) -> None:
        self._owns_game = owns_game
        try:
            self.handle(listener, client, addr)
        finally:
            self._owns_game = False

    def _owner(self, client: socket.socket) -> int | None:
        """The slot owning the request's game; None (no game in the path, or the request line
        is not complete in the first bytes that arrived); `IDLE` if no byte came within the
        client timeout or the client closed."""
        try:
            # Waits for the first bytes, at most the client timeout (`_BoundedSocket` answers
            # b"" then, as for a closed connection).
            head = client.recv(PEEK_BYTES, socket.MSG_PEEK)
        except OSError:
            return None  # served here: the usual error handling answers or drops it
        if not head:
            return IDLE
        found = ROUTED.match(head)
        return owner_slot(found.group(1), self.slots) if found else None

    # -- the inbox ------------------------------------------------------------------------
    def _address(self, slot: int) -> str:
        return os.path.join(self.inbox_dir, f"slot-{slot}")

    def _open_inbox(self, slot: int) -> socket.socket:
        inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._inbox_address = address = self._address(slot)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)  # a worker this one replaces (its own inbox stays open)
        inbox.bind(address)
        inbox.setblocking(False)
        self._inbox_inode = os.stat(address).st_ino
        return inbox

    def _hand_over(self, client: socket.socket, listener: socket.socket, slot: int) -> bool:
        """Pass the connection to the worker of `slot`; False if it cannot take it now."""
        index = self.sockets.index(listener)
        try:
            # sendmsg, not socket.send_fds: that one drops its address argument (3.11).
            self._outbox.sendmsg(
                [bytes([index])],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [client.fileno()]))],
                0,
                self._addresses[slot],
            )
        except OSError:  # no such worker (restarting), or its queue is full (EAGAIN)
            return False
        return True

    def _serve_inbox(self) -> bool:
        """Serve one handed-over connection if one is waiting."""
        try:
            data, fds, _flags, _addr = socket.recv_fds(self._inbox, 1, 1)
        except (BlockingIOError, InterruptedError):
            return False
        for fd in fds:
            client = bounded(socket.socket(fileno=fd), self.client_timeout)
            util.close_on_exec(fd)
            try:
                addr = client.getpeername()
            except OSError:  # the client is gone already
                client.close()
                continue
            index = data[0] if data and data[0] < len(self.sockets) else 0
            self._serve(self.sockets[index], client, addr, owns_game=True)
        return True

    def _close_inbox(self) -> None:
        """Stop receiving (unless a newer worker holds the slot's address already), then serve
        what was queued."""
        address = self._inbox_address
        try:
            if os.stat(address).st_ino == self._inbox_inode:
                os.unlink(address)
        except FileNotFoundError:
            pass
        while self._serve_inbox():
            pass
        self._inbox.close()
        self._outbox.close()
