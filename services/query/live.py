"""Live streams: one Redis reader per process wakes every open stream of the games that moved.

Why: a stream that waits in its own `XREAD BLOCK` holds a Redis connection (and, under a
threaded worker, a thread) for as long as it is open, so a few hundred viewers exhausted the
pool the plain views needed. Here an open stream is a greenlet of gunicorn's gevent worker
waiting on an Event of its own; one reader per process sends a single `XREAD BLOCK` naming
the move and score streams of every watched game, reads what arrived once (through the
store), keeps the last `keep` events of each watched stream in memory and wakes that game's
streams, which take the new events from memory. N viewers of a game cost one read, not N,
and the process holds O(1) Redis connections whatever the number of streams.

A stream of a game nobody watched yet reads its own catch-up from the store (so it is served
at once). Its game joins the reader's set at the stream ends read when the stream opened, so
nothing appended after them is missed; the reader is woken out of its current BLOCK by
`CLIENT UNBLOCK` (sent by a waker on the view client), so the new game does not wait for the
block to run out.

Redis Cluster: one XREAD may only name keys of one hash slot. `reader_group` is the one place
that decides which reader watches a game: one group on a single Redis (one reader, one
connection); on a cluster the game's slot (both streams share the ``{g:<id>}`` tag), and each
slot with watched games gets its own reader, blocking on a connection to that slot's primary
(new games sit on the 64 index shards' slots: at most 64 readers per process; games from
before the shards each add one). A slot that moved (MOVED/ASK/TRYAGAIN) makes its reader
re-read the cluster's topology and block on the new owner; events are then read from the
tails, so nothing is missed.

A client that went away: each stream's client socket is registered with an epoll set for
EPOLLRDHUP (peer closed), polled every `watch_interval`; the stream is woken and ends, freeing
its slot, instead of keeping it until a heartbeat write fails.

Written with `threading` primitives, which gevent's monkey patching makes cooperative: under
the gevent worker the reader, its waker and the watcher are greenlets; in a threaded server
(Flask's test client) they are daemon threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, TryAgainError

from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import EventStore
from services.redis_store import game_keys
from services.redis_store.connect import is_cluster

from .log import READ_BATCH, Cursor, StreamClosed, scored_prefix, sse_event

log = logging.getLogger(__name__)

STREAM_KINDS = (MOVES, SCORES)
RETRY_SECONDS = 1.0  # after a Redis error, before the reader tries again
UNBLOCK_TRIES, UNBLOCK_PAUSE = 100, 0.005  # the waker's CLIENT UNBLOCK, until it takes
EPOLLRDHUP = getattr(select, "EPOLLRDHUP", 0x2000)  # the peer closed (Linux); HUP/ERR always


def reader_group(game_id: str, cluster: bool = False) -> int:
    """Which reader watches `game_id` (the keys one XREAD names): one group on a single
    Redis; on a cluster (one XREAD may name keys of a single slot) the slot of its keys."""
    return key_slot(game_keys(game_id, MOVES)[0].encode()) if cluster else 0


class _Tail:
    """The last events of one watched stream, in order: seq `base + 1` … `last`."""

    def __init__(self, last: int, keep: int) -> None:
        self.base = last
        self.events: list[StoredEvent] = []
        self.keep = keep

    @property
    def last(self) -> int:
        return self.base + len(self.events)

    def extend(self, events: list[StoredEvent]) -> None:
        for event in events:
            if event.seq == self.last + 1:  # anything else was already there
                self.events.append(event)
        extra = len(self.events) - self.keep
        if extra > 0:
            del self.events[:extra]
            self.base += extra

    def after(self, after: int, limit: int | None) -> list[StoredEvent] | None:
        """The kept events after `after`, or None when some of them are no longer kept."""
        if after < self.base:
            return None
        start = after - self.base
        return self.events[start : None if limit is None else start + limit]


class _Game:
    """A watched game: its two tails and the streams open on it."""

    def __init__(self, game_id: str, ends: Cursor, keep: int) -> None:
        self.game_id = game_id
        self.tails = {MOVES: _Tail(ends[0], keep), SCORES: _Tail(ends[1], keep)}
        self.subscribers: set[Subscription] = set()
        self.rendered: dict[tuple[str, int, Cursor], str] = {}
        self.render_keep = 4 * keep

    def render(self, event: StoredEvent, cursor: Cursor) -> str:
        """An event's SSE text, made once for all the viewers at the same cursor."""
        key = (event.stream, event.seq, cursor)
        text = self.rendered.get(key)
        if text is None:
            if len(self.rendered) >= self.render_keep:
                self.rendered.clear()  # old events are rarely asked again: start afresh
            text = self.rendered[key] = sse_event(event, cursor)
        return text

    def ahead_of(self, cursor: Cursor) -> bool:
        return self.tails[MOVES].last > cursor[0] or self.tails[SCORES].last > cursor[1]


