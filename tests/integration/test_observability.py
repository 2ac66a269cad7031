"""Health, readiness, metrics and request ids, on real processes and a real Redis."""

from __future__ import annotations

import json
import logging
import re
import time

import redis

from carcassonne.game import actions
from services.command.app import create_app as command_app
from services.common.observability import JsonFormatter, request_id_from
from services.query.app import create_app as query_app
from services.redis_store import RedisEventStore
from tests.redis_server import private_redis

from .http_client import api_key, call, free_port, gunicorn
from .workers import celery_env, running, wait_scored, worker


def test_readyz_follows_redis_and_healthz_does_not(redis_url: str) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    for make in (command_app, query_app):
        up = make({"REDIS_URL": redis_url}).test_client()
        down = make({"REDIS_URL": dead}).test_client()
        assert up.get("/readyz").status_code == 200
        reply = down.get("/readyz")
        assert reply.status_code == 503
        assert set(reply.get_json()["failed"]) == {"redis"}
        assert down.get("/healthz").status_code == 200  # alive, just not ready


def test_request_ids_are_echoed_or_made() -> None:
    client = command_app({"REDIS_URL": "redis://127.0.0.1:1/0"}).test_client()
    assert (
        client.get("/healthz", headers={"X-Request-Id": "abc-123"}).headers["X-Request-Id"]
        == "abc-123"
    )
    made = client.get("/healthz", headers={"X-Request-Id": "no spaces allowed"})
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["X-Request-Id"])
    assert request_id_from("x" * 65) != "x" * 65


def test_json_log_lines_carry_the_request_id() -> None:
    record = logging.LogRecord("a.b", logging.INFO, "f.py", 1, "scored %d", (3,), None)
    record.request_id = "r1"
    record.game_id = "g1"
    line = json.loads(JsonFormatter("scoring").format(record))
    assert line["msg"] == "scored 3" and line["service"] == "scoring"
    assert (line["request_id"], line["game_id"], line["level"]) == ("r1", "g1", "info")


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_of_all_gunicorn_workers_are_merged(redis_url: str) -> None:
    with gunicorn(
        "services.command.wsgi:app", "deploy/gunicorn/command.py", {"REDIS_URL": redis_url}, 3
    ) as base:
        for _ in range(30):  # spread over the three workers by the kernel
            assert call(base, "GET", "/readyz")[0] == 200
        status, text = call(base, "GET", "/metrics")
    assert status == 200
    count = _metric(
        text, "carcassonne_http_requests_total", route="/readyz", status="200", service="command"
    )
    assert count == 30


def test_a_request_id_follows_a_move_into_the_scoring_logs() -> None:
    """On a Redis of its own: on the session's, a worker starting with other tests' games
    waiting on the change feed scores that backlog first (it was still at it 40 s later in
    one loaded CI run) and the move's line came too late."""
    with private_redis() as url:
        _request_id_in_worker_logs(url, redis.Redis.from_url(url))


def _request_id_in_worker_logs(redis_url: str, redis_client: redis.Redis) -> None:
    env = celery_env(redis_url)
    app = command_app({"REDIS_URL": redis_url, "BROKER_URL": env["BROKER_URL"]})
    client = app.test_client()
    w = worker(env, "obs")
    with running(w):
        players = [{"name": "a"}, {"name": "b"}]
        created = client.post("/games", json={"players": players}, headers=api_key(redis_url))
        game_id = created.get_json()["game_id"]
        tokens = {p["seat"]: p["token"] for p in created.get_json()["players"]}
        state = app.extensions["game_service"].load(game_id).state
        x, y, rotation, _ = actions(state)[0]
        reply = client.post(
            f"/games/{game_id}/turns",
            json={"x": x, "y": y, "rotation": rotation, "meeple": None},
            headers={
                "Authorization": f"Bearer {tokens[state.current]}",
                "X-Request-Id": "trace-42",
            },
        )
        assert reply.status_code == 200 and reply.headers["X-Request-Id"] == "trace-42"
        wait_scored(redis_client, RedisEventStore(redis_client), [game_id], timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lines = [json.loads(line) for line in w.log.read_text().splitlines()
                     if line.startswith("{")]  # fmt: skip
            if any(
                x.get("request_id") == "trace-42" and x.get("game_id") == game_id for x in lines
            ):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the worker did not log the move's request id")
