"""Live streams at scale (issue 13, findings 2, 3 and 8): the real query service under gunicorn
with the real deploy/gunicorn/query.py (gevent worker), games played through the command
service and scored by a real worker; streams and views from one asyncio client."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask

from eventstore.envelope import MOVES, SCORES
from services.command.app import create_app as create_command_app
from services.redis_store import RedisEventStore
from services.redis_store.connect import client_name
from tests.redis_server import private_redis

from .games import new_game, play
from .http_client import gunicorn
from .live_checks import assert_every_event_in_order, merged, open_streams, opened, received
from .live_client import Stream, Views, raise_fd_limit
from .workers import celery_env, running, wait_scored, worker

CAP = 20  # live streams per process on the capped server


@pytest.fixture(scope="module")
def live_redis_url() -> Iterator[str]:
    """A redis-server of this module's own: the connection counts below are the query
    servers' alone (other tests' in-process apps hold `cc:query` connections on the shared one)."""
    with private_redis() as url:
        yield url


@pytest.fixture
def redis_client(live_redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(live_redis_url)


@pytest.fixture(scope="module")
def env(live_redis_url: str) -> Iterator[dict[str, str]]:
    raise_fd_limit()
    environment = celery_env(live_redis_url)
    with running(worker(environment)):
        yield environment


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[str]:
    """One query instance as deployed: 2 workers, default heartbeat (15 s) and caps."""
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, 2) as base:
        yield base


@pytest.fixture(scope="module")
def capped(env: dict[str, str]) -> Iterator[str]:
    """One worker process allowed CAP live streams."""
    settings = {**env, "SSE_MAX_STREAMS": str(CAP)}
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", settings, 1) as base:
        yield base


@pytest.fixture(scope="module")
def command(env: dict[str, str]) -> Flask:
    return create_command_app({"REDIS_URL": env["REDIS_URL"], "BROKER_URL": env["BROKER_URL"]})


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def games(command: Flask, count: int, turns: int, seed: int) -> list[tuple[str, dict[int, str]]]:
    rng = random.Random(seed)
    made = [new_game(command, ["ann", "bob"]) for _ in range(count)]
    for game_id, tokens in made:
        play(command, game_id, tokens, rng, turns=turns)
    return made


async def views(base: str, paths: list[str], parallel: int) -> list[tuple[int, Any]]:
    """GET every path over `parallel` keep-alive connections; (status, body) of each."""
    queue = list(reversed(paths))
    out: list[tuple[int, Any]] = []

    async def client() -> None:
        conn = Views(base)
        try:
            while queue:
                status, _, body, _ = await conn.get(queue.pop())
                out.append((status, body))
        finally:
            await conn.close()

    await asyncio.gather(*(client() for _ in range(parallel)))
    return out


def query_connections(redis_client: redis.Redis) -> dict[str, int]:
    """Redis connections held per role of the query service."""
    counts: dict[str, int] = {}
    for entry in redis_client.client_list():
        name = entry.get("name", "")
        if name.startswith(client_name("query")):
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_views_never_get_503_while_150_streams_are_open(server, command, redis_client) -> None:
    """Finding 2: 150 live clients and 1,000 board/score views at once: every stream is
    accepted, every view answers 200, and the query processes hold a bounded number of Redis
    connections (not one per stream)."""
    made = games(command, 3, 6, seed=1)
    game_ids = [g for g, _ in made]

    async def scenario() -> tuple[list[Stream], list[tuple[int, Any]], dict[str, int]]:
        streams = await open_streams(server, game_ids, 50)
        held = query_connections(redis_client)
        paths = [f"/games/{game_ids[i % 3]}/{('board', 'scores')[i % 2]}" for i in range(1_000)]
        rng = random.Random(2)
        moving = asyncio.gather(
            *(asyncio.to_thread(play, command, g, t, rng, 4) for g, t in made[:1])
        )
        answers = await views(server, paths, 50)
        await moving
        for stream in streams:
            await stream.close()
        return streams, answers, held

    streams, answers, held = asyncio.run(scenario())
    assert [s.status for s in streams].count(200) == 150
    statuses = [status for status, _ in answers]
    assert statuses.count(503) == 0 and statuses == [200] * len(answers)
    # Two workers, each with one reader and at most REDIS_POOL_SIZE (16) connections in the
    # view client's pool and as many in the event store's wire: not one per stream.
    assert held.get(client_name("query-live"), 0) <= 2, held
    assert held.get(client_name("query"), 0) <= 2 * 16, held
    assert held.get(client_name("query") + ":wire", 0) <= 2 * 16, held


def test_streams_over_the_cap_get_503_and_a_gone_client_frees_its_slot(capped, command) -> None:
    """Finding 2: beyond the cap a stream gets 503 too_many_streams with Retry-After while a
    view still answers 200; streams whose clients closed free their slots within seconds
    (long before a heartbeat, 15 s by default, could notice)."""
    game_id = games(command, 1, 2, seed=3)[0][0]

    async def scenario() -> None:
        streams = await open_streams(capped, [game_id], CAP + 10)
        accepted = [s for s in streams if s.status == 200]
        refused = [s for s in streams if s.status != 200]
        assert len(accepted) == CAP and len(refused) == 10
        for stream in refused:
            assert stream.status == 503 and stream.json()["code"] == "too_many_streams"
            assert int(stream.headers["retry-after"]) > 0
        answers = await views(capped, [f"/games/{game_id}/board"] * 20, 4)
        assert [status for status, _ in answers] == [200] * 20

        for stream in accepted[:10]:
            await stream.close()
        started = time.monotonic()
        reopened: list[Stream] = []
        while len(reopened) < 10:
            assert time.monotonic() - started < 5, f"only {len(reopened)} slots freed in 5 s"
            stream = Stream(capped, game_id)
            if await stream.open() == 200:
                reopened.append(stream)
            else:
                await asyncio.sleep(0.1)
        extra = Stream(capped, game_id)
        assert await extra.open() == 503  # full again
        for stream in accepted[10:] + reopened:
            await stream.close()

    asyncio.run(scenario())


def test_a_new_games_stream_does_not_wait_for_the_readers_block(capped, command, store) -> None:
    """The process's reader blocks up to LIVE_BLOCK_SECONDS (10 s) in XREAD on the games it
    watches; a stream on a game it did not watch yet interrupts that block (CLIENT UNBLOCK),
    so the new game's next move arrives at once, not after the block."""
    (watched, _), (fresh, tokens) = games(command, 2, 2, seed=9)

    async def scenario() -> None:
        first = await opened(capped, watched)
        await first.next()  # "live from": the reader now blocks on this game's streams
        await asyncio.sleep(0.5)  # let it get into its XREAD
        stream = await opened(capped, fresh)
        await stream.next()
        before = store.last_seq(fresh, MOVES)
        await asyncio.to_thread(play, command, fresh, tokens, random.Random(9), 1)
        started = time.monotonic()
        item = await asyncio.wait_for(stream.next(), 10)
        assert item is not None and item[1]["seq"] == before + 1
        assert time.monotonic() - started < 2, "the move waited for the reader's block"
        await stream.close()
        await first.close()

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_quiet_stream_outlives_the_redis_socket_timeout(server, command, store) -> None:
    """Finding 3: with the default heartbeat (15 s) a stream on a quiet game stays open past
    20 s, sends a keepalive comment, and still delivers the next event."""
    ((game_id, tokens),) = games(command, 1, 2, seed=4)

    async def scenario() -> None:
        stream = Stream(server, game_id)
        assert await stream.open() == 200
        opened = time.monotonic()
        while time.monotonic() - opened < 21:
            try:
                item = await asyncio.wait_for(stream.next(), 21 - (time.monotonic() - opened))
            except TimeoutError:
                break
            assert item is not None, f"the stream ended after {time.monotonic() - opened:.1f} s"
        assert ": keepalive" in stream.comments
        before = store.last_seq(game_id, MOVES)
        await asyncio.to_thread(play, command, game_id, tokens, random.Random(5), 1)
        item = await asyncio.wait_for(stream.next(), 10)
        assert item is not None and item[0] == "event"
        assert item[1]["stream"] == MOVES and item[1]["seq"] == before + 1
        await stream.close()

    asyncio.run(scenario())


