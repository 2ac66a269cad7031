"""The Celery app of the bot worker: its tasks, its beat schedule and its consumer of the
change feed.

Run: ``celery -A services.bots.celery_app worker -Q bots --pool prefork`` (CPU-bound: one
process per core) and ``celery -A services.bots.celery_app beat``.

How a bot's turn is triggered (docs/bots.md): the worker's main process watches the change
feed (services/redis_store/watch.py; FOLLOW_CHANGES=0 leaves it to the sweep) and its
consumer "bots" (services/bots/feed.py) sends ``bots.play(game)`` on the `bots` queue after
every append to a game with a bot seat, once it has recorded the game as due in its shard's
due index (services/redis_store/bot_index.py) with the time by which its bot should have
moved. Safety net: ``bots.sweep`` on beat follows the feed over every shard (in case no
worker watches) and re-sends the task for the games that are overdue (a lost task, a worker
killed mid-think). Tasks are acknowledged late and rejected when their worker is lost, so
the broker hands a killed worker's task out again; the append's command id
``bot:<game>:<seq>`` makes every copy play the turn at most once.

Hints (``bots.hint``, services/bots/hints.py) are worked out here too, asked for by the
command service on the same queue: their search holds this process, never a web worker.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import billiard.pool  # type: ignore[import-untyped]
from celery import Celery
from celery.signals import setup_logging as celery_setup_logging
from celery.signals import worker_process_init
from prometheus_client import Counter, Histogram

from services.common.celery_conf import reliable, watch_step
from services.common.observability import setup_logging
from services.redis_store import RedisEventStore
from services.redis_store.bot_index import QUEUE, TASK, drop, due_games, secrets_of, set_due
from services.redis_store.connect import broker_url, shared_client
from services.redis_store.hint_store import TASK as HINT_TASK
from services.redis_store.hint_store import HintStore
from services.redis_store.replication import NotReplicated

from .config import from_env
from .feed import BotFeed
from .hints import work_out
from .player import GONE, HUMAN, OVER, PLAYED, WAITING, BotPlayer

log = logging.getLogger(__name__)
settings = from_env()
UNCONFIRMED = "unconfirmed"  # a move appended that too few replicas confirmed (WAIT)
if (
    settings["VISIBILITY_TIMEOUT"] * 1000
    <= max(settings["MAX_THINK_MS"], settings["MOVE_FLOOR_MS"]) + 5_000
):
    raise SystemExit(
        "VISIBILITY_TIMEOUT must exceed MAX_THINK_MS (and MOVE_FLOOR_MS) by 5 s (see config.py)"
    )

# A prefork child waits at exit until the parent has counted its last result, up to
# billiard's 300 x 0.1 s. In about one stop in seven of test_suite_run's Redis-crash test (a
# sweep every 0.5 s, the broker lost and back earlier), a sweep that finished in the instant
# of the warm shutdown was never counted: py-spy showed the parent in `Pool.join` and the
# child in `_ensure_messages_consumed`, the whole 30 s, and supervisord's 30 s stop wait
# killed the worker. The exact race is billiard's and was not made certain here (a child
# held back with SIGSTOP while its task is handed over does not show it). 5 s bounds the
# stop; a result not counted loses nothing (acks late: an unacknowledged task is delivered
# again, and every bot task is idempotent).
billiard.pool.GUARANTEE_MESSAGE_CONSUMPTION_RETRY_LIMIT = 50

app = Celery("bots", broker=broker_url(settings["BROKER_URL"], settings["REDIS_URL"]))
app.conf.update(
    # Acknowledged when the turn is played: a killed worker's task is redone, and a thinking
    # child does not hold other games' turns (services/common/celery_conf.py).
    **reliable(QUEUE, settings["VISIBILITY_TIMEOUT"]),
    beat_schedule={"bots-sweep": {"task": "bots.sweep", "schedule": settings["SWEEP_SECONDS"]}},
)

TURNS = Counter("carcassonne_bot_turns_total", "Bot turns played", ["level"])
THINK = Histogram(
    "carcassonne_bot_think_seconds",
    "Time a bot took to choose its move",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0),
)
# A move whose work overran its fixed duration (services/common/pace.py) was appended late,
# and its gap is its work's: a MOVE_FLOOR_MS too low for the machine.
LATE = Counter("carcassonne_bot_moves_late_total", "Bot moves whose work overran their pace")

HINTS = Counter("carcassonne_bot_hints_total", "Hints worked out by the bot worker", ["level"])

_player: BotPlayer | None = None
_lock = threading.Lock()


def player() -> BotPlayer:
    """This process's bot player (one per worker child: Redis connections are not fork-safe)."""
    global _player
    with _lock:
        if _player is None:
            client = shared_client(settings["REDIS_URL"], role="bots", max_connections=4)
            store = RedisEventStore(
                client,
                wait_replicas=settings["REDIS_WAIT_REPLICAS"],
                wait_ms=settings["REDIS_WAIT_MS"],
            )
            _player = BotPlayer(
                store,
                lambda game_id: secrets_of(client, game_id),
                max_think_ms=settings["MAX_THINK_MS"],
                undo_grace_ms=int(settings["UNDO_GRACE_SECONDS"] * 1000),
                floor_ms=settings["MOVE_FLOOR_MS"],
                bot_only_max_think_ms=settings["BOT_ONLY_MAX_THINK_MS"],
            )
        return _player


