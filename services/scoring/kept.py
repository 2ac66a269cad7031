"""`Kept`: what a worker process folded of its recent games, kept for the next task on each.

The scorer keeps each game's state after its last scored move, the turn timer its state at
the end of the move stream, the subscription dispatcher its feed as far as its last dispatch:
the next task on the game then reads and folds only the moves since, not the game from move
1. One pattern, one class: a bounded LRU shared by the process's task threads. A value is
taken out while in use, so two threads on one game never change one object (the second folds
its own); one put back never replaces a value further on (another thread got further).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Kept(Generic[T]):
    """Per game id, the latest value kept (at most `size` games, least recently kept out)."""

    def __init__(self, size: int, progress: Callable[[T], int]) -> None:
        self.size = size
        self.progress = progress  # how far a value stands (the last move folded into it)
        self._values: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, game_id: str) -> T | None:
        """The game's value, taken out (put it back with `keep`), or None."""
        with self._lock:
            return self._values.pop(game_id, None)

    def peek(self, game_id: str) -> T | None:
        """The game's value, left in (the caller must not change it)."""
        with self._lock:
            return self._values.get(game_id)

    def keep(self, game_id: str, value: T) -> None:
        """Keep `value` for the game unless the one kept stands further on."""
        if self.size <= 0:
            return
        with self._lock:
            current = self._values.get(game_id)
            if current is not None and self.progress(current) > self.progress(value):
                return
            self._values[game_id] = value
            self._values.move_to_end(game_id)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)