def test_a_finished_games_stream_replays_the_rest_then_ends(
    server, command, redis_client, store
) -> None:
    """Finding 8: on a game scored to its end a stream sends every event after its
    Last-Event-ID, then `end`, then the response ends; a cursor beyond the log gets 422."""
    ((game_id, tokens),) = games(command, 1, 0, seed=6)
    play(command, game_id, tokens, random.Random(6))
    wait_scored(redis_client, store, [game_id])
    whole = merged(store, game_id, "0-0")
    final = whole[-1][0]
    assert whole[-1][1] == SCORES
    middle = whole[len(whole) // 2][0]
    moves, scores = (int(v) for v in final.split("-"))

    async def scenario() -> None:
        for last_id, expected in ((middle, merged(store, game_id, middle)), (final, [])):
            stream = Stream(server, game_id, last_id)
            assert await stream.open() == 200
            await asyncio.wait_for(stream.until_end(), 15)
            assert received(stream) == expected
            end = stream.events[-1]
            assert (end["event"], end["id"], end["cursor"]) == ("end", final, final)
            await stream.close()
        for beyond in (f"{moves + 1}-{scores}", f"{moves}-{scores + 1}", "999999-0"):
            stream = Stream(server, game_id, beyond)
            assert await stream.open() == 422
            body = stream.json()
            assert body["code"] == "cursor_beyond_log"
            assert body["details"] == {"cursor": beyond, "last": final}

    asyncio.run(scenario())


@pytest.mark.slow
def test_1000_streams_get_every_event_in_order_while_2000_views_are_served(
    server, command, redis_client, store
) -> None:
    """The issue's scale test: 1,000 open streams on one query instance (10 games, 100
    viewers each) while the games are played to their end and 2,000 views are served: no view
    answers 503, and every stream gets every event after its start, in order, then `end`."""
    made = games(command, 10, 2, seed=7)
    game_ids = [g for g, _ in made]
    rng = random.Random(8)

    async def scenario() -> tuple[list[Stream], list[tuple[int, Any]]]:
        streams = await open_streams(server, game_ids, 100)
        assert [s.status for s in streams].count(200) == 1_000
        readers = [asyncio.create_task(asyncio.wait_for(s.until_end(), 150)) for s in streams]

        def play_all() -> None:
            for game_id, tokens in made:
                play(command, game_id, tokens, rng)

        playing = asyncio.to_thread(play_all)
        paths = [f"/games/{game_ids[i % 10]}/{('board', 'scores')[i % 2]}" for i in range(2_000)]
        answers, _ = await asyncio.gather(views(server, paths, 20), playing)
        await asyncio.gather(*readers)
        for stream in streams:
            await stream.close()
        return streams, answers

    streams, answers = asyncio.run(scenario())
    statuses = [status for status, _ in answers]
    assert statuses.count(503) == 0 and statuses == [200] * 2_000
    for stream in streams:
        assert_every_event_in_order(stream, store)
