"""`GET /games` lists archived games with hot ones (issue 28: lists include archived games),
on a real Redis and a real archive (the SQLite default, and a private PostgreSQL server from
tests/postgres_server.py): games created, some moved by the real archiver, two of them put
back (then in both places: listed once), more created after; every list (an API key's,
by player name, by player id, public, by status) shows each of its games once, newest
first, across small pages, each row as the directory showed it before archiving."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from services.archive import open_archive
from services.archive.archiver import Archiver
from services.redis_store import RedisEventStore
from services.redis_store.apikeys import ApiKeys
from services.redis_store.keys import archive_used_key, archived_key, secrets_key
from services.redis_store.seats import write_both
from tests.archive_games import play
from tests.redis_server import private_redis

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_url() -> Iterator[str]:
    with private_redis() as url:
        yield url


def make_game(client: redis.Redis, store: RedisEventStore, seed: int, key_id: str,
              public: bool, names: list[str], pid: str) -> dict[str, Any]:  # fmt: skip
    """A whole scored game owned by `key_id`; its seat 0's player id `pid`."""
    game_id = play(store, seed, names=names)
    record = json.loads(client.get(secrets_key(game_id)) or b"{}")
    record.update(key_id=key_id, public=public)
    record["player_ids"][0] = pid
    write_both(client, game_id, record)
    time.sleep(0.002)  # creation times apart, mostly (ties are ordered by id)
    return {"id": game_id, "key": key_id, "public": public, "names": names, "pid": pid}


def walk(web: Any, query: str, headers: dict[str, str], limit: int) -> list[dict[str, Any]]:
    """Every page of a list, `limit` games a page."""
    out: list[dict[str, Any]] = []
    cursor = ""
    for _ in range(100):
        reply = web.get(f"/games?limit={limit}{query}{cursor}", headers=headers)
        assert reply.status_code == 200, reply.data
        body = reply.get_json()
        assert len(body["games"]) <= limit
        out += body["games"]
        if body["next"] is None:
            return out
        cursor = "&cursor=" + body["next"]
    raise AssertionError("the list never ended")


def test_lists_show_hot_and_archived_games_once_newest_first(redis_url, archive_url) -> None:
    from services.query.app import create_app

    client = redis.Redis.from_url(redis_url)
    store = RedisEventStore(client)
    keys = ApiKeys(client)
    key_a, secret_a = keys.create("lists a")
    key_b, secret_b = keys.create("lists b")
    games = []
    for seed in range(1, 8):  # archived later (two of them put back)
        key = key_a if seed % 3 else key_b
        names = ["Ann", f"Bo{seed}"] if seed % 2 else [f"Cy{seed}", "ann", "Di"]
        games.append(make_game(client, store, seed, key, seed % 2 == 1, names, f"p{seed % 2}"))
    app = create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url})
    web = app.test_client()
    headers: dict[str | None, dict[str, str]] = {
        key_a: {"X-Api-Key": secret_a},
        key_b: {"X-Api-Key": secret_b},
        None: {},
    }
    before = {g["game_id"]: g for g in walk(web, "", headers[key_a], 100)}
    before |= {g["game_id"]: g for g in walk(web, "", headers[key_b], 100)}
    assert len(before) == 7

    archive = open_archive(archive_url)
    archiver = Archiver(client, archive, after_ms=0)
    try:
        archiver.run(int(time.time() * 1000) + 1)
        assert all(client.exists(archived_key(g["id"])) for g in games)
        for g in games[2:4]:  # back in Redis, still in the archive: in both places
            archiver.restore(g["id"], schedule=False)
        assert archive.count() == 7
    finally:
        archive.close()
    for seed in range(8, 13):  # never archived
        key = key_a if seed % 3 else key_b
        names = ["Ann", f"Bo{seed}"] if seed % 2 else [f"Cy{seed}", "ann", "Di"]
        games.append(make_game(client, store, seed, key, seed % 2 == 1, names, f"p{seed % 2}"))

    web = create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url}).test_client()
    everything = walk(web, "", headers[key_a], 100) + walk(web, "", headers[key_b], 100)
    rows = {g["game_id"]: g for g in everything}
    assert len(everything) == len(rows) == 12
    for game_id, row in before.items():  # archived: the row the directory showed before
        assert rows[game_id] == row

    lists: list[tuple[str | None, str, Any]] = [
        (key_a, "", lambda g: g["key"] == key_a),
        (key_b, "", lambda g: g["key"] == key_b),
        (key_a, "&player=ANN", lambda g: g["key"] == key_a),
        (key_b, "&player=bo7", lambda g: g["key"] == key_b and "Bo7" in g["names"]),
        (key_a, "&player=Cy4", lambda g: g["key"] == key_a and "Cy4" in g["names"]),
        (key_a, "&player_id=p1", lambda g: g["key"] == key_a and g["pid"] == "p1"),
        (key_b, "&player_id=p0", lambda g: g["key"] == key_b and g["pid"] == "p0"),
        (key_a, "&status=over", lambda g: g["key"] == key_a),
        (key_a, "&status=abandoned", lambda g: False),
        (key_b, "&status=in_progress", lambda g: False),
        (None, "", lambda g: g["public"]),
        (None, "&status=over", lambda g: g["public"]),
    ]
    for whose, query, wanted in lists:
        expected = [g["id"] for g in reversed(games) if wanted(g)]  # newest first
        for limit in (1, 2, 5):
            listed = walk(web, query, headers[whose], limit)
            ids = [g["game_id"] for g in listed]
            assert ids == expected, (whose, query, limit)
            assert all(row == rows[row["game_id"]] for row in listed)


