"""`/v1/subscriptions` against a real Redis (no worker: tests/integration/
test_subscriptions_worker.py has it): the bad day — hostile URLs and kinds get a 4xx with a
stable code and store nothing — keys that see only their own subscriptions, the limit per
key, secrets shown once, and games owned by the key that creates them."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from services.command.apikeys import ApiKeys
from services.command.app import create_app
from services.common.notifications import MAX_SUBSCRIPTIONS
from services.redis_store import secrets_key
from services.redis_store.keys import subscriptions_key

GOOD = "https://hooks.example.com/carcassonne"


def make_app(redis_url: str, development: bool) -> Flask:
    return create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0,
                       "WEBHOOK_ALLOW_PRIVATE": development,
                       "API_KEY_RATE": 10_000.0, "API_KEY_BURST": 10_000})  # fmt: skip


@pytest.fixture(scope="module")
def production(redis_url: str) -> FlaskClient:
    return make_app(redis_url, development=False).test_client()


@pytest.fixture(scope="module")
def development(redis_url: str) -> FlaskClient:
    return make_app(redis_url, development=True).test_client()


@pytest.fixture
def key(redis_url: str) -> tuple[str, str]:
    return ApiKeys(redis.Redis.from_url(redis_url)).create("apps")


def subscribe(client: FlaskClient, key: str, body: Any) -> tuple[int, Any]:
    reply = client.post("/v1/subscriptions", json=body, headers={"X-Api-Key": key})
    return reply.status_code, reply.get_json()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"url": "ftp://example.com/x", "kinds": ["score"]}, "bad_webhook_url"),
        ({"url": "not a url", "kinds": ["score"]}, "bad_webhook_url"),
        ({"url": "https://user:pw@example.com/", "kinds": ["score"]}, "bad_webhook_url"),
        ({"url": "http://example.com/in", "kinds": ["score"]}, "webhook_url_not_https"),
        ({"url": "https://127.0.0.1/in", "kinds": ["score"]}, "webhook_url_not_public"),
        ({"url": "https://2130706433/in", "kinds": ["score"]}, "webhook_url_not_public"),
        ({"url": "https://10.1.2.3/in", "kinds": ["score"]}, "webhook_url_not_public"),
        ({"url": "https://[::ffff:192.168.0.1]/", "kinds": ["score"]}, "webhook_url_not_public"),
        ({"url": "https://localhost/in", "kinds": ["score"]}, "webhook_url_not_public"),
        ({"url": GOOD, "kinds": ["score", "moves"]}, "unknown_event_kind"),
        ({"url": GOOD, "kinds": ["turn_started"] * 500}, "invalid_body"),
        ({"url": GOOD, "kinds": ["turn_started"] * 5000}, "body_too_large"),
        ({"url": GOOD, "kinds": []}, "invalid_body"),
        ({"url": GOOD, "kinds": "score"}, "invalid_body"),
        ({"url": GOOD}, "invalid_body"),
        ({"url": GOOD, "kinds": ["score"], "secret": "mine"}, "invalid_body"),
        ({"url": "https://x.example/" + "a" * 3000, "kinds": ["score"]}, "bad_webhook_url"),
    ],
)
def test_hostile_subscriptions_are_refused_and_store_nothing(
    production: FlaskClient, key: tuple[str, str], redis_client: redis.Redis, body: Any, code: str
) -> None:
    key_id, secret = key
    status, answer = subscribe(production, secret, body)
    assert 400 <= status < 500 and answer["code"] == code, answer
    assert not redis_client.exists(subscriptions_key(key_id))


def test_development_allows_http_and_loopback_only_there(
    development: FlaskClient, production: FlaskClient, key: tuple[str, str]
) -> None:
    _, secret = key
    body = {"url": "http://127.0.0.1:9/in", "kinds": ["turn_started"]}
    status, answer = subscribe(development, secret, body)
    assert status == 201 and answer["url"] == "http://127.0.0.1:9/in"
    assert subscribe(production, secret, body)[1]["code"] == "webhook_url_not_public"


def test_secrets_are_shown_once_and_keys_see_only_their_own(
    production: FlaskClient, key: tuple[str, str], redis_url: str
) -> None:
    _, secret = key
    status, created = subscribe(production, secret, {"url": GOOD, "kinds": ["score", "score"]})
    assert status == 201 and created["kinds"] == ["score"]
    assert created["secret"].startswith("whsec_") and created["secrets_live"] == 1
    sub_id = created["subscription_id"]
    headers = {"X-Api-Key": secret}
    listed = production.get("/v1/subscriptions", headers=headers).get_json()["subscriptions"]
    assert [s["subscription_id"] for s in listed] == [sub_id]
    assert "secret" not in json.dumps(listed).replace("secrets_live", "")
    one = production.get(f"/v1/subscriptions/{sub_id}", headers=headers).get_json()
    assert "secret" not in one
    _, other = ApiKeys(redis.Redis.from_url(redis_url)).create("someone else")
    for method, path in [("get", ""), ("delete", ""), ("post", "/rotate"), ("post", "/ping"),
                         ("get", "/deliveries")]:  # fmt: skip
        body: dict[str, Any] | None = {} if path == "/rotate" else None
        reply = getattr(production, method)(
            f"/v1/subscriptions/{sub_id}{path}", headers={"X-Api-Key": other}, json=body
        )
        assert reply.status_code == 404 and reply.get_json()["code"] == "subscription_not_found"
    assert production.get("/v1/subscriptions").get_json()["code"] == "missing_api_key"
    # No broker in this app: a ping cannot be handed to the worker, and says so.
    reply = production.post(f"/v1/subscriptions/{sub_id}/ping", headers=headers)
    assert reply.status_code == 503 and reply.get_json()["code"] == "worker_unreachable"
    reply = production.post(f"/v1/subscriptions/{sub_id}/rotate", headers=headers,
                            json={"overlap_seconds": 10**9})  # fmt: skip
    assert reply.status_code == 422 and reply.get_json()["code"] == "invalid_body"


def test_a_key_has_at_most_so_many_subscriptions(
    production: FlaskClient, key: tuple[str, str]
) -> None:
    _, secret = key
    for _ in range(MAX_SUBSCRIPTIONS):
        assert subscribe(production, secret, {"url": GOOD, "kinds": ["score"]})[0] == 201
    status, answer = subscribe(production, secret, {"url": GOOD, "kinds": ["score"]})
    assert (status, answer["code"]) == (422, "too_many_subscriptions")


def test_the_key_that_creates_a_game_owns_it(
    production: FlaskClient, key: tuple[str, str], redis_client: redis.Redis, redis_url: str
) -> None:
    key_id, secret = key
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}]}
    reply = production.post("/games", json=body, headers={"X-Api-Key": secret})
    assert reply.status_code == 201
    record = json.loads(cast(bytes, redis_client.get(secrets_key(reply.get_json()["game_id"]))))
    assert record["key_id"] == key_id
    reply = production.post("/games", json=body)  # a key is needed (issue 33)
    assert (reply.status_code, reply.get_json()["code"]) == (401, "missing_api_key")
    development = create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0, "ANONYMOUS_GAMES": True})
    reply = development.test_client().post("/games", json=body)
    assert reply.status_code == 201  # a key is optional on a development server only
    stored = cast(bytes, redis_client.get(secrets_key(reply.get_json()["game_id"])))
    assert "key_id" not in json.loads(stored)
    reply = production.post("/games", json=body, headers={"X-Api-Key": "cck_unknown"})
    assert reply.status_code == 403 and reply.get_json()["code"] == "bad_api_key"
