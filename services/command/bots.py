"""Hand a bot seat's turn to the bot worker: ``bots.play(game)`` by name on queue `bots`.

The command service does not import the worker (services never import each other); it
knows the task's name and queue (services/redis_store/bot_index.py) and keeps the game in
the bot sweep's due index, so a task that is lost (a broker outage, a send that failed) is
sent again by the worker's sweep: a bot's turn is delayed then, never skipped.
"""

from __future__ import annotations

import logging
import time

import redis

from services.common.task_sender import TaskSender
from services.redis_store.bot_index import QUEUE, TASK, set_due

log = logging.getLogger(__name__)


class BotCaller:
    """Keeps bot games in the due index and sends the bot task when a bot is to move."""

    def __init__(self, sender: TaskSender, client: redis.Redis, grace_ms: int = 30_000) -> None:
        self.sender = sender
        self.client = client
        self.grace_ms = grace_ms

    def expect(self, game_id: str) -> None:
        """Index a game with bot seats before its first append (a crash in between leaves
        an entry the sweep drops: the game does not exist)."""
        set_due(self.client, game_id, int(time.time() * 1000) + self.grace_ms)

    def __call__(self, game_id: str) -> None:
        """A bot is to move in `game_id`: send the task (the sweep resends a lost one)."""
        try:
            self.expect(game_id)
        except Exception:  # any Redis failure: the bot sweep covers it
            log.warning("could not index the bot game %s", game_id, exc_info=True)
            return
        self.sender.send(TASK, QUEUE, [game_id])  # a failed send is logged by the sender
