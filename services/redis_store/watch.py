"""A worker's watch on the change feed: one thread per worker process that wakes the
feed's followers (services/redis_store/changes.py) when their shards have new entries.
The scoring worker runs its followers on one, the bot worker its own (each through
services/common/celery_conf.py's `watch_step`).

On a single Redis the thread blocks in one XREAD over the 64 shards' feeds, so a move is
seen as soon as it is appended (no task, no broker hop); on a Redis Cluster it polls every
feed's newest entry each `poll_ms`. Each wake-up runs every follower over the shards that
changed, in their order, with one read of all their positions and feeds (`changes.follow`);
every `full_seconds` (and at start, and after an error) over all shards, so a follower that
failed on a batch tries it again. Several worker processes may watch at once:
followers record their output conditionally on their position, so no batch is applied
twice; at worst two processes do the same idempotent work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import redis

from .changes import Follower, follow, tails, wait
from .connect import is_cluster
from .keys import SHARDS

log = logging.getLogger(__name__)


class Watcher:
    """Runs `followers` whenever the feed has news, on a thread of its own until `stop`."""

    def __init__(
        self,
        client: redis.Redis,
        followers: Sequence[Follower],
        block_ms: int = 1_000,
        poll_ms: int = 100,
        full_seconds: float = 30.0,
    ) -> None:
        self.client = client  # its socket timeout must outlast `block_ms`
        self.followers = list(followers)
        self.block_ms, self.poll_ms, self.full_seconds = block_ms, poll_ms, full_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feed-watcher", daemon=True)

    def start(self) -> None:
        """Start watching (returns at once)."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the current round (a blocked read returns within `block_ms`)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def round(self, shards: Sequence[int]) -> int:
        """Every follower over `shards`; returns how many changes they applied."""
        return follow(self.followers, shards)

    def _run(self) -> None:
        pause = 0.1
        while not self._stop.is_set():
            try:
                self._watch()
            except Exception:  # Redis away, a follower's bug: log, wait, start over
                log.warning("change feed watch failed; retrying in %.1f s", pause, exc_info=True)
                self._stop.wait(pause)
                pause = min(5.0, pause * 2)
            else:
                pause = 0.1

    def _watch(self) -> None:
        everything = list(range(SHARDS))
        seen = tails(self.client)
        self.round(everything)  # what was appended while no one watched
        full_at = time.monotonic() + self.full_seconds
        polling = is_cluster(self.client)
        while not self._stop.is_set():
            changed = wait(self.client, seen, self.block_ms)
            if time.monotonic() >= full_at:
                changed, full_at = everything, time.monotonic() + self.full_seconds
            if changed:
                self.round(changed)
            elif polling:
                self._stop.wait(self.poll_ms / 1000)
