"""`services.redis_store.wire.Wire` against a real redis-server: raw replies, a killed
connection retried once on a new one, a flushed script loaded again, a thread and a forked
process each on a connection of their own."""

from __future__ import annotations

import multiprocessing
import threading

import pytest
import redis

from services.redis_store.store import APPEND_LUA, RedisEventStore
from services.redis_store.wire import Wire


def client_ids(client: redis.Redis, name: str) -> list[str]:
    return [str(c["id"]) for c in client.client_list() if c.get("name") == name]


def test_replies_are_raw_and_errors_raise(redis_client: redis.Redis) -> None:
    wire = Wire(redis_client)
    redis_client.delete("{t:wire}:s")
    assert wire.call("XADD", "{t:wire}:s", "1-0", "k", "v") == b"1-0"
    assert wire.call("XRANGE", "{t:wire}:s", "-", "+") == [[b"1-0", [b"k", b"v"]]]
    with pytest.raises(redis.ResponseError):
        wire.call("XADD", "{t:wire}:s", "1-0", "k", "v")  # an id not above the last one


def test_a_killed_connection_is_replaced_once(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, client_name="wire-kill")
    wire = Wire(client)
    assert wire.call("PING") == b"PONG"
    admin = redis.Redis.from_url(redis_url)
    (first,) = client_ids(admin, "wire-kill")
    admin.client_kill_filter(_id=first)
    assert wire.call("PING") == b"PONG"  # the retry went out on a new connection
    assert client_ids(admin, "wire-kill") != [first]


def test_a_flushed_append_script_is_loaded_again(redis_client: redis.Redis) -> None:
    store = RedisEventStore(redis_client)
    redis_client.script_flush()
    assert not redis_client.script_exists(store._append.sha)[0]
    reply = store._wire.evalsha(
        store._append.sha,
        APPEND_LUA,
        ["{t:f}:a", "{t:f}:b", "{t:f}:c", "{t:f}:d"],
        [-1, "c1", 1, "", "", 0],
    )
    assert reply[0] == b"ok"
    assert redis_client.script_exists(store._append.sha)[0]


def test_each_thread_has_its_own_connection(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, client_name="wire-threads")
    wire = Wire(client)
    wire.call("PING")
    seen: list[object] = []

    def use() -> None:
        wire.call("PING")
        seen.append(wire._local.conn)

    threads = [threading.Thread(target=use) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for c in [*seen, wire._local.conn]}) == 4


def _ping_in_child(wire: Wire, out: multiprocessing.Queue) -> None:
    out.put(wire.call("PING"))


def test_a_forked_process_does_not_share_the_parents_socket(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, client_name="wire-fork")
    wire = Wire(client)
    wire.call("PING")
    parent_conn = wire._local.conn
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_ping_in_child, args=(wire, out))
    child.start()
    assert out.get(timeout=10) == b"PONG"
    child.join(timeout=10)
    assert wire._local.conn is parent_conn
    assert wire.call("PING") == b"PONG"  # the parent's connection still answers in order
