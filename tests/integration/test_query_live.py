"""Live events (SSE) over real HTTP: the query service under gunicorn, games played through the
command service and scored by a real worker, the stream read with http.client."""

from __future__ import annotations

import http.client
import json
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

from .games import new_game, play
from .http_client import call, gunicorn
from .workers import celery_env, running, wait_scored, worker

MAX_SECONDS, HEARTBEAT, MAX_STREAMS = 3.0, 0.3, 6


@pytest.fixture(scope="module")
def env(redis_url: str) -> Iterator[dict[str, str]]:
    environment = celery_env(redis_url)
    with running(worker(environment)):
        yield environment


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[str]:
    settings = {
        "REDIS_URL": env["REDIS_URL"],
        "SSE_MAX_SECONDS": str(MAX_SECONDS),
        "SSE_HEARTBEAT_SECONDS": str(HEARTBEAT),
        "SSE_MAX_STREAMS": str(MAX_STREAMS),
    }
    # One worker process: the live-stream limit below is per process.
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", settings, 1) as base:
        yield base


@pytest.fixture(scope="module")
def command(env: dict[str, str]) -> Flask:
    return create_command_app({"REDIS_URL": env["REDIS_URL"], "BROKER_URL": env["BROKER_URL"]})


class Stream:
    """One SSE connection read line by line."""

    def __init__(self, base: str, game_id: str, last_id: str | None = None) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {"Accept": "text/event-stream"}
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        self.conn.request("GET", f"/games/{game_id}/live", headers=headers)
        self.resp = self.conn.getresponse()
        self.comments: list[str] = []
        self.ended = False

    def next_event(self) -> dict[str, Any] | None:
        """The next event, or None when the server ended the stream."""
        fields: dict[str, str] = {}
        while True:
            line = self.resp.readline().decode()
            if not line:
                self.ended = True
                return None
            line = line.rstrip("\n")
            if line.startswith(":"):
                self.comments.append(line)
            elif line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields:
                return {"id": fields["id"], "event": fields["event"], **json.loads(fields["data"])}

    def close(self) -> None:
        """Drop the connection (as a client that goes away)."""
        self.conn.close()


def connect(base: str, game_id: str, last_id: str | None = None) -> Stream:
    """A live stream, retried on 503 as a client does: the server frees a stream's slot when
    a write to it fails, up to two heartbeats after the client has gone."""
    deadline = time.monotonic() + 10
    while True:
        stream = Stream(base, game_id, last_id)
        if stream.resp.status != 503 or time.monotonic() > deadline:
            assert stream.resp.status == 200, stream.resp.status
            return stream
        stream.close()
        time.sleep(HEARTBEAT)


def collect(
    base: str, game_id: str, last_id: str | None, target: str, drop_after: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Read events until the one whose id is `target`, reconnecting with Last-Event-ID when a
    stream ends (or after `drop_after` events, once); returns them and the connections used."""
    events: list[dict[str, Any]] = []
    connections = 0
    deadline = time.monotonic() + 30
    while last_id != target:
        assert time.monotonic() < deadline, f"stuck at {last_id}, waiting for {target}"
        stream = connect(base, game_id, last_id)
        connections += 1
        try:
            while (event := stream.next_event()) is not None:
                events.append(event)
                last_id = event["id"]
                if last_id == target:
                    break
                if drop_after is not None and len(events) == drop_after:
                    drop_after = None
                    break
        finally:
            stream.close()
    return events, connections


def ends(store: RedisEventStore, game_id: str) -> str:
    return f"{store.last_seq(game_id, MOVES)}-{store.last_seq(game_id, SCORES)}"


def test_streams_over_the_cap_get_503_and_views_still_answer(server, command) -> None:
    """With a cap of 6 streams per process the 7th gets 503 too_many_streams (with
    Retry-After), and a view still answers at once while the 6 stay open."""
    game_id, _ = new_game(command, ["a", "b"])
    streams = []
    try:
        for _ in range(MAX_STREAMS):
            streams.append(Stream(server, game_id))
            assert streams[-1].resp.status == 200
        started = time.monotonic()
        status, _ = call(server, "GET", f"/games/{game_id}/board")
        assert status == 200 and time.monotonic() - started < 2
        status, body = call(server, "GET", f"/games/{game_id}/live")
        assert status == 503 and body["code"] == "too_many_streams"
    finally:
        for stream in streams:
            stream.close()


def test_a_client_connected_mid_game_gets_every_later_event_once(
    server, command, redis_client: redis.Redis
) -> None:
    store = RedisEventStore(redis_client)
    game_id, tokens = new_game(command, ["ann", "bob"])
    rng = random.Random(5)
    play(command, game_id, tokens, rng, turns=10)
    wait_scored(redis_client, store, [game_id])
    start = ends(store, game_id)

    # Connected mid-game with no Last-Event-ID: it starts from now.
    first = connect(server, game_id)
    assert first.resp.getheader("Content-Type", "").startswith("text/event-stream")
    assert first.resp.readline().startswith(b"retry:")
    assert first.resp.readline().decode().strip() == f": live from {start}"
    play(command, game_id, tokens, rng, turns=15)
    wait_scored(redis_client, store, [game_id])
    target = ends(store, game_id)
    received = []
    while (event := first.next_event()) is not None:
        received.append(event)
        if len(received) == 12:
            break  # the client drops the connection mid-way
    first.close()
    assert received, "the stream delivered nothing"

    # It reconnects with the last id; meanwhile the game goes on to its end.
    play(command, game_id, tokens, rng)
    wait_scored(redis_client, store, [game_id])
    final = ends(store, game_id)
    rest, connections = collect(server, game_id, received[-1]["id"], final, drop_after=20)
    received += rest
    assert connections >= 2  # the dropped one and at least one more
    assert any(e["id"] == target for e in received)

    start_moves, start_scores = (int(v) for v in start.split("-"))
    final_moves, final_scores = (int(v) for v in final.split("-"))
    moves = [e["seq"] for e in received if e["stream"] == MOVES]
    scores = [e["seq"] for e in received if e["stream"] == SCORES]
    assert moves == list(range(start_moves + 1, final_moves + 1))  # each once, in order
    assert scores == list(range(start_scores + 1, final_scores + 1))
    latest_move = start_moves
    for event in received:  # a score never arrives before the move it scores
        if event["stream"] == MOVES:
            latest_move = event["seq"]
        else:
            assert event["payload"]["move"] <= latest_move
        assert event["event"] == ("move" if event["stream"] == MOVES else "score")
    assert [e.payload for e in store.read(game_id, SCORES)][start_scores:] == [
        e["payload"] for e in received if e["stream"] == SCORES
    ]


def test_an_idle_stream_sends_heartbeats_and_ends_in_bounded_time(server, command) -> None:
    game_id, _ = new_game(command, ["a", "b"])
    stream = connect(server, game_id, last_id="0-0")  # from the start
    started = time.monotonic()
    try:
        events = []
        while (event := stream.next_event()) is not None:
            events.append(event)
        elapsed = time.monotonic() - started
    finally:
        stream.close()
    assert [e["type"] for e in events][:2] == ["GameStarted", "TileDrawn"]
    assert stream.ended and MAX_SECONDS - 0.5 < elapsed < MAX_SECONDS + 3
    assert stream.comments.count(": keepalive") >= 2
    assert any("reconnect with Last-Event-ID" in c for c in stream.comments)
