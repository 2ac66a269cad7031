"""Board pictures served by the query service under real gunicorn on a real Redis:
`/games/{id}/board.svg` for a whole 72-tile game is the golden picture byte for byte (the same
as `carcassonne show --svg`), with its ETag and 304, `?turn=`, `?open=1`, and a clear 4xx
for every bad request. Each answer is checked against docs/openapi.json."""

from __future__ import annotations

import http.client
import json
import uuid
import xml.etree.ElementTree as ET
from typing import Any, NamedTuple

import pytest
import redis

from carcassonne.events import Event
from carcassonne.game import fold
from carcassonne.record import load_record, record_events
from carcassonne.svg import board_svg
from services.redis_store import RedisEventStore
from services.scoring.scorer import Scorer
from tests.integration import http_client
from tests.integration.http_client import ROOT
from tests.integration.openapi_client import PROBLEM_KEYS
from tests.stack import Stack
from tests.unit.test_query_games import store_game

GOLDEN = ROOT / "tests" / "golden"
FULL_GAME = "regression_base_3p_seed2024"  # a whole base game: 72 tiles
SVG = "image/svg+xml"


def golden_events(name: str) -> list[Event]:
    data = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    record = {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}
    return record_events(load_record(record))


class Reply(NamedTuple):
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    def getheader(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def fetch(base: str, path: str, headers: dict[str, str] | None = None) -> Reply:
    """One GET over a socket (checked against the document)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if http_client.VALIDATE:
        from tests.integration.openapi_client import check_raw

        check_raw(base, "GET", path, headers or {}, None, resp.status, resp.getheaders(), body)
    return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)


def error(resp: Reply) -> dict[str, Any]:
    assert (resp.getheader("Content-Type") or "").startswith("application/problem+json")
    body: dict[str, Any] = json.loads(resp.body)
    assert set(body) == PROBLEM_KEYS
    return body


@pytest.fixture(scope="module")
def game(running_suite: Stack) -> tuple[str, list[Event]]:
    """The full golden game, stored as the command service stores moves, and scored."""
    events = golden_events(FULL_GAME)
    store = RedisEventStore(redis.Redis.from_url(running_suite.redis_url))
    game_id = uuid.uuid4().hex
    store_game(store, game_id, events)
    Scorer(store).catch_up(game_id)
    return game_id, events


@pytest.fixture(scope="module")
def server(running_suite: Stack) -> str:
    """The session suite's query service (the pictures need nothing of their own)."""
    return running_suite.query


def test_a_whole_game_is_the_golden_picture(server, game) -> None:
    game_id, _ = game
    resp = fetch(server, f"/games/{game_id}/board.svg")
    assert resp.status == 200
    assert (resp.getheader("Content-Type") or "").startswith(SVG)
    expected = (GOLDEN / "svg" / f"{FULL_GAME}.svg").read_bytes()
    assert resp.body == expected
    root = ET.fromstring(resp.body)
    tiles = [e for e in root.iter() if e.get("class") == "tile"]
    assert len(tiles) == 72
    assert (resp.getheader("Server-Timing") or "").startswith("view;dur=")
    assert resp.getheader("Cache-Control") == "no-cache"


def test_etag_and_304(server, game) -> None:
    game_id, _ = game
    first = fetch(server, f"/games/{game_id}/board.svg")
    etag = first.getheader("ETag")
    assert etag and etag.startswith('"svg')
    again = fetch(server, f"/games/{game_id}/board.svg", {"If-None-Match": etag})
    assert again.status == 304 and again.body == b""
    assert again.getheader("ETag") == etag
    # Another view of the same game is another picture, with its own ETag.
    other = fetch(server, f"/games/{game_id}/board.svg?open=1", {"If-None-Match": etag})
    assert other.status == 200 and other.getheader("ETag") != etag
    earlier = fetch(server, f"/games/{game_id}/board.svg?turn=10", {"If-None-Match": etag})
    assert earlier.status == 200 and earlier.getheader("ETag") != etag


@pytest.mark.parametrize("turn", [0, 1, 30, 71])
def test_turn_draws_the_board_after_that_many_placements(server, game, turn) -> None:
    game_id, events = game
    resp = fetch(server, f"/games/{game_id}/board.svg?turn={turn}")
    assert resp.status == 200
    root = ET.fromstring(resp.body)
    assert root.get("data-turn") == str(turn)
    assert len([e for e in root.iter() if e.get("class") == "tile"]) == turn + 1
    # The engine's own picture of the same position, placements counted independently.
    placed, upto = 0, len(events)
    for index, event in enumerate(events):
        if type(event).__name__ == "TilePlaced":
            if placed == turn:
                upto = index
                break
            placed += 1
    assert resp.body.decode() == board_svg(fold(events, upto))


def test_open_features_are_outlined(server, game) -> None:
    game_id, _ = game
    resp = fetch(server, f"/games/{game_id}/board.svg?turn=30&open=true")
    root = ET.fromstring(resp.body)
    outlined = [e for e in root.iter() if e.get("class") == "open-feature"]
    assert outlined, "a game at turn 30 has open features"
    plain = ET.fromstring(fetch(server, f"/games/{game_id}/board.svg?turn=30").body)
    assert not [e for e in plain.iter() if e.get("class") == "open-feature"]


def test_an_unknown_game_is_404(server) -> None:
    for game_id in (uuid.uuid4().hex, "not-a-game", "x" * 300):
        resp = fetch(server, f"/games/{game_id}/board.svg")
        assert resp.status == 404
        assert error(resp)["code"] == "game_not_found"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("turn=73", "turn_out_of_range"),
        ("turn=1000000", "turn_out_of_range"),
        ("at=100000", "at_out_of_range"),
        ("turn=3&at=5", "at_and_turn"),
        ("turn=-1", "invalid_query"),
        ("turn=x", "invalid_query"),
        ("turn=1e3", "invalid_query"),
        ("turn=" + "9" * 400, "invalid_query"),
        ("open=maybe", "invalid_query"),
        ("turn=%00", "invalid_query"),
        ("turn=%ff%fe", "invalid_query"),
    ],
)
def test_bad_queries_are_clear_4xx(server, game, query, code) -> None:
    game_id, _ = game
    resp = fetch(server, f"/games/{game_id}/board.svg?{query}")
    assert 400 <= resp.status < 500
    assert error(resp)["code"] == code


