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
    "SSE_HEARTBEAT_SECONDS": 15.0,  # a quiet stream sends a comment line this often
    # Streams one process serves at once; more get 503 too_many_streams. A stream is a
    # greenlet waiting on an Event (no thread, no Redis connection): the gunicorn config sets
    # this from its worker_connections, keeping a reserve of connections for plain views.
    "SSE_MAX_STREAMS": 1_000,
    # The process's one live reader: XREAD BLOCK this long on every watched game's streams
    # (its socket timeout is longer; a new game interrupts the block with CLIENT UNBLOCK).
    "LIVE_BLOCK_SECONDS": 10.0,
    "LIVE_KEEP_EVENTS": 256,  # recent events kept per watched stream, served from memory
    "LIVE_WATCH_SECONDS": 0.5,  # how often closed client connections are looked for
    # Redis connections of the views (and the streams' catch-up reads) per process. A gevent
    # worker runs one greenlet at a time and a view spends well under a millisecond in Redis,
    # so a few connections keep up with it; requests beyond them wait (never fail) for one.
    "REDIS_POOL_SIZE": 16,
    # The archive that finished games move to (services/archive; the scoring worker's
    # setting): postgresql://… or sqlite:///path ("" = var/archive.sqlite3). Read only here.
    "ARCHIVE_URL": "",
    "ARCHIVE_CACHE_SIZE": 256,  # archived games whose decoded log a process keeps
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The service's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
