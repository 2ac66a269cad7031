"""The scoring worker's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the event store (the embedded Redis of `make run`)
    "BROKER_URL": "",  # Celery broker ("" = REDIS_URL)
    # Redis connections the scorer of one worker process may hold; 0 = derived: the
    # worker's concurrency (its pool threads) + 2 (the feed's followers, the sweep).
    "REDIS_MAX_CONNECTIONS": 0,
    "SCORING_BATCH": 1_000,  # move events read and scored per append
    "SCORING_CACHE_SIZE": 2_000,  # games whose folded state a worker process keeps
    # Each worker process watches the change feed and scores what it brings at once
    # (services/redis_store/watch.py); 0 = only beat's sweep follows it (every SWEEP_SECONDS).
    "FOLLOW_CHANGES": True,
    "FOLLOW_BATCH": 100,  # feed entries a follower handles per recorded step
    "SWEEP_SECONDS": 10.0,  # how often beat runs every follower over every shard
    # The lifecycle (services/scoring/timer.py, docs/lifecycle.md): how often beat looks for
    # turns past their deadline and idle games (the precision of a turn limit), and how long
    # a game in progress may go without a move before the server ends it as abandoned
    # (0 = never).
    "TIMER_SECONDS": 1.0,
    "ABANDON_AFTER": 30 * 86_400.0,
    "TIMER_BATCH": 10_000,  # expired turns (and idle games) one tick handles at most
    # A seat that times out under `on_leave: "bot:<level>"` has its bot's time reserved
    # against its game's API key by the timer (docs/takeover.md): the command service's
    # budgets and bot move floor, which must be set alike on both (0: no limit).
    "BOT_SECONDS_IN_FLIGHT": 7_200.0,
    "BOT_SECONDS_PER_DAY": 28_800.0,
    "BOT_MOVE_FLOOR_MS": 250,
    # An unacknowledged task (its worker died) is handed out again after this long.
    "VISIBILITY_TIMEOUT": 60,
    "WORKER_METRICS_PORT": 0,  # Prometheus /metrics of the worker (0 = not served)
    "WORKER_METRICS_ADDR": "127.0.0.1",
    # Delivery of webhooks and subscriptions (services/scoring/subscriptions.py, docs/
    # integration.md, docs/subscriptions.md): their tasks run on this queue; start a worker
    # with `-Q webhooks` (or `-Q scoring,webhooks`) so slow receivers never delay scoring.
    "WEBHOOK_QUEUE": "webhooks",
    "WEBHOOK_TIMEOUT": 5.0,  # seconds a POST may take, whole: connect, send, status line
    # A delivery is retried for this long after its event was dispatched: a receiver down
    # for less misses nothing.
    "WEBHOOK_RETRY_SECONDS": 86_400.0,
    # Celery's exponential backoff with full jitter: after the n-th failure a delivery waits
    # a uniform draw from 0 to min(BASE * 2^(n-1), MAX) seconds. MAX stays below
    # VISIBILITY_TIMEOUT minus a deliver task's running time (10 s): a retry held longer is
    # handed out twice by the broker (harmless: the second finds the attempt taken).
    "WEBHOOK_BACKOFF_BASE": 1.0,
    "WEBHOOK_BACKOFF_MAX": 45.0,
    "WEBHOOK_ALLOW_PRIVATE": False,  # deliver to loopback/private addresses (tests, dev)
    "WEBHOOK_SWEEP_GRACE": 30.0,  # seconds a hook's head may be overdue before the sweep resends
    # Deliveries one deliver task makes (in seq order, for one hook) before it hands over to
    # a new task, so a long backlog does not hold one task (and other hooks wait less).
    "WEBHOOK_TASK_DELIVERIES": 100,
    # Redis connections the webhook tasks of one worker process may hold (pool `cc:webhooks`);
    # 0 = derived: the process's task threads (--concurrency; 1 in a prefork child) + 2.
    "WEBHOOK_REDIS_CONNECTIONS": 0,
    "WEBHOOK_BATCH": 500,  # score events turned into deliveries per atomic step
    # The archive (services/archive, deploy/README.md "The archive"): a finished game is due
    # ARCHIVE_AFTER seconds after its final score event; beat's `archive.run` (every
    # ARCHIVE_SECONDS, at most ARCHIVE_BATCH games) moves due games when ARCHIVE_RUN is on
    # (the default; each worker process opens the archive once, on its first run). Every
    # part must read the same ARCHIVE_URL ("" is right for `make run` only: one machine).
    "ARCHIVE_URL": "",  # postgresql://… or sqlite:///path ("" = var/archive.sqlite3)
    "ARCHIVE_AFTER": 3_600.0,
    "ARCHIVE_RUN": True,  # 0: games stay in Redis (still listed as due: moved once it is on)
    "ARCHIVE_SECONDS": 60.0,
    "ARCHIVE_BATCH": 1_000,
    "ARCHIVE_RETRY": 60.0,  # seconds before a game that could not move is tried again
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The worker's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
