"""Reads of archived games fall through to the archive (issue 28's second half), on a real
Redis and a real archive (the SQLite default, and a private PostgreSQL server from
tests/postgres_server.py): every public read answers byte for byte what it answered before
the game was archived, commands get a finished game's 409 `game_over`, an import's
Idempotency-Key still answers its game, the archive down is a 503 with Retry-After, and an
id that is neither in Redis nor archived is a 404 as before. One test runs the query service
under gunicorn."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.errors import GameError
from carcassonne.record import record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from services.archive.archiver import Archiver
from services.command.apikeys import ApiKeys
from services.command.secrets_store import token_hash
from services.redis_store import RedisEventStore
from services.redis_store.keys import archived_key, secrets_key
from services.redis_store.seats import write_both
from services.scoring.scorer import Scorer
from tests.archive_games import play
from tests.integration.http_client import gunicorn
from tests.postgres_server import postgres_missing, private_postgres
from tests.redis_server import private_redis

pytestmark = pytest.mark.integration

TOKEN = "archived-seat-0-token"


@pytest.fixture
def redis_url() -> Iterator[str]:
    with private_redis() as url:
        yield url


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def store(client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(client)


def query_app(redis_url: str, archive_url: str) -> Any:
    from services.query.app import create_app

    return create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url,
                       "SSE_MAX_SECONDS": 5.0, "SSE_HEARTBEAT_SECONDS": 1.0})  # fmt: skip


def command_app(redis_url: str, archive_url: str) -> Any:
    from services.command.app import create_app

    return create_app({"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url, "NOTIFY_MS": 0,
                       "API_KEY_RATE": 0})  # fmt: skip


def finished_game(client: redis.Redis, store: RedisEventStore, seed: int, key_id: str) -> str:
    """A whole game, scored, whose seat 0 plays with `TOKEN` and whose owner is `key_id`."""
    game_id = play(store, seed)
    record = json.loads(client.get(secrets_key(game_id)) or b"{}")
    record["tokens"] = {token_hash(TOKEN): 0}
    record["key_id"] = key_id
    write_both(client, game_id, record)
    return game_id


def archive_all(client: redis.Redis, archive_url: str) -> dict[str, int]:
    from services.archive import open_archive

    archive = open_archive(archive_url)
    try:
        return Archiver(client, archive, after_ms=0).run(int(time.time() * 1000) + 1)
    finally:
        archive.close()


def reads(game_id: str) -> list[str]:
    return [
        f"/games/{game_id}/board",
        f"/games/{game_id}/scores",
        f"/games/{game_id}/board?turn=3",
        f"/games/{game_id}/board?at=5",
        f"/games/{game_id}/scores?at=9",
        f"/games/{game_id}/scores?turn=0",
        f"/games/{game_id}/events",
        f"/games/{game_id}/events?limit=7",
        f"/games/{game_id}/events?after=5-3&limit=11",
        f"/games/{game_id}/events?format=ndjson",
        f"/games/{game_id}/events?format=ndjson&after=12-4",
        f"/games/{game_id}/board.svg",
        f"/games/{game_id}/board.svg?turn=4",
        f"/games/{game_id}/view",
        f"/games/{game_id}/board?turn=9999",  # a 422 names the game's last turn: the same
    ]


def answers(app: Any, paths: list[str]) -> dict[str, tuple[int, str | None, bytes]]:
    out = {}
    with app.test_client() as web:
        for path in paths:
            reply = web.get(path)
            out[path] = (reply.status_code, reply.headers.get("ETag"), reply.data)
    return out


def test_every_read_of_an_archived_game_answers_byte_for_byte_as_before(
    client, store, redis_url, archive_url
) -> None:
    key_id, _ = ApiKeys(client).create("fallthrough")
    game_id = finished_game(client, store, 11, key_id)
    before = answers(query_app(redis_url, archive_url), reads(game_id))
    assert before[f"/games/{game_id}/board"][0] == 200
    assert before[f"/games/{game_id}/events?format=ndjson"][2].count(b"\n") > 100
    record_before = (
        command_app(redis_url, archive_url).test_client().get(f"/games/{game_id}/record")
    )
    assert record_before.status_code == 200

    assert archive_all(client, archive_url) == {"archived": 1}
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]

    app = query_app(redis_url, archive_url)  # nothing of the game cached here
    after = answers(app, reads(game_id))
    for path in reads(game_id):
        assert after[path] == before[path], path
    # Asked again: served from the projector's cache and the kept log (one archive read).
    service = app.extensions["query_service"]
    assert service.store.loads == 1
    assert answers(app, reads(game_id)) == after
    assert service.store.loads == 1
    # /record (the command service's export of the turns) as before.
    record_after = command_app(redis_url, archive_url).test_client().get(f"/games/{game_id}/record")
    assert (record_after.status_code, record_after.data, record_after.headers.get("ETag")) == (
        200, record_before.data, record_before.headers.get("ETag"),
    )  # fmt: skip


def test_commands_on_an_archived_game_answer_as_on_a_finished_game(
    client, store, redis_url, tmp_path
) -> None:
    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, key = ApiKeys(client).create("fallthrough")
    game_id = finished_game(client, store, 12, key_id)
    seat = {"Authorization": f"Bearer {TOKEN}"}
    owner = {"X-Api-Key": key}
    commands: list[tuple[str, str, dict[str, str], Any]] = [
        ("POST", f"/games/{game_id}/turns", seat, {"x": 0, "y": 1, "rotation": 0}),
        ("POST", f"/games/{game_id}/resign", seat, None),
        ("POST", f"/games/{game_id}/undo", seat, None),
        ("POST", f"/games/{game_id}/undo/1/accept", seat, None),
        ("POST", f"/games/{game_id}/players/0/token", owner, None),
        ("GET", f"/games/{game_id}/hint", seat, None),
    ]

    def codes() -> list[tuple[int, str | None]]:
        web = command_app(redis_url, archive_url).test_client()
        out = []
        for method, path, headers, body in commands:
            reply = web.open(path, method=method, headers=headers, json=body)
            out.append((reply.status_code, (reply.get_json() or {}).get("code")))
        return out

    finished = codes()
    # Hot, a hint in a game without hints says so first; archived, every command is over.
    assert finished == [(409, "game_over")] * 5 + [(403, "hints_disabled")]
    assert archive_all(client, archive_url) == {"archived": 1}
    assert codes() == [(409, "game_over")] * len(commands)
    web = command_app(redis_url, archive_url).test_client()
    for path in (f"/games/{game_id}/turn", f"/games/{game_id}/hand"):
        reply = web.get(path, headers=seat)
        assert (reply.status_code, reply.get_json()["code"]) == (409, "game_over"), path
    # Nothing was written back for the archived game: only its tombstone is in Redis.
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]
    # An id neither in Redis nor archived: 404 as before.
    web = command_app(redis_url, archive_url).test_client()
    reply = web.post(f"/games/{'0' * 32}/turns", headers=seat, json={"x": 0, "y": 1,
                                                                     "rotation": 0})  # fmt: skip
    assert (reply.status_code, reply.get_json()["code"]) == (404, "game_not_found")


def test_a_process_that_had_the_game_cached_answers_game_over_once_it_is_archived(
    client, store, redis_url, tmp_path
) -> None:
    """A command process keeps the games it served (its fold cache): once such a game was
    archived, its stream is gone from under the cached state. Every command must still get
    a finished game's 409 `game_over`, as in a process that never saw the game (before: a
    turn 409 `game_not_started`, folded again from an empty stream and kept so; then a
    resign 404 `game_not_found`), and nothing is written back."""
    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, key = ApiKeys(client).create("fallthrough")
    game_id = finished_game(client, store, 15, key_id)
    seat = {"Authorization": f"Bearer {TOKEN}"}
    web = command_app(redis_url, archive_url).test_client()  # one process, before and after
    assert web.get(f"/games/{game_id}/turn", headers=seat).status_code == 200  # now cached
    assert archive_all(client, archive_url) == {"archived": 1}
    commands: list[tuple[str, str, dict[str, str], Any]] = [
        ("POST", f"/games/{game_id}/turns", seat, {"x": 0, "y": 1, "rotation": 0}),
        ("POST", f"/games/{game_id}/resign", seat, None),
        ("GET", f"/games/{game_id}/turn", seat, None),
        ("POST", f"/games/{game_id}/turns", seat, {"x": 0, "y": 1, "rotation": 0}),
        ("POST", f"/games/{game_id}/players/0/token", {"X-Api-Key": key}, None),
    ]
    for method, path, headers, body in commands:
        reply = web.open(path, method=method, headers=headers, json=body)
        assert (reply.status_code, reply.get_json()["code"]) == (409, "game_over"), path
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]


def test_a_command_on_a_state_cached_before_the_games_end_and_archiving_is_game_over(
    client, store, redis_url, tmp_path
) -> None:
    """A process that trusts its cached state (TRUST_CACHE, the default) decides a command on
    it and appends on that state's sequence. When the game was ended elsewhere (the turn
    timer, another process) and archived since, that append meets an archived game's empty
    stream: 409 `game_over` as for any command on an archived game, never a 5xx, nothing
    written."""
    from tests.archive_games import turns

    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    game_id = "f" * 24 + "00000abc"
    played = turns(18)
    names = [f"P{i}" for i in range(len(played[0][0].payload["players"]))]
    write_both(client, game_id, {"seed": "s" * 32, "names": names,
                                 "tokens": {token_hash(TOKEN): 0}})  # fmt: skip
    at = 0
    for i, turn in enumerate(played):
        if i == 5:  # the process caches the game in progress here
            web = command_app(redis_url, archive_url).test_client()
            seat = {"Authorization": f"Bearer {TOKEN}"}
            assert web.get(f"/games/{game_id}/turn", headers=seat).status_code == 200
        store.append(game_id, "moves", turn, expected=at, command_id=f"c{i}", marker="$seq")
        at += len(turn)
    Scorer(store).catch_up(game_id)
    assert archive_all(client, archive_url) == {"archived": 1}
    placed = played[5][0].payload  # seat 0's legal turn on the cached state
    body = {k: placed[k] for k in ("x", "y", "rotation", "meeple")}
    reply = web.post(f"/games/{game_id}/turns", headers=seat, json=body)
    assert (reply.status_code, reply.get_json()["code"]) == (409, "game_over"), reply.data
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]


def test_a_webhook_on_an_archived_game_is_refused_as_over_and_writes_nothing(
    client, store, redis_url, tmp_path
) -> None:
    """`POST /games/{id}/webhooks` on an archived game: 409 `game_over` as every command
    (before: 404 `game_not_found`, an id that names no game); and the registration's script
    itself refuses a game archived after the request's check (its tombstone), so no webhook
    is ever added beside an archived game's tombstone, nor counted in its key's cap."""
    from services.redis_store.keys import key_hooks_key

    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, key = ApiKeys(client).create("fallthrough")
    game_id = finished_game(client, store, 16, key_id)
    app = command_app(redis_url, archive_url)
    web = app.test_client()
    hook = {"url": "https://example.com/hook", "secret": "s" * 20}
    owner = {"X-Api-Key": key}
    assert archive_all(client, archive_url) == {"archived": 1}
    reply = web.post(f"/games/{game_id}/webhooks", headers=owner, json=hook)
    assert (reply.status_code, reply.get_json()["code"]) == (409, "game_over")
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]
    # Archived between the request's check and its script: refused there, nothing kept.
    hooks = app.extensions["integration"].hooks
    with pytest.raises(GameError) as refused:
        hooks._add(game_id, "h_late", {"created_ms": 1})
    assert (refused.value.status, refused.value.code) == (409, "game_over")
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]
    assert not client.exists(key_hooks_key(key_id))


def test_an_unknown_id_is_404_and_an_archive_down_is_503_with_retry_after(
    client, store, redis_url
) -> None:
    why = postgres_missing()
    if why:
        pytest.skip(why)
    with private_postgres() as server:
        key_id, _ = ApiKeys(client).create("fallthrough")
        game_id = finished_game(client, store, 13, key_id)
        board = answers(query_app(redis_url, server.url), [f"/games/{game_id}/board"])
        assert archive_all(client, server.url) == {"archived": 1}
        app = query_app(redis_url, server.url)
        server.stop("immediate")
        with app.test_client() as web:
            for path in [*reads(game_id)[:3], f"/games/{game_id}/events?format=ndjson"]:
                reply = web.get(path)
                assert reply.status_code == 503, (path, reply.data)
                assert reply.get_json()["code"] == "archive_unavailable"
                assert reply.headers["Retry-After"] == "5"
            reply = web.get(f"/games/{'0' * 32}/board")  # neither in Redis nor archived
            assert (reply.status_code, reply.get_json()["code"]) == (404, "game_not_found")
        server.start()
        assert answers(app, [f"/games/{game_id}/board"]) == board


def test_an_import_key_still_answers_its_game_once_archived(client, redis_url, tmp_path) -> None:
    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    _, key = ApiKeys(client).create("importer")
    _, events = random_game(random.Random(5), 2, Ruleset())
    record = {**record_from_events(events).to_dict(), "names": ["Ann", "Bob"]}
    web = command_app(redis_url, archive_url).test_client()
    headers = {"X-Api-Key": key, "Idempotency-Key": "import-once"}
    first = web.post("/games/import", headers=headers, json=record)
    assert first.status_code in (200, 201), first.data
    game_id = first.get_json()["game_id"]
    Scorer(RedisEventStore(client)).catch_up(game_id)
    assert archive_all(client, archive_url) == {"archived": 1}
    again = (
        command_app(redis_url, archive_url)
        .test_client()
        .post("/games/import", headers=headers, json=record)
    )
    assert again.get_json()["game_id"] == game_id
    assert again.get_json()["seq"] == first.get_json()["seq"]
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]
    other = {**record, "names": ["Cy", "Di"]}
    reused = (
        command_app(redis_url, archive_url)
        .test_client()
        .post("/games/import", headers=headers, json=other)
    )
    assert (reused.status_code, reused.get_json()["code"]) == (422, "idempotency_key_reused")


@pytest.mark.parametrize("window", ["archived", "get"])
def test_an_import_retried_while_its_game_is_archived_never_makes_it_again(
    client, redis_url, tmp_path, window
) -> None:
    """An import's retry (same Idempotency-Key, same record) whose game the archiver moves
    while the retry runs — right after the retry looked for the tombstone, or right after it
    read the game's claim — answers the archived game and writes nothing: before, its
    conditional append found an empty stream and made the game again in Redis beside its
    archived copy (a second life: listed, scored and archived twice)."""
    from services.command.imports import import_game
    from services.command.records import read_record, replay_record
    from services.command.secrets_store import RedisSecrets

    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, key = ApiKeys(client).create("importer")
    _, events = random_game(random.Random(6), 2, Ruleset())
    record = {**record_from_events(events).to_dict(), "names": ["Ann", "Bob"]}
    app = command_app(redis_url, archive_url)
    headers = {"X-Api-Key": key, "Idempotency-Key": "import-race"}
    first = app.test_client().post("/games/import", headers=headers, json=record)
    assert first.status_code == 201, first.data
    game_id = first.get_json()["game_id"]
    Scorer(RedisEventStore(client)).catch_up(game_id)

    class Meddling(RedisSecrets):
        """The archiver runs once, right after the call named `window` answered."""

        def archived(self, game_id: str) -> bool:
            found = super().archived(game_id)
            self._archive("archived")
            return found

        def get(self, game_id: str) -> dict[str, Any] | None:
            found = super().get(game_id)
            self._archive("get")
            return found

        def _archive(self, step: str) -> None:
            if step == window and not super().archived(game_id):
                assert archive_all(client, archive_url) == {"archived": 1}

    service = app.extensions["game_service"]
    service.secrets = Meddling(client)
    body = json.dumps(record).encode()
    parsed, extra = read_record(body, "application/json", extra=("names", "public", "rated"))
    done = import_game(service, replay_record(parsed), extra["names"], key_id, "import-race")
    assert (done.game_id, done.seq, done.replayed) == (game_id, first.get_json()["seq"], True)
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]


def test_a_start_racing_the_archiving_of_its_game_starts_nothing(
    client, store, redis_url, tmp_path
) -> None:
    """`start_prepared` (a lobby's or a rematch's start, idempotent) for a game the archiver
    moves right after the start looked for its tombstone: nothing is written and nothing
    raised (before: its claim and first append made the game again in Redis)."""
    from services.command.secrets_store import RedisSecrets
    from services.command.service import secrets_record

    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, _ = ApiKeys(client).create("lobby")
    game_id = finished_game(client, store, 17, key_id)

    class Meddling(RedisSecrets):
        def archived(self, game_id: str) -> bool:
            found = super().archived(game_id)
            if not found:
                assert archive_all(client, archive_url) == {"archived": 1}
            return found

    service = command_app(redis_url, archive_url).extensions["game_service"]
    service.secrets = Meddling(client)
    fresh = secrets_record("ab" * 16, ["Ann", "Bob"], ["t0", "t1"], [None, None], key_id, [])
    _, stored = service.start_prepared(game_id, fresh, Ruleset())
    assert not stored
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]


def test_the_query_service_under_gunicorn_reads_an_archived_game(
    client, store, redis_url, tmp_path
) -> None:
    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, _ = ApiKeys(client).create("fallthrough")
    game_id = finished_game(client, store, 14, key_id)
    env = {"REDIS_URL": redis_url, "ARCHIVE_URL": archive_url}
    # /live of a game scored to its end: its log from the cursor, then `end`, at once.
    paths = [f"/games/{game_id}/events?format=ndjson", f"/games/{game_id}/events",
             f"/games/{game_id}/board", f"/games/{game_id}/scores?turn=5",
             f"/games/{game_id}/live?after=0-0", f"/games/{game_id}/live",
             f"/games/{game_id}/live?after=20-5"]  # fmt: skip
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, workers=1) as base:
        started = time.monotonic()
        before = [fetch(base, p) for p in paths]
        assert time.monotonic() - started < 5
        assert before[4][1].count(b"event: move") > 50
        assert all(b[1].endswith(b'"reason": "game_scored"}\n\n') for b in before[4:])
        assert archive_all(client, archive_url) == {"archived": 1}
        assert [fetch(base, p) for p in paths] == before  # a worker that had it cached
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, workers=1) as base:
        started = time.monotonic()
        assert [fetch(base, p) for p in paths] == before  # a fresh one, from the archive
        assert time.monotonic() - started < 5
        assert fetch(base, f"/games/{'0' * 32}/board")[0] == 404


def fetch(base: str, path: str) -> tuple[int, bytes]:
    import http.client

    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_a_rematch_asked_once_the_game_was_archived_is_made_from_its_copy(
    client, store, redis_url, tmp_path
) -> None:
    """Players of an asynchronous game ask for their rematch when they next open the app,
    often after the game was archived (ARCHIVE_AFTER, an hour by default). The rematch is
    made from the archived copy's record as from the hot game's: the same players, seats
    rotated by one, the owner key alone; asked again, the same game (200, no tokens)."""
    archive_url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
    key_id, key = ApiKeys(client).create("fallthrough")
    _, other = ApiKeys(client).create("another")
    game_id = finished_game(client, store, 13, key_id)
    names = json.loads(client.get(secrets_key(game_id)) or b"{}")["names"]
    assert archive_all(client, archive_url) == {"archived": 1}
    web = command_app(redis_url, archive_url).test_client()
    refused = web.post(f"/games/{game_id}/rematch", headers={"X-Api-Key": other})
    assert (refused.status_code, refused.get_json()["code"]) == (403, "not_game_owner")
    made = web.post(f"/games/{game_id}/rematch", headers={"X-Api-Key": key})
    assert made.status_code == 201, made.get_json()
    body = made.get_json()
    assert body["created"] and body["rematch_of"] == game_id
    assert [p["name"] for p in body["players"]] == names[1:] + names[:1]
    assert all(p["token"] for p in body["players"])
    again = web.post(f"/games/{game_id}/rematch", headers={"X-Api-Key": key})
    assert again.status_code == 200 and again.get_json()["game_id"] == body["game_id"]
    assert not again.get_json()["created"]
    # The archived game stays archived: only its tombstone is in Redis.
    assert client.keys("{g:" + game_id + "}:*") == [archived_key(game_id).encode()]
    turn = web.get(f"/games/{body['game_id']}/turn",
                   headers={"Authorization": f"Bearer {body['players'][0]['token']}"})  # fmt: skip
    assert turn.status_code == 200, turn.get_json()
