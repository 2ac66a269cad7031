"""`services.redis_store.wire.Wire` against a real redis-server: raw replies, connections
given back after each command and bounded by its pool (finding 1 of "Dependable under real
use": the old wire pinned one per thread and per store, forever), a killed connection
retried once, a flushed script loaded again, a forked process on sockets of its own."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
import redis

from services.redis_store.connect import client_name, connect
from services.redis_store.store import APPEND_LUA, RedisEventStore
from services.redis_store.wire import Wire


def held(admin: redis.Redis, name: str) -> list[str]:
    """Ids of the connections named `name` (CLIENT LIST)."""
    return [str(c["id"]) for c in admin.client_list() if c.get("name") == name]


def test_replies_are_raw_and_errors_raise(redis_client: redis.Redis) -> None:
    wire = Wire(redis_client)
    redis_client.delete("{t:wire}:s")
    assert wire.call("XADD", "{t:wire}:s", "1-0", "k", "v") == b"1-0"
    assert wire.call("XRANGE", "{t:wire}:s", "-", "+") == [[b"1-0", [b"k", b"v"]]]
    with pytest.raises(redis.ResponseError):
        wire.call("XADD", "{t:wire}:s", "1-0", "k", "v")  # an id not above the last one
    assert wire.call("PING") == b"PONG"  # an error reply leaves the connection usable


def test_many_threads_and_many_stores_stay_within_the_bound(redis_url: str) -> None:
    """200 threads over 50 stores of one client: never more than the pools' bound, and the
    connections are reused afterwards (no connection per thread or per store)."""
    client = connect(redis_url, role="wire-bound", max_connections=3)
    admin = redis.Redis.from_url(redis_url)
    stores = [RedisEventStore(client, wire_connections=4) for _ in range(50)]
    gate = threading.Barrier(20)
    errors: list[BaseException] = []

    def use(i: int) -> None:
        try:
            if i < 20:
                gate.wait(timeout=10)
            for _ in range(20):
                stores[i % 50].wire.call("PING")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=use, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    # Each store's wire holds at most its bound; the threads are gone, the connections are
    # idle on the wires' free lists, and a new thread uses one of them.
    wire_name = client_name("wire-bound") + ":wire"
    before = set(held(admin, wire_name))
    assert len(before) <= 50 * 4
    assert all(s.wire._free.qsize() <= 4 for s in stores)  # type: ignore[union-attr]
    thread = threading.Thread(target=lambda: stores[0].wire.call("PING"))
    thread.start()
    thread.join()
    assert set(held(admin, wire_name)) == before


def test_one_wire_under_contention_holds_at_most_its_pool(redis_url: str) -> None:
    client = connect(redis_url, role="wire-contention", max_connections=2)
    admin = redis.Redis.from_url(redis_url)
    wire = Wire(client, max_connections=3)
    gate = threading.Barrier(30)

    def use() -> None:
        gate.wait(timeout=10)
        for _ in range(50):
            wire.call("PING")

    threads = [threading.Thread(target=use) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert 1 <= len(held(admin, client_name("wire-contention") + ":wire")) <= 3
    assert wire._free.qsize() <= 3


def test_a_killed_connection_is_replaced_once(redis_url: str) -> None:
    client = connect(redis_url, role="wire-kill", max_connections=1)
    wire = Wire(client, max_connections=1)
    assert wire.call("PING") == b"PONG"
    admin = redis.Redis.from_url(redis_url)
    name = client_name("wire-kill") + ":wire"
    (first,) = held(admin, name)
    admin.client_kill_filter(_id=first)
    assert wire.call("PING") == b"PONG"  # the retry went out on a new connection
    assert held(admin, name) != [first]


def test_a_flushed_append_script_is_loaded_again(redis_client: redis.Redis) -> None:
    store = RedisEventStore(redis_client)
    redis_client.script_flush()
    reply = store.wire.evalsha(
        store._append.sha,
        APPEND_LUA,
        ["{t:f}:a", "{t:f}:b", "{t:f}:c", "{t:f}:d"],
        [-1, "c1", 1, "", "", 0, ""],
    )
    assert reply[0] == b"ok"
    assert redis_client.script_exists(store._append.sha)[0]


def _ping_in_child(wire: Wire, out: multiprocessing.Queue) -> None:
    reply = wire.call("PING")
    out.put((reply, [id(c) for c in wire._free.queue]))


def test_a_forked_process_does_not_share_the_parents_socket(redis_url: str) -> None:
    client = connect(redis_url, role="wire-fork", max_connections=1)
    wire = Wire(client, max_connections=2)
    wire.call("PING")
    parent_conn = wire._free.queue[-1]
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_ping_in_child, args=(wire, out))
    child.start()
    reply, child_conns = out.get(timeout=10)
    child.join(timeout=10)
    assert reply == b"PONG"
    assert id(parent_conn) not in child_conns  # the child took a connection of its own
    assert wire._free.queue == [parent_conn]
    assert wire.call("PING") == b"PONG"  # the parent's connection still answers in order


def test_close_disconnects_the_idle_connections(redis_url: str) -> None:
    client = connect(redis_url, role="wire-close", max_connections=2)
    admin = redis.Redis.from_url(redis_url)
    wire = Wire(client, max_connections=2)
    wire.call("PING")
    name = client_name("wire-close") + ":wire"
    assert len(held(admin, name)) == 1
    wire.close()
    deadline = time.monotonic() + 5
    while held(admin, name) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held(admin, name) == []
    assert wire.call("PING") == b"PONG"  # still usable: it makes a new connection
