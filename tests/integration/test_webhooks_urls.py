"""Finding 9 of issue 13, registration side, over a real socket: the command service under
gunicorn (deploy config), a real Redis. Loopback and other non-public addresses in the
spellings resolvers and browsers accept (``http://2130706433/``, ``http://0x7f000001/``,
``http://127.1/``, ``http://0177.0.0.1/``, ``[::ffff:127.0.0.1]`` …) are refused with
``422 webhook_url_not_public`` and store nothing; an accepted URL is stored normalised (what
the worker will call is what was checked). Before issue 13 every one of them was accepted:
the check only knew dotted quads. The delivery side (one lookup, connect to the checked
address) is tested in tests/unit/test_integration_webhooks.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from services.command.apikeys import ApiKeys
from services.redis_store.keys import game_subscriptions_key as hooks_key

from .http_client import call, gunicorn
from .test_integration_api import GOLDEN, golden

ODD = [
    "http://2130706433/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://0x7f.1:8080/in",
    "http://127.0.0.1./",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://0xa9fea9fe/latest/meta-data",  # 169.254.169.254, cloud metadata
    "http://012.0.0.1/",  # 10.0.0.1
    "http://LOCALHOST./",
]


@pytest.fixture(scope="module")
def service(redis_url: str) -> Iterator[tuple[str, str]]:
    """(base URL, API key) of a command service that sends no tasks (NOTIFY_MS=0)."""
    key = ApiKeys(redis.Redis.from_url(redis_url)).create("webhook-urls")[1]
    env = {
        "REDIS_URL": redis_url,
        "NOTIFY_MS": "0",
        "WEBHOOK_ALLOW_PRIVATE": "0",
        "API_KEY_RATE": "0",
    }
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 1) as base:
        yield base, key


@pytest.fixture
def game_id(service: tuple[str, str]) -> str:
    """A new imported game (each test sees only the hooks it registered)."""
    base, key = service
    record, _ = golden(GOLDEN[0])
    status, body = call(base, "POST", "/games/import", record, {"X-Api-Key": key})
    assert status == 201, body
    return str(body["game_id"])


@pytest.mark.parametrize("url", ODD)
def test_odd_spellings_of_private_addresses_are_refused_at_registration(
    service, game_id, redis_client, url
) -> None:
    base, key = service
    body = {"url": url, "secret": "s" * 20}
    status, reply = call(base, "POST", f"/games/{game_id}/webhooks", body, {"X-Api-Key": key})
    assert (status, reply["code"]) == (422, "webhook_url_not_public"), reply
    assert "public address" in reply["message"]
    assert not redis_client.exists(hooks_key(game_id))  # nothing stored


def test_an_accepted_url_is_stored_normalised(service, game_id, redis_client) -> None:
    base, key = service
    body = {"url": "HTTPS://1572395042:443/in?x=1#part", "secret": "s" * 20}
    status, reply = call(base, "POST", f"/games/{game_id}/webhooks", body, {"X-Api-Key": key})
    assert status == 201, reply
    assert reply["url"] == "https://93.184.216.34/in?x=1"
    stored = json.loads(redis_client.hget(hooks_key(game_id), reply["hook_id"]))
    assert stored["url"] == reply["url"]
    status, reply = call(base, "POST", f"/games/{game_id}/webhooks",
                         {**body, "url": "https://1.2.3.4.5/"}, {"X-Api-Key": key})  # fmt: skip
    assert (status, reply["code"]) == (422, "bad_webhook_url")
    # Outside development a signed body goes over https only (issue 32, finding 6).
    plain = {**body, "url": "http://93.184.216.34/in"}
    status, reply = call(base, "POST", f"/games/{game_id}/webhooks", plain, {"X-Api-Key": key})
    assert (status, reply["code"]) == (422, "webhook_url_not_https")
