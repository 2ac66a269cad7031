"""The scoring worker's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the event store (the embedded Redis of `make run`)
    "BROKER_URL": "",  # Celery broker ("" = REDIS_URL)
    # Redis connections the scorer of one worker process may hold; 0 = derived: the
    # worker's concurrency (its pool threads) + 2 (the drain's own reads, the sweep).
    "REDIS_MAX_CONNECTIONS": 0,
    "SCORING_BATCH": 1_000,  # move events read and scored per append
    "SCORING_CACHE_SIZE": 2_000,  # games whose folded state a worker process keeps
    "DRAIN_BATCH": 100,  # games taken from the pending set at a time
    "SWEEP_SECONDS": 10.0,  # how often beat looks for games whose notification was lost
    # An unacknowledged task (its worker died) is handed out again after this long.
    "VISIBILITY_TIMEOUT": 60,
    "WORKER_METRICS_PORT": 0,  # Prometheus /metrics of the worker (0 = not served)
    "WORKER_METRICS_ADDR": "127.0.0.1",
    # Webhooks (services/scoring/webhooks.py): their tasks run on this queue; start a worker
    # with `-Q webhooks` (or `-Q scoring,webhooks`) so slow receivers never delay scoring.
    "WEBHOOK_QUEUE": "webhooks",
    "WEBHOOK_TIMEOUT": 5.0,  # seconds per POST
    "WEBHOOK_RETRY_SECONDS": 3_600.0,  # a delivery is retried for this long after its event
    "WEBHOOK_BACKOFF_BASE": 1.0,  # seconds before the 2nd attempt, doubling after each failure
    # Capped below VISIBILITY_TIMEOUT: a retry held longer is handed out twice by the broker
    # (harmless, the second finds its attempt taken, but wasted).
    "WEBHOOK_BACKOFF_MAX": 50.0,
    "WEBHOOK_ALLOW_PRIVATE": False,  # deliver to loopback/private addresses (tests, dev)
    "WEBHOOK_SWEEP_GRACE": 30.0,  # seconds a delivery may be overdue before the sweep resends
    "WEBHOOK_BATCH": 500,  # score events turned into deliveries per atomic step
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The worker's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
