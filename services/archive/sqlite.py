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

from eventstore.archive import ArchivedGame, Summary, unpack

from .sql import rows_of, summary_of

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
  log BLOB NOT NULL
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
                    "INSERT OR REPLACE INTO archived_games VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (row.game_id, row.status, row.created_ms, row.ended_ms, row.archived_ms,
                     row.key_id, json.dumps(row.names), json.dumps(row.player_ids), row.moves,
                     row.scores, row.log),
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
