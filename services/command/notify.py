"""Wake the scoring worker: send ``scoring.catch_up(game_id)`` by name over the broker.

The command service does not import the worker (services never import each other); it
only knows the task's name and queue. A failed send is logged and dropped: the worker's
periodic sweep finds the game anyway, so a broker outage delays scores but loses nothing.
"""

from __future__ import annotations

import logging

from celery import Celery

from services.common.observability import REQUEST_ID

TASK, QUEUE = "scoring.catch_up", "scoring"
log = logging.getLogger(__name__)


class CeleryNotifier:
    """Sends one catch-up task per call, to run `delay_ms` later.

    The delay debounces: the task is sent by the move that raised the game's notification
    flag, and every move appended before the task starts rides along with it (the worker
    lowers the flag when it starts). One task then scores a burst of moves.
    """

    def __init__(self, broker_url: str, delay_ms: int = 0) -> None:
        self.countdown = delay_ms / 1000 if delay_ms > 0 else None
        self.app = Celery("command-notifier", broker=broker_url)
        self.app.conf.update(
            broker_connection_retry=False,  # never hold a player's request on a broker outage
            broker_connection_timeout=1.0,
            task_ignore_result=True,
        )

    def __call__(self, game_id: str) -> None:
        try:
            self.app.send_task(
                TASK,
                args=[game_id],
                kwargs={"request_id": REQUEST_ID.get()},  # the worker logs under the same id
                queue=QUEUE,
                retry=False,
                countdown=self.countdown,
            )
        except Exception:  # any broker failure: the sweep covers it
            log.warning("could not notify the scoring worker of game %s", game_id, exc_info=True)
