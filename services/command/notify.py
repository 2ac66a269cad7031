"""Wake the scoring worker: add the game to the pending set and, when no drain task is
scheduled, send ``scoring.drain`` by name over the broker.

The command service does not import the worker (services never import each other); it
only knows the task's name and queue. A failed send is logged and dropped: the worker's
periodic sweep finds the game anyway, so a broker outage delays scores but loses nothing.
"""

from __future__ import annotations

import logging

import redis
from celery import Celery

from services.common.observability import REQUEST_ID
from services.redis_store import mark_pending

TASK, QUEUE = "scoring.drain", "scoring"
log = logging.getLogger(__name__)


class CeleryNotifier:
    """Marks a game as waiting and sends a drain task when none is scheduled.

    Called for a move that raised its game's notification flag (once per burst of that
    game's moves). The task runs `delay_ms` later, so it scores a burst of moves of many
    games; the "scheduled" flag lives `ttl_ms` at most (a lost task is sent again).
    """

    def __init__(
        self, broker_url: str, client: redis.Redis, delay_ms: int = 0, ttl_ms: int = 2_000
    ) -> None:
        self.client = client
        self.ttl_ms = ttl_ms
        self.countdown = delay_ms / 1000 if delay_ms > 0 else None
        self.app = Celery("command-notifier", broker=broker_url)
        self.app.conf.update(
            broker_connection_retry=False,  # never hold a player's request on a broker outage
            broker_connection_timeout=1.0,
            task_ignore_result=True,
        )

    def __call__(self, game_id: str) -> None:
        try:
            if not mark_pending(self.client, game_id, self.ttl_ms):
                return  # a drain task is on its way and will take this game too
            self.app.send_task(
                TASK,
                kwargs={"request_id": REQUEST_ID.get()},  # the worker logs under the same id
                queue=QUEUE,
                retry=False,
                countdown=self.countdown,
            )
        except Exception:  # any broker or Redis failure: the sweep covers it
            log.warning("could not notify the scoring worker of game %s", game_id, exc_info=True)
