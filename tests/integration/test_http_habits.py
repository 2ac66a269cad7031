"""HTTP habits a browser or mobile app relies on, over real gunicorn and a real Redis: the
turn view's ETag and 304, If-Match in the ETag form, ``Allow`` on every 405, and CORS for the
origins in `CORS_ORIGINS` (none by default)."""

from __future__ import annotations

import gzip
import http.client
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from services.common.webapp import cors_origins
from tests import nginx as private_nginx

from .http_client import api_key, gunicorn

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
QUERY = ("services.query.wsgi:app", "deploy/gunicorn/query.py")
APP_ORIGIN = "https://app.example.org"


def request(
    base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One request; (status, headers, raw body)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    try:
        conn.request(method, path, body=data, headers=sent)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def command(redis_url: str) -> Iterator[str]:
    """The command service as deployed by default: no CORS_ORIGINS."""
    with gunicorn(*COMMAND, {"REDIS_URL": redis_url}, workers=2) as base:
        yield base


@pytest.fixture(scope="module")
def command_cors(redis_url: str) -> Iterator[str]:
    origins = f"{APP_ORIGIN}, http://localhost:3000"
    with gunicorn(*COMMAND, {"REDIS_URL": redis_url, "CORS_ORIGINS": origins}, workers=1) as base:
        yield base


@pytest.fixture(scope="module")
def query(redis_url: str) -> Iterator[str]:
    with gunicorn(*QUERY, {"REDIS_URL": redis_url, "CORS_ORIGINS": "*"}, workers=1) as base:
        yield base


def new_game(base: str) -> tuple[str, dict[int, str]]:
    body = {"players": [{"name": "ann"}, {"name": "bob"}], "seat_order": [0, 1]}
    status, _, raw = request(base, "POST", "/games", body, api_key(base))
    assert status == 201, raw
    created = json.loads(raw)
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


def play(base: str, game_id: str, tokens: dict[int, str], if_match: str | None) -> tuple[int, Any]:
    """The first legal placement for whoever's turn it is, with `if_match` if given."""
    status, _, raw = request(base, "GET", f"/games/{game_id}/turn")
    turn = json.loads(raw)
    move = turn["placements"][0]
    headers = {"Authorization": f"Bearer {tokens[turn['player']]}"}
    if if_match is not None:
        headers["If-Match"] = if_match
    body = {"x": move["x"], "y": move["y"], "rotation": move["rotation"], "meeple": None}
    status, _, raw = request(base, "POST", f"/games/{game_id}/turns", body, headers)
    return status, json.loads(raw)


# -- the turn view: ETag and 304 --------------------------------------------------------------


def test_the_turn_view_has_an_etag_and_answers_304_while_it_holds(command: str) -> None:
    game_id, tokens = new_game(command)
    path = f"/games/{game_id}/turn"
    status, headers, raw = request(command, "GET", path)
    assert status == 200
    seq = json.loads(raw)["seq"]
    assert headers["ETag"] == f'"m{seq}"'  # the board's form: usable as If-Match
    assert headers["Cache-Control"] == "no-cache"
    for held in (f'"m{seq}"', f'W/"m{seq}"', f'"x", "m{seq}"', "*"):
        status, headers, raw = request(command, "GET", path, headers={"If-None-Match": held})
        assert (status, raw) == (304, b""), held
        assert headers["ETag"] == f'"m{seq}"'
    status, _ = play(command, game_id, tokens, None)
    assert status == 200
    status, headers, raw = request(command, "GET", path, headers={"If-None-Match": f'"m{seq}"'})
    assert status == 200  # the game moved on: the held view is stale
    fresh = json.loads(raw)["seq"]
    assert fresh > seq and headers["ETag"] == f'"m{fresh}"'


def test_a_304_is_not_given_for_another_game_or_a_missing_one(command: str) -> None:
    first, _ = new_game(command)
    second, _ = new_game(command)
    _, headers, _ = request(command, "GET", f"/games/{first}/turn")
    status, _, _ = request(
        command, "GET", f"/games/{second}/turn", headers={"If-None-Match": headers["ETag"]}
    )
    assert status == 304  # same sequence, same ETag: ETags are per URL, as HTTP says
    status, _, raw = request(
        command, "GET", f"/games/{'0' * 32}/turn", headers={"If-None-Match": headers["ETag"]}
    )
    assert status == 404 and json.loads(raw)["code"] == "game_not_found"


def test_behind_the_proxy_the_turn_is_gzipped_and_its_weak_etag_still_works(
    command: str,
) -> None:
    """nginx (deploy/nginx) compresses JSON and so weakens the ETag (W/"m6"): the weak form
    must still give a 304 and still be taken as If-Match, or an app behind it could not use
    either. No proxy, no compression: see docs/http.md."""
    binary, why = private_nginx.find_nginx()
    if binary is None:
        warnings.warn(f"proxy case skipped: {why}", stacklevel=1)
        pytest.skip(why)
    with private_nginx.nginx({"command": command.removeprefix("http://")}) as public:
        base = public["public"]
        game_id, tokens = new_game(base)
        path = f"/games/{game_id}/turn"
        gz = {"Accept-Encoding": "gzip"}
        for _ in range(20):  # nginx compresses from 1 KiB on: the first turn may be shorter
            status, headers, raw = request(base, "GET", path, headers=gz)
            assert status == 200
            if headers["Content-Encoding"] == "gzip":
                break
            assert play(base, game_id, tokens, None)[0] == 200
        assert headers["Content-Encoding"] == "gzip"
        view = json.loads(gzip.decompress(raw))
        etag = headers["ETag"]
        assert etag == f'W/"m{view["seq"]}"'
        status, _, _ = request(base, "GET", path, headers={**gz, "If-None-Match": etag})
        assert status == 304
        status, result = play(base, game_id, tokens, etag)
        assert status == 200, result


# -- If-Match on POST /turns ---------------------------------------------------------------


def test_if_match_takes_the_etag_the_views_send(command: str) -> None:
    game_id, tokens = new_game(command)
    for form in ('"m{}"', 'W/"m{}"', "{}", '"{}"', "m{}"):
        _, headers, raw = request(command, "GET", f"/games/{game_id}/turn")
        seq = json.loads(raw)["seq"]
        if form == '"m{}"':
            assert headers["ETag"] == form.format(seq)  # exactly what GET /turn sent
        status, result = play(command, game_id, tokens, form.format(seq))
        assert status == 200, (form, result)
        assert result["replayed"] is False
    status, result = play(command, game_id, tokens, "*")  # any current game: no condition
    assert status == 200, result


def test_a_stale_or_malformed_if_match_is_refused(command: str) -> None:
    game_id, tokens = new_game(command)
    _, headers, raw = request(command, "GET", f"/games/{game_id}/turn")
    seq = json.loads(raw)["seq"]
    for stale in (f'"m{seq - 1}"', f'W/"m{seq + 5}"', str(seq - 1)):
        status, error = play(command, game_id, tokens, stale)
        assert (status, error["code"]) == (409, "stale_sequence"), stale
    for bad in ('"s6"', '"m"', "m-1", '"m6.s2"', "soon", '"m²"'):
        status, error = play(command, game_id, tokens, bad)
        assert (status, error["code"]) == (422, "bad_if_match"), bad
        assert '"m6"' in error["message"]
    _, after, _ = request(command, "GET", f"/games/{game_id}/turn")
    assert after["ETag"] == headers["ETag"]  # nothing was appended


# -- 405 with Allow ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("service", "method", "path", "allowed"),
    [
        ("command", "DELETE", "/games/{game}/turn", {"GET"}),
        ("command", "GET", "/games/{game}/turns", {"POST"}),
        ("command", "PUT", "/games", {"POST"}),
        ("command", "POST", "/v1/score", {"POST"}),  # (allowed: checked not to be 405 below)
        ("query", "POST", "/games", {"GET"}),
        ("query", "DELETE", "/games/{game}/board", {"GET"}),
    ],
)
def test_every_405_says_what_is_allowed(
    command: str, query: str, service: str, method: str, path: str, allowed: set
) -> None:
    base = {"command": command, "query": query}[service]
    url = path.format(game="0123456789abcdef0123456789abcdef")
    status, headers, raw = request(base, method, url, body={} if method != "GET" else None)
    if method in allowed:
        assert status != 405
        return
    assert status == 405, raw
    assert json.loads(raw)["code"] == "method_not_allowed"
    listed = {m.strip() for m in headers["Allow"].split(",")}
    assert allowed <= listed and method not in listed, headers["Allow"]


