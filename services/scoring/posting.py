"""HTTP posting of deliveries: one POST to a checked, pinned address with a whole-attempt
watchdog. Shared by per-game webhooks and subscriptions (services/scoring/delivery.py)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

from services.common.webhook_url import Address, RefusedUrl, Target, normalise, resolve


@dataclass(frozen=True)
class Answer:
    """What one POST got: a status, or an error; `blocked` when the address was refused."""

    status: int | None
    error: str | None = None
    blocked: bool = False


Poster = Callable[[str, bytes, dict[str, str]], Answer]


def _connect_checked(addresses: list[Address], port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to the first of `addresses` that answers: every one of them was
    checked, and no name is looked up again (no DNS-rebinding window)."""
    error: OSError | None = None
    for address in addresses:
        try:
            sock = socket.create_connection((str(address), port), timeout)
        except OSError as exc:
            error = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error or OSError("no address to connect to")


class PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to `host` (its Host header) over a connection to a checked address."""

    def __init__(self, host: str, port: int, addresses: list[Address], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses

    def connect(self) -> None:
        self.sock = _connect_checked(self.addresses, self.port, self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to `host` over a connection to a checked address: SNI and the certificate check
    are still on the host name."""

    def __init__(
        self,
        host: str,
        port: int,
        addresses: list[Address],
        timeout: float,
        context: ssl.SSLContext,
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.addresses = addresses
        self.tls = context

    def connect(self) -> None:
        sock = _connect_checked(self.addresses, self.port, self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def _cut(conn: http.client.HTTPConnection, done: threading.Event) -> None:
    """End a connection's blocked reads and writes (from the watchdog's thread); `done` says
    so before anything is cut (the attempt's thread may wake before this thread ends)."""
    done.set()
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # closed already
            sock.shutdown(socket.SHUT_RDWR)


class HttpPoster:
    """POSTs a delivery: the URL's host is resolved once, every address checked (unless
    `allow_private`), and the connection made to a checked address. No proxy from the
    environment, no redirect followed (a 3xx is the receiver's answer: it could point inside
    this network), and the response body is never read (a receiver that drips it slowly
    cannot hold the worker)."""

    def __init__(
        self, timeout: float, allow_private: bool = False, tls: ssl.SSLContext | None = None
    ) -> None:
        self.timeout = timeout
        self.allow_private = allow_private
        self.tls = tls or ssl.create_default_context()  # verifies the certificate and its name

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        try:
            target = normalise(url)  # what registration stored: canonical already
            addresses = resolve(target, self.allow_private)
        except RefusedUrl as refused:
            return Answer(None, f"blocked: {refused.message}"[:300], blocked=True)
        except OSError as exc:  # the name does not resolve now: retried
            return Answer(None, f"resolve: {type(exc).__name__}: {exc}"[:300])
        conn = self.connection(target, addresses)
        # The socket timeout bounds each read, not the attempt: a receiver that drips its
        # status line a byte at a time would hold the thread (and its hook's lease) for
        # minutes. A watchdog cuts the connection once the whole attempt has had `timeout`.
        fired = threading.Event()
        watchdog = threading.Timer(self.timeout, _cut, args=(conn, fired))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request("POST", target.path, body=body, headers=headers)
            response = conn.getresponse()
            return Answer(int(response.status))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            cut = " (attempt cut at its deadline)" if fired.is_set() else ""
            return Answer(None, f"{type(exc).__name__}: {exc}{cut}"[:300])
        finally:
            watchdog.cancel()
            conn.close()

    def connection(self, target: Target, addresses: list[Address]) -> http.client.HTTPConnection:
        """A connection to `target` that will connect to one of `addresses` only."""
        if target.scheme == "https":
            return PinnedHTTPSConnection(
                target.host, target.port, addresses, self.timeout, self.tls
            )
        return PinnedHTTPConnection(target.host, target.port, addresses, self.timeout)
