"""The body and headers of a per-game webhook's delivery: a subscription of format "webhook"
(services/command/hooks.py registers it) gets these instead of a subscription's, so
receivers written against per-game webhooks see the same bytes as before they became
subscriptions (docs/integration.md): one score event per POST, its position the score seq.
Signed as subscriptions are (issue 32, finding 6): ``Carcassonne-Signature: t=<unix
seconds>,v1=<hex>`` over ``t + "." + body`` under each live secret (rotatable; a receiver
refuses an old timestamp). A hook registered before that (its configuration has no
``"signature": "v1"``) also keeps ``X-Carcassonne-Signature: sha256=<HMAC(secret, body)>``,
untimed, so its receiver keeps working until it checks the new header.

Everything else — dispatch, ordered delivery, retries, the log, the sweep — is the
subscriptions' (services/scoring/subscriptions.py).
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

from eventstore.envelope import SCORES, StoredEvent
from eventstore.port import EventStore
from services.common.notifications import WEBHOOK_FORMAT, WEBHOOK_SIGNED, live_secrets
from services.common.signing import SIGNATURE_HEADER, hook_signature, sign

from .delivery import Request

USER_AGENT = "CarcassonneCloud-Webhooks/1"
READ_AHEAD = 50  # score events read at once by a deliver task

__all__ = ["WEBHOOK_FORMAT", "delivery_body", "delivery_id", "request"]


def delivery_id(hook_id: str, seq: int) -> str:
    """The stable id of the delivery of score event `seq` to a hook (receivers dedupe on it)."""
    return f"{hook_id}.{seq}"


def delivery_body(game_id: str, hook_id: str, event: StoredEvent) -> bytes:
    """The JSON body of a delivery: the same bytes on every attempt."""
    body = {
        "delivery": delivery_id(hook_id, event.seq),
        "hook_id": hook_id,
        "game_id": game_id,
        "seq": event.seq,
        "event": event.type,
        "time_ms": event.time_ms,
        "payload": event.payload,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def request(
    store: EventStore,
    game_id: str,
    config: dict[str, Any],
    entry: dict[str, Any],
    attempt: int,
    cache: dict[Any, Any],
) -> Request:
    """The POST of one attempt at a hook's delivery of score event ``entry["seq"]``."""
    event = _event(store, game_id, int(entry["seq"]), cache)
    body = delivery_body(game_id, config["id"], event)
    now = time.time()  # each attempt signed afresh
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Carcassonne-Event": event.type,
        "X-Carcassonne-Delivery": entry["delivery"],
        "X-Carcassonne-Attempt": str(attempt),
        SIGNATURE_HEADER: sign(live_secrets(config, int(now * 1000)), body, int(now)),
    }
    if config.get("signature") != WEBHOOK_SIGNED:  # registered before timed signatures: both
        headers["X-Carcassonne-Signature"] = hook_signature(config["secrets"][0]["secret"], body)
    return Request(config["url"], body, headers)


def _event(store: EventStore, game_id: str, seq: int, cache: dict[Any, Any]) -> StoredEvent:
    """Score event `seq`, read `READ_AHEAD` at a time for one task run (the log entry keeps
    only its type: the body is read from the stream, the same bytes on every attempt)."""
    event = cache.pop(("score", seq), None)
    if event is None:
        cache.clear()
        read = store.read(game_id, SCORES, after=seq - 1, limit=READ_AHEAD)
        cache.update((("score", e.seq), e) for e in read)
        event = cache.pop(("score", seq))
    return cast(StoredEvent, event)
