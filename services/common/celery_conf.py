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

from collections.abc import Sequence
from typing import Any

from kombu import Exchange, Queue


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
