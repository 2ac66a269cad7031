"""A game's merged log of moves and scores: pages, NDJSON lines and Server-Sent Events.

A position in the merged log is a pair of stream positions, written ``"<move seq>-<score
seq>"``: the last move and the last score event already delivered. Reading "after" a cursor
reads each stream after its own position, so a cursor never skips or repeats an event, even
when the scoring worker appends scores of moves delivered earlier. Within what is read, a
move comes before its scores and scores follow the move they name (payload ``move``).
"""

from __future__ import annotations

import heapq
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import EventStore
from eventstore.score_stream import GAME_SCORED

from .projector import BadParameter

Cursor = tuple[int, int]
CURSOR = re.compile(r"([0-9]{1,15})-([0-9]{1,15})")  # ASCII: Python's \d takes any digit
READ_BATCH = 500  # events read per stream and round when streaming


def parse_cursor(text: str) -> Cursor:
    """Read ``"<move seq>-<score seq>"`` (422 `bad_cursor` otherwise)."""
    match = CURSOR.fullmatch(text.strip())
    if match is None:
        raise BadParameter(
            "bad_cursor", 'a cursor is "<move seq>-<score seq>", e.g. "12-3"', None, cursor=text
        )
    return int(match[1]), int(match[2])


def format_cursor(cursor: Cursor) -> str:
    """The text form of a cursor."""
    return f"{cursor[0]}-{cursor[1]}"


def _order(event: StoredEvent) -> tuple[int, int, int]:
    if event.stream == MOVES:
        return (event.seq, 0, 0)
    return (int(event.payload["move"]), 1, event.seq)


def page(
    store: StreamReader, game_id: str, after: Cursor, limit: int
) -> tuple[list[tuple[StoredEvent, Cursor]], Cursor]:
    """Up to `limit` events after `after`, each with the cursor that follows it; the last one.

    Each stream's events taken form a prefix of what follows its position (the merge keeps
    each stream's order), so the returned cursor is exact.
    """
    moves = store.read(game_id, MOVES, after=after[0], limit=limit)
    scores = store.read(game_id, SCORES, after=after[1], limit=limit)
    # The scores are read after the moves: a move appended in between may already be scored.
    # Such a score waits for the next read, with its move (a score never precedes its move).
    scores = scores[: scored_prefix(scores, moves[-1].seq if moves else after[0])]
    moved, scored = after
    out: list[tuple[StoredEvent, Cursor]] = []
    for event in heapq.merge(moves, scores, key=_order):
        if len(out) == limit:
            break
        if event.stream == MOVES:
            moved = event.seq
        else:
            scored = event.seq
        out.append((event, (moved, scored)))
    return out, (moved, scored)


def scored_prefix(scores: list[StoredEvent], last_move: int) -> int:
    """How many of `scores` (in order) name moves up to `last_move`."""
    for i, event in enumerate(scores):
        if int(event.payload["move"]) > last_move:
            return i
    return len(scores)


def item(event: StoredEvent, cursor: Cursor) -> dict[str, Any]:
    """An event of the merged log as JSON: its envelope and the cursor just after it."""
    return {**event.to_dict(), "cursor": format_cursor(cursor)}


def ndjson_lines(
    store: StreamReader, game_id: str, after: Cursor, limit: int | None
) -> Iterator[bytes]:
    """The merged log after `after` as NDJSON (one event per line), read a batch at a time."""
    left = limit
    while left is None or left > 0:
        batch = READ_BATCH if left is None else min(READ_BATCH, left)
        items, after = page(store, game_id, after, batch)
        for event, cursor in items:
            yield json.dumps(item(event, cursor), separators=(",", ":")).encode() + b"\n"
        if left is not None:
            left -= len(items)
        if len(items) < batch:
            return


# ------------------------------------------------------------------------------- live


