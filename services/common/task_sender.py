"""The one Celery producer of a web process: tasks sent by name to the workers' queues.

Services never import each other, so the command service knows only each task's name and
queue. One `TaskSender` per app (built in `create_app`) serves the scoring wake-up, the bot
turns, webhook dispatch and subscription pings: one Celery app and one broker connection pool
per process, not one per caller. A send never raises and never waits on a broker outage: it is
logged and answered False, and the workers' sweeps find the work that was not announced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery

log = logging.getLogger(__name__)


class TaskSender:
    """Sends Celery tasks by name; see the module's docstring."""

    def __init__(self, broker_url: str, name: str = "web") -> None:
        self.app = Celery(name, broker=broker_url)
        self.app.conf.update(
            broker_connection_retry=False,  # never hold a player's request on a broker outage
            broker_connection_timeout=1.0,
            task_ignore_result=True,
        )

    def send(
        self,
        task: str,
        queue: str,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        countdown: float | None = None,
    ) -> bool:
        """Send `task` to `queue`; False (logged) when the broker did not take it."""
        try:
            self.app.send_task(
                task, args=list(args), kwargs=kwargs, queue=queue, retry=False, countdown=countdown
            )
        except Exception:  # any broker failure: the workers' sweeps find the work anyway
            log.warning("could not send %s%r to %s", task, tuple(args), queue, exc_info=True)
            return False
        return True

    def to(self, task: str, queue: str) -> Callable[..., bool]:
        """`send` of one task, taking its arguments: `sender.to(TASK, QUEUE)(game_id)`."""

        def send(*args: Any) -> bool:
            return self.send(task, queue, args)

        return send
