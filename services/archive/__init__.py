"""The archive: finished games leave Redis for a database (issue 28's first half).

`open_archive(url)` gives the adapter of the archive port (`eventstore.archive.Archive`) a URL
names: ``postgresql://…`` (services/archive/postgres.py) or ``sqlite:///path`` / "" (the
embedded default, ``var/archive.sqlite3``: services/archive/sqlite.py). The archiver, the
change feed's consumer "archive" and the steps that move a game, is
services/archive/archiver.py; the operator's command is ``python -m services.archive``.
"""

from __future__ import annotations

from pathlib import Path

from eventstore.archive import Archive

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SQLITE = ROOT / "var" / "archive.sqlite3"


def open_archive(url: str = "") -> Archive:
    """The archive a URL names ("" = the embedded SQLite file under var/)."""
    if url.startswith(("postgresql://", "postgres://")) or "host=" in url or "dbname=" in url:
        from .postgres import PostgresArchive  # psycopg only where it is used

        return PostgresArchive(url)
    if not url:
        path = DEFAULT_SQLITE
    elif url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite://"))
    elif url.startswith("sqlite:"):
        path = ROOT / url.removeprefix("sqlite:")
    else:
        raise ValueError(f"ARCHIVE_URL {url!r}: postgresql://… or sqlite:///path")
    from .sqlite import SqliteArchive

    return SqliteArchive(path)
