"""Reads that fall through to the archive (issue 28's second half): `FallThroughStore`.

An archived game's keys are gone from Redis but for its tombstone ``{g:<id>}:archived``. The
query service reads every game through `FallThroughStore`, which wraps the Redis event store:
a read that finds nothing where a game would start (its move stream empty after 0, its last
move 0, or no score marker) looks for the tombstone (one ``EXISTS``); if it is there, the
game's copy is read from the archive once (read only: `Archive.read`), decoded exactly as
the Redis store decodes a stream entry (payload JSON parsed, then upcast), and served from
memory from then on: an archived game never changes. What a process knows of archived games
is bounded: the decoded logs of the `logs` games read last, and for `known` games their
streams' ends, markers and secrets-free record (a view of a known game whose log was let go
reads its copy again).

Reads of hot games cost what they cost before, but for a game without a score marker yet
(its first moves, before the worker scores them), whose views each check the tombstone too.

The archive database down while a game must be read from it: `ArchiveUnavailable`, 503
``archive_unavailable`` with Retry-After (services/common/http_errors.py). An id that is
neither in Redis nor archived reads as empty, as before (404 ``game_not_found``).

services/archive is shared infrastructure like services/redis_store (no process of its own
but the operator's command, ``python -m services.archive``): the query and command services
import it; it imports neither.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from carcassonne.errors import GameError
from eventstore.archive import Archive, ArchivedGame, ListQuery, Page
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import EventStore
from eventstore.schemas import upcast
from services.common.kept import Kept

T = TypeVar("T")


class ArchiveUnavailable(GameError):
    """The archive database could not be read: 503 with Retry-After."""

    status = 503

    def __init__(
        self,
        why: str = "",
        message: str = "this game is archived and the archive is unavailable: retry later",
    ) -> None:
        super().__init__("archive_unavailable", message, None)
        self.why = why


@dataclass(frozen=True)
class Facts:
    """What a process keeps of an archived game without its log."""

    ends: dict[str, int]  # stream -> last seq
    markers: dict[str, str]
    record: dict[str, Any]  # the secrets record without tokens and seed (GameMeta.record)
    status: str


def stored_events(game: ArchivedGame) -> dict[str, list[StoredEvent]]:
    """The game's events per stream as `RedisEventStore.read` gives them (JSON parsed, then
    upcast): the envelope and payload of each exactly as stored."""
    out: dict[str, list[StoredEvent]] = {MOVES: [], SCORES: []}
    for e in game.events:
        stored = StoredEvent(
            game.game_id, e.stream, e.seq, e.type, e.version, e.time_ms, e.command_id,
            json.loads(e.data),
        )  # fmt: skip
        out[e.stream].append(upcast(stored))
    return out


def unavailable_errors() -> tuple[type[BaseException], ...]:
    """What an adapter raises when its database cannot be read."""
    errors: list[type[BaseException]] = [sqlite3.Error, OSError]
    try:
        from .postgres import ArchiveUnavailable as PostgresDown  # psycopg installed

        errors.append(PostgresDown)
        import psycopg

        errors.append(psycopg.Error)
    except ImportError:  # pragma: no cover - psycopg is a dependency
        pass
    return tuple(errors)


class FallThroughStore:
    """An `EventStore` (reads only) over the hot store, falling through to the archive for
    archived games (module docstring). `archived(game_id)`: whether its tombstone exists;
    `open_archive()`: the archive, opened on first need (again after a failure)."""

    def __init__(
        self,
        inner: EventStore,
        archived: Callable[[str], bool],
        open_archive: Callable[[], Archive],
        logs: int = 256,
        known: int = 100_000,
        used: Callable[[], bool] | None = None,
    ) -> None:
        self.inner = inner
        self.archived = archived
        self._open = open_archive
        self._used = used  # whether any game was ever archived (None: lists never look)
        self._used_seen = False
        self._archive: Archive | None = None
        self._lock = threading.Lock()
        self._logs: Kept[str, dict[str, list[StoredEvent]]] = Kept(logs)
        self._known: Kept[str, Facts] = Kept(known)
        self._down = unavailable_errors()
        self.loads = 0  # copies read from the archive (tests check the cache holds)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # anything else is the hot store's

    # -- what is known of archived games ------------------------------------------------
    def facts(self, game_id: str) -> Facts | None:
        """What is known of the game if it is a known archived game (no I/O)."""
        return self._known.get(game_id)

    def is_archived(self, game_id: str) -> bool:
        """Whether the game is known here to be archived (no I/O)."""
        return self._known.get(game_id) is not None

    def record(self, game_id: str) -> dict[str, Any] | None:
        """A known archived game's secrets-free record (names, player ids, bots, …)."""
        facts = self._known.get(game_id)
        return None if facts is None else facts.record

    def _discover(self, game_id: str) -> Facts | None:
        """The game's facts if its tombstone is there (its copy read once), else None."""
        if not self.archived(game_id):
            return None
        self._load(game_id)
        return self._known.get(game_id)

    def _use(self, work: Callable[[Archive], T], message: str | None = None) -> T:
        """`work` on the archive (opened on first need): `ArchiveUnavailable` when it cannot
        be read (and the archive opened again next time)."""
        try:
            with self._lock:
                if self._archive is None:
                    self._archive = self._open()
                archive = self._archive
            return work(archive)
        except self._down as e:
            with self._lock:
                if self._archive is not None:
                    with contextlib.suppress(Exception):  # being let go anyway
                        self._archive.close()
                self._archive = None
            if message is not None:
                raise ArchiveUnavailable(str(e), message) from e
            raise ArchiveUnavailable(str(e)) from e

    # -- lists ----------------------------------------------------------------------------
    def lists_archive(self) -> bool:
        """Whether lists must read the archive too: once a game was ever archived (the
        archiver's mark in Redis, `archive_used_key`; remembered once seen)."""
        if not self._used_seen and self._used is not None:
            self._used_seen = self._used()
        return self._used_seen

    def page(self, query: ListQuery) -> Page:
        """A page of archived games (`Archive.page`); `ArchiveUnavailable` when it cannot be
        read."""
        return self._use(
            lambda archive: archive.page(query),
            "lists include archived games and the archive is unavailable: retry later",
        )

    def _load(self, game_id: str) -> dict[str, list[StoredEvent]] | None:
        game = self._use(lambda archive: archive.read(game_id))
        if game is None:
            return None  # a tombstone without a copy: the game reads as unknown
        logs = stored_events(game)
        self.loads += 1
        self._logs.keep(game_id, logs)
        ends = {stream: len(events) for stream, events in logs.items()}
        self._known.keep(
            game_id, Facts(ends, dict(game.markers), dict(game.meta.record), game.meta.status)
        )
        return logs

    def _log(self, game_id: str, stream: str) -> list[StoredEvent]:
        logs = self._logs.get(game_id) or self._load(game_id)
        return [] if logs is None else logs[stream]

    # -- the EventStore reads ----------------------------------------------------------
    def read(
        self, game_id: str, stream: str, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """See `EventStore.read`."""
        facts = self._known.get(game_id)
        if facts is None:
            found = self.inner.read(game_id, stream, after, limit)
            if found or after > 0 or stream != MOVES:
                return found
            facts = self._discover(game_id)
            if facts is None:
                return found
        if after >= facts.ends.get(stream, 0):
            return []
        events = self._log(game_id, stream)[max(0, after) :]
        return events if limit is None else events[: max(0, limit)]

    def last_seq(self, game_id: str, stream: str) -> int:
        """See `EventStore.last_seq`."""
        facts = self._known.get(game_id)
        if facts is None:
            last = self.inner.last_seq(game_id, stream)
            if last or stream != MOVES:
                return last
            facts = self._discover(game_id)
            if facts is None:
                return last
        return facts.ends.get(stream, 0)

    def marker(self, game_id: str, stream: str) -> str | None:
        """See `EventStore.marker` (no marker: perhaps an archived game's)."""
        facts = self._known.get(game_id)
        if facts is None:
            value = self.inner.marker(game_id, stream)
            if value is not None:
                return value
            facts = self._discover(game_id)
            if facts is None:
                return value
        return facts.markers.get(stream)
