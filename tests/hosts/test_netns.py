"""The harness itself (tests/hosts/netns.py): hosts reach each other over the bridge, a
one-way cut drops only one direction, a two-way cut both, `heal` restores them, and closing
the network leaves none of its namespaces or processes behind."""

from __future__ import annotations

import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.hosts.netns import Network, leftover_namespaces

pytestmark = pytest.mark.integration

# Inside host "b": a UDP echo that prints each datagram it receives and answers it.
ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9000))
while True:
    data, peer = s.recvfrom(100)
    print(data.decode(), flush=True)
    s.sendto(b"got " + data, peer)
"""


def _ask(sock: socket.socket, address: str, word: bytes, wait: float = 0.5) -> bytes | None:
    """Send `word` to the echo and return its answer (None: nothing came back in `wait`)."""
    sock.settimeout(wait)
    sock.sendto(word, (address, 9000))
    try:
        return sock.recvfrom(100)[0]
    except TimeoutError:
        return None


def _until_echo(sock: socket.socket, address: str) -> None:
    deadline = time.monotonic() + 30
    while _ask(sock, address, b"hello", 0.2) != b"got hello":
        assert time.monotonic() < deadline, "the echo in host b never answered"


def test_cuts_one_way_and_both_ways_and_heals(hosts_possible: None) -> None:
    net = Network(Path(tempfile.mkdtemp(prefix="cc-netns-")))
    try:
        net.add_host("t")
        b = net.add_host("b")
        net.start("b", [sys.executable, "-c", ECHO, b.address], "echo")
        with net.enter("t"), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            _until_echo(sock, b.address)
            # b -> t dropped at t: the datagram reaches b (which answers), the answer is lost.
            net.block(["b"], ["t"], both=False)
            assert _ask(sock, b.address, b"one-way") is None
            assert "one-way" in net.log("echo")  # it did arrive
            net.heal()
            _until_echo(sock, b.address)
            assert _ask(sock, b.address, b"after") == b"got after"
            net.block(["t"], ["b"], both=True)
            assert _ask(sock, b.address, b"two-way") is None
            net.heal()
            _until_echo(sock, b.address)
        assert "two-way" not in net.log("echo")  # dropped on the way in
    finally:
        net.close()
    assert leftover_namespaces(net.prefix) == []
