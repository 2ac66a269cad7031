"""The command service's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the embedded Redis of `make run`
    "BROKER_URL": "",  # Celery broker for score notifications ("" = REDIS_URL)
    "MAX_CONTENT_LENGTH": 16 * 1024,  # bytes; a turn is ~100 bytes, a new game < 1 KiB
    "STATE_CACHE_SIZE": 10_000,  # games whose folded state a worker process keeps
    # Scoring wake-ups: at most one pending per game; a lost one is re-sent after NOTIFY_MS
    # ("0" = never send: rely on the worker's sweep). Each runs NOTIFY_DELAY_MS after the
    # move that sent it, so a burst of moves is scored by one task.
    "NOTIFY_MS": 2_000,
    "NOTIFY_DELAY_MS": 20,
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The service's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