# -- CORS ----------------------------------------------------------------------------------


def test_no_cors_headers_unless_origins_are_configured(command: str) -> None:
    _, headers, _ = request(command, "GET", "/healthz", headers={"Origin": APP_ORIGIN})
    assert "Access-Control-Allow-Origin" not in headers
    _, headers, _ = request(
        command,
        "OPTIONS",
        "/games",
        headers={"Origin": APP_ORIGIN, "Access-Control-Request-Method": "POST"},
    )
    assert "Access-Control-Allow-Origin" not in headers


def test_cors_for_a_configured_origin(command_cors: str) -> None:
    base = command_cors
    game_id, tokens = new_game(base)
    path = f"/games/{game_id}/turns"
    status, headers, _ = request(
        base,
        "OPTIONS",
        path,
        headers={
            "Origin": APP_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, if-match, "
            "idempotency-key",
        },
    )
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == APP_ORIGIN
    assert "POST" in headers["Access-Control-Allow-Methods"]
    asked = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert asked == {"authorization", "content-type", "if-match", "idempotency-key"}
    assert int(headers["Access-Control-Max-Age"]) > 0
    assert "Access-Control-Allow-Credentials" not in headers  # tokens ride in headers
    assert "Origin" in headers["Vary"]

    _, headers, _ = request(base, "GET", f"/games/{game_id}/turn", headers={"Origin": APP_ORIGIN})
    assert headers["Access-Control-Allow-Origin"] == APP_ORIGIN
    exposed = {h.strip().lower() for h in headers["Access-Control-Expose-Headers"].split(",")}
    assert {"etag", "retry-after", "x-request-id"} <= exposed
    # errors carry the headers too, or a browser app could not read them
    status, headers, _ = request(base, "GET", f"/games/{'0' * 32}/turn", {}, {"Origin": APP_ORIGIN})
    assert status == 404 and headers["Access-Control-Allow-Origin"] == APP_ORIGIN
    # an origin not listed gets no CORS headers: the browser refuses the answer
    _, headers, _ = request(
        base, "GET", f"/games/{game_id}/turn", headers={"Origin": "https://x.org"}
    )
    assert "Access-Control-Allow-Origin" not in headers
    assert tokens  # (the game was made through the CORS-enabled service)


def test_cors_any_origin_on_the_query_service(query: str) -> None:
    _, headers, _ = request(query, "GET", "/games", headers={"Origin": "http://localhost:5173"})
    assert headers["Access-Control-Allow-Origin"] == "*"


def test_cors_origins_setting_is_read_strictly() -> None:
    assert cors_origins("") == ""
    assert cors_origins(" * ") == "*"
    assert cors_origins("https://a.example, http://localhost:3000/") == [
        "https://a.example",
        "http://localhost:3000",
    ]
    for bad in ("https://*.example.com", "a.example", "https://a.example/path", "ftp://a"):
        with pytest.raises(SystemExit, match="CORS_ORIGINS"):
            cors_origins(bad)
