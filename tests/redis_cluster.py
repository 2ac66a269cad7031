"""A private Redis Cluster for tests and benchmarks (deploy/local/cluster.py), on free ports.

Use the fixtures by importing them into a test module (or a conftest):

    from tests.redis_cluster import redis_cluster, redis_cluster_url  # noqa: F401

`redis_cluster_url` is a `redis+cluster://127.0.0.1:<port>,…` URL (what REDIS_URL takes) of
3 primaries without replicas, started once per test session and stopped at its end;
`redis_cluster` is the same cluster's `Cluster` (ports, node clients, slot owners).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.local.cluster import Cluster, start_cluster

__all__ = ["flush_cluster", "redis_cluster", "redis_cluster_url", "start_cluster"]


def flush_cluster(cluster: Cluster) -> None:
    """Empty every primary (a test's data only: the cluster is the session's own)."""
    for port in cluster.primary_ports():
        cluster.node_client(port).flushall()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    """3 primaries, no replicas, in a temporary directory removed at the end."""
    cluster = start_cluster(primaries=3, replicas=0)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_cluster_url(redis_cluster: Cluster) -> str:
    """`redis+cluster://127.0.0.1:<port>,…` of the session's cluster."""
    return redis_cluster.url
