"""One contract for every adapter of the archive port (eventstore/archive.py): in memory,
SQLite (the embedded default) and PostgreSQL (a private server: tests/postgres_server.py),
as pyeventsourcing runs one suite per recorder."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from eventstore.archive import (
    Archive,
    ArchivedGame,
    Entry,
    InMemoryArchive,
    ListQuery,
    RawEvent,
    Summary,
    all_commands,
    canonical,
    pack,
    row_of,
    verify,
)
from eventstore.envelope import MOVES, SCORES
from services.archive.postgres import PostgresArchive, toast_chunk
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
            names = {"n:ada", "n:ada ", "n:cy", "k:k0"} | {f"i:u-14-{i}" for i in range(3)}
            rows = [(w, c) for w in names for k, c in found if k == who_key(w)]
            status = db.execute("SELECT status, key_id FROM archived_games").fetchone()
    else:
        pytest.skip("no list columns in memory")
    whos = {w for w, _ in rows}
    assert whos == {"n:ada", "n:ada ", "n:cy", "k:k0"} | {f"i:u-14-{i}" for i in range(3)}
    assert {c for _, c in rows} == {game.meta.created_ms}
    assert tuple(status) == ("over", "k0")


def list_games() -> list[ArchivedGame]:
    """Twelve games for lists: two keys, shared names and player ids, some public, some
    abandoned, creation times with ties (ordered by id then)."""
    out = []
    for n in range(12):
        game = archived(gid(100 + n), 100 + n, names=["Ada", f"P{n % 3}", "Bo"][: 2 + n % 2])
        record = dict(game.meta.record)
        record["key_id"] = "ka" if n % 2 else "kb"
        record["public"] = n % 3 == 0
        record["player_ids"] = ["pid-x" if n % 4 == 0 else f"pid-{n}", None, "pid-y"][
            : len(record["names"])
        ]
        meta = dataclasses.replace(
            game.meta,
            status="abandoned" if n % 5 == 0 else "over",
            created_ms=1_000 + n // 3,  # three games a millisecond
            record=record,
        )
        out.append(dataclasses.replace(game, meta=meta))
    return out


def pages(archive: Archive, **filters: Any) -> list[list[str]]:
    """Every page of a list, 2 games a page, each as game ids."""
    out: list[list[str]] = []
    after: Entry | None = None
    while True:
        found, to = archive.page(ListQuery(after=after, limit=2, **filters))
        assert [e for e, _ in found] == sorted((e for e, _ in found), reverse=True)
        out.append([game["game_id"] for _, game in found])
        if to is None:
            return out
        assert to <= found[-1][0] if found else True
        after = to


LISTS: list[dict[str, Any]] = [
    {},
    {"status": "abandoned"},
    {"status": "over"},
    {"public": True},
    {"public": True, "status": "over"},
    {"key_id": "ka"},
    {"key_id": "kb", "status": "abandoned"},
    {"key_id": "ka", "player": "ada"},
    {"key_id": "kb", "player": "p1"},
    {"key_id": "ka", "player": "nobody"},
    {"key_id": "kb", "player_id": "pid-x"},
    {"key_id": "ka", "player_id": "pid-x"},
    {"key_id": "ka", "player_id": "pid-y", "status": "over"},
    {"player_id": "pid-y"},
    {"player": "P2"},
]


@pytest.mark.parametrize("filters", LISTS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_lists_page_newest_first_with_the_directorys_filters(
    archive: Archive, filters: dict[str, Any]
) -> None:
    games = list_games()
    archive.put_many(games[:5])
    for game in games[5:]:
        archive.put(game)
    query = ListQuery(**filters)
    expected = sorted(
        (
            (g.meta.created_ms, g.game_id)
            for g in games
            if query.admits(
                (g.meta.created_ms, g.game_id),
                g.meta.status,
                g.meta.key_id,
                g.meta.record.get("public") is True,
                (g.meta.names, g.meta.record["player_ids"]),
            )
        ),
        reverse=True,
    )
    # Empty: nobody of that name; pid-x only in the other key's games (a key's own players).
    assert bool(expected) != (
        filters.get("player") == "nobody"
        or (filters.get("player_id") == "pid-x" and filters["key_id"] == "ka")
    )
    got = pages(archive, **filters)
    assert [g for page in got for g in page] == [g for _, g in expected]
    assert all(len(page) <= 2 for page in got)


def test_a_listed_game_shows_what_the_directory_shows(archive: Archive) -> None:
    games = list_games()
    archive.put_many(games)
    found, _ = archive.page(ListQuery(key_id="kb", limit=100))
    by_id = {g.game_id: g for g in games}
    assert len(found) == 6
    for (created, game_id), row in found:
        game = by_id[game_id]
        assert created == game.meta.created_ms
        assert row == row_of(game)
        assert set(row) == {"game_id", "status", "players", "player_ids", "seq", "updated_ms",
                            "scores"}  # fmt: skip
        assert row["seq"] == game.count(MOVES) and row["scores"] is not None
        assert row["player_ids"] == game.meta.record["player_ids"]


def test_a_sqlite_file_from_before_lists_gets_its_list_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    first = SqliteArchive(path)
    games = list_games()[:4]
    first.put_many(games)
    first.close()
    with sqlite3.connect(path) as db:  # as a file made before the list columns
        db.execute("UPDATE archived_games SET totals = NULL, seats = NULL, public = 0")
        db.execute("DELETE FROM archived_players WHERE who LIKE 'k:%'")
    again = SqliteArchive(path)
    try:
        found, _ = again.page(ListQuery(key_id="kb", limit=10))
        assert [row for _, row in found] == [
            row_of(g) for g in reversed(games) if g.meta.key_id == "kb"
        ]
        public, _ = again.page(ListQuery(public=True, limit=10))
        assert [r["game_id"] for _, r in public] == [games[3].game_id, games[0].game_id]
    finally:
        again.close()


def test_postgres_keeps_whole_toast_chunks_out_of_line_and_the_rest_in_the_row(
    postgres: PrivatePostgres | None,
) -> None:
    """A copy is stored as (head, log): `log` whole TOAST chunks (4 to a page, none part
    empty), `head` the rest, in the row; a copy shorter than a chunk all in the row; a row
    stored before the split (all in `log`) reads back as it was."""
    if postgres is None:
        pytest.skip(f"no PostgreSQL server: {postgres_missing()}")
    archive = PostgresArchive(fresh_database(postgres))
    try:
        chunk = toast_chunk(8192)
        assert chunk == 1996  # TOAST_MAX_CHUNK_SIZE of 8 KB pages
        long, short = archived(gid(30), 30), archived(gid(31), 31)
        short = dataclasses.replace(short, events=short.events[:3])
        archive.put_many([long, short])
        with psycopg.connect(archive.url) as db:
            rows = {
                r[0]: (len(r[1]), len(r[2]))
                for r in db.execute("SELECT game_id, head, log FROM archived_games")
            }
            for game in (long, short):
                head, tail = rows[game.game_id]
                assert head == len(pack(game)) % chunk and tail % chunk == 0
            assert rows[long.game_id][1] > 0 and rows[short.game_id][1] == 0
            toast: Any = db.execute(
                "SELECT reltoastrelid::regclass FROM pg_class WHERE relname = 'archived_games'"
            ).fetchone()
            chunks = db.execute(f"SELECT length(chunk_data) FROM {toast[0]}").fetchall()
            assert sorted(chunks) == [(chunk,)] * (rows[long.game_id][1] // chunk)
            db.execute(
                "UPDATE archived_games SET log = head || log, head = '' WHERE game_id = %s",
                (long.game_id,),
            )
        assert archive.read(long.game_id) == long and archive.read(short.game_id) == short
        assert archive.summaries([long.game_id, short.game_id]) == {
            g.game_id: Summary.of(g) for g in (long, short)
        }
    finally:
        archive.close()


def test_a_format_1_copy_stored_before_format_2_reads_back(archive: Archive) -> None:
    """A row whose copy an archiver packed before format 2 (zlib, no prefix byte; from
    tests/unit/archive_format1_copies.json) reads back as its game and verifies against the
    digest it was verified with then; the game's format 2 digest differs (a copy of a game
    still in Redis is made again), and the new copy verifies."""
    import base64
    import json

    from tests.unit.test_archive_format import _commanded

    stored = Path(__file__).parents[1] / "unit" / "archive_format1_copies.json"
    item = json.loads(stored.read_text())["copies"][0]
    old, game = base64.b64decode(item["copy"]), _commanded(item["seed"])
    archive.put(game)
    if isinstance(archive, SqliteArchive):
        with sqlite3.connect(archive.path) as db:
            db.execute("UPDATE archived_games SET log = ?", (old,))
    elif isinstance(archive, PostgresArchive):
        with psycopg.connect(archive.url, autocommit=True) as db:
            db.execute("UPDATE archived_games SET head = '', log = %s", (old,))
    else:
        assert isinstance(archive, InMemoryArchive)
        archive._blobs[game.game_id] = old
    assert archive.read(game.game_id) == game
    held = archive.summary(game.game_id)
    assert held is not None and held.digest.hex() == item["digest"]
    assert not verify(archive, Summary.of(game), game.game_id)
    archive.put(game)
    assert verify(archive, Summary.of(game), game.game_id)


def test_two_archivers_storing_the_same_games_in_other_orders_never_deadlock(
    postgres: PrivatePostgres | None,
) -> None:
    """Two archivers whose batches overlap (a rerun beside a run, two workers' ticks) upsert
    the same rows in one transaction each. Taken in each batch's own order, one locks a row
    the other holds while holding one the other waits for, and PostgreSQL fails one batch
    as a deadlock (its games wait for a later run). In the rows' key order, one waits and
    both commit."""
    if postgres is None:
        pytest.skip(f"no PostgreSQL server: {postgres_missing()}")
    url = fresh_database(postgres)
    games = [archived(gid(100 + n), n % 5) for n in range(60)]
    archives = [PostgresArchive(url), PostgresArchive(url)]
    try:
        archives[0].put_many(games)  # every row there: each upsert locks it
        start = threading.Barrier(2)
        failed: list[BaseException] = []

        def store(archive: PostgresArchive, order: list[ArchivedGame]) -> None:
            for _ in range(4):
                start.wait(timeout=30)
                try:
                    archive.put_many(order)
                except Exception as e:  # a deadlock retried and lost again: ArchiveUnavailable
                    failed.append(e)

        runs = [threading.Thread(target=store, args=(archives[0], games)),
                threading.Thread(target=store, args=(archives[1], games[::-1]))]  # fmt: skip
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
        assert not any(run.is_alive() for run in runs)
        assert failed == []
        with psycopg.connect(url) as db:  # one retried on a new connection shows here
            found: Any = db.execute(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
        assert found[0] == 0
        assert archives[1].summaries([g.game_id for g in games]) == {
            g.game_id: Summary.of(g) for g in games
        }
    finally:
        for archive in archives:
            archive.close()
