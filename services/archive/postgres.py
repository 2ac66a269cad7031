"""`PostgresArchive`: the archive port on PostgreSQL (psycopg 3), for deployments.

The rows are services/archive/sql.py's, compact: ``seats`` one JSON text (names and player
ids in seat order, for lists to show); players in the row itself: ``who``, the keys
(`who_key`, 8 bytes each) of the game's casefolded names (``n:…``) and player ids (``i:…``),
under a GIN index (a player's games are one posting list, a few bytes a game). The packed
log is stored `EXTERNAL` (out of line, not compressed again: it is compressed already). One
connection behind a lock, opened lazily and again after the server went away (a kept
connection that fails is replaced at once, the statement tried again on the new one): an
archive that is down makes `put` and `summary` raise `ArchiveUnavailable`, and the archiver
leaves the game in Redis for a later run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

from eventstore.archive import ArchivedGame, ListQuery, Page, Summary, unpack

from .sql import Row, page_of, rows_of, summary_of, wanted, who_key

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS archived_games (
  game_id text PRIMARY KEY,
  status text NOT NULL,
  created_ms bigint NOT NULL,
  ended_ms bigint NOT NULL,
  key_id text,
  seats text NOT NULL,
  who bigint[] NOT NULL,
  moves integer NOT NULL,
  scores integer NOT NULL,
  log bytea NOT NULL
);
ALTER TABLE archived_games ALTER COLUMN log SET STORAGE EXTERNAL;
CREATE INDEX IF NOT EXISTS archived_games_created ON archived_games (created_ms);
CREATE INDEX IF NOT EXISTS archived_games_abandoned ON archived_games (created_ms)
  WHERE status = 'abandoned';
CREATE INDEX IF NOT EXISTS archived_games_who ON archived_games USING gin (who)
  WITH (fastupdate = off);
ALTER TABLE archived_games ADD COLUMN IF NOT EXISTS public boolean NOT NULL DEFAULT false;
ALTER TABLE archived_games ADD COLUMN IF NOT EXISTS totals text;
CREATE INDEX IF NOT EXISTS archived_games_public ON archived_games (created_ms) WHERE public;
ALTER TABLE archived_games ADD COLUMN IF NOT EXISTS head bytea NOT NULL DEFAULT '';
ALTER TABLE archived_games ALTER COLUMN head SET STORAGE PLAIN,
  ALTER COLUMN game_id SET STORAGE PLAIN, ALTER COLUMN status SET STORAGE PLAIN,
  ALTER COLUMN key_id SET STORAGE PLAIN, ALTER COLUMN seats SET STORAGE PLAIN,
  ALTER COLUMN who SET STORAGE PLAIN, ALTER COLUMN totals SET STORAGE PLAIN;
"""
COLUMNS = (
    "game_id, status, created_ms, ended_ms, key_id, seats, who, moves, scores, head, log, public, "
    "totals"
)
BY_IDS = "game_id = ANY(%s)"
LOG = "head || log"  # a stored copy, whole (`PostgresArchive.put_many` splits it in two)
UPSERT = (
    f"INSERT INTO archived_games ({COLUMNS}) VALUES ({', '.join(['%s'] * 13)}) "
    "ON CONFLICT (game_id) DO UPDATE SET status = excluded.status, "
    "created_ms = excluded.created_ms, ended_ms = excluded.ended_ms, "
    "key_id = excluded.key_id, seats = excluded.seats, who = excluded.who, "
    "moves = excluded.moves, scores = excluded.scores, head = excluded.head, "
    "log = excluded.log, "
    "public = excluded.public, totals = excluded.totals"
)
LISTED = "game_id, status, created_ms, ended_ms, key_id, public, seats, moves, totals"

TABLES = ("archived_games",)


def toast_chunk(block_size: int) -> int:
    """The bytes of one TOAST chunk on a server with pages of `block_size` bytes
    (TOAST_MAX_CHUNK_SIZE: 1,996 for 8 KB): a quarter page, less a heap tuple's header,
    the chunk's id and number and its length word."""
    per_tuple = (block_size - 40) // 4 // 8 * 8  # MaximumBytesPerTuple(4), MAXALIGNed down
    return per_tuple - 24 - 4 - 4 - 4


def split(log: bytes, chunk: int) -> tuple[bytes, bytes]:
    """A packed log as (head, tail): the tail whole TOAST chunks (stored out of line, 4 to
    a page, no page left part empty), the head the rest (< one chunk, in the row)."""
    cut = len(log) % chunk
    return log[:cut], log[cut:]


class ArchiveUnavailable(RuntimeError):
    """The archive database could not be reached (or failed mid-transaction)."""