def test_unknown_and_repeated_parameters_do_not_break_the_picture(server, game) -> None:
    game_id, _ = game
    resp = fetch(server, f"/games/{game_id}/board.svg?cachebust=1&utm_source=%3Cscript%3E")
    assert resp.status == 200 and (resp.getheader("Content-Type") or "").startswith(SVG)
    assert b"script" not in resp.body


def test_only_get(server, game) -> None:
    game_id, _ = game
    status, body = http_client.call(server, "POST", f"/games/{game_id}/board.svg", {})
    assert status == 405 and body["code"] == "method_not_allowed"


# -- the tile catalog ------------------------------------------------------------------------


def test_the_catalog_lists_the_sets_and_is_cacheable(server) -> None:
    resp = fetch(server, "/tilesets")
    assert resp.status == 200
    index = json.loads(resp.body)
    assert {s["name"] for s in index["tilesets"]} >= {"base", "demo"}
    assert resp.getheader("Cache-Control") == "public, max-age=86400"
    assert resp.getheader("ETag") == f'"{index["version"]}"'
    again = fetch(server, "/tilesets", {"If-None-Match": resp.getheader("ETag") or ""})
    assert again.status == 304 and again.body == b""


@pytest.mark.parametrize("name", ["base", "demo"])
def test_a_set_with_every_tile_drawn(server, name) -> None:
    resp = fetch(server, f"/tilesets/{name}")
    assert resp.status == 200
    data = json.loads(resp.body)
    assert data["name"] == name and resp.getheader("ETag") == f'"{data["version"]}"'
    assert sum(t["count"] for t in data["tiles"]) == data["size"]
    for tile in data["tiles"]:
        root = ET.fromstring(tile["svg"])
        segs = [e for e in root.iter() if "seg" in (e.get("class") or "").split()]
        assert len(segs) == len(tile["segments"])
    index = json.loads(fetch(server, "/tilesets").body)
    assert {s["name"]: s["version"] for s in index["tilesets"]}[name] == data["version"]
    etag = resp.getheader("ETag") or ""
    assert fetch(server, f"/tilesets/{name}", {"If-None-Match": etag}).status == 304
    assert fetch(server, f"/tilesets/{name}", {"If-None-Match": f"W/{etag}"}).status == 304
    assert fetch(server, f"/tilesets/{name}", {"If-None-Match": '"other"'}).status == 200


@pytest.mark.parametrize(
    "name", ["nope", "BASE", "base%00", "%ff%fe", "x" * 3000, "base%20", "base.json", "%3Cb%3E"]
)
def test_an_unknown_set_is_404_tileset_not_found(server, name) -> None:
    resp = fetch(server, f"/tilesets/{name}")
    assert resp.status == 404
    body = error(resp)
    assert body["code"] == "tileset_not_found"
    assert len(body["message"]) < 100


def test_a_path_beyond_a_set_is_plain_404(server) -> None:
    for path in ("/tilesets/..%2F..%2Fetc%2Fpasswd", "/tilesets/base/D", "/tilesets/base/"):
        resp = fetch(server, path)
        assert resp.status == 404
        assert error(resp)["code"] in ("not_found", "tileset_not_found")


def test_the_catalog_is_read_only(server) -> None:
    status, body = http_client.call(server, "PUT", "/tilesets/base", {})
    assert status == 405 and body["code"] == "method_not_allowed"
