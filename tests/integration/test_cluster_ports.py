"""`start_cluster` when a port it found free is taken before its node binds it."""

from __future__ import annotations

import socket

import pytest

from deploy.local.host import free_ports
from tests import redis_cluster


def test_a_node_that_cannot_bind_its_port_makes_the_cluster_start_on_other_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first ports handed out include one another socket holds (as a client's ephemeral
    port can take a node's or its bus port between the choice and the bind): that node exits,
    and the cluster starts on fresh ports instead of waiting 30 s and failing."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        handed: list[list[int]] = []

        def ports(count: int, *, bus: bool = False) -> list[int]:
            chosen = free_ports(count, bus=bus)
            handed.append([taken, *chosen[1:]] if not handed else chosen)
            return handed[-1]

        monkeypatch.setattr(redis_cluster, "free_ports", ports)
        cluster = redis_cluster.start_cluster(primaries=3, timeout=20)
        try:
            assert len(handed) == 2 and taken not in cluster.ports
            assert cluster.ports == handed[1]
            assert sorted(cluster.primary_ports()) == sorted(cluster.ports)
        finally:
            cluster.stop()
