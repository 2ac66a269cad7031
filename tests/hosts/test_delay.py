"""The delay proxy (tests/hosts/delay.py) on loopback: it adds its delay each way, relays a
large stream whole and in order within its bound, passes a half-close on, closes both sides
when stopped, and turns away connections beyond its limit."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.hosts.delay import MAX_HELD, DelayProxy
from tests.sockets import recv_exactly

pytestmark = pytest.mark.integration


def _echo_server() -> tuple[socket.socket, threading.Thread]:
    """A server echoing every byte back; at the end of its input it sends "bye" and closes."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
            conn.sendall(b"bye")

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def proxy() -> Iterator[DelayProxy]:
    server, _ = _echo_server()
    relay = DelayProxy(("127.0.0.1", 0), server.getsockname()[:2], delay_ms=100)
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()
        server.close()


def test_each_way_is_delayed_and_a_half_close_passes_on(proxy: DelayProxy) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(b"ping")
        start = time.monotonic()
        assert recv_exactly(sock, 4) == b"ping"
        took = time.monotonic() - start
        assert 0.2 <= took < 2.0, took  # 100 ms there, 100 ms back (and the connect's 100 ms)
        sock.shutdown(socket.SHUT_WR)  # the server sees the end, says bye and closes
        assert recv_exactly(sock, 3) == b"bye"
        assert sock.recv(10) == b""
    proxy.delay_ms = 0  # changed while it runs: new chunks are not held
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(b"x")
        start = time.monotonic()
        assert recv_exactly(sock, 1) == b"x"
        assert time.monotonic() - start < 0.2


def test_a_large_stream_arrives_whole_and_in_order(proxy: DelayProxy) -> None:
    payload = bytes(range(256)) * (4 * MAX_HELD // 256)  # more than either direction holds
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        sender.start()
        assert recv_exactly(sock, len(payload)) == payload
        sender.join(10)


def test_stop_closes_both_sides_and_a_full_proxy_turns_connections_away() -> None:
    server, _ = _echo_server()
    relay = DelayProxy(("127.0.0.1", 0), server.getsockname()[:2], max_connections=1)
    relay.start()
    try:
        first = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        first.sendall(b"a")
        assert recv_exactly(first, 1) == b"a"  # relayed: it holds the one place
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as second:
            assert second.recv(10) == b""  # closed at once
        assert relay.refused == 1
        relay.stop()
        assert first.recv(10) in (b"", b"bye")  # closed by the proxy (or the server's end)
        first.close()
    finally:
        relay.stop()
        server.close()
