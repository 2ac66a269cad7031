"""The bot worker's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the event store (the embedded Redis of `make run`)
    "BROKER_URL": "",  # Celery broker ("" = REDIS_URL)
    # As the command service's (deploy/README, "Failover"): after each bot move's append,
    # WAIT until this many replicas have it (0 = off), at most REDIS_WAIT_MS. A move fewer
    # replicas confirmed may be lost in a failover: the sweep looks at the game again soon.
    "REDIS_WAIT_REPLICAS": 0,
    "REDIS_WAIT_MS": 100,
    # An unacknowledged task (its worker died mid-think) is handed out again after this long.
    # It must exceed the longest think (MAX_THINK_MS) plus a turn's append, or a task still
    # thinking is handed out twice (harmless, the turn is played once, but wasted work).
    "VISIBILITY_TIMEOUT": 60,
    "MAX_THINK_MS": 10_000,  # the most a bot seat may think per move (POST /games caps it too)
    # The most a bot thinks per move in a game where every seat still in is a bot (the
    # command service's BOT_ONLY_MAX_THINK_MS refuses more at creation; this caps older games
    # and those whose humans all left).
    "BOT_ONLY_MAX_THINK_MS": 1_000,
    # Every bot move takes a fixed time from its start whatever the bot's hand (docs/bots.md,
    # "Paced moves"): an mcts bot its think_ms, a greedy or random bot this floor (and no move
    # less). Above the slowest greedy move's work (~60 ms with six players, three tiles).
    "MOVE_FLOOR_MS": 250,
    "SWEEP_SECONDS": 10.0,  # how often beat looks for bot turns that nobody is playing
    # Whether each worker's main process watches the change feed and sends bot tasks at once
    # (services/redis_store/watch.py); 0 = only beat's sweep follows it (every SWEEP_SECONDS).
    "FOLLOW_CHANGES": True,
    # After a bot task is sent (or starts thinking), the sweep leaves the game alone this long
    # beyond the think time: a task in the queue or thinking is not sent again.
    "GRACE_SECONDS": 30.0,
    # A game waiting for a human is looked at again this often (the human's move sends the
    # bot task through the change feed; this only cleans up after a lost task).
    "HUMAN_RECHECK_SECONDS": 600.0,
    # In a game with undo, a bot waits this long after a human's placement before it plays
    # (its placement would close the human's window to take it back; docs/undo.md).
    "UNDO_GRACE_SECONDS": 3.0,
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The worker's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
