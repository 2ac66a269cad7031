"""The query side's service layer: views of games, their merged log, live events, the list.

It never writes a stream: it reads them through the `EventStore` port (and, for live events
and the games list, the Redis `Waiter` and directory). Rendered views are cached as JSON
bytes under their ETag, which names the stream positions they reflect.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from eventstore.archive import ListQuery
from eventstore.envelope import MOVES, SCORES
from eventstore.port import EventStore
from services.archive.fallthrough import FallThroughStore
from services.common.kept import Kept

from .directory import Entry, _bots, _names, _seats, decode_cursor, encode_cursor
from .live import LiveHub, LiveStream
from .log import Cursor, PollingWaiter, Waiter, format_cursor, item, live, ndjson_lines, page
from .projector import BadParameter, NotFound, Position, Projector
from .views import board_etag, board_view, scores_etag, scores_view

T = TypeVar("T")


class Directory(Protocol):
    """Where the games list and the players' names come from."""

    def names(self, game_id: str) -> list[str] | None:
        """The players' names in seat order, if known."""

    def seats(self, game_id: str) -> tuple[list[str], list[str | None]] | None:
        """The players' names and player ids (None where not given) in seat order."""

    def bots(self, game_id: str) -> list[dict[str, Any] | None] | None:
        """Each seat's bot ({"level", "think_ms"}; None: a person), if known."""

    def page(
        self,
        status: str | None,
        player: str | None,
        cursor: str | None,
        limit: int,
        player_id: str | None = None,
        key_id: str | None = None,
        public: bool = False,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of game summaries and the next page's cursor (None at the end)."""

    def entries(
        self,
        status: str | None,
        player: str | None,
        after: Entry | None,
        limit: int,
        player_id: str | None = None,
        key_id: str | None = None,
        public: bool = False,
    ) -> tuple[list[tuple[Entry, dict[str, Any]]], Entry | None]:
        """`page` from a cursor's entry: each game with its entry (creation ms, id), and the
        entry down to which the page looked when more may follow (None at the end)."""


def merge_pages(
    hot: list[tuple[Entry, dict[str, Any]]],
    hot_to: Entry | None,
    cold: list[tuple[Entry, dict[str, Any]]],
    cold_to: Entry | None,
    limit: int,
) -> tuple[list[dict[str, Any]], Entry | None]:
    """One page of `GET /games` from the games directory's page (hot games) and the
    archive's (archived games), both read from the same cursor: newest first, a game once
    (while it is being archived it may be in both for a moment), and the cursor of the next
    page. Each side is whole only down to the entry it says it read to (None: to its end);
    below the higher of the two, the other side may still hold games, so the page stops
    there and the cursor goes on from it."""
    bounds = [b for b in (hot_to, cold_to) if b is not None]
    bound = max(bounds) if bounds else None
    seen: dict[str, tuple[Entry, dict[str, Any]]] = {}
    for entry, game in [*hot, *cold]:
        seen.setdefault(entry[1], (entry, game))
    merged = sorted(seen.values(), key=lambda found: found[0], reverse=True)
    if bound is not None:
        merged = [found for found in merged if found[0] >= bound]
    if len(merged) > limit:
        return [game for _, game in merged[:limit]], merged[limit - 1][0]
    return [game for _, game in merged], bound


def _archived(store: EventStore, game_id: str) -> bool:
    """Whether `store` falls through to the archive and knows the game is archived."""
    return isinstance(store, FallThroughStore) and store.is_archived(game_id)


def _falls(
    found: Callable[[str], T | None], store: EventStore, parse: Callable[[str], T | None]
) -> Callable[[str], T | None]:
    """The directory's answer from the seats record; for an archived game (whose records
    left Redis), the same answer from the record kept in its copy."""

    def answer(game_id: str) -> T | None:
        value = found(game_id)
        if value is None and isinstance(store, FallThroughStore):
            record = store.record(game_id)
            if record is not None:
                return parse(json.dumps(record))
        return value

    return answer


class _Idle:
    """The waiter of an archived game's live stream: nothing is ever appended to it (an
    abandoned game, with no `GameScored` to end its stream, sends keepalives as before)."""

    def wait(self, game_id: str, after: Cursor, timeout: float) -> bool:
        """Nothing new, after `timeout`."""
        time.sleep(timeout)
        return False


def to_json(body: Any) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(body, separators=(",", ":")).encode()


class QueryService:
    """Read-only views of games, kept up to date from their streams."""

    def __init__(
        self,
        store: EventStore,
        directory: Directory | None = None,
        waiter: Waiter | None = None,
        hub: LiveHub | None = None,
        cache_size: int = 2_000,
        snapshot_every: int = 16,
        replay_games: int = 100,
        view_cache_size: int = 1_024,
    ) -> None:
        self.store = store
        self.directory = directory
        self.waiter = waiter if waiter is not None else PollingWaiter(store)
        self.hub = hub  # live streams fed by one reader per process (else `waiter` each)
        names = _falls(directory.names, store, _names) if directory is not None else None
        seats = _falls(directory.seats, store, _seats) if directory is not None else None
        bots = _falls(directory.bots, store, _bots) if directory is not None else None
        self.projector = Projector(
            store, names, cache_size, snapshot_every, replay_games, seats=seats, bots=bots
        )
        # Rendered views by (game, kind, ETag, the fold's generation): a body never changes
        # for its ETag while the log holds the history folded (a failover may cut it back).
        self._views: Kept[tuple[str, str, str, int], bytes] = Kept(view_cache_size)

    # -- board and scores ---------------------------------------------------------------
    def position(self, game_id: str, at: int | None = None, turn: int | None = None) -> Position:
        """The game now, right after move `at`, or after `turn` placements (not both)."""
        return self.projector.position(game_id, at, turn)

    def board(
        self, game_id: str, at: int | None = None, turn: int | None = None
    ) -> tuple[str, Callable[[], bytes]]:
        """The board view's ETag and a function that renders it (called unless a 304 will do)."""
        pos = self.position(game_id, at, turn)
        return self._view(pos, "board", board_etag(pos), board_view)

    def scores(
        self, game_id: str, at: int | None = None, turn: int | None = None
    ) -> tuple[str, Callable[[], bytes]]:
        """The score view's ETag and a function that renders it."""
        pos = self.position(game_id, at, turn)
        return self._view(pos, "scores", scores_etag(pos), scores_view)

    def _view(
        self, pos: Position, kind: str, etag: str, render: Callable[[Position], dict[str, Any]]
    ) -> tuple[str, Callable[[], bytes]]:
        key = (pos.game_id, kind, etag, pos.generation)

        def body() -> bytes:
            cached = self._views.get(key)
            if cached is not None:
                return cached
            data = to_json(render(pos))
            self._views.keep(key, data)
            return data

        return etag, body

    # -- the merged log -----------------------------------------------------------------
    def events(self, game_id: str, after: Cursor, limit: int) -> tuple[str, dict[str, Any]]:
        """A page of the merged log after `after`, and its ETag (the positions it spans); 422
        `cursor_beyond_log` for a cursor past the log's end, as `live`."""
        items, last = page(self.store, game_id, after, limit)
        if not items:
            self.within(game_id, after, self.require(game_id))
            if _archived(self.store, game_id):  # found archived just now: read it from there
                items, last = page(self.store, game_id, after, limit)
        else:
            # An item of a stream shows the cursor short of that stream's end; a stream with
            # none on the page may be beyond it (its events would then never be sent).
            streams = {event.stream for event, _ in items}
            if (MOVES not in streams and after[0] > self.store.last_seq(game_id, MOVES)) or (
                SCORES not in streams and after[1] > self.store.last_seq(game_id, SCORES)
            ):
                self.within(game_id, after, self.require(game_id))  # the log's ends told
        body = {
            "game_id": game_id,
            "after": format_cursor(after),
            "next": format_cursor(last),
            "more": len(items) == limit,
            "items": [item(event, cursor) for event, cursor in items],
        }
        return f"e{format_cursor(after)}.{format_cursor(last)}.{limit}", body

    def export(self, game_id: str, after: Cursor, limit: int | None) -> Iterator[bytes]:
        """The merged log after `after` as NDJSON lines (404 before the first line if unknown,
        422 `cursor_beyond_log` for a cursor past the log's end)."""
        self.within(game_id, after, self.require(game_id))
        return ndjson_lines(self.store, game_id, after, limit)

    @staticmethod
    def within(game_id: str, after: Cursor, ends: Cursor) -> None:
        """422 `cursor_beyond_log` when `after` is past the log's `ends` in either stream: a
        made-up cursor, another game's, or one from before a failover cut the log back."""
        if after[0] > ends[0] or after[1] > ends[1]:
            raise BadParameter(
                "cursor_beyond_log",
                f"cursor {format_cursor(after)} is beyond this game's log, which ends at "
                f"{format_cursor(ends)}",
                None,
                cursor=format_cursor(after),
                last=format_cursor(ends),
            )

    def require(self, game_id: str) -> Cursor:
        """The ends of the game's streams (404 `game_not_found` when it has no moves)."""
        moves = self.store.last_seq(game_id, MOVES)
        if moves == 0:
            raise NotFound("game_not_found", f"no game {game_id[:64]}")
        return moves, self.store.last_seq(game_id, SCORES)

    def live(
        self,
        game_id: str,
        after: Cursor | None,
        max_seconds: float,
        heartbeat: float,
        client: socket.socket | None = None,
    ) -> Iterator[str]:
        """Server-Sent Events after `after` (default: from now on). `client` is the stream's
        connection, watched so that a client that leaves frees its stream at once.

        A cursor beyond the log (a made-up or foreign Last-Event-ID) is refused with 422
        `cursor_beyond_log` rather than streamed from: its ids would not be this game's.
        """
        ends = self.require(game_id)
        if after is not None:
            self.within(game_id, after, ends)
        start = ends if after is None else after
        if _archived(self.store, game_id):  # a finished game that never changes again
            return live(self.store, _Idle(), game_id, start, max_seconds, heartbeat)
        if self.hub is None:
            return live(self.store, self.waiter, game_id, start, max_seconds, heartbeat)
        subscription = self.hub.subscribe(game_id, ends, client)
        events = live(
            subscription,
            subscription,
            game_id,
            start,
            max_seconds,
            heartbeat,
            render=subscription.game.render,
        )
        return LiveStream(events, subscription)

    # -- the games list -----------------------------------------------------------------
    def games(
        self,
        status: str | None,
        player: str | None,
        cursor: str | None,
        limit: int,
        player_id: str | None = None,
        key_id: str | None = None,
    ) -> dict[str, Any]:
        """A page of the API key's games (None: the public games), filtered by status, player
        name and player id."""
        if self.directory is None:
            return {"games": [], "next": None}
        store = self.store
        if not isinstance(store, FallThroughStore) or not store.lists_archive():
            games, following = self.directory.page(
                status, player, cursor, limit, player_id, key_id, public=key_id is None
            )
            return {"games": games, "next": following}
        after = decode_cursor(cursor) if cursor else None
        public = key_id is None
        hot, hot_to = self.directory.entries(
            status, player, after, limit, player_id, key_id, public
        )
        query = ListQuery(status, player, player_id, key_id, public, after, limit)
        cold, cold_to = store.page(query)
        page, to = merge_pages(hot, hot_to, cold, cold_to, limit)
        return {"games": page, "next": encode_cursor(to) if to else None}
