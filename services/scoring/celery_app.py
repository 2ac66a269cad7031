"""The Celery app of the scoring worker, its tasks, its beat schedule and its followers of
the change feed.

Run: ``celery -A services.scoring.celery_app worker --concurrency 2 -Q scoring,webhooks``
and ``celery -A services.scoring.celery_app beat``. No one sends the worker a task per move:
each worker process watches the change feed (services/redis_store/watch.py; FOLLOW_CHANGES=0
turns the watch off) and runs its consumers over the shards that changed: the games
directory, the turn timer's indexes, scoring (each game with new moves is caught up, its
progress saved with its score events) and the subscriptions' due index (webhooks included).
``scoring.sweep`` runs the same followers over every shard on beat, in case no worker
process watches, and trims the feed below every consumer's position.
``scoring.catch_up(game_id)`` scores one game; only tests and benchmarks send it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import redis
from celery import Celery
from celery.signals import setup_logging as celery_setup_logging
from celery.signals import worker_init, worker_process_init
from prometheus_client import Counter, Gauge, Histogram, start_http_server

from eventstore.envelope import MOVES
from services.archive.archiver import ArchiveDue, Archiver
from services.common.celery_conf import reliable, watch_step
from services.common.observability import REQUEST_ID, setup_logging
from services.common.takeover import TakeoverPayer
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import BotBudget
from services.redis_store.changes import Change, Follower, Write, follow, trim
from services.redis_store.connect import broker_url, shared_client
from services.redis_store.directory_index import DirectoryIndex

from . import subscriptions  # registers the delivery tasks (dispatch, deliver, ping, sweep)
from .config import from_env
from .ratings import RatingsConsumer
from .scorer import CatchUp, Scorer
from .timer import Timer

QUEUE = "scoring"
log = logging.getLogger(__name__)
settings = from_env()

app = Celery("scoring", broker=broker_url(settings["BROKER_URL"], settings["REDIS_URL"]))
app.conf.update(
    # Acknowledged when done: a killed worker's task is redone (services/common/celery_conf.py).
    # The webhook and subscription tasks have a queue of their own (WEBHOOK_QUEUE).
    **reliable(QUEUE, settings["VISIBILITY_TIMEOUT"], [subscriptions.QUEUE]),
    beat_schedule={
        "sweep": {"task": "scoring.sweep", "schedule": settings["SWEEP_SECONDS"]},
        "subscriptions-sweep": {
            "task": "subscriptions.sweep",
            "schedule": settings["SWEEP_SECONDS"],
        },
        # A tick left waiting longer than its period is dropped: the next one does its work.
        "lifecycle-tick": {
            "task": "lifecycle.tick",
            "schedule": settings["TIMER_SECONDS"],
            "options": {"expires": max(1.0, settings["TIMER_SECONDS"])},
        },
        # Finished games leave Redis (services/archive): only with ARCHIVE_RUN on.
        **(
            {
                "archive-run": {
                    "task": "archive.run",
                    "schedule": settings["ARCHIVE_SECONDS"],
                    "options": {"expires": max(1.0, settings["ARCHIVE_SECONDS"])},
                }
            }
            if settings["ARCHIVE_RUN"]
            else {}
        ),
    },
)

_scorer: Scorer | None = None
_scorer_lock = threading.Lock()


def scorer() -> Scorer:
    """This process's scorer (one per worker child: Redis connections are not fork-safe)."""
    global _scorer
    with _scorer_lock:  # the thread pool's threads share one scorer and its cache
        if _scorer is None:
            client = shared_client(
                settings["REDIS_URL"], role="scoring", max_connections=redis_pool_size()
            )
            _scorer = Scorer(
                RedisEventStore(client),
                batch=settings["SCORING_BATCH"],
                cache_size=settings["SCORING_CACHE_SIZE"],
            )
        return _scorer


_concurrency = 0  # the worker's --concurrency, known once `worker_init` has run


def worker_concurrency() -> int:
    """The pool size of this worker (its threads), as `celery worker --concurrency` set it."""
    return _concurrency or os.cpu_count() or 1


def redis_pool_size() -> int:
    """Connections the scorer of this process may hold (REDIS_MAX_CONNECTIONS or derived)."""
    return int(settings["REDIS_MAX_CONNECTIONS"]) or worker_concurrency() + 2


def scorer_client() -> redis.Redis:
    """The Redis client of this process's scorer."""
    store = scorer().store
    assert isinstance(store, RedisEventStore)
    return store.client


@worker_process_init.connect
def _fresh_scorer(**_: Any) -> None:
    global _scorer
    _scorer = None  # never share a connection inherited across fork