def test_lists_read_the_archive_only_once_a_game_was_archived_and_503_when_it_is_down(
    redis_url: str, tmp_path: Path
) -> None:
    from services.query.app import create_app

    client = redis.Redis.from_url(redis_url)
    store = RedisEventStore(client)
    make_game(client, store, 1, "k_none", True, ["Ann", "Bo"], "p1")
    (tmp_path / "file").write_text("not a directory")
    broken = f"sqlite:///{tmp_path / 'file' / 'archive.sqlite3'}"  # cannot be opened
    web = create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": broken}).test_client()
    reply = web.get("/games")  # nothing archived yet: the archive is not read
    assert reply.status_code == 200 and len(reply.get_json()["games"]) == 1
    client.set(archive_used_key(), 1)  # as the archiver does before its first copy
    reply = web.get("/games")
    assert reply.status_code == 503, reply.data
    assert reply.get_json()["code"] == "archive_unavailable"
    assert reply.get_json()["message"].startswith("lists include archived games")
    assert reply.headers.get("Retry-After")


@pytest.mark.parametrize("ms", ["99999999999999999999", "9223372036854775808", "-1", "+5", "1_0"])
def test_a_made_up_cursor_is_a_422_bad_cursor_when_lists_read_the_archive(
    redis_url: str, archive_url: str, ms: str
) -> None:
    """A cursor is opaque, but a client can make one: a creation time larger than 64 bits
    reached the archive's query (SQLite: OverflowError, a 500); any time `encode_cursor`
    could not have written is refused before a store is asked."""
    from services.query.app import create_app
    from services.query.directory import encode_cursor

    client = redis.Redis.from_url(redis_url)
    make_game(client, RedisEventStore(client), 1, "k_none", True, ["Ann", "Bo"], "p1")
    client.set(archive_used_key(), 1)  # lists read the archive too
    web = create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url}).test_client()
    made_up = base64.urlsafe_b64encode(f"v2:{ms}:{'a' * 32}".encode()).decode()
    reply = web.get(f"/games?cursor={made_up}")
    assert reply.status_code == 422, reply.data
    assert reply.get_json()["code"] == "bad_cursor"
    first = web.get("/games?limit=1").get_json()  # a cursor the list gave still works
    assert first["games"] and first["next"] is None
    reply = web.get(f"/games?cursor={encode_cursor((1_790_000_000_000, 'f' * 32))}")
    assert reply.status_code == 200, reply.data


@pytest.mark.parametrize("game_id", ["a\x00b", "a\nb", "", "a" * 129])
def test_a_cursor_naming_no_possible_game_is_a_422_bad_cursor_when_lists_read_the_archive(
    redis_url: str, archive_url: str, game_id: str
) -> None:
    """The cursor's game id reached the archive's query too: PostgreSQL refuses a NUL in a
    text parameter, which read as the archive being down (503 `archive_unavailable`, its
    connection let go). A game id `encode_cursor` could not have written is refused first."""
    from services.query.app import create_app

    client = redis.Redis.from_url(redis_url)
    make_game(client, RedisEventStore(client), 1, "k_none", True, ["Ann", "Bo"], "p1")
    client.set(archive_used_key(), 1)
    web = create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url}).test_client()
    made_up = base64.urlsafe_b64encode(f"v2:1790000000000:{game_id}".encode()).decode()
    reply = web.get("/games", query_string={"cursor": made_up})
    assert reply.status_code == 422, reply.data
    assert reply.get_json()["code"] == "bad_cursor"
