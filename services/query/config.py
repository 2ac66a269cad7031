"""The query service's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the embedded Redis of `make run`
    "STATE_CACHE_SIZE": 2_000,  # games whose folded state a process keeps (~60 KiB each)
    "SNAPSHOT_EVERY": 16,  # moves between kept snapshots: `?at=` replays fewer than this
    "REPLAY_CACHE_SIZE": 100,  # games viewed with `?at=` whose snapshots a process keeps
    "PAGE_LIMIT": 100,  # default page size of /games and /events
    "MAX_PAGE_LIMIT": 1_000,  # largest page a client may ask for
    "SSE_MAX_SECONDS": 300.0,  # a /live stream ends after this long (the client reconnects)
    "SSE_HEARTBEAT_SECONDS": 15.0,  # XREAD BLOCK timeout: a comment line is sent after each
    # Streams one process serves at once; more get 503 so plain views always find a thread.
    # The gunicorn config sets it from GUNICORN_THREADS.
    "SSE_MAX_STREAMS": 32,
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The service's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
