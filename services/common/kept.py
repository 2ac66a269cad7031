"""`Kept`: a bounded, thread-safe cache of what a process folded, per key.

The command service keeps each game's state at the end of its move stream and the hints it
worked out; the scorer keeps each game's state after its last scored move, the turn timer
its state at the end of the move stream, the subscription dispatcher its feed as far as its
last dispatch, the query projector each game's views and replay snapshots: the next request
or task on the game then reads and folds only the moves since, not the game from move 1. One
pattern, one class (services may not import each other, so it lives here): a bounded LRU
shared by the process's threads. A value is taken out while in use, so two threads on one
game never change one object (the second folds its own); one put back never replaces a value
further on (another thread got further).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Kept(Generic[K, T]):
    """Per key, the latest value kept (at most `size` keys, least recently kept out)."""

    def __init__(self, size: int, progress: Callable[[T], int] = lambda _value: 0) -> None:
        self.size = size
        self.progress = progress  # how far a value stands (the last move folded into it)
        self._values: OrderedDict[K, T] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: K) -> T | None:
        """The key's value, taken out (put it back with `keep`), or None."""
        with self._lock:
            return self._values.pop(key, None)

    def get(self, key: K) -> T | None:
        """The key's value, left in and made the most recently used (for values never
        changed once kept: a rendered view, a game's owner)."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def peek(self, key: K) -> T | None:
        """The key's value, left in (the caller must not change it)."""
        with self._lock:
            return self._values.get(key)

    def keep(self, key: K, value: T) -> list[T]:
        """Keep `value` for the key unless the one kept stands further on; returns the values
        that made room for it (least recently used first), for a caller that must let go of
        what they hold."""
        if self.size <= 0:
            return []
        with self._lock:
            current = self._values.get(key)
            if current is not None and self.progress(current) > self.progress(value):
                return []
            self._values[key] = value
            self._values.move_to_end(key)
            return self._evict()

    def setdefault(self, key: K, make: Callable[[], T]) -> T:
        """The key's value, made the most recently used; if none, `make()`'s, kept (for a
        value shared by the threads that use the key, e.g. one with its own lock)."""
        with self._lock:
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = make()
                self._evict()
            else:
                self._values.move_to_end(key)
            return value

    def discard(self, key: K, value: T) -> None:
        """Drop the key if `value` is still the one kept for it (not one kept since)."""
        with self._lock:
            if self._values.get(key) is value:
                del self._values[key]

    def _evict(self) -> list[T]:
        evicted = []
        while len(self._values) > max(1, self.size):
            evicted.append(self._values.popitem(last=False)[1])
        return evicted

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._values

    def __getitem__(self, key: K) -> T:
        with self._lock:
            return self._values[key]

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._values))

    def __len__(self) -> int:
        return len(self._values)
