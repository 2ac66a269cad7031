"""The one free-port helper (deploy/local/host.py). `make run` picks its instances' private
ports before nginx binds the public ones: the kernel can hand a public port out again in
between, so a pick must skip every promised port (seen in CI: nginx could not bind the command
port a gunicorn instance had just taken)."""

from __future__ import annotations

import socket
from typing import Any, ClassVar

import pytest

from deploy.local import host


class ScriptedSocket:
    """A socket whose kernel picks come from a list: the collision made deterministic."""

    picks: ClassVar[list[int]] = []

    def __enter__(self) -> ScriptedSocket:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self.port = ScriptedSocket.picks.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_promised_to_nginx_is_never_given_to_an_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(host.socket, "socket", ScriptedSocket)
    ScriptedSocket.picks = [8000, 8001, 40123]
    assert host.free_port("127.0.0.1", {8000, 8001}) == 40123
    ScriptedSocket.picks = [8000]
    assert host.free_port("127.0.0.1") == 8000  # nothing promised: the kernel's pick


def test_the_search_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host.socket, "socket", ScriptedSocket)
    ScriptedSocket.picks = [8000] * 100
    with pytest.raises(OSError, match="no free port"):
        host.free_port("127.0.0.1", {8000})


def test_free_ports_are_distinct_and_free_with_their_cluster_bus_ports() -> None:
    ports = host.free_ports(4, bus=True)
    assert len(set(ports)) == 4
    assert all(host.port_free(p) and host.port_free(p + host.BUS) for p in ports)


def test_consecutive_free_ports_for_make_run_cluster() -> None:
    """REDIS_PORT and the three above it, with their bus ports, as `make run-cluster` takes."""
    ports = host.free_ports(4, bus=True, consecutive=True)
    assert ports == list(range(ports[0], ports[0] + 4))
    assert all(host.port_free(p) and host.port_free(p + host.BUS) for p in ports)


def test_a_port_in_use_is_not_free() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not host.port_free(port)
        assert port not in host.free_ports(20)
