"""One contract for every adapter of the archive port (eventstore/archive.py): in memory,
SQLite (the embedded default) and PostgreSQL (a private server: tests/postgres_server.py),
as pyeventsourcing runs one suite per recorder."""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from eventstore.archive import (
    Archive,
    InMemoryArchive,
    RawEvent,
    Summary,
    all_commands,
    canonical,
    verify,
)
from eventstore.envelope import MOVES, SCORES
from services.archive.postgres import PostgresArchive
from services.archive.sql import who_key
from services.archive.sqlite import SqliteArchive
from tests.archive_games import archived
from tests.postgres_server import PrivatePostgres, postgres_missing, private_postgres


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres | None]:
    """The module's private PostgreSQL server (None, with the reason shown, where none can
    start)."""
    why = postgres_missing()
    if why:
        yield None
        return
    with private_postgres() as server:
        yield server


def fresh_database(server: PrivatePostgres) -> str:
    """A new empty database on the private server: its URL."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return server.url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def archive(request: Any, tmp_path: Path, postgres: PrivatePostgres | None) -> Iterator[Archive]:
    """Each adapter in turn, empty."""
    made: Archive
    if request.param == "memory":
        made = InMemoryArchive()
    elif request.param == "sqlite":
        made = SqliteArchive(tmp_path / "archive.sqlite3")
    else:
        if postgres is None:
            pytest.skip(f"no PostgreSQL server: {postgres_missing()}")
        made = PostgresArchive(fresh_database(postgres))
    yield made
    made.close()


def gid(n: int) -> str:
    return f"{n:032x}"


def test_a_game_comes_back_exactly_as_it_was_put(archive: Archive) -> None:
    game = archived(gid(1), 1, names=["Ådá", "Bob"])
    # Payload text as stored, whatever its spacing or key order: never re-encoded.
    odd = RawEvent(SCORES, game.count(SCORES) + 1, "GameScored", 1, 5, "x\ty",
                   '{"z": 1,  "a":[2, 3]}')  # fmt: skip
    game = dataclasses.replace(game, events=(*game.events, odd))
    archive.put(game)
    back = archive.read(game.game_id)
    assert back == game
    assert back is not None and canonical(back) == canonical(game)
    assert all_commands(back, SCORES) == all_commands(game, SCORES)
    assert archive.read(gid(2)) is None


def test_the_summary_is_read_back_and_verifies(archive: Archive) -> None:
    game = archived(gid(3), 3)
    assert archive.summary(game.game_id) is None
    archive.put(game)
    expected = Summary.of(game)
    assert archive.summary(game.game_id) == expected
    assert expected.moves == game.count(MOVES) and expected.scores == game.count(SCORES)
    assert verify(archive, expected, game.game_id)
    other = archived(game.game_id, 4)  # same id, another log
    assert not verify(archive, Summary.of(other), game.game_id)


def test_putting_again_replaces_the_copy(archive: Archive) -> None:
    first, second = archived(gid(5), 5), archived(gid(5), 6)
    archive.put(first)
    archive.put(first)  # a rerun after a crash: the same copy again
    assert archive.count() == 1
    archive.put(second)
    assert archive.read(gid(5)) == second
    assert archive.count() == 1


def test_game_ids_are_listed_in_pages(archive: Archive) -> None:
    ids = [gid(n) for n in (9, 7, 8, 10, 11)]
    for n, game_id in enumerate(ids):
        archive.put(archived(game_id, 20 + n))
    assert archive.count() == 5
    pages, after = [], ""
    while page := archive.games(after, limit=2):
        pages.append(page)
        after = page[-1]
    assert pages == [[gid(7), gid(8)], [gid(9), gid(10)], [gid(11)]]


def test_a_log_that_is_not_whole_is_refused(archive: Archive) -> None:
    game = archived(gid(12), 12)
    holed = dataclasses.replace(game, events=game.events[:3] + game.events[4:])
    with pytest.raises(ValueError):
        archive.put(holed)
    assert archive.read(gid(12)) is None


def test_a_damaged_copy_does_not_verify(archive: Archive, tmp_path: Path) -> None:
    game = archived(gid(13), 13)
    archive.put(game)
    expected = Summary.of(game)
    if isinstance(archive, SqliteArchive):
        with sqlite3.connect(archive.path) as db:
            db.execute("UPDATE archived_games SET log = substr(log, 1, 100)")
    elif isinstance(archive, PostgresArchive):
        with psycopg.connect(archive.url, autocommit=True) as db:
            db.execute("UPDATE archived_games SET log = substring(log from 1 for 100)")
    else:
        pytest.skip("nothing stored to damage in memory")
    assert not verify(archive, expected, game.game_id)


def test_the_list_columns_hold_the_players(archive: Archive) -> None:
    game = archived(gid(14), 14, names=["Ada", "ADA ", "Cy"])
    archive.put(game)
    if isinstance(archive, SqliteArchive):
        with sqlite3.connect(archive.path) as db:
            rows = db.execute("SELECT who, created_ms FROM archived_players").fetchall()
            status = db.execute("SELECT status, key_id FROM archived_games").fetchone()
    elif isinstance(archive, PostgresArchive):
        with psycopg.connect(archive.url) as db:
            found = db.execute("SELECT unnest(who), created_ms FROM archived_games").fetchall()
            names = {"n:ada", "n:ada ", "n:cy"} | {f"i:u-14-{i}" for i in range(3)}
            rows = [(w, c) for w in names for k, c in found if k == who_key(w)]
            status = db.execute("SELECT status, key_id FROM archived_games").fetchone()
    else:
        pytest.skip("no list columns in memory")
    whos = {w for w, _ in rows}
    assert whos == {"n:ada", "n:ada ", "n:cy"} | {f"i:u-14-{i}" for i in range(3)}
    assert {c for _, c in rows} == {game.meta.created_ms}
    assert tuple(status) == ("over", "k0")