MOVES_SCORED = Counter("carcassonne_scoring_moves_total", "Move events scored")
EVENTS_SCORED = Counter("carcassonne_scoring_events_total", "Score events appended")
CONFLICTS = Counter("carcassonne_scoring_conflicts_total", "Appends lost to another worker")
# A game whose move stream cannot be folded (a bug, or data written around the command
# service): logged with its id and retried by every sweep until someone repairs it.
FAILURES = Counter("carcassonne_scoring_failures_total", "Catch-ups that raised")
LAG = Histogram(
    "carcassonne_scoring_lag_seconds",
    "From a move's append to the append of a score event it caused",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


@celery_setup_logging.connect
def _json_logs(**_: Any) -> None:
    setup_logging("scoring")  # one JSON object per line, like the web services


@worker_init.connect
def _remember_concurrency(sender: Any = None, **_: Any) -> None:
    # The worker's --concurrency is known only here (before any pool thread or child
    # exists); the Redis pool sizes of this process are derived from it.
    global _concurrency
    _concurrency = int(getattr(sender, "concurrency", 0) or 0)


@worker_init.connect
def _metrics_server(**_: Any) -> None:
    port = settings["WORKER_METRICS_PORT"]
    if port:  # the thread pool is one process: one endpoint has all its metrics
        start_http_server(port, addr=settings["WORKER_METRICS_ADDR"])
        log.info("metrics on http://%s:%d/metrics", settings["WORKER_METRICS_ADDR"], port)


@app.task(name="scoring.catch_up")
def catch_up(game_id: str, request_id: str = "") -> dict[str, Any]:
    """Score every unscored move of one game (idempotent: safe to run twice or at once).
    Sent only by tests and benchmarks; the command service sends `drain`.

    `request_id` is the id of the command request whose move sent this task: the logs of
    the scoring carry it, so one id follows a move from its request to its score events.
    """
    done = _score_game(game_id, request_id)
    return {"moves": done.moves, "events": done.events, "progress": done.progress}


def _score_game(game_id: str, request_id: str = "", until: int | None = None) -> CatchUp:
    token = REQUEST_ID.set(request_id)
    try:
        done = scorer().catch_up(game_id, until)
    finally:
        REQUEST_ID.reset(token)
    # The feed of the game's subscriptions: its owner key's, and webhooks filtered to it.
    subscriptions.after_scoring(game_id, done.moves)
    MOVES_SCORED.inc(done.moves)
    EVENTS_SCORED.inc(done.events)
    CONFLICTS.inc(done.conflicts)
    for lag in done.lags_ms:
        LAG.observe(lag / 1000)
    if done.moves:
        log.info(
            "game %s: scored moves up to %d (%d events, %d conflicts)",
            game_id,
            done.progress,
            done.events,
            done.conflicts,
            extra={"game_id": game_id, "request_id": request_id, "progress": done.progress},
        )
    return done


def score_changes(shard: int, changes: list[Change]) -> list[Write]:
    """The change feed's consumer "scoring": catch up every game of the batch that has new
    moves. Its output is each game's score stream, saved with that game's progress by the
    scorer (conditional, so redoing a batch after a crash scores nothing twice); it writes
    nothing beside the feed position. A game that cannot be scored (a bug, data written
    around the command service) is logged and counted, and does not hold up its shard: it is
    tried again with its next move, or by `scoring.catch_up`. A Redis failure stops the
    batch (it is redone).

    Each game is scored up to the batch's last move of it, no further: the moves appended
    since are scored with their own entries, so each score line names the request of the
    moves it scored (a move appended between the feed's read and the scoring would
    otherwise be scored under an earlier request's id)."""
    games: dict[str, tuple[str, int]] = {}  # game -> its latest move's request id and seq
    for change in changes:
        if change.stream == MOVES:
            trace = change.trace or games.get(change.game_id, ("", 0))[0]
            last = max(change.last, games.get(change.game_id, ("", 0))[1])
            games[change.game_id] = (trace, last)
    for game_id, (trace, last) in games.items():
        try:
            _score_game(game_id, trace, last)
        except redis.RedisError:
            raise
        except Exception:
            FAILURES.inc()
            log.exception("game %s: scoring failed", game_id, extra={"game_id": game_id})
    return []


def followers() -> list[Follower]:
    """This process's consumers of the change feed, in the order a wake-up runs them."""
    client = scorer_client()
    return [
        # First: the scoring lag is the figure players see (bench_scoring). Leased: two
        # worker processes never score the same shard's batch at once.
        Follower(
            client,
            "scoring",
            score_changes,
            batch=settings["FOLLOW_BATCH"],
            lease_ms=30_000,
            appends=True,
        ),
        DirectoryIndex(client).follower,
        timer().index.follower,
        subscriptions.due_follower(client),
        # Each finished game rated once for its API key (docs/ratings.md); it reads the games
        # through the scorer's store (`followers()` is called by every sweep: a store of its
        # own would open a connection pool each time). Before the archive's due index: the
        # archive removes the secrets record that says whose a game is, so a game must not
        # be due before it is rated (a ratings batch that stops stops the round).
        RatingsConsumer(client, scorer().store, batch=settings["FOLLOW_BATCH"]).follower,
        # Finished games due in the archive (only the due index: `archive.run` moves them).
        ArchiveDue(client, int(settings["ARCHIVE_AFTER"] * 1000)).follower,
    ]


@app.task(name="scoring.sweep")
def sweep() -> int:
    """Run every follower over every shard (what a watcher would have done had none been
    running), then trim the feed below every consumer's position; returns the changes
    applied."""
    done = follow(followers())
    trimmed = trim(scorer_client())
    if done or trimmed:
        log.info("sweep: %d changes followed, %d feed entries trimmed", done, trimmed)
    return done


# Each worker process of the scoring queue watches the feed (services/redis_store/watch.py).
app.steps["worker"].add(
    watch_step(QUEUE, settings["FOLLOW_CHANGES"], settings["REDIS_URL"], "scoring:watch", followers)
)


TIMED_OUT = Counter("carcassonne_turns_timed_out_total", "Turns skipped past their deadline")
ABANDONED = Counter("carcassonne_games_abandoned_total", "Games ended as abandoned")
LOST = Counter(
    "carcassonne_lifecycle_lost_total",
    "Timeouts and abandons another process or a player's move got to first (nothing appended)",
)


_timer: Timer | None = None
_timer_lock = threading.Lock()


def timer() -> Timer:
    """This process's turn timer, which keeps the states it folded (like `scorer`)."""
    global _timer
    folder, client = scorer(), scorer_client()  # outside the lock: they take it themselves
    with _timer_lock:
        if _timer is None:
            budget = BotBudget(
                client, settings["BOT_SECONDS_IN_FLIGHT"], settings["BOT_SECONDS_PER_DAY"]
            )
            _timer = Timer(
                folder.store,
                client,
                cache_size=settings["SCORING_CACHE_SIZE"],
                warm=folder.folded,
                payer=TakeoverPayer(budget, settings["BOT_MOVE_FLOOR_MS"]),
            )
        return _timer


@worker_process_init.connect
def _fresh_timer(**_: Any) -> None:
    global _timer
    _timer = None  # never share a connection inherited across fork


@app.task(name="lifecycle.tick")
def tick() -> dict[str, int]:
    """Time out every turn past its deadline and abandon every game idle for ABANDON_AFTER
    (services/scoring/timer.py). Safe on several workers at once."""
    handled = timer().tick(
        int(time.time() * 1000),
        int(settings["ABANDON_AFTER"] * 1000),
        limit=settings["TIMER_BATCH"],
    )
    TIMED_OUT.inc(len(handled.timed_out))
    ABANDONED.inc(len(handled.abandoned))
    LOST.inc(handled.lost)
    if handled.timed_out or handled.abandoned:  # scored from the feed like any other move
        log.info(
            "lifecycle: %d turns timed out, %d games abandoned",
            len(handled.timed_out),
            len(handled.abandoned),
        )
    return {"timed_out": len(handled.timed_out), "abandoned": len(handled.abandoned)}


ARCHIVED = Counter(
    "carcassonne_archive_games_total",
    "Due games an archive run handled, by outcome (archived, removed, waiting, changed, "
    "failed, gone)",
    ["outcome"],
)
ARCHIVE_WAITING = Gauge(
    "carcassonne_archive_waiting_games", "Finished games in the due indexes, not archived yet"
)
ARCHIVE_DUE = Gauge("carcassonne_archive_due_games", "Of those, due by now (late if it grows)")


_archiver: Archiver | None = None
_archiver_lock = threading.Lock()  # guards `_archiver`
_archive_running = threading.Lock()  # held by this process's `archive.run` while it runs


def archiver() -> Archiver:
    """This process's archiver, its archive opened on first use and kept (a tick does not
    open a connection); opened again on a later tick when opening failed (the database
    down). A PostgreSQL archive reconnects by itself once its server is back
    (services/archive/postgres.py)."""
    global _archiver
    with _archiver_lock:
        if _archiver is None:
            from services.archive import open_archive  # psycopg only where it is used

            _archiver = Archiver(
                scorer_client(),
                open_archive(settings["ARCHIVE_URL"]),
                after_ms=int(settings["ARCHIVE_AFTER"] * 1000),
                retry_ms=int(settings["ARCHIVE_RETRY"] * 1000),
            )
        return _archiver


@app.task(name="archive.run")
def archive_run() -> dict[str, int]:
    """Move the finished games that are due from Redis to the archive (services/archive/
    archiver.py); safe on several workers at once (each step is conditional); a tick that
    finds this process's previous run still going, or the archive not reachable, does
    nothing (logged)."""
    if not _archive_running.acquire(blocking=False):
        log.info("archive: the previous run of this process is still going")
        return {}
    try:
        try:
            mover = archiver()
        except Exception as e:  # the database down: opened again next tick
            log.warning("archive: cannot open the archive (%s); tried again next tick", e)
            return {}
        outcomes = mover.run(limit=settings["ARCHIVE_BATCH"])
        waiting, due = mover.waiting(int(time.time() * 1000))
    finally:
        _archive_running.release()
    for outcome, n in outcomes.items():
        ARCHIVED.labels(outcome).inc(n)
    ARCHIVE_WAITING.set(waiting)
    ARCHIVE_DUE.set(due)
    if outcomes:
        log.info("archive: %s; %d games waiting, %d due", dict(outcomes), waiting, due)
    return dict(outcomes)