@worker_process_init.connect
def _fresh_player(**_: Any) -> None:
    global _player, _feed
    _player = _feed = None  # never share a connection inherited across fork


@celery_setup_logging.connect
def _json_logs(**_: Any) -> None:
    setup_logging("bots")


def _client() -> Any:
    store = player().store
    assert isinstance(store, RedisEventStore)
    return store.client


def _now_ms() -> int:
    return int(time.time() * 1000)


@app.task(name=TASK)
def play(game_id: str) -> str:
    """Play the turn of the bot to move in a game, if it is a bot's turn (idempotent)."""
    client = _client()
    grace_ms = int(settings["GRACE_SECONDS"] * 1000)

    def thinking(think_ms: int) -> None:  # the sweep leaves the game alone meanwhile
        set_due(client, game_id, _now_ms() + think_ms + grace_ms)

    try:
        done = player().play(game_id, on_think=thinking)
    except NotReplicated as unconfirmed:
        # The move is on the primary only: a failover may still lose it, and then nothing
        # else would send this turn again (tests/hosts found games waiting on such a bot).
        # The sweep looks again after the grace: the move is there (a human's turn), or it
        # is played again.
        set_due(client, game_id, _now_ms() + grace_ms)
        log.warning("game %s: bot move not confirmed by replicas (%s); looked at again",
                    game_id, unconfirmed, extra={"game_id": game_id})  # fmt: skip
        return UNCONFIRMED
    if done.kind in (OVER, GONE):
        drop(client, game_id)
    elif done.kind == HUMAN:
        _human_next(client, game_id, done.due_ms)
    elif done.kind == WAITING:  # a human may still undo their placement: play after that
        assert done.due_ms is not None
        _play_at(client, game_id, done.due_ms, grace_ms)
    elif done.kind == PLAYED:
        assert done.choice is not None
        TURNS.labels(done.level).inc()
        THINK.observe(done.think_ms / 1000)
        if done.late_ms:
            LATE.inc()
        log.info(
            "game %s: bot played up to %d (value %.1f, %d playouts, %d ms, %d ms late)",
            game_id,
            done.seq,
            done.choice.value,
            done.choice.playouts,
            done.think_ms,
            done.late_ms,
            extra={"game_id": game_id},
        )
        # The feed sends the next turn's task (this append is on it): a bot's next turn is
        # due soon, a human's is looked at again later.
        if done.next_bot:
            set_due(client, game_id, _now_ms() + grace_ms)
        else:
            _human_next(client, game_id, done.due_ms)
    return done.kind


