"""The scoring worker's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the event store (the embedded Redis of `make run`)
    "BROKER_URL": "",  # Celery broker ("" = REDIS_URL)
    "SCORING_BATCH": 1_000,  # move events read and scored per append
    "SCORING_CACHE_SIZE": 2_000,  # games whose folded state a worker process keeps
    "SWEEP_SECONDS": 10.0,  # how often beat looks for games whose notification was lost
    # An unacknowledged task (its worker died) is handed out again after this long.
    "VISIBILITY_TIMEOUT": 60,
    "WORKER_METRICS_PORT": 0,  # Prometheus /metrics of the worker (0 = not served)
    "WORKER_METRICS_ADDR": "127.0.0.1",
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The worker's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
