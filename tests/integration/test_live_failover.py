"""Live streams (services/query/live.py) when a failover or a restart loses events the
process's reader already kept in memory, on a real Redis: the streams never send what the
log no longer holds, and the ones open through the loss end so that their clients reconnect
from the log as it is."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from eventstore.envelope import MOVES
from services.query.live import LiveHub
from services.query.service import QueryService
from services.redis_store import RedisEventStore
from services.redis_store.connect import connect
from tests.integration.test_lost_suffix import lose_suffix
from tests.redis_server import private_redis
from tests.unit.test_query_games import long_game, store_game

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A redis-server of this module's own: a test cuts every connection to it."""
    with private_redis() as url:
        yield url


def live_service(url: str, store: RedisEventStore) -> QueryService:
    """A query service whose live streams share one reader, as under gunicorn, on the real
    Redis; short blocks so that a test waits little."""
    client = redis.Redis.from_url(url)
    live_client = connect(url, role="query-live", max_connections=1, socket_timeout=5)
    hub = LiveHub(store, live_client, client, block_seconds=0.5, watch_interval=0.1)
    return QueryService(store, hub=hub)


def until_quiet(stream: Iterator[str]) -> list[str]:
    """The chunks a live stream sends up to its first keepalive (it then waits for news)."""
    out: list[str] = []
    for chunk in stream:
        if chunk.startswith(": keepalive"):
            return out
        out.append(chunk)
    return out


def ids(chunks: list[str]) -> list[str]:
    return [line[4:] for chunk in chunks for line in chunk.splitlines() if line.startswith("id: ")]


def watched_game(url: str, redis_client: redis.Redis) -> tuple[QueryService, str, Iterator[str]]:
    """A game of 40 moves whose moves 31-40 a live stream received as they were appended
    (the process's reader keeps them in memory): the service, the game, the stream."""
    store = RedisEventStore(redis_client)
    service = live_service(url, store)
    game_id = uuid.uuid4().hex
    _, events = long_game()
    store_game(store, game_id, events[:30])
    watching = iter(service.live(game_id, None, 20.0, 0.2))
    assert until_quiet(watching)[0].startswith("retry:")
    store_game(store, game_id, events[30:40])
    seen: list[str] = []
    while "40-0" not in seen:
        seen += ids(until_quiet(watching))
    return service, game_id, watching


def test_a_live_stream_opened_after_a_failover_is_not_served_lost_moves(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Moves a watched game's live reader kept in memory, then lost by a failover: a stream
    opened afterwards (from the log's end, 34) was served them from memory, with ids past
    the log (reconnecting with them: 422 cursor_beyond_log). The streams opened before the
    loss end, so that their clients reconnect from the log as it is."""
    service, game_id, watching = watched_game(redis_url, redis_client)
    lose_suffix(redis_client, game_id, MOVES, 34)
    opened = service.live(game_id, None, 20.0, 0.2)
    try:
        fresh = until_quiet(iter(opened))
        assert ids(fresh) == []  # nothing after the log's end, 34-0
        assert list(watching) == []  # ended, without waiting for its time to be up
    finally:
        # Closed as a server closes a response: a stream left open keeps its game watched,
        # and once this module's Redis is gone the process's live reader would log a
        # traceback a second for the rest of the session (Python 3.11 parses source lines
        # for a traceback's carets, and two threads parsing at once can raise SystemError,
        # CPython gh-106905: it failed an unrelated ast.parse in CI).
        for stream in (opened, watching):
            close = getattr(stream, "close", None)
            if close is not None:
                close()
    assert service.hub is not None and service.hub.streams() == 0


def test_a_live_stream_open_through_a_failover_ends_once_its_reader_reconnects(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The same loss, the process's reader cut from Redis (as a failover or a restart cuts
    it): the open stream used to go on from the lost moves' ids (the moves played again
    below them never sent) until its time was up; it ends once the reader is back."""
    service, game_id, watching = watched_game(redis_url, redis_client)
    lose_suffix(redis_client, game_id, MOVES, 34)
    killed = redis_client.execute_command("CLIENT KILL", "TYPE", "normal", "SKIPME", "yes")
    assert killed >= 1
    started = time.monotonic()
    try:
        rest = list(watching)  # keepalives until it ends
    finally:
        close = getattr(watching, "close", None)
        if close is not None:
            close()  # see the test above: no stream left watching a game
    assert not any("time is up" in chunk for chunk in rest)
    assert time.monotonic() - started < 20
    assert service.hub is not None and service.hub.streams() == 0
