"""Webhook pieces that need no Redis: URL and secret checks, signatures, bodies, backoff, and
the key layout the command service and the worker must agree on."""

from __future__ import annotations

import hashlib
import hmac
import json
import random

import pytest

from eventstore.envelope import SCORES, StoredEvent
from services.command import hooks as command_hooks
from services.command.hooks import BadWebhook, check_secret, check_url
from services.scoring import webhooks


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hooks/carcassonne",
        "http://scores.example.org:8080/in?token=abc",
        "https://[2606:4700::1111]/x",
    ],
)
def test_public_http_urls_are_accepted(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("ftp://example.com/x", "bad_webhook_url"),
        ("javascript:alert(1)", "bad_webhook_url"),
        ("https://", "bad_webhook_url"),
        ("https://user:pw@example.com/", "bad_webhook_url"),
        ("https://example.com:99999/", "bad_webhook_url"),
        ("https://exa mple.com/", "bad_webhook_url"),
        ("https://example.com/" + "a" * 2048, "bad_webhook_url"),
        (42, "bad_webhook_url"),
        ("http://127.0.0.1:8080/", "webhook_url_not_public"),
        ("http://localhost/", "webhook_url_not_public"),
        ("http://10.1.2.3/", "webhook_url_not_public"),
        ("http://169.254.169.254/latest/meta-data", "webhook_url_not_public"),
        ("http://[::1]/", "webhook_url_not_public"),
    ],
)
def test_bad_urls_are_refused(url: object, code: str) -> None:
    with pytest.raises(BadWebhook) as info:
        check_url(url)
    assert info.value.code == code and info.value.status == 422


def test_private_addresses_are_allowed_when_configured() -> None:
    assert check_url("http://127.0.0.1:8080/in", allow_private=True) == "http://127.0.0.1:8080/in"


def test_secrets_must_be_long_enough_and_bounded() -> None:
    assert check_secret("s" * 16) == "s" * 16
    for bad in ("short", "s" * 257, None, 1234567890123456):
        with pytest.raises(BadWebhook):
            check_secret(bad)


def test_both_services_use_one_key_layout() -> None:
    """The command service writes hooks where the worker reads them (one shared key module)."""
    assert command_hooks.hooks_key("g1") == webhooks.hooks_key("g1") == "{g:g1}:webhooks"
    assert command_hooks.hook_keys("g1", "h_1") == webhooks.hook_keys("g1", "h_1")
    assert all(k.startswith("{g:g1}:") for k in webhooks.hook_keys("g1", "h_1"))
    assert webhooks.lease_key("g1", "h_1", 5).startswith("{g:g1}:")


def test_signature_is_hmac_sha256_of_the_raw_body() -> None:
    payload = {"points": 4, "kind": "road"}
    event = StoredEvent("g", SCORES, 3, "FeatureScored", 1, 1700, "c", payload)
    body = webhooks.delivery_body("g", "h_1", event)
    assert body == webhooks.delivery_body("g", "h_1", event)  # the same bytes on every attempt
    data = json.loads(body)
    assert data["delivery"] == "h_1.3" == webhooks.delivery_id("h_1", 3)
    assert (data["seq"], data["event"], data["payload"]["points"]) == (3, "FeatureScored", 4)
    expected = hmac.new(b"k" * 16, body, hashlib.sha256).hexdigest()
    assert webhooks.signature("k" * 16, body) == "sha256=" + expected


def test_backoff_doubles_up_to_its_cap_with_bounded_jitter() -> None:
    rng = random.Random(1)
    delays = [webhooks.backoff(n, 1.0, 50.0, rng) for n in range(1, 12)]
    for n, delay in enumerate(delays, start=1):
        plain = min(50.0, 2 ** (n - 1))
        assert plain <= delay <= plain * 1.2
    assert webhooks.backoff(10_000, 1.0, 50.0) <= 60.0
