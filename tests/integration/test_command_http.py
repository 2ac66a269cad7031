"""The command service over real HTTP (gunicorn) against a real Redis."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.events import (
    DiscardTile,
    DrawTile,
    GameStarted,
    PlayTurn,
    StartGame,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
)
from carcassonne.game import decide
from carcassonne.state import GameState
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.redis_store import RedisEventStore, game_keys
from tests.integration.openapi_client import PROBLEM_KEYS

from .http_client import api_key, call, gunicorn


@pytest.fixture(scope="module")
def server(redis_url: str) -> Iterator[str]:
    with gunicorn(
        "services.command.wsgi:app", "deploy/gunicorn/command.py", {"REDIS_URL": redis_url}
    ) as base:
        yield base


def new_game(base: str, players: int = 2, **ruleset: Any) -> tuple[str, dict[int, str]]:
    body: dict[str, Any] = {
        "players": [{"name": f"p{i}"} for i in range(players)],
        "seat_order": list(range(players)),
    }
    if ruleset:
        body["ruleset"] = ruleset
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def raw_stream(client: redis.Redis, game_id: str) -> list[Any]:
    return list(client.xrange(game_keys(game_id, MOVES)[0]) or [])


def test_full_games_through_http_fold_to_what_the_engine_decides(server, redis_client) -> None:
    """Two whole games played through HTTP: the stream, re-decided move by move, agrees."""
    rng = random.Random(7)
    for players in (2, 4):
        game_id, tokens = new_game(server, players)
        while True:
            status, turn = call(server, "GET", f"/games/{game_id}/turn")
            assert status == 200
            if turn["over"]:
                break
            choice = rng.choice(turn["placements"])
            meeple = rng.choice([None, *choice["meeples"]])
            status, result = call(
                server,
                "POST",
                f"/games/{game_id}/turns",
                {
                    "x": choice["x"],
                    "y": choice["y"],
                    "rotation": choice["rotation"],
                    "meeple": meeple,
                },
                auth(tokens[turn["player"]]),
            )
            assert status == 200, result
        stored = [to_engine(e) for e in RedisEventStore(redis_client).read(game_id, MOVES)]
        # Play the same moves directly in the engine: every event must come out the same.
        state, replayed = GameState(), []
        for event in stored:
            match event:
                case GameStarted():
                    command: Any = StartGame(event.ruleset, event.players)
                case TileDrawn():
                    command = DrawTile(event.tile)
                case TilePlaced():
                    command = PlayTurn(event.player, event.x, event.y, event.rotation, event.meeple)
                case TileDiscarded():
                    command = DiscardTile(event.player)
                case _:
                    continue  # GameEnded comes with the last PlayTurn
            for produced in decide(state, command):
                state.apply(produced)
                replayed.append(produced)
        assert replayed == stored
        assert state.over and turn["scores"] == state.scores
        assert sum(isinstance(e, TilePlaced) for e in stored) + len(state.discarded) == 71


def test_twenty_conflicting_turns_at_once_accept_exactly_one(server, redis_client) -> None:
    game_id, tokens = new_game(server)
    _, turn = call(server, "GET", f"/games/{game_id}/turn")
    before = len(raw_stream(redis_client, game_id))
    statuses: list[int] = []
    barrier = threading.Barrier(20)

    def contender(i: int) -> None:
        choice = turn["placements"][i % len(turn["placements"])]
        barrier.wait()
        status, _ = call(
            server,
            "POST",
            f"/games/{game_id}/turns",
            {"x": choice["x"], "y": choice["y"], "rotation": choice["rotation"]},
            auth(tokens[turn["player"]]),
        )
        statuses.append(status)

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] + [409] * 19
    after = raw_stream(redis_client, game_id)[before:]
    assert [fields[b"type"] for _, fields in after].count(b"TilePlaced") == 1


def test_a_retried_idempotency_key_returns_the_original_and_appends_nothing(server, redis_client):
    game_id, tokens = new_game(server)
    _, turn = call(server, "GET", f"/games/{game_id}/turn")
    choice = turn["placements"][0]
    body = {"x": choice["x"], "y": choice["y"], "rotation": choice["rotation"]}
    headers = {**auth(tokens[turn["player"]]), "Idempotency-Key": "move-1"}
    first = call(server, "POST", f"/games/{game_id}/turns", body, headers)
    length = len(raw_stream(redis_client, game_id))
    again = call(server, "POST", f"/games/{game_id}/turns", body, headers)
    assert first[0] == again[0] == 200
    assert again[1]["replayed"] is True
    assert again[1]["events"] == first[1]["events"] and again[1]["seq"] == first[1]["seq"]
    assert len(raw_stream(redis_client, game_id)) == length


BAD_INPUTS = [
    # (case, body or raw bytes, header mode, status, code)
    ("wrong types", {"x": "0", "y": 1, "rotation": 0}, "current", 422, "invalid_body"),
    ("missing field", {"x": 0, "y": -1}, "current", 422, "invalid_body"),
    ("huge number", {"x": 10**20, "y": 0, "rotation": 0}, "current", 422, "invalid_body"),
    ("rotation 4", {"x": 0, "y": -1, "rotation": 4}, "current", 422, "invalid_body"),
    (
        "unknown field",
        {"x": 0, "y": -1, "rotation": 0, "colour": "C"},
        "current",
        422,
        "invalid_body",
    ),
    (
        "unknown edge",
        {"x": 0, "y": -1, "rotation": 0, "meeple": {"feature": "city", "edge": "Q"}},
        "current",
        422,
        "invalid_body",
    ),
    ("monastery not on tile", "no-monastery", "current", 422, "no_such_feature"),
    ("not adjacent", {"x": 40, "y": 40, "rotation": 0}, "current", 422, "not_adjacent"),
    ("start square", {"x": 0, "y": 0, "rotation": 0}, "current", 422, "square_taken"),
    ("wrong player", "legal", "other", 409, "not_your_turn"),
    ("no token", "legal", "none", 401, "missing_token"),
    ("garbage token", "legal", "garbage", 403, "bad_token"),
    ("token of another game", "legal", "foreign", 403, "bad_token"),
    ("stale If-Match", "legal", "stale", 409, "stale_sequence"),
    ("bad If-Match", "legal", "bad-if-match", 422, "bad_if_match"),
    ("invalid JSON", b'{"x": 0,', "current", 400, "invalid_json"),
    ("oversized body", b'{"x": "' + b"9" * 20_000 + b'"}', "current", 413, "body_too_large"),
    ("JSON array", b"[1, 2]", "current", 422, "invalid_body"),
]


@pytest.mark.parametrize(
    ("case", "body", "mode", "status", "code"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_gets_a_clear_error_and_leaves_the_stream_unchanged(
    server, redis_client, case, body, mode, status, code
) -> None:
    game_id, tokens = new_game(server)
    _, turn = call(server, "GET", f"/games/{game_id}/turn")
    # A monastery tile (A, B) is drawn first in about 1 game in 12: this case needs a tile
    # without one, so it takes another game rather than skip (50 tries fail by chance < 1e-50).
    for _ in range(50 if body == "no-monastery" else 0):
        if turn["tile"] not in ("A", "B"):
            break
        game_id, tokens = new_game(server)
        _, turn = call(server, "GET", f"/games/{game_id}/turn")
    legal = turn["placements"][0]
    legal_body = {"x": legal["x"], "y": legal["y"], "rotation": legal["rotation"]}
    if body == "legal":
        body = legal_body
    elif body == "no-monastery":
        body = {**legal_body, "meeple": {"feature": "monastery"}}
        assert turn["tile"] not in ("A", "B")
    headers = {
        "current": auth(tokens[turn["player"]]),
        "other": auth(tokens[1 - turn["player"]]),
        "none": {},
        "garbage": auth("not-a-token"),
        "foreign": auth(new_game(server)[1][0]),
        "stale": {**auth(tokens[turn["player"]]), "If-Match": str(turn["seq"] - 1)},
        "bad-if-match": {**auth(tokens[turn["player"]]), "If-Match": "soon"},
    }[mode]
    before = raw_stream(redis_client, game_id)
    raw = body if isinstance(body, bytes) else None
    got_status, error = call(
        server, "POST", f"/games/{game_id}/turns", None if raw else body, headers, raw=raw
    )
    assert (got_status, error["code"]) == (status, code), error
    assert set(error) == PROBLEM_KEYS
    assert raw_stream(redis_client, game_id) == before


def test_unknown_game_and_bad_game_creation(server) -> None:
    assert call(server, "GET", "/games/" + "0" * 32 + "/turn")[1]["code"] == "game_not_found"
    assert call(server, "GET", "/games/../turn")[0] == 404
    status, error = call(server, "POST", "/games", {"players": [{"name": "solo"}]}, api_key(server))
    assert (status, error["code"]) == (422, "invalid_body")
    status, error = call(
        server,
        "POST",
        "/games",
        {"players": [{"name": "a"}, {"name": "b"}], "seat_order": [0, 0]},
        api_key(server),
    )
    assert (status, error["code"], error["rule"]) == (422, "bad_seat_order", "R10.2")


def test_openapi_document_is_generated(server) -> None:
    status, spec = call(server, "GET", "/openapi.json")
    assert status == 200
    assert {"/games", "/games/{game_id}/turns", "/games/{game_id}/turn"} <= set(spec["paths"])
