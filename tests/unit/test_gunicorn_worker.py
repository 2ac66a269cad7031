"""The command service's gunicorn worker (services/common/gunicorn_worker.py): the client timeout
it reads from the environment, and connections whose reads end when the client goes quiet."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from gunicorn import util

from services.common import gunicorn_worker
from tests.sockets import recv_exactly


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


def _connected() -> tuple[socket.socket, socket.socket]:
    """A loopback TCP connection: (the worker's side, bounded as the worker bounds it; the
    client's side)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname(), timeout=5)
        ours, _ = listener.accept()
    return gunicorn_worker.bounded(ours, gunicorn_worker.DEFAULT_CLIENT_TIMEOUT), theirs


REQUEST = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


def _read_to_end(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(4096):
        got += chunk
    return got


def test_after_an_answer_to_a_request_read_whole_the_worker_does_not_wait_for_the_client() -> None:
    """gunicorn's graceful close reads until the client closes (up to 2 s); with nothing unread
    it ends at once, and the client still gets the whole answer and the worker's FIN."""
    ours, theirs = _connected()
    try:
        theirs.sendall(REQUEST)
        assert ours.recv(4096) == REQUEST
        ours.sendall(ANSWER)
        started = time.monotonic()
        util.close_graceful(ours)  # as gunicorn's sync worker ends every connection
        assert time.monotonic() - started < 0.5  # the client keeps its side open meanwhile
        assert _read_to_end(theirs) == ANSWER
    finally:
        ours.close()
        theirs.close()


def _answered_and_draining(
    ours: socket.socket, theirs: socket.socket
) -> tuple[threading.Event, threading.Thread]:
    """The answer sent and gunicorn's graceful close of `ours` under way in a thread; the
    client reads the whole answer (no reset), and the worker, draining, waits for the
    client's close: (set once it closed, the thread)."""
    ours.sendall(ANSWER)
    closed = threading.Event()

    def close() -> None:
        util.close_graceful(ours)
        closed.set()

    closer = threading.Thread(target=close)
    closer.start()
    assert _read_to_end(theirs) == ANSWER
    assert not closed.wait(0.3)
    return closed, closer


@pytest.mark.parametrize(
    ("early", "owed", "late"),
    [
        (b"x" * 1000, False, b""),  # a body the app refused unread, there already
        (b"", True, b"x" * 1000),  # one still to come (after `Expect: 100-continue`)
    ],
    ids=["there", "to-come"],
)
def test_bytes_the_app_never_read_are_drained_until_the_client_closes(
    early: bytes, owed: bool, late: bytes
) -> None:
    """A body the app refused before reading it is still arriving, or may arrive only after
    the answer: the drain reads it and waits for the client's close, as gunicorn's does, so
    no reset can cost the client its answer or meet its late bytes. Bytes there are seen on
    the socket; bytes to come, only from the worker's note that the body was not read whole."""
    ours, theirs = _connected()
    try:
        theirs.sendall(REQUEST + early)
        assert recv_exactly(ours, len(REQUEST)) == REQUEST  # the app reads no further
        ours._owed = owed  # type: ignore[attr-defined]  # as the worker notes after the app
        closed, closer = _answered_and_draining(ours, theirs)
        theirs.sendall(late)
        theirs.close()
        assert closed.wait(5)
        closer.join(5)
    finally:
        ours.close()
        theirs.close()


class _Request:
    def __init__(self, reader: object) -> None:
        self.body = type("Body", (), {"reader": reader})()


def test_a_body_is_owed_until_its_reader_reached_its_end() -> None:
    from gunicorn.http.body import ChunkedReader, EOFReader, LengthReader

    assert gunicorn_worker.body_owed(_Request(LengthReader(None, 10)))
    assert not gunicorn_worker.body_owed(_Request(LengthReader(None, 0)))
    chunked = ChunkedReader.__new__(ChunkedReader)
    chunked.parser = iter(())  # not read to its last chunk
    assert gunicorn_worker.body_owed(_Request(chunked))
    chunked.parser = None  # gunicorn drops the parser at the last chunk
    assert not gunicorn_worker.body_owed(_Request(chunked))
    assert gunicorn_worker.body_owed(_Request(EOFReader(None)))  # read to the close: owed
    assert gunicorn_worker.body_owed(None)  # no request parsed: as gunicorn, drained
