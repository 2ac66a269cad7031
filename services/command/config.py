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
    "NOTIFY_MS": 2_000,  # one scoring wake-up per game per this long at most ("0" = none)
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The service's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
