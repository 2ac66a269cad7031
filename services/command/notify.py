"""Wake the scoring worker: add the game to the pending set and, when no drain task is
scheduled, send ``scoring.drain`` by name over the broker.

The command service does not import the worker (services never import each other); it
only knows the task's name and queue. A failed send is logged and dropped: the worker's
periodic sweep finds the game anyway, so a broker outage delays scores but loses nothing.
"""

from __future__ import annotations

import logging

import redis

from services.common.observability import REQUEST_ID
from services.common.task_sender import TaskSender
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
        self, sender: TaskSender, client: redis.Redis, delay_ms: int = 0, ttl_ms: int = 2_000
    ) -> None:
        self.sender = sender
        self.client = client
        self.ttl_ms = ttl_ms
        self.countdown = delay_ms / 1000 if delay_ms > 0 else None

    def __call__(self, game_id: str) -> None:
        try:
            if not mark_pending(self.client, game_id, self.ttl_ms):
                return  # a drain task is on its way and will take this game too
        except Exception:  # any Redis failure: the sweep covers it
            log.warning("could not mark game %s as waiting to be scored", game_id, exc_info=True)
            return
        # the worker logs under the same request id; a failed send is logged by the sender
        self.sender.send(TASK, QUEUE, kwargs={"request_id": REQUEST_ID.get()},
                         countdown=self.countdown)  # fmt: skip
