"""Who the client is (services/common/access.py) and which bucket its writes are counted in
(services/redis_store/ratelimit.py): a forwarded address counts only from a trusted proxy."""

from __future__ import annotations

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from services.common.access import client_address, trusted_proxies
from services.redis_store.ratelimit import address_bucket

LOOPBACK = trusted_proxies("127.0.0.1, ::1")


def request(peer: str, **headers: str) -> Request:
    sent = [(k.replace("_", "-"), v) for k, v in headers.items()]
    return Request(EnvironBuilder(environ_base={"REMOTE_ADDR": peer}, headers=sent).get_environ())


def test_without_trusted_proxies_the_peer_is_the_client_whatever_it_says() -> None:
    spoofed = request("203.0.113.7", X_Forwarded_For="198.51.100.1", X_Real_IP="198.51.100.2")
    assert client_address(spoofed, ()) == "203.0.113.7"
    assert client_address(spoofed, LOOPBACK) == "203.0.113.7"  # not a proxy of ours


def test_behind_a_trusted_proxy_the_address_it_appended_counts() -> None:
    # nginx appends the peer it saw ($proxy_add_x_forwarded_for): the rightmost entry.
    assert client_address(request("127.0.0.1", X_Forwarded_For="203.0.113.7"), LOOPBACK) == (
        "203.0.113.7"
    )
    forged = request("127.0.0.1", X_Forwarded_For="198.51.100.1, 203.0.113.7")
    assert client_address(forged, LOOPBACK) == "203.0.113.7"  # the client's own entry ignored
    # Through a chain of trusted proxies: the first address none of them vouches for.
    chain = trusted_proxies("127.0.0.1, 10.0.0.0/8")
    hops = request("127.0.0.1", X_Forwarded_For="198.51.100.1, 203.0.113.7, 10.1.2.3")
    assert client_address(hops, chain) == "203.0.113.7"
    assert client_address(request("127.0.0.1", X_Real_IP="203.0.113.9"), LOOPBACK) == (
        "203.0.113.9"
    )
    assert client_address(request("127.0.0.1"), LOOPBACK) == "127.0.0.1"  # a local client


def test_a_bad_trusted_proxies_setting_stops_the_start() -> None:
    with pytest.raises(SystemExit, match="TRUSTED_PROXIES"):
        trusted_proxies("127.0.0.1, proxy.local")


def test_an_ipv6_subscriber_is_one_bucket() -> None:
    assert address_bucket("2001:db8:1:2::5") == address_bucket("2001:db8:1:2:ffff::9")
    assert address_bucket("2001:db8:1:2::5") != address_bucket("2001:db8:1:3::5")
    assert address_bucket("::ffff:203.0.113.7") == address_bucket("203.0.113.7")
    assert address_bucket("203.0.113.7") != address_bucket("203.0.113.8")
    assert address_bucket("not an address") == "{rl:other}:bucket"
