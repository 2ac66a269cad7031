"""What the contract fuzzer (tests/contract/test_schemathesis.py) found, each pinned down on
the command app over a real Redis, so a regression shows without running the fuzzer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from services.command.apikeys import ApiKeys
from services.command.app import create_app

ROOT = Path(__file__).resolve().parents[2]
HAND_GAME = ROOT / "tests" / "golden" / "hand_three_tiles_2p.json"


@pytest.fixture(scope="module")
def app(redis_url: str) -> Flask:
    return create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0, "API_KEY_RATE": 0})


@pytest.fixture(scope="module")
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture(scope="module")
def key(redis_url: str) -> str:
    return ApiKeys(redis.Redis.from_url(redis_url)).create("contract-findings")[1]


def post(client: FlaskClient, path: str, key: str, body: Any) -> tuple[int, Any]:
    reply = client.post(path, headers={"X-Api-Key": key}, json=body)
    return reply.status_code, reply.get_json()


def base_record() -> dict[str, Any]:
    return {
        "format": "carcassonne-record/1",
        "players": 2,
        "turns": [{"tile": "U", "x": 1, "y": 0, "rotation": 0, "meeple": None}],
    }


@pytest.mark.parametrize("path", ["/v1/score", "/games/import"])
def test_a_record_with_null_draws_is_refused_not_read_as_without(client, key, path) -> None:
    # The document's `draws` is an array, never null: `"draws": null` was scored and
    # imported as if absent (schemathesis: "Schema-violating request accepted").
    status, body = post(client, path, key, {**base_record(), "draws": None})
    assert status == 422, body
    assert (body["code"], body["rule"]) == ("bad_draws", "R10.3")
    # Left out, the same record is fine; in a hand game `null` is refused as well.
    status, body = post(client, path, key, base_record())
    assert status in (200, 201), body
    hand = json.loads(HAND_GAME.read_text(encoding="utf-8"))
    hand = {k: v for k, v in hand.items() if k not in ("expected", "why", "regression")}
    status, body = post(client, path, key, {**hand, "draws": None})
    assert status == 422 and body["code"] == "bad_draws", body


@pytest.mark.parametrize("overlap", [2.5890419884777833e-42, 2.5, "3600", True])
def test_a_rotation_overlap_is_a_whole_number_of_seconds(client, key, redis_url, overlap) -> None:
    # The document says integer; 2.589e-42 was truncated to 0 and the secret rotated
    # (schemathesis: "Schema-violating request accepted").
    status, created = post(
        client,
        "/v1/subscriptions",
        key,
        {"url": "https://receiver.example/hook", "kinds": ["game_over"]},
    )
    assert status == 201, created
    sub_id = created["subscription_id"]
    rotate = f"/v1/subscriptions/{sub_id}/rotate"
    status, body = post(client, rotate, key, {"overlap_seconds": overlap})
    assert status == 422 and body["code"] == "invalid_body", body
    assert "overlap_seconds" in body["details"]["fields"], body
    # Nothing rotated: the secret made at creation is still the only one.
    reply = client.get(f"/v1/subscriptions/{sub_id}", headers={"X-Api-Key": key})
    assert reply.status_code == 200 and reply.get_json()["secrets_live"] == 1
    status, body = post(client, rotate, key, {"overlap_seconds": 3600})
    assert status == 200 and body["secret"] != created["secret"], body
    client.delete(f"/v1/subscriptions/{sub_id}", headers={"X-Api-Key": key})