class Subscription:
    """One open stream: a `Waiter` woken by the reader and a `StreamReader` that serves kept
    events from memory and anything older from the store."""

    def __init__(self, hub: LiveHub, game: _Game) -> None:
        self.hub = hub
        self.game = game
        self.woken = threading.Event()
        self.gone = False  # the client closed its connection
        self.fd: int | None = None
        self.closed = False

    def wait(self, game_id: str, after: Cursor, timeout: float) -> bool:
        """See `Waiter.wait`."""
        if self.gone:
            raise StreamClosed
        self.woken.clear()  # before the check: a wake-up after it is not lost
        if self.game.ahead_of(after):
            time.sleep(0)  # let other streams (and the reader) run between two reads
            return True
        woke = self.woken.wait(timeout)
        if self.gone:
            raise StreamClosed
        return woke

    def read(
        self, game_id: str, stream: str, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """See `StreamReader.read`."""
        kept = self.game.tails[stream].after(after, limit)
        return kept if kept is not None else self.hub.store.read(game_id, stream, after, limit)

    def client_gone(self) -> None:
        """The watcher saw the client close its end: end the stream now."""
        self.gone = True
        self.woken.set()

    def close(self) -> None:
        """Leave the hub (idempotent)."""
        if not self.closed:
            self.closed = True
            self.hub.unsubscribe(self)


class LiveStream:
    """A stream's response body: the SSE generator, and a `close` that also unsubscribes
    (a generator that never started would not run its `finally`)."""

    def __init__(self, events: Iterator[str], subscription: Subscription) -> None:
        self._events = events
        self._subscription = subscription

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        return next(self._events)

    def close(self) -> None:
        try:
            close: Callable[[], None] | None = getattr(self._events, "close", None)
            if close is not None:
                close()
        finally:
            self._subscription.close()


class _Reader:
    """One `XREAD BLOCK` loop over the streams of one group's games, on a connection of its
    own (the live client's pool), and a waker that interrupts it when a game is added."""

    def __init__(self, hub: LiveHub, group: int) -> None:
        self.hub = hub
        self.group = group
        self.games: dict[str, _Game] = {}
        self.gen = 0  # bumped when a game is added: the keys sent are then out of date
        self.sent_gen = 0  # the generation of the keys in the XREAD now blocked
        self.blocking = False
        self.client_id: int | None = None  # CLIENT ID of the connection, for CLIENT UNBLOCK
        self.has_games = threading.Event()
        self.nudged = threading.Event()
        self.rounds = 0  # XREAD replies handled (tests and metrics)
        # After a Redis error (a restart, a failover): the kept tails are checked against the
        # store before the next XREAD, since the new primary may have lost their last events.
        self.suspect = False
        self.node: Any = None  # on a cluster: the node the XREAD blocks on (CLIENT UNBLOCK)

    def start(self) -> None:
        for target, name in ((self._run, "reader"), (self._wake, "waker")):
            threading.Thread(target=target, name=f"live-{name}-{self.group}", daemon=True).start()

    def add(self, game: _Game) -> None:
        """A new game to watch (hub lock held)."""
        self.games[game.game_id] = game
        self.gen += 1
        self.has_games.set()
        self.nudged.set()

    # -- the reader ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                self._round()
            except Exception:  # never die: every stream of this process depends on it
                self.blocking = False
                self.suspect = True
                log.exception("live reader (retrying in %.0f s)", RETRY_SECONDS)
                time.sleep(RETRY_SECONDS)

    def _round(self) -> None:
        """One XREAD and what it found."""
        with self.hub.lock:
            games = list(self.games.values())
            if not games:
                self.has_games.clear()
            self.sent_gen, self.blocking = self.gen, bool(games)
        if not games:
            self.has_games.wait()
            return
        if self.suspect:
            for game in games:
                if not self.hub.verified(game):
                    self.hub.drop(game)
            self.suspect = False  # only once all were checked (a failure: checked again)
            return  # the next round watches the games left, from their tails
        try:
            moved = self._xread(games)
        except (redis.RedisError, OSError) as exc:
            self.blocking = False
            self.suspect = True
            log.warning("live reader: %s (retrying in %.0f s)", exc, RETRY_SECONDS)
            if self.hub.cluster and isinstance(
                exc, (AskError, TryAgainError, ClusterDownError, redis.ConnectionError)
            ):  # the slot moved or is moving, or its primary failed: ask the cluster again
                with contextlib.suppress(redis.RedisError):
                    self.hub.live_client.nodes_manager.initialize()  # type: ignore[attr-defined]
            time.sleep(RETRY_SECONDS)
            return
        self.blocking = False
        self.rounds += 1
        self._take(moved)

    def _xread(self, games: list[_Game]) -> list[tuple[_Game, str]]:
        """Block until a watched stream has entries after its tail (or the block ends, or the
        waker unblocks us); which (game, stream) moved. COUNT 1: the entries are read through
        the store afterwards, so the XREAD reply stays tiny whatever arrived."""
        keys: list[str] = []
        ids: list[str] = []
        owners: dict[bytes, tuple[_Game, str]] = {}
        for game in games:
            for stream in STREAM_KINDS:
                key = game_keys(game.game_id, stream)[0]
                keys.append(key)
                ids.append(f"{game.tails[stream].last}-0")
                owners[key.encode()] = (game, stream)
        block_ms = max(1, int(self.hub.block_seconds * 1000))
        client = self.hub.live_client
        if self.hub.cluster:  # the primary of this group's slot, as the client knows it now
            self.node = client.get_node_from_key(keys[0])  # type: ignore[attr-defined]
            client = client.get_redis_connection(self.node)  # type: ignore[attr-defined]
        pool = client.connection_pool
        conn = pool.get_connection()
        try:
            # CLIENT ID first, in the same write: the waker needs this connection's id while
            # the XREAD blocks, and the id changes whenever redis-py reconnects.
            conn.send_packed_command(
                conn.pack_commands(
                    [
                        ("CLIENT", "ID"),
                        ("XREAD", "COUNT", 1, "BLOCK", block_ms, "STREAMS", *keys, *ids),
                    ]
                )
            )
            self.client_id = int(conn.read_response())
            reply: Any = conn.read_response()
        except BaseException:
            conn.disconnect()  # a reply may still be on its way: never reuse this socket
            raise
        finally:
            pool.release(conn)
        moved: list[tuple[_Game, str]] = []
        if isinstance(reply, dict):  # RESP3
            reply = list(reply.items())
        for key, entries in reply or ():
            owner = owners.get(key if isinstance(key, bytes) else str(key).encode())
            if owner is not None and entries:
                moved.append(owner)
        return moved

    def _take(self, moved: list[tuple[_Game, str]]) -> None:
        """Read what arrived on each moved game (once for all its viewers) and wake them.

        Both streams, the moves first: a score is kept only once the move it names is, so the
        kept events are always a consistent merged log (a score never precedes its move).
        """
        woken: dict[str, _Game] = {game.game_id: game for game, _ in moved}
        for game in woken.values():
            try:
                read = {
                    stream: self.hub.store.read(
                        game.game_id, stream, after=game.tails[stream].last, limit=READ_BATCH
                    )
                    for stream in STREAM_KINDS  # MOVES first
                }
            except Exception as exc:  # one game's trouble must not stop the others
                log.warning("live reader: reading %s: %s", game.game_id, exc)
                continue
            with self.hub.lock:
                game.tails[MOVES].extend(read[MOVES])
                scores = read[SCORES]
                game.tails[SCORES].extend(
                    scores[: scored_prefix(scores, game.tails[MOVES].last)]
                )  # the rest is read again next round: XREAD returns at once for it
        for game in woken.values():
            with self.hub.lock:
                subscribers = list(game.subscribers)
            for subscriber in subscribers:
                subscriber.woken.set()

    # -- the waker ----------------------------------------------------------------------
    def _wake(self) -> None:
        """Unblock the XREAD when the keys it names are out of date. CLIENT UNBLOCK answers 0
        when Redis has not started that XREAD yet: then it is sent again, shortly."""
        while True:
            self.nudged.wait()
            self.nudged.clear()
            for _ in range(UNBLOCK_TRIES):
                with self.hub.lock:
                    stale = self.blocking and self.sent_gen < self.gen
                    client_id = self.client_id
                if not stale:
                    break
                try:
                    if client_id is not None and self._unblock(client_id):
                        break
                except Exception as exc:  # the block then simply runs out
                    log.warning("live waker: %s", exc)
                    break
                time.sleep(UNBLOCK_PAUSE)

    def _unblock(self, client_id: int) -> bool:
        """CLIENT UNBLOCK of the reader's connection (client ids are per node on a cluster)."""
        views = self.hub.views
        if not self.hub.cluster:
            return bool(views.client_unblock(client_id))
        node = self.node and views.get_node(host=self.node.host, port=self.node.port)  # type: ignore[attr-defined]
        if not node:
            return False
        return bool(views.execute_command("CLIENT UNBLOCK", client_id, target_nodes=node))


def _epoll() -> Any:
    """The real `select.epoll` (gevent's monkey patching removes it from `select`; polled
    with a zero timeout it never blocks the loop). None where there is none."""
    if "gevent.monkey" in sys.modules:
        from gevent import monkey  # type: ignore[import-untyped]

        if monkey.is_module_patched("select"):
            return monkey.get_original("select", "epoll")()
    factory = getattr(select, "epoll", None)
    return None if factory is None else factory()


class _ClientWatch:
    """Notices clients that closed their connection: EPOLLRDHUP / EPOLLHUP / EPOLLERR on the
    streams' sockets, polled (never blocking) every `interval` seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.poller = _epoll()
        self.watched: dict[int, Subscription] = {}
        self.lock = threading.Lock()

    def start(self) -> None:
        if self.poller is not None:
            threading.Thread(target=self._run, name="live-watch", daemon=True).start()

    def add(self, subscription: Subscription, sock: socket.socket) -> None:
        if self.poller is None:
            return  # no epoll: heartbeat writes find a gone client
        try:
            fd = sock.fileno()
            with self.lock:
                self.poller.register(fd, EPOLLRDHUP)
                self.watched[fd] = subscription
            subscription.fd = fd
        except (OSError, ValueError):
            pass

    def remove(self, subscription: Subscription) -> None:
        fd = subscription.fd
        if fd is None or self.poller is None:
            return
        subscription.fd = None
        with self.lock:
            if self.watched.get(fd) is subscription:
                del self.watched[fd]
                with contextlib.suppress(OSError, ValueError):
                    self.poller.unregister(fd)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            try:
                ready = self.poller.poll(0)
            except Exception as exc:
                log.warning("live watch: %s", exc)
                continue
            for fd, _ in ready:
                with self.lock:
                    subscription = self.watched.pop(fd, None)
                    with contextlib.suppress(OSError, ValueError):
                        self.poller.unregister(fd)
                if subscription is not None:
                    subscription.fd = None
                    subscription.client_gone()


class LiveHub:
    """The process's live streams: subscriptions per game, the reader(s), the watcher."""

    def __init__(
        self,
        store: EventStore,
        live_client: redis.Redis,
        views: redis.Redis,
        block_seconds: float = 10.0,
        keep: int = 256,
        watch_interval: float = 0.5,
    ) -> None:
        self.store = store
        self.live_client = live_client  # the readers' blocking XREADs (socket timeout > block)
        self.views = views  # the view client: CLIENT UNBLOCK
        self.block_seconds = block_seconds
        self.keep = max(1, keep)
        self.lock = threading.Lock()
        self.games: dict[str, _Game] = {}
        self.readers: dict[int, _Reader] = {}
        self.cluster = is_cluster(live_client)  # a reader per slot (see `reader_group`)
        self.watch = _ClientWatch(watch_interval)
        self._pid: int | None = None

    def _started(self) -> None:
        """Start the watcher in this process on first use (threads do not survive a fork)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self.readers.clear()
            self.watch = _ClientWatch(self.watch.interval)
            self.watch.start()

    def subscribe(
        self, game_id: str, ends: Cursor, client: socket.socket | None = None
    ) -> Subscription:
        """A stream on `game_id`, whose streams ended at `ends` (or later) when it opened."""
        with self.lock:
            self._started()
            game = self.games.get(game_id)
        # Tails past the ends just read: the reader read newer events meanwhile, or a failover
        # cut the log back below what they keep (the new stream would be served lost events).
        if game is not None and game.ahead_of(ends) and not self.verified(game):
            self.drop(game)
        with self.lock:
            game = self.games.get(game_id)
            if game is None:
                game = self.games[game_id] = _Game(game_id, ends, self.keep)
                group = reader_group(game_id, self.cluster)
                reader = self.readers.get(group)
                if reader is None:
                    reader = self.readers[group] = _Reader(self, group)
                    reader.start()
                reader.add(game)
            subscription = Subscription(self, game)
            game.subscribers.add(subscription)
        if client is not None:
            self.watch.add(subscription, client)
        return subscription

    def verified(self, game: _Game) -> bool:
        """Whether the store still holds the last event of each of the game's tails (the
        same command's): False when a failover or a restart lost events the tails keep."""
        for stream, tail in game.tails.items():
            if tail.last == 0:
                continue
            found = self.store.read(game.game_id, stream, after=tail.last - 1, limit=1)
            if not found or found[0].seq != tail.last:
                return False
            if tail.events and tail.events[-1].command_id != found[0].command_id:
                return False
        return True

    def drop(self, game: _Game) -> None:
        """Stop watching a game whose log lost events its tails keep: its open streams end
        (their clients reconnect with their Last-Event-ID and read the log as it is now:
        422 `cursor_beyond_log` when it no longer reaches their cursor), and the next stream
        on it starts afresh from the store."""
        log.warning("live: %s lost events its streams sent; ending them", game.game_id)
        with self.lock:
            if self.games.get(game.game_id) is game:
                del self.games[game.game_id]
                reader = self.readers.get(reader_group(game.game_id, self.cluster))
                if reader is not None:
                    reader.games.pop(game.game_id, None)
            subscribers = list(game.subscribers)
        for subscriber in subscribers:
            subscriber.client_gone()

    def unsubscribe(self, subscription: Subscription) -> None:
        """A stream ended: the last one of a game takes it out of the reader's set (its keys
        leave the next XREAD; no need to interrupt the current one)."""
        self.watch.remove(subscription)
        game = subscription.game
        with self.lock:
            game.subscribers.discard(subscription)
            if not game.subscribers and self.games.get(game.game_id) is game:
                del self.games[game.game_id]
                reader = self.readers.get(reader_group(game.game_id, self.cluster))
                if reader is not None:
                    reader.games.pop(game.game_id, None)

    def streams(self) -> int:
        """Streams open in this process."""
        with self.lock:
            return sum(len(g.subscribers) for g in self.games.values())
