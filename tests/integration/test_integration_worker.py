"""Imported games and webhooks end to end: the command service imports, a real Celery worker
scores and delivers, the query service shows, a local HTTP receiver (http.server on
127.0.0.1) checks every delivery's signature. R6, R7 and R7.5 through the whole pipeline."""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from celery import Celery
from flask import Flask
from flask.testing import FlaskClient

from eventstore.envelope import SCORES
from services.command.apikeys import ApiKeys
from services.command.app import create_app as create_command_app
from services.common.signing import SIGNATURE_HEADER, verify
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore

from .games import new_game, play
from .http_client import free_port
from .test_integration_api import GOLDEN, golden, random_records
from .workers import APP, Process, celery_env, running, wait_scored, wait_tasks_done

SECRET = "a-shared-secret-of-some-length"


@pytest.fixture(scope="module")
def env(redis_url: str) -> Iterator[dict[str, str]]:
    """One worker on both queues; short backoff and window so retries show within seconds."""
    environment = celery_env(redis_url, WEBHOOK_ALLOW_PRIVATE="1", WEBHOOK_BACKOFF_BASE="0.3",
                             WEBHOOK_BACKOFF_MAX="1", WEBHOOK_RETRY_SECONDS="30",
                             WEBHOOK_TIMEOUT="3")  # fmt: skip
    args = [sys.executable, "-m", "celery", "-A", APP, "worker", "-Q", "scoring,webhooks",
            "-l", "info", "--concurrency", "4", "--pool", "threads", "-n", "wh@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    with running(Process(args, environment, "wh")):
        yield environment


@pytest.fixture(scope="module")
def command(env: dict[str, str]) -> Flask:
    return create_command_app({"REDIS_URL": env["REDIS_URL"], "BROKER_URL": env["BROKER_URL"],
                               "WEBHOOK_ALLOW_PRIVATE": True, "API_KEY_RATE": 0.0})  # fmt: skip


@pytest.fixture(scope="module")
def query(env: dict[str, str]) -> FlaskClient:
    return create_query_app({"REDIS_URL": env["REDIS_URL"]}).test_client()


@pytest.fixture(scope="module")
def key(env: dict[str, str]) -> str:
    return ApiKeys(redis.Redis.from_url(env["REDIS_URL"])).create("worker-tests")[1]


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


class Receiver:
    """A webhook receiver on 127.0.0.1: keeps every POST; answers from `statuses`, then 200."""

    def __init__(self, port: int | None = None, statuses: list[int] | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/hooks/carcassonne"
        self.statuses = list(statuses or [])
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.received.append((dict(self.headers.items()), body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def deliveries(self) -> dict[str, list[dict[str, Any]]]:
        """Bodies received per delivery id (a retried delivery would appear more than once)."""
        with self.lock:
            out: dict[str, list[dict[str, Any]]] = {}
            for headers, body in self.received:
                out.setdefault(headers["X-Carcassonne-Delivery"], []).append(json.loads(body))
            return out


def wait_for(check: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def import_game(command: Flask, key: str, record: dict[str, Any], **extra: Any) -> str:
    reply = command.test_client().post("/games/import", json={**record, **extra},
                                       headers={"X-Api-Key": key})  # fmt: skip
    assert reply.status_code == 201, reply.get_json()
    return str(reply.get_json()["game_id"])


def add_hook(command: Flask, key: str, game_id: str, url: str) -> str:
    reply = command.test_client().post(f"/games/{game_id}/webhooks",
                                       json={"url": url, "secret": SECRET},
                                       headers={"X-Api-Key": key})  # fmt: skip
    assert reply.status_code == 201, reply.get_json()
    return str(reply.get_json()["hook_id"])


def delivery_log(command: Flask, key: str, game_id: str, hook_id: str) -> list[dict[str, Any]]:
    reply = command.test_client().get(f"/games/{game_id}/webhooks/{hook_id}/deliveries",
                                      headers={"X-Api-Key": key})  # fmt: skip
    assert reply.status_code == 200, reply.get_json()
    return list(reply.get_json()["deliveries"])


def all_delivered(command: Flask, key: str, game_id: str, hook_id: str, count: int) -> bool:
    log = delivery_log(command, key, game_id, hook_id)
    return len(log) == count and all(e["outcome"] == "delivered" for e in log)


def test_golden_imports_are_scored_by_the_worker_and_shown_by_the_query_service(
    command, query, key, store, redis_client
) -> None:
    games = {}
    for path in GOLDEN:
        record, expected = golden(path)
        names = [f"{path.stem[:10]}-{i}" for i in range(record["players"])]
        games[import_game(command, key, record, names=names)] = (expected, names)
    wait_scored(redis_client, store, list(games), timeout=60)
    for game_id, (expected, names) in games.items():
        final = store.read(game_id, SCORES)[-1]
        assert final.type == "GameScored"
        assert final.payload["final_scores"] == expected["final_scores"]
        assert final.payload["scores_before_final"] == expected["scores_before_final"]
        view = query.get(f"/games/{game_id}/scores").get_json()
        assert [p["score"] for p in view["players"]] == expected["final_scores"]
        assert [p["name"] for p in view["players"]] == names
        assert view["over"] and view["unscored_moves"] == 0


def test_an_exported_game_reimports_to_the_same_score_stream(command, key, store, redis_client):
    client = command.test_client()
    pairs = []
    for record in random_records(6, seed=41):
        first = import_game(command, key, record)
        exported = client.get(f"/games/{first}/record").get_json()
        pairs.append((first, import_game(command, key, exported)))
    wait_scored(redis_client, store, [g for pair in pairs for g in pair], timeout=60)
    for first, second in pairs:
        assert [(e.type, e.payload) for e in store.read(first, SCORES)] == [
            (e.type, e.payload) for e in store.read(second, SCORES)
        ]


def check_deliveries(receiver: Receiver, store: RedisEventStore, game_id: str, hook_id: str):
    """Every score event arrived once, signed, as the score stream holds it."""
    scores = store.read(game_id, SCORES)
    got = receiver.deliveries()
    assert sorted(got) == sorted(f"{hook_id}.{e.seq}" for e in scores)
    assert all(len(bodies) == 1 for bodies in got.values()), "a delivery arrived twice"
    with receiver.lock:
        received = list(receiver.received)
    for headers, body in received:
        assert signed(headers, body)
        data = json.loads(body)
        event = scores[data["seq"] - 1]
        assert (data["event"], data["payload"]) == (event.type, event.payload)
        assert headers["X-Carcassonne-Event"] == event.type
        assert (data["game_id"], data["hook_id"]) == (game_id, hook_id)
    assert scores[-1].type == "GameScored"  # the final result is delivered too


def test_webhooks_deliver_every_score_event_once_signed_and_redelivery_changes_nothing(
    env, command, key, store, redis_client
) -> None:
    receiver = Receiver().start()
    try:
        record, _ = golden(GOLDEN[0])
        game_id = import_game(command, key, record)
        wait_scored(redis_client, store, [game_id])
        hook_id = add_hook(command, key, game_id, receiver.url)  # the backlog is delivered
        count = store.last_seq(game_id, SCORES)
        wait_for(lambda: all_delivered(command, key, game_id, hook_id, count), what="deliveries")
        check_deliveries(receiver, store, game_id, hook_id)
        log = delivery_log(command, key, game_id, hook_id)
        assert [e["seq"] for e in log] == list(range(1, count + 1))
        assert all(e["tries"] == 1 and e["attempts"][0]["status"] == 200 for e in log)
        # Redelivered tasks (a broker handing a message out twice) and a repeated dispatch.
        sender = Celery("redeliver", broker=env["BROKER_URL"])
        sent: set[str] = set()
        try:
            dispatch, deliver = "subscriptions.dispatch", "subscriptions.deliver"
            sent.add(sender.send_task(dispatch, args=[game_id], queue="webhooks").id)
            for _ in range(count + 1):
                sent.add(sender.send_task(deliver, args=[game_id, hook_id], queue="webhooks").id)
        finally:
            sender.close()
        wait_tasks_done(env["BROKER_URL"], sent)  # every one of them has run
        assert delivery_log(command, key, game_id, hook_id) == log
        assert len(receiver.received) == count
    finally:
        receiver.stop()


def test_a_live_game_delivers_its_score_events_as_the_worker_scores_them(
    command, key, store, redis_client
) -> None:
    receiver = Receiver().start()
    try:
        game_id, tokens = new_game(command, ["ann", "bob"], key=key)  # hooks: the owner's
        hook_id = add_hook(command, key, game_id, receiver.url)
        play(command, game_id, tokens, random.Random(8))
        wait_scored(redis_client, store, [game_id])
        count = store.last_seq(game_id, SCORES)
        wait_for(lambda: all_delivered(command, key, game_id, hook_id, count), what="deliveries")
        check_deliveries(receiver, store, game_id, hook_id)
    finally:
        receiver.stop()


def test_a_receiver_down_at_first_gets_every_event_once_it_is_up(
    command, key, store, redis_client
) -> None:
    # Down (connection refused), then up but failing twice (500, 503), then fine.
    receiver = Receiver(statuses=[500, 503])
    record, _ = golden(GOLDEN[1])
    game_id = import_game(command, key, record)
    wait_scored(redis_client, store, [game_id])
    count = store.last_seq(game_id, SCORES)
    hook_id = add_hook(command, key, game_id, receiver.url)

    def failed_once() -> bool:
        log = delivery_log(command, key, game_id, hook_id)
        return len(log) == count and log[0]["tries"] >= 1

    wait_for(failed_once, what="first attempts")
    log = delivery_log(command, key, game_id, hook_id)
    # Deliveries go out in seq order: while the receiver is down only the first is tried.
    assert log[0]["outcome"] == "retrying" and log[0]["attempts"][0]["status"] is None
    assert "error" in log[0]["attempts"][0] and log[0]["next_ms"]
    assert all(e["outcome"] == "pending" and e["tries"] == 0 for e in log[1:])
    receiver.start()
    try:
        wait_for(lambda: all_delivered(command, key, game_id, hook_id, count), what="recovery")
        log = delivery_log(command, key, game_id, hook_id)
        assert [a["status"] for a in log[0]["attempts"]][-3:] == [500, 503, 200]
        assert all(e["tries"] == 1 and e["attempts"][-1]["status"] == 200 for e in log[1:])
        statuses = [a["status"] for e in log for a in e["attempts"]]
        assert statuses.count(500) == 1 and statuses.count(503) == 1
        for entry in log:  # the attempts' times grow: the backoff was waited out
            times = [a["at_ms"] for a in entry["attempts"]]
            assert times == sorted(times) and entry["delivered_ms"] >= times[-1]
        got = receiver.deliveries()
        assert sorted(got) == sorted(f"{hook_id}.{s}" for s in range(1, count + 1))
        # Only the two refused answers were sent twice, under the same delivery id.
        assert sum(len(b) for b in got.values()) == count + 2
        assert all(len({json.dumps(b, sort_keys=True) for b in bodies}) == 1
                   for bodies in got.values())  # fmt: skip
    finally:
        receiver.stop()


def signed(headers: Any, body: bytes) -> bool:
    """Signed as subscriptions are (timed, issue 32 finding 6), and only so: a hook registered
    now gets no untimed legacy header."""
    assert "X-Carcassonne-Signature" not in headers
    return verify(headers[SIGNATURE_HEADER], body, SECRET, time.time())