class StreamReader(Protocol):
    """What the merged log is read from: an `EventStore`, or a live subscription that serves
    recent events from memory and the rest from the store."""

    def read(
        self, game_id: str, stream: str, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """The events of one stream after `after` (at most `limit`)."""


class StreamClosed(Exception):
    """Raised by a waiter whose client has gone: the stream ends at once, freeing its slot."""


class Waiter(Protocol):
    """Blocks until a game's streams may hold events after a cursor, or a timeout passes."""

    def wait(self, game_id: str, after: Cursor, timeout: float) -> bool:
        """True when something new may be there, False on timeout; `StreamClosed` when the
        client went away."""


class PollingWaiter:
    """Polls the store's last sequences (in-memory stores in unit tests)."""

    def __init__(self, store: EventStore, interval: float = 0.01) -> None:
        self.store = store
        self.interval = interval

    def wait(self, game_id: str, after: Cursor, timeout: float) -> bool:
        """See `Waiter.wait`."""
        deadline = time.monotonic() + timeout
        while True:
            if (
                self.store.last_seq(game_id, MOVES) > after[0]
                or self.store.last_seq(game_id, SCORES) > after[1]
            ):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.interval)


def sse_event(event: StoredEvent, cursor: Cursor) -> str:
    """One Server-Sent Event: ``id`` is the cursor after it (what Last-Event-ID sends back)."""
    name = "move" if event.stream == MOVES else "score"
    data = json.dumps(item(event, cursor), separators=(",", ":"))
    return f"id: {format_cursor(cursor)}\nevent: {name}\ndata: {data}\n\n"


def sse_end(game_id: str, cursor: Cursor) -> str:
    """The last event of a stream on a game scored to its end: the client should close (a
    reconnect with this id gets `end` again at once)."""
    text = format_cursor(cursor)
    data = json.dumps({"game_id": game_id, "cursor": text, "reason": "game_scored"})
    return f"id: {text}\nevent: end\ndata: {data}\n\n"


def scored_to_end(store: StreamReader, game_id: str, after: Cursor) -> bool:
    """Whether the score event at the cursor is the game's `GameScored`: nothing follows it."""
    if after[1] <= 0:
        return False
    last = store.read(game_id, SCORES, after=after[1] - 1, limit=1)
    return bool(last) and last[0].type == GAME_SCORED


def live(
    store: StreamReader,
    waiter: Waiter,
    game_id: str,
    after: Cursor,
    max_seconds: float,
    heartbeat: float,
    clock: Callable[[], float] = time.monotonic,
    render: Callable[[StoredEvent, Cursor], str] = sse_event,
) -> Iterator[str]:
    """The events after `after` as they arrive, for at most `max_seconds`, with a comment line
    after every `heartbeat` seconds without events (it keeps proxies from closing the stream
    and lets the server notice a client that left). After `GameScored` (also one that was
    already there) an `end` event, and the stream closes. `render` makes an event's text (a
    live hub shares it between the viewers of a game)."""
    deadline = clock() + max_seconds
    # The client waits this long before reconnecting (with Last-Event-ID) when the stream ends.
    yield f"retry: 1000\n: live from {format_cursor(after)}\n\n"
    caught_up = False
    while True:
        items, after = page(store, game_id, after, READ_BATCH)
        for event, cursor in items:
            yield render(event, cursor)
            if event.stream == SCORES and event.type == GAME_SCORED:
                yield sse_end(game_id, cursor)
                return
        if len(items) == READ_BATCH:
            continue  # more already waiting
        if not caught_up:
            caught_up = True  # at the end of the log: was the game over before we came?
            if scored_to_end(store, game_id, after):
                yield sse_end(game_id, after)
                return
        remaining = deadline - clock()
        if remaining <= 0:
            yield ": stream time is up; reconnect with Last-Event-ID\n\n"
            return
        try:
            woke = waiter.wait(game_id, after, min(heartbeat, remaining))
        except StreamClosed:
            return
        if not woke:
            yield ": keepalive\n\n"
