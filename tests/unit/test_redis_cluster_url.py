"""The `redis+cluster://` URL form of REDIS_URL (services/redis_store/connect.py)."""

from __future__ import annotations

import pytest

from services.redis_store.connect import cluster_nodes, is_cluster_url


def test_a_cluster_url_names_its_seed_nodes() -> None:
    url = "redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002"
    assert is_cluster_url(url)
    assert cluster_nodes(url) == [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002)]


def test_a_plain_url_is_a_single_redis() -> None:
    assert not is_cluster_url("redis://127.0.0.1:6390/0")


@pytest.mark.parametrize("url", ["redis+cluster://", "redis+cluster://host", "redis+cluster://h:x"])
def test_a_malformed_cluster_url_is_refused_with_the_expected_form(url: str) -> None:
    with pytest.raises(ValueError, match=r"redis\+cluster://host:port"):
        cluster_nodes(url)


def test_a_cluster_event_store_needs_a_named_broker() -> None:
    from services.redis_store.connect import broker_url

    assert broker_url("", "redis://h:1/0") == "redis://h:1/0"
    assert broker_url("redis://b:2/1", "redis+cluster://h:1") == "redis://b:2/1"
    with pytest.raises(SystemExit, match="BROKER_URL must name a single Redis"):
        broker_url("", "redis+cluster://h:1,h:2")


def test_a_cluster_url_may_name_a_redis_user_for_every_node() -> None:
    from services.redis_store.acl import user_of, with_user
    from services.redis_store.connect import cluster_userinfo

    url = with_user("redis+cluster://10.0.0.1:7000,10.0.0.2:7001", "query", "p@ss:w/rd")
    assert url == "redis+cluster://query:p%40ss%3Aw%2Frd@10.0.0.1:7000,10.0.0.2:7001"
    assert cluster_nodes(url) == [("10.0.0.1", 7000), ("10.0.0.2", 7001)]
    assert cluster_userinfo(url) == "query:p%40ss%3Aw%2Frd@" and user_of(url) == "query"
    assert cluster_userinfo("redis+cluster://h:1") == "" and user_of("redis://h:1/0") is None
    assert with_user("redis://old:pw@h:1/0", "worker", "x") == "redis://worker:x@h:1/0"