class PostgresArchive:
    """An `Archive` on PostgreSQL (`url`: a libpq connection string or URL)."""

    def __init__(self, url: str, connect_timeout: int = 5) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self._db: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._run(lambda db: db.execute(SCHEMA))  # tables and indexes, if missing
        found: Any = self._run(lambda db: db.execute("SHOW block_size").fetchone())
        self._chunk = toast_chunk(int(found[0]))
        self._fill_list_columns()

    def _fill_list_columns(self) -> None:
        """Rows stored before the list columns (``totals`` NULL): filled in from their logs
        (``who`` gets the owner's key too)."""
        while True:
            old = self._run(
                lambda db: db.execute(
                    f"SELECT {LOG} FROM archived_games WHERE totals IS NULL LIMIT 200"
                ).fetchall()
            )
            if not old:
                return
            self.put_many([unpack(bytes(r[0])) for r in old])

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`work` in one transaction, committed; the connection dropped on any failure. A
        connection kept from before that fails to reach the server (it restarted, or went
        away while idle) is replaced and `work` tried once more on the new one (each `work`
        is one transaction that may run twice: upserts and reads)."""
        with self._lock:
            while True:
                fresh = self._db is None or self._db.closed
                try:
                    if self._db is None or self._db.closed:
                        self._db = psycopg.connect(self.url, connect_timeout=self.connect_timeout)
                    with self._db.transaction():
                        return work(self._db)
                except psycopg.OperationalError as e:
                    self._drop()
                    if not fresh:
                        continue  # a stale connection: once more, on a new one
                    raise ArchiveUnavailable(str(e)) from e
                except psycopg.Error:
                    self._drop()
                    raise

    def _drop(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            finally:
                self._db = None

    def put(self, game: ArchivedGame) -> None:
        """See `Archive.put`."""
        self.put_many([game])

    def put_many(self, games: Sequence[ArchivedGame]) -> None:
        """See `Archive.put_many`: the games' rows (`put_rows`)."""
        self.put_rows(rows_of(games, int(time.time() * 1000)))

    def put_rows(self, rows: Sequence[Row]) -> None:
        """Store rows made by `rows_of` (or by a benchmark filling an archive): one INSERT …
        ON CONFLICT a game, sent together (`executemany`: one prepared statement,
        pipelined), one commit; a game twice: its last row. In game id order: two archivers
        whose batches overlap (a tick beside an operator's run) then lock the rows they share
        in one order, and one waits for the other; each in its own batch's order, PostgreSQL
        found a deadlock between them and failed one (4 of 4 tries in the test)."""
        latest = {row.game_id: row for row in rows}
        params = [
            (row.game_id, row.status, row.created_ms, row.ended_ms, row.key_id, row.seats(),
             [who_key(w) for w in row.who()], row.moves, row.scores,
             *split(row.log, self._chunk), row.public, row.totals)
            for row in (latest[game_id] for game_id in sorted(latest))
        ]  # fmt: skip
        if params:
            self._run(lambda db: db.cursor().executemany(UPSERT, params))

    def _one(self, sql: str, game_id: str) -> Any:
        return self._run(lambda db: db.execute(sql, (game_id,)).fetchone())

    def read(self, game_id: str) -> ArchivedGame | None:
        """See `Archive.read`: one primary-key lookup and an unpack (~1 ms)."""
        found = self._one(f"SELECT {LOG} FROM archived_games WHERE game_id = %s", game_id)
        return None if found is None else unpack(bytes(found[0]))

    def summary(self, game_id: str) -> Summary | None:
        """See `Archive.summary`."""
        found = self._one(
            f"SELECT moves, scores, {LOG} FROM archived_games WHERE game_id = %s", game_id
        )
        return None if found is None else summary_of(*found)

    def summaries(self, game_ids: Sequence[str]) -> dict[str, Summary]:
        """See `Archive.summaries`: one query."""
        rows = self._run(
            lambda db: db.execute(
                f"SELECT game_id, moves, scores, {LOG} FROM archived_games WHERE {BY_IDS}",
                (list(game_ids),),
            ).fetchall()
        )
        return {r[0]: summary_of(*r[1:]) for r in rows}

    def games(self, after: str = "", limit: int = 100) -> list[str]:
        """See `Archive.games`."""
        rows = self._run(
            lambda db: db.execute(
                "SELECT game_id FROM archived_games WHERE game_id > %s ORDER BY game_id LIMIT %s",
                (after, limit),
            ).fetchall()
        )
        return [r[0] for r in rows]

    def page(self, query: ListQuery) -> Page:
        """See `Archive.page`: a player's or an API key's games through the GIN index on
        ``who`` (the keys of all that the list asks for), the public games through their
        partial index, the others by creation; newest first from the cursor."""
        where: list[str] = []
        params: list[Any] = []
        who = [who_key(w) for w in wanted(query)]
        if who:
            where.append("who @> %s::bigint[]")
            params.append(who)
        if query.public:
            where.append("public")
        if query.status is not None:
            where.append("status = %s")
            params.append(query.status)
        if query.after is not None:
            where.append("(created_ms, game_id) < (%s, %s)")
            params += list(query.after)
        sql = f"SELECT {LISTED} FROM archived_games"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_ms DESC, game_id DESC LIMIT %s"
        params.append(query.limit)
        found = self._run(lambda db: db.execute(sql, params).fetchall())
        return page_of(query, found)

    def count(self) -> int:
        """See `Archive.count`."""
        found: Any = self._run(
            lambda db: db.execute("SELECT count(*) FROM archived_games").fetchone()
        )
        return int(found[0])

    def size(self) -> int:
        """Bytes of the archive's tables with their indexes and TOAST (pg_total_relation_size)."""
        sql = " + ".join(f"pg_total_relation_size('{t}')" for t in TABLES)
        found: Any = self._run(lambda db: db.execute(f"SELECT {sql}").fetchone())
        return int(found[0])

    def sizes(self) -> dict[str, int]:
        """Bytes of each part of the archive: the table, its TOAST (the logs) with its index,
        and each index."""
        sql = (
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c WHERE c.relname IN "
            "(SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = "
            "'archived_games'::regclass) OR c.relname = 'archived_games' UNION ALL "
            "SELECT 'toast', pg_total_relation_size(reltoastrelid) FROM pg_class "
            "WHERE relname = 'archived_games'"
        )
        rows = self._run(lambda db: db.execute(sql).fetchall())
        return {str(name): int(size) for name, size in rows}

    def close(self) -> None:
        """See `Archive.close`."""
        with self._lock:
            self._drop()