# The longest a task is held back by the broker (an ETA): well inside the visibility timeout,
# after which the broker would hand a held task out a second time. Longer waits (an undo
# request's deadline, UNDO_SECONDS) are left to the sweep.
MAX_COUNTDOWN_SECONDS = 30.0


def _play_at(client: Any, game_id: str, at_ms: int, grace_ms: int) -> None:
    """Play the game's bot turn at `at_ms`: a task held until then if that is soon, and the
    sweep's entry just after it in any case (a lost task is sent again)."""
    wait = max(0.0, (at_ms - _now_ms()) / 1000)
    if wait <= MAX_COUNTDOWN_SECONDS:
        set_due(client, game_id, at_ms + grace_ms)  # the held task's turn: not sent again
        play.apply_async((game_id,), queue=QUEUE, countdown=wait)
    else:
        set_due(client, game_id, at_ms)


def _human_next(client: Any, game_id: str, deadline_ms: int | None) -> None:
    """A human is to move: the feed sends the bot task after their move (or the timer's
    timeout of it); the sweep looks again later, or just after the turn's deadline, in case
    that task was lost (a timed-out turn may pass to a bot, docs/lifecycle.md)."""
    later = _now_ms() + int(settings["HUMAN_RECHECK_SECONDS"] * 1000)
    if deadline_ms is not None:
        later = min(later, deadline_ms + 2_000)
    set_due(client, game_id, later)


@app.task(name=HINT_TASK)
def hint(owner: str, game_id: str, seq: int, level: str, nonce: str, ms: int, think_ms: int) -> str:
    """Work out a hint the command service asked for (services/bots/hints.py) and write it with
    the time it may be shown; nothing if it was given up on or its game moved on."""
    store = HintStore(_client())
    if not store.is_pending(owner, game_id, seq, level, nonce):
        store.drop(owner, game_id, seq, level, ms, nonce)
        return "gone"
    think_ms = min(think_ms, settings["MAX_THINK_MS"])
    worked = work_out(
        player().store, lambda g: secrets_of(_client(), g), game_id, seq, level, ms, think_ms
    )
    if worked is None:
        store.drop(owner, game_id, seq, level, ms, nonce)
        return "moved_on"
    answer, ready_ms = worked
    HINTS.labels(level).inc()
    if not store.done(owner, game_id, seq, level, ms, nonce, answer, ready_ms):
        return "gone"
    return "done"


_feed: BotFeed | None = None


def feed() -> BotFeed:
    """This process's consumer "bots" of the change feed (services/bots/feed.py)."""
    global _feed
    with _lock:
        if _feed is None:
            client = shared_client(settings["REDIS_URL"], role="bots:feed", max_connections=4)
            _feed = BotFeed(
                client,
                lambda game_id: play.apply_async((game_id,), queue=QUEUE),
                int(settings["GRACE_SECONDS"] * 1000),
            )
        return _feed


# The worker's main process watches the feed (services/redis_store/watch.py).
app.steps["worker"].add(
    watch_step(
        QUEUE,
        settings["FOLLOW_CHANGES"],
        settings["REDIS_URL"],
        "bots:watch",
        lambda: [feed().follower],
    )
)


@app.task(name="bots.sweep")
def sweep() -> int:
    """Follow the feed over every shard (what a watcher would have done had none been
    running), then send the bot task again for every game whose bot is overdue; returns
    how many were overdue."""
    feed().follower.catch_up()
    client = _client()
    later = _now_ms() + int(settings["GRACE_SECONDS"] * 1000)
    count = 0
    for game_id in list(due_games(client, _now_ms())):
        set_due(client, game_id, later)  # not again next sweep while this task waits
        play.apply_async((game_id,), queue=QUEUE)
        count += 1
    if count:
        log.info("bots sweep: %d games overdue", count)
    return count
