"""Checks of what live (SSE) streams received, against the game's log in Redis (for the
live-stream tests on a single Redis and on a cluster)."""

from __future__ import annotations

import asyncio
import time

from eventstore.envelope import MOVES, SCORES
from services.query.log import format_cursor, page
from services.redis_store import RedisEventStore

from .live_client import Stream


def merged(store: RedisEventStore, game_id: str, after: str) -> list[tuple[str, str, int]]:
    """(id, stream, seq) of every event of the merged log after the cursor `after`."""
    moves, scores = (int(v) for v in after.split("-"))
    items, _ = page(store, game_id, (moves, scores), 100_000)
    return [(format_cursor(cursor), e.stream, e.seq) for e, cursor in items]


def received(stream: Stream) -> list[tuple[str, str, int]]:
    return [(e["id"], e["stream"], e["seq"]) for e in stream.events if e["event"] != "end"]


def assert_every_event_in_order(stream: Stream, store: RedisEventStore) -> None:
    """A stream opened without Last-Event-ID on a game played to its end got each move and
    each score event after its start exactly once, each stream in order, no score before the
    move it scores, every id the cursor after its event; then `end` at the log's end."""
    moves, scores = (int(v) for v in start_cursor(stream).split("-"))
    *events, end = stream.events
    for event in events:
        if event["stream"] == MOVES:
            assert event["seq"] == moves + 1, (stream.game_id, event["id"])
            moves += 1
        else:
            assert event["seq"] == scores + 1, (stream.game_id, event["id"])
            scores += 1
            assert event["payload"]["move"] <= moves
        assert event["id"] == event["cursor"] == f"{moves}-{scores}"
    final = (store.last_seq(stream.game_id, MOVES), store.last_seq(stream.game_id, SCORES))
    assert (moves, scores) == final
    assert end["event"] == "end" and end["id"] == format_cursor(final) and stream.ended


def start_cursor(stream: Stream) -> str:
    """The cursor a stream opened without Last-Event-ID started from (its first comment)."""
    return next(c for c in stream.comments if c.startswith(": live from ")).split()[-1]


async def open_streams(base: str, game_ids: list[str], per_game: int) -> list[Stream]:
    streams = [Stream(base, g) for g in game_ids for _ in range(per_game)]
    limit = asyncio.Semaphore(100)  # connections being opened at once

    async def one(stream: Stream) -> None:
        async with limit:
            await stream.open()
            if stream.status == 200:
                while not stream.comments:  # the "live from" line: it is subscribed
                    await stream.next()

    await asyncio.gather(*(one(s) for s in streams))
    return streams


async def opened(base: str, game_id: str) -> Stream:
    """A stream, retried on 503 for a few seconds (slots of streams that an earlier test
    closed are freed within a second or so)."""
    deadline = time.monotonic() + 5
    while True:
        stream = Stream(base, game_id)
        if await stream.open() == 200:
            return stream
        assert stream.status == 503 and time.monotonic() < deadline, stream.status
        await asyncio.sleep(0.2)
