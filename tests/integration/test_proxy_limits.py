"""Per-client limits at the proxy (issue 32, findings 8 and 9; deploy/nginx/public.conf):
live streams held open and costly reads, per client address, answered 429 `rate_limited`
with Retry-After by nginx itself; `/metrics` and `/readyz` not on the public URL. Real nginx
from the repository's templates (with low limits, so the test is short), real gunicorn
servers of both services, real Redis. Two client addresses: 127.0.0.1 and 127.0.0.2 (both
loopback on Linux), so one client's burst is seen not to touch another's.
"""

from __future__ import annotations

import http.client
import json
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest

from tests import nginx as private_nginx

from .http_client import api_key, call, gunicorn

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
QUERY = ("services.query.wsgi:app", "deploy/gunicorn/query.py")
LIMITS = {"CC_LIVE_PER_CLIENT": "2", "CC_COSTLY_RATE": "1r/s", "CC_COSTLY_BURST": "2"}


@dataclass
class Proxy:
    public: str
    operators: str  # the query service alone, for operators
    query: str  # its gunicorn, straight


@pytest.fixture(scope="module")
def proxy(redis_url: str) -> Iterator[Proxy]:
    binary, why = private_nginx.find_nginx()
    if binary is None:
        warnings.warn(f"proxy limit tests skipped: {why}", stacklevel=1)
        pytest.skip(why)
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0", "SSE_HEARTBEAT_SECONDS": "0.2"}
    with (
        gunicorn(*COMMAND, env, 1) as command,
        gunicorn(*QUERY, env, 4) as query,
        private_nginx.nginx(
            {"command": command.removeprefix("http://"), "query": query.removeprefix("http://")},
            limits=LIMITS,
        ) as bases,
    ):
        yield Proxy(bases["public"], bases["query"], query)


def get(base: str, path: str, source: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10, source_address=(source, 0))
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
    finally:
        conn.close()


def refused(status: int, headers: dict[str, str], body: bytes) -> bool:
    """Whether this is the proxy's 429: problem details, code `rate_limited`, Retry-After."""
    if status != 429:
        return False
    assert headers["content-type"].startswith("application/problem+json")
    assert int(headers["retry-after"]) >= 1
    assert json.loads(body)["code"] == "rate_limited"
    return True


def wait_for_refill(base: str, path: str) -> None:
    deadline = time.monotonic() + 10
    while get(base, path)[0] == 429:
        assert time.monotonic() < deadline, "the limit never let a request through again"
        time.sleep(0.2)


def test_costly_reads_beyond_the_burst_get_429_and_cheap_reads_and_other_clients_do_not(
    proxy: Proxy,
) -> None:
    answers = [get(proxy.public, "/games?limit=1") for _ in range(12)]
    # At most the burst and a refill or two pass (a rate of 1/s, a burst of 2); the rest are
    # the proxy's 429s, never a service's answer.
    assert sum(a[0] == 200 for a in answers) <= 4, [a[0] for a in answers]
    assert all(refused(*a) for a in answers if a[0] != 200)
    # Another address has a bucket of its own; cheap reads are never counted.
    assert get(proxy.public, "/games?limit=1", source="127.0.0.2")[0] == 200
    for _ in range(12):
        assert get(proxy.public, "/games/g-none/board")[0] == 404  # the service's own answer
    # A replay (`?turn=`) and a picture are costly (a burst of them is refused beyond the
    # bucket, which the cheap reads above did not touch); the operator port has no limits.
    for path in ("/games/g-none/board?turn=1", "/games/g-none/board.svg"):
        wait_for_refill(proxy.public, "/games?limit=1")
        answers = [get(proxy.public, path) for _ in range(8)]
        assert sum(refused(*a) for a in answers) >= 4, [a[0] for a in answers]
    assert all(get(proxy.operators, "/games?limit=1")[0] == 200 for _ in range(6))
    wait_for_refill(proxy.public, "/games?limit=1")


def test_costly_reads_of_many_clients_together_are_capped_and_cheap_reads_pass(
    proxy: Proxy,
) -> None:
    """Issue 32: 16 addresses each within its own limit still took the query service's CPU
    from plain reads (bench_costly.py). A cap on every client's costly reads together
    (CC_COSTLY_TOTAL_RATE, _BURST; 1/s and 4 here) refuses the rest with the proxy's 429,
    whichever address asks; cheap reads are not counted."""
    total = {"CC_COSTLY_TOTAL_RATE": "1r/s", "CC_COSTLY_TOTAL_BURST": "4"}
    with private_nginx.nginx({"query": proxy.query.removeprefix("http://")},
                             limits=total) as bases:  # fmt: skip
        answers = [get(bases["public"], "/games?limit=1", source=f"127.0.0.{i}")
                   for i in range(10, 18) for _ in range(2)]  # fmt: skip
        assert sum(a[0] == 200 for a in answers) <= 6, [a[0] for a in answers]
        assert sum(refused(*a) for a in answers) >= 10, [a[0] for a in answers]
        for i in range(20, 26):  # cheap reads of every address pass
            assert get(bases["public"], "/games/g-none/board", source=f"127.0.0.{i}")[0] == 404


def open_live(base: str, game_id: str) -> http.client.HTTPConnection | int:
    """A live stream held open (its connection), or the status it was refused with."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", f"/games/{game_id}/live")
    reply = conn.getresponse()
    if reply.status != 200:
        status, body = reply.status, reply.read()
        conn.close()
        if status == 429:
            assert json.loads(body)["code"] == "rate_limited"
        return status
    reply.fp.readline()  # the first line of the stream: it is flowing
    return conn


def test_a_client_may_hold_only_so_many_live_streams_open(proxy: Proxy) -> None:
    status, created = call(proxy.public, "POST", "/games", {
        "players": [{"name": "Ann"}, {"name": "Bob"}]}, api_key(proxy.query))  # fmt: skip
    assert status == 201, created
    game_id = created["game_id"]
    with ExitStack() as held:
        for _ in range(2):
            conn = open_live(proxy.public, game_id)
            assert not isinstance(conn, int), conn
            held.callback(conn.close)
        assert open_live(proxy.public, game_id) == 429
        assert get(proxy.public, f"/games/{game_id}/board")[0] == 200  # other paths still go
        third = open_live(proxy.operators, game_id)  # operators' port: not limited
        assert not isinstance(third, int), third
        third.close()
    deadline = time.monotonic() + 10
    while isinstance(again := open_live(proxy.public, game_id), int):  # closed: room again
        assert time.monotonic() < deadline, again
        time.sleep(0.1)
    again.close()


def test_metrics_and_readiness_are_for_operators_only(proxy: Proxy) -> None:
    for path in ("/metrics", "/readyz"):
        status, headers, body = get(proxy.public, path)
        assert status == 404 and json.loads(body)["code"] == "not_found", (path, body)
        assert headers["content-type"].startswith("application/problem+json")
        assert get(proxy.operators, path)[0] == 200
    assert get(proxy.public, "/healthz")[0] == 200  # liveness stays public (load balancers)
