"""Configuration from environment variables, with development defaults."""

from __future__ import annotations

import os
from typing import Any

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the embedded Redis of `make run`
    "MAX_CONTENT_LENGTH": 16 * 1024,  # bytes; a turn is ~100 bytes, a new game < 1 KiB
    "STATE_CACHE_SIZE": 10_000,  # games whose folded state a worker process keeps
}


def from_env(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The service's settings: each default can be overridden by the variable of its name."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key, default in DEFAULTS.items():
        raw = env.get(key)
        out[key] = default if raw is None else type(default)(raw)
    return out
