"""The Celery settings every worker of the suite shares: at-least-once task delivery.

The scoring worker and the bot worker both rely on the same four promises, so they take
them from here rather than each keeping a copy:

- a task is acknowledged only when it has run (`task_acks_late`) and goes back to the queue
  when its worker process dies (`task_reject_on_worker_lost`): a killed worker's task is
  run again, and every task is idempotent (conditional appends, command ids);
- a worker child takes one task at a time (`worker_prefetch_multiplier` 1): a busy child
  does not hold other games' tasks;
- results are not stored (`task_ignore_result`): the streams are the results;
- the broker's `visibility_timeout` says when an unacknowledged task is handed out again:
  longer than any task runs, or a task still running would be run twice.

Each app also declares every queue its tasks are sent to (`task_queues`): a worker started
without `-Q` consumes them all, and tests/unit/test_deployments.py reads them to check that
every deployment runs a worker for each queue and a beat for each schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from celery import bootsteps
from kombu import Exchange, Queue

from services.redis_store.changes import Follower
from services.redis_store.connect import blocking_read_timeout, connect
from services.redis_store.watch import Watcher


def reliable(queue: str, visibility_timeout: float, others: Sequence[str] = ()) -> dict[str, Any]:
    """Celery settings for a worker of `queue` (the default) and `others` with at-least-once
    delivery (module doc)."""
    return {
        "task_default_queue": queue,
        # As Celery makes a queue it was not told of (a direct exchange of the queue's name):
        # declaring them changes no routing.
        "task_queues": [Queue(name, Exchange(name), routing_key=name) for name in (queue, *others)],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_ignore_result": True,
        "worker_prefetch_multiplier": 1,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": visibility_timeout},
        "worker_hijack_root_logger": False,  # our own JSON logging (services/common/observability)
    }


def watch_step(
    queue: str,
    enabled: bool,
    redis_url: str,
    role: str,
    followers: Callable[[], Sequence[Follower]],
) -> type[bootsteps.StartStopStep]:
    """A worker bootstep that watches the change feed (services/redis_store/watch.py) for as
    long as the worker runs, and runs `followers()` when their shards have news. Only a
    worker that consumes `queue` watches (one started with `-Q` of other queues alone
    leaves the feed to the others); `enabled` False leaves it to beat's sweep."""

    class WatchStep(bootsteps.StartStopStep):
        # After the pool: a prefork pool forks its children at its start, and a child forked
        # while the watcher thread held a lock (a client pool's, a logger's) would inherit
        # it locked and hang on its first task (the bot worker is prefork).
        requires = ("celery.worker.components:Pool",)

        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            self.watcher: Watcher | None = None

        def start(self, parent: Any) -> None:
            if not enabled or queue not in set(parent.app.amqp.queues.consume_from or ()):
                return
            block_ms = 1_000
            client = connect(
                redis_url,
                role=role,
                max_connections=2,
                socket_timeout=blocking_read_timeout(block_ms / 1000),
            )
            self.watcher = Watcher(client, followers(), block_ms=block_ms)
            self.watcher.start()

        def stop(self, parent: Any) -> None:
            if self.watcher is not None:
                self.watcher.stop()

    WatchStep.__name__ = WatchStep.__qualname__ = f"WatchStep[{queue}]"
    return WatchStep
