"""Socket helpers the tests share (standard library only)."""

from __future__ import annotations

import socket


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Exactly `size` bytes from `sock` (a stream that ends first fails the test)."""
    got = b""
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        assert chunk, f"the stream ended after {len(got)} of {size} bytes"
        got += chunk
    return got
