"""Hostile request bodies against the command service on a real Redis (issue 13, findings 5
and 6): every JSON route answers the documented 4xx in the one error shape and writes nothing.

Every route and case through Flask's test client (the app on a real Redis), a few over real
HTTP through gunicorn (the deploy config), and the truncated body over a raw socket: a complete
JSON turn sent with a Content-Length 40 bytes larger, then the client stops sending. Before
services/common/body.py the turn was applied (gunicorn ends a short body without an error).
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from carcassonne.notation import format_record
from eventstore.envelope import MOVES
from services.command.apikeys import ApiKeys
from services.command.app import create_app
from services.redis_store import game_keys
from tests.integration.openapi_client import PROBLEM_KEYS

from .http_client import api_key, gunicorn

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
SETTINGS = {"NOTIFY_MS": 0, "WEBHOOK_ALLOW_PRIVATE": True, "API_KEY_RATE": 10_000.0,
            "API_KEY_BURST": 10_000}  # fmt: skip
ROUTES = ("games", "turns", "score", "import", "webhooks")
RECORD_ROUTES = ("score", "import")


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


# (case, body, Content-Type or None, status, code), the same for every route unless the
# route's override below says otherwise.
CASES: list[tuple[str, bytes, str | None, int, str]] = [
    ("arrays 1,000 deep", deep(1_000), "application/json", 400, "json_too_deep"),
    ("objects 1,000 deep", b'{"a":' * 1_000 + b"1" + b"}" * 1_000, "application/json", 400,
     "json_too_deep"),
    ("arrays 100,000 deep", deep(100_000), "application/json", 400, "json_too_deep"),
    ("deep inside a field", b'{"players":' + deep(1_000) + b"}", "application/json", 400,
     "json_too_deep"),
    ("integer of 4,301 digits", b'{"players":' + b"9" * 4_301 + b"}", "application/json", 400,
     "invalid_json"),
    ("NaN", b'{"players":NaN}', "application/json", 400, "invalid_json"),
    ("-Infinity", b"[-Infinity]", "application/json", 400, "invalid_json"),
    ("duplicate key", b'{"players":2,"players":3}', "application/json", 400, "invalid_json"),
    ("lone surrogate", b'{"players":"\\udc00"}', "application/json", 400, "invalid_json"),
    ("not UTF-8", b'{"players":"\xff"}', "application/json", 400, "invalid_json"),
    ("empty body", b"", "application/json", 400, "invalid_json"),
    ("not JSON", b"{players: 2}", "application/json", 400, "invalid_json"),
    ("null", b"null", "application/json", 422, "invalid_body"),
    ("1", b"1", "application/json", 422, "invalid_body"),
    ("true", b"true", "application/json", 422, "invalid_body"),
    ('"x"', b'"x"', "application/json", 422, "invalid_body"),
    ("no Content-Type", b'{"players": 2}', None, 415, "unsupported_media_type"),
    ("form Content-Type", b"players=2", "application/x-www-form-urlencoded", 415,
     "unsupported_media_type"),
    ("text/html", b"<p>", "text/html", 415, "unsupported_media_type"),
]  # fmt: skip
OVERRIDES: dict[tuple[str, str], tuple[int, str]] = {
    # 200 KB: beyond the 16 KiB of a command body, within the 256 KiB of a record
    **{("arrays 100,000 deep", r): (413, "body_too_large") for r in ("games", "turns", "webhooks")},
    # a record that is not a JSON object is a malformed record, like any other
    **{(s, r): (422, "bad_record") for s in ("null", "1", "true", '"x"') for r in RECORD_ROUTES},
}


@pytest.fixture(scope="module")
def app(redis_url: str) -> Flask:
    return create_app({"REDIS_URL": redis_url, **SETTINGS})


@pytest.fixture(scope="module")
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture(scope="module")
def key(redis_url: str) -> str:
    return ApiKeys(redis.Redis.from_url(redis_url)).create("hostile")[1]


@pytest.fixture(scope="module")
def game(client: FlaskClient, key: str) -> tuple[str, dict[str, str]]:
    """A game and the headers of the player to move."""
    created = client.post("/games", json={"players": [{"name": "a"}, {"name": "b"}],
                                          "seat_order": [0, 1]},
                          headers={"X-Api-Key": key})  # fmt: skip
    body = created.get_json()
    return body["game_id"], {"Authorization": f"Bearer {body['players'][0]['token']}"}


def target(route: str, game: tuple[str, dict[str, str]], key: str) -> tuple[str, dict[str, str]]:
    game_id, auth = game
    return {
        "games": ("/games", {"X-Api-Key": key}),
        "turns": (f"/games/{game_id}/turns", auth),
        "score": ("/v1/score", {"X-Api-Key": key}),
        "import": ("/games/import", {"X-Api-Key": key}),
        "webhooks": (f"/games/{game_id}/webhooks", {"X-Api-Key": key}),
    }[route]


def key_snapshot(client: redis.Redis) -> set[bytes]:
    """Every key that lasts (no time to live): a refused request must create none."""
    keys = list(client.scan_iter(count=1000))
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.pttl(k)
    return {k for k, ttl in zip(keys, pipe.execute(), strict=True) if ttl == -1}


def moves(client: redis.Redis, game_id: str) -> list[Any]:
    return list(client.xrange(game_keys(game_id, MOVES)[0]) or [])


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("case", "body", "content_type", "status", "code"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_every_hostile_body_gets_its_4xx_and_writes_nothing(
    client, redis_client, game, key, route, case, body, content_type, status, code
) -> None:
    status, code = OVERRIDES.get((case, route), (status, code))
    path, headers = target(route, game, key)
    before, stream = key_snapshot(redis_client), moves(redis_client, game[0])
    reply = client.post(path, data=body, headers=headers, content_type=content_type)
    error = reply.get_json()
    assert (reply.status_code, error["code"]) == (status, code), error
    assert set(error) == PROBLEM_KEYS
    if status == 415:  # the message says what to send
        assert "application/json" in error["message"], error
    assert key_snapshot(redis_client) <= before
    assert moves(redis_client, game[0]) == stream


@pytest.mark.parametrize("route", RECORD_ROUTES)
def test_a_lone_surrogate_in_a_notation_header_is_422_and_stores_nothing(
    client, redis_client, game, key, route
) -> None:
    """A notation record's header lists are JSON: `names=["\\ud800x","b"]` decodes to a
    name UTF-8 cannot encode (JSON bodies refuse such text: 400 invalid_json). Before, an
    import of it was stored (201), and the games directory's consumer of the change feed
    then failed on that game's entry at every try (UnicodeEncodeError writing the name's
    index): the shard's lists stopped moving on, and with them the archiver, whose every
    run catches the directory up first."""
    from carcassonne.record import record_from_events
    from carcassonne.ruleset import Ruleset
    from carcassonne.simulate import random_game
    from services.redis_store.directory_index import DirectoryIndex

    _, events = random_game(__import__("random").Random(3), 2, Ruleset())
    text = format_record(record_from_events(events, ["x", "b"]))
    text = text.replace('names=["x","b"]', 'names=["\\ud800x","b"]')
    path, headers = target(route, game, key)
    before = key_snapshot(redis_client)
    reply = client.post(path, data=text.encode(), headers=headers, content_type="text/plain")
    assert (reply.status_code, reply.get_json()["code"]) == (422, "bad_notation"), reply.data
    assert key_snapshot(redis_client) <= before
    DirectoryIndex(redis_client).catch_up()  # the directory's consumer still moves on


def test_a_meeple_nested_deep_is_400_and_the_same_turn_then_plays(client, game) -> None:
    game_id, auth = game
    turn = client.get(f"/games/{game_id}/turn").get_json()
    spot = turn["placements"][0]
    body = json.dumps({"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"]}).encode()
    for meeple in (deep(1_000), b'{"feature":' * 1_000 + b"1" + b"}" * 1_000):
        hostile = body[:-1] + b',"meeple":' + meeple + b"}"
        reply = client.post(f"/games/{game_id}/turns", data=hostile, headers=auth,
                            content_type="application/json")  # fmt: skip
        assert (reply.status_code, reply.get_json()["code"]) == (400, "json_too_deep")
    typed = client.post(f"/games/{game_id}/turns", data=body, headers=auth)  # no Content-Type
    error = typed.get_json()
    assert (typed.status_code, error["code"]) == (415, "unsupported_media_type")
    assert "application/json" in error["message"] and "no Content-Type" in error["message"]
    played = client.post(f"/games/{game_id}/turns", data=body, headers=auth,
                         content_type="application/json; charset=utf-8")  # fmt: skip
    assert played.status_code == 200, played.get_json()


def test_a_record_may_still_come_as_notation_or_as_json(client, key) -> None:
    notation = b"carcassonne-record/1 base players=2\nQ1@0,-1\n"
    for content_type in ("text/plain", "text/plain; charset=utf-8", "text/x-carcassonne-record"):
        reply = client.post("/v1/score", data=notation, content_type=content_type,
                            headers={"X-Api-Key": key})  # fmt: skip
        assert reply.status_code == 200, reply.get_json()
    reply = client.post("/v1/score", data=notation, headers={"X-Api-Key": key})
    error = reply.get_json()
    assert (reply.status_code, error["code"]) == (415, "unsupported_media_type")
    assert "application/json or text/plain" in error["message"]


# -- over real HTTP (gunicorn, the deploy config) ----------------------------------------------
@pytest.fixture(scope="module")
def server(redis_url: str) -> Iterator[str]:
    env = {"REDIS_URL": redis_url, **{k: str(v) for k, v in SETTINGS.items()}}
    with gunicorn(*COMMAND, env, workers=2) as base:
        yield base


def send(base: str, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    """POST exactly these bytes and headers (no Content-Type added)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=raw, headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def new_game(base: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A game over HTTP: its id, the first player's headers, and a legal turn body."""
    body = json.dumps({"players": [{"name": "a"}, {"name": "b"}], "seat_order": [0, 1]})
    headers = {"Content-Type": "application/json", **api_key(base)}
    status, created = send(base, "/games", body.encode(), headers)
    assert status == 201, created
    spot = created["turn"]["placements"][0]
    turn = {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"], "meeple": None}
    token = created["players"][created["turn"]["player"]]["token"]
    return created["game_id"], {"Authorization": f"Bearer {token}"}, turn


def test_hostile_bodies_over_http(server, redis_client, key) -> None:
    game_id, auth, turn = new_game(server)
    json_type = {"Content-Type": "application/json"}
    api = {"X-Api-Key": key, **json_type}
    legal = json.dumps(turn).encode()
    cases = [
        ("/games", deep(1_000), json_type, 400, "json_too_deep"),
        (f"/games/{game_id}/turns", deep(1_000), {**auth, **json_type}, 400, "json_too_deep"),
        (f"/games/{game_id}/turns", legal[:-1] + b',"meeple":' + deep(1_000) + b"}",
         {**auth, **json_type}, 400, "json_too_deep"),
        (f"/games/{game_id}/turns", b'{"x":' + b"1" * 4_301 + b',"y":0,"rotation":0}',
         {**auth, **json_type}, 400, "invalid_json"),
        (f"/games/{game_id}/turns", legal, auth, 415, "unsupported_media_type"),
        ("/v1/score", b"null", api, 422, "bad_record"),
        ("/games/import", b"1", api, 422, "bad_record"),
        ("/games/import", b"true", api, 422, "bad_record"),
        ("/games/import", deep(100_000), api, 400, "json_too_deep"),
        (f"/games/{game_id}/webhooks", deep(1_000), api, 400, "json_too_deep"),
    ]  # fmt: skip
    before = key_snapshot(redis_client)
    for path, raw, headers, status, code in cases:
        got, error = send(server, path, raw, headers)
        assert (got, error["code"]) == (status, code), (path, raw[:40], error)
    assert key_snapshot(redis_client) <= before
    assert len(moves(redis_client, game_id)) == 2  # GameStarted, TileDrawn: nothing played
    assert send(server, f"/games/{game_id}/turns", legal, {**auth, **json_type})[0] == 200


# -- a body shorter than its Content-Length is never executed (finding 6) -----------------------
def raw_request(base: str, head: str, body: bytes, read: bool) -> bytes:
    """Send `head` and `body`, then stop sending (shutdown SHUT_WR); with `read`, the reply
    (until the server closes), else close at once."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        if not read:
            return b""
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        return reply


def head(path: str, length: int | None, **headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return "\r\n".join(lines) + "\r\n"


def status_and_error(reply: bytes) -> tuple[int, dict[str, Any]]:
    status_line, _, rest = reply.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def test_a_turn_shorter_than_its_content_length_is_refused_and_appends_nothing(
    server, redis_client
) -> None:
    game_id, auth, turn = new_game(server)
    body = json.dumps(turn).encode()  # complete JSON: it would parse
    path = f"/games/{game_id}/turns"
    before = moves(redis_client, game_id)
    reply = raw_request(server, head(path, len(body) + 40, **auth), body, read=True)
    status, error = status_and_error(reply)
    assert (status, error["code"]) == (400, "incomplete_body"), error
    assert error["details"] == {"content_length": len(body) + 40, "received": len(body)}
    assert moves(redis_client, game_id) == before
    # Chunked, broken off inside a chunk: the same.
    chunked = head(path, None, Transfer_Encoding="chunked", **auth)
    reply = raw_request(server, chunked, f"{len(body) + 40:x}\r\n".encode() + body, read=True)
    assert status_and_error(reply)[1]["code"] == "incomplete_body"
    assert moves(redis_client, game_id) == before
    # The body itself was a legal turn: sent whole, it plays.
    assert send(server, path, body, {**auth, "Content-Type": "application/json"})[0] == 200


def test_a_client_that_closes_before_the_end_of_its_body_plays_nothing(redis_url, redis_client):
    """The finding as measured: send, close, never read. One sync worker, so once a later
    request on the same server has answered, the closed one was handled before it."""
    env = {"REDIS_URL": redis_url, **{k: str(v) for k, v in SETTINGS.items()}}
    with gunicorn(*COMMAND, env, workers=1) as base:
        game_id, auth, turn = new_game(base)
        body = json.dumps(turn).encode()
        path = f"/games/{game_id}/turns"
        before = moves(redis_client, game_id)
        for _ in range(5):
            raw_request(base, head(path, len(body) + 40, **auth), body, read=False)
        host, port = base.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", f"/games/{game_id}/turn")
        view = json.loads(conn.getresponse().read())
        conn.close()
        assert view["seq"] == len(before) and moves(redis_client, game_id) == before
        assert send(base, path, body, {**auth, "Content-Type": "application/json"})[0] == 200


def test_a_record_shorter_than_its_content_length_stores_no_game(server, redis_client, key):
    record = {"format": "carcassonne-record/1", "players": 2,
              "turns": [{"tile": "Q", "x": 0, "y": -1, "rotation": 1, "meeple": None}]}  # fmt: skip
    body = json.dumps(record).encode()
    before = key_snapshot(redis_client)
    reply = raw_request(server, head("/games/import", len(body) + 40, X_Api_Key=key), body, True)
    assert status_and_error(reply)[1]["code"] == "incomplete_body"
    assert key_snapshot(redis_client) <= before
    status, created = send(server, "/games/import", body,
                           {"X-Api-Key": key, "Content-Type": "application/json"})  # fmt: skip
    assert status == 201, created
