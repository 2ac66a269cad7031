"""`SqliteArchive`: the embedded default of the archive port (a file under `var/`, standard
library sqlite3), for `make run` and anyone without a PostgreSQL server. Same rows as the
PostgreSQL adapter (services/archive/sql.py); one connection behind a lock."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventstore.archive import ArchivedGame, ListQuery, Page, Summary, unpack

from .sql import page_of, rows_of, summary_of, wanted

SCHEMA = """
CREATE TABLE IF NOT EXISTS archived_games (
  game_id TEXT PRIMARY KEY,
  status TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  archived_ms INTEGER NOT NULL,
  key_id TEXT,
  names TEXT NOT NULL,
  player_ids TEXT NOT NULL,
  moves INTEGER NOT NULL,
  scores INTEGER NOT NULL,
  log BLOB NOT NULL,
  seats TEXT,
  public INTEGER NOT NULL DEFAULT 0,
  totals TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS archived_games_created ON archived_games (created_ms, game_id);
CREATE INDEX IF NOT EXISTS archived_games_status ON archived_games (status, created_ms, game_id);
CREATE TABLE IF NOT EXISTS archived_players (
  who TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  game_id TEXT NOT NULL,
  PRIMARY KEY (who, created_ms, game_id)
) WITHOUT ROWID;
"""


# Columns added for lists (a file made before them gets them, and its rows are filled in
# from their logs when it is opened).
LIST_COLUMNS = {"seats": "TEXT", "public": "INTEGER NOT NULL DEFAULT 0", "totals": "TEXT"}
LIST_INDEXES = """
CREATE INDEX IF NOT EXISTS archived_games_public ON archived_games (created_ms, game_id)
  WHERE public = 1;
"""
COLUMNS = ("game_id, status, created_ms, ended_ms, archived_ms, key_id, names, player_ids, "
           "moves, scores, log, seats, public, totals")  # fmt: skip
LISTED = (
    "g.game_id, g.status, g.created_ms, g.ended_ms, g.key_id, g.public, g.seats, g.moves, g.totals"
)


class SqliteArchive:
    """An `Archive` in one SQLite file (WAL: readers do not wait for the archiver)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # committed means on disk
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._add_list_columns()

    def _add_list_columns(self) -> None:
        """The list columns and index on a file made before them, its rows filled in."""
        have = {r[1] for r in self._db.execute("PRAGMA table_info(archived_games)")}
        with self._db:
            for name, kind in LIST_COLUMNS.items():
                if name not in have:
                    self._db.execute(f"ALTER TABLE archived_games ADD COLUMN {name} {kind}")
        self._db.executescript(LIST_INDEXES)
        while True:
            with self._lock:
                old = self._db.execute(
                    "SELECT log FROM archived_games WHERE totals IS NULL LIMIT 200"
                ).fetchall()
            if not old:
                return
            self.put_many([unpack(bytes(r[0])) for r in old])

    def put(self, game: ArchivedGame) -> None:
        """See `Archive.put`."""
        self.put_many([game])

    def put_many(self, games: Sequence[ArchivedGame]) -> None:
        """See `Archive.put_many`: the games' rows and their players' rows, one transaction."""
        now = int(time.time() * 1000)
        rows = rows_of(games, now)
        with self._lock, self._db:
            for row in rows:
                self._db.execute("DELETE FROM archived_players WHERE game_id = ?", (row.game_id,))
                self._db.execute(
                    f"INSERT OR REPLACE INTO archived_games ({COLUMNS}) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (row.game_id, row.status, row.created_ms, row.ended_ms, row.archived_ms,
                     row.key_id, json.dumps(row.names), json.dumps(row.player_ids), row.moves,
                     row.scores, row.log, row.seats(), int(row.public), row.totals),
                )  # fmt: skip
                self._db.executemany("INSERT INTO archived_players VALUES (?,?,?)", row.players())

    def read(self, game_id: str) -> ArchivedGame | None:
        """See `Archive.read`: one primary-key lookup and an unpack (~1 ms)."""
        with self._lock:
            found = self._db.execute(
                "SELECT log FROM archived_games WHERE game_id = ?", (game_id,)
            ).fetchone()
        return None if found is None else unpack(bytes(found[0]))

    def summary(self, game_id: str) -> Summary | None:
        """See `Archive.summary`."""
        with self._lock:
            found = self._db.execute(
                "SELECT moves, scores, log FROM archived_games WHERE game_id = ?",
                (game_id,),
            ).fetchone()
        return None if found is None else summary_of(*found)

    def summaries(self, game_ids: Sequence[str]) -> dict[str, Summary]:
        """See `Archive.summaries`."""
        found = {g: self.summary(g) for g in game_ids}
        return {g: s for g, s in found.items() if s is not None}

    def games(self, after: str = "", limit: int = 100) -> list[str]:
        """See `Archive.games`."""
        with self._lock:
            rows = self._db.execute(
                "SELECT game_id FROM archived_games WHERE game_id > ? ORDER BY game_id LIMIT ?",
                (after, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def page(self, query: ListQuery) -> Page:
        """See `Archive.page`: a player's or an API key's games from ``archived_players``
        (its key (who, creation, game) read backwards from the cursor), the public games from
        their partial index, the others by status or creation."""
        where: list[str] = []
        params: list[Any] = []
        who = wanted(query)
        if who:  # the rarest first would be better; any one of them finds the games
            table = "archived_players p JOIN archived_games g ON g.game_id = p.game_id"
            where.append("p.who = ?")
            params.append(who[-1])
            order = "p.created_ms DESC, p.game_id DESC"
            at = "(p.created_ms, p.game_id)"
        else:
            table = "archived_games g"
            order = "g.created_ms DESC, g.game_id DESC"
            at = "(g.created_ms, g.game_id)"
        if query.key_id is not None:
            where.append("g.key_id = ?")
            params.append(query.key_id)
        if query.public:
            where.append("g.public = 1")
        if query.status is not None:
            where.append("g.status = ?")
            params.append(query.status)
        if query.after is not None:
            where.append(f"{at} < (?, ?)")
            params += list(query.after)
        sql = f"SELECT {LISTED} FROM {table}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order} LIMIT ?"
        params.append(query.limit)
        with self._lock:
            found = self._db.execute(sql, params).fetchall()
        return page_of(query, found)

    def count(self) -> int:
        """See `Archive.count`."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM archived_games").fetchone()[0])

    def size(self) -> int:
        """Bytes of the database file (what the archive takes on disk)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return self.path.stat().st_size

    def close(self) -> None:
        """See `Archive.close`."""
        with self._lock:
            self._db.close()
