"""The command service's gunicorn worker (services/common/gunicorn_worker.py): the client timeout
it reads from the environment, and connections whose reads end when the client goes quiet."""

from __future__ import annotations

import socket
import time

import pytest

from services.common import gunicorn_worker


@pytest.mark.parametrize(
    "raw, seconds",
    [(None, gunicorn_worker.DEFAULT_CLIENT_TIMEOUT), ("", gunicorn_worker.DEFAULT_CLIENT_TIMEOUT),
     ("0.5", 0.5), ("5", 5.0), ("0", None)],
)  # fmt: skip
def test_the_client_timeout_comes_from_the_environment(raw: str | None, seconds: float) -> None:
    environ = {} if raw is None else {"CLIENT_TIMEOUT": raw}
    assert gunicorn_worker.client_timeout(environ) == seconds


def test_a_client_timeout_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="CLIENT_TIMEOUT='soon'"):
        gunicorn_worker.client_timeout({"CLIENT_TIMEOUT": "soon"})


def test_a_bounded_connection_reads_what_comes_and_ends_when_nothing_does() -> None:
    """A read (or a peek) that times out answers b"" — for gunicorn, the client's end."""
    ours, theirs = socket.socketpair()
    client = gunicorn_worker.bounded(ours, 0.05)
    try:
        theirs.sendall(b"GET / HTTP/1.1\r\n")
        assert client.recv(64, socket.MSG_PEEK) == b"GET / HTTP/1.1\r\n"
        assert client.recv(64) == b"GET / HTTP/1.1\r\n"
        started = time.monotonic()
        assert client.recv(64, socket.MSG_PEEK) == b""
        assert client.recv(64) == b""
        assert time.monotonic() - started < 1.0
        assert client.gettimeout() == 0.05  # and the socket is still usable
        theirs.sendall(b"more")
        assert client.recv(64) == b"more"
    finally:
        client.close()
        theirs.close()


def test_without_a_client_timeout_a_connection_blocks_as_gunicorn_expects() -> None:
    ours, theirs = socket.socketpair()
    try:
        client = gunicorn_worker.bounded(ours, None)
        assert client is ours and client.gettimeout() is None
    finally:
        ours.close()
        theirs.close()
