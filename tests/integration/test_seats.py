"""Seats and players on a real Redis: the create response maps each seat to the request's
player (`player_index`), duplicate names are refused (422 `duplicate_player_name`), and an
optional opaque `player_id` per player (the app's user id) is kept with the names, shown in
the board and score views and the exported record, and indexed for `GET /games?player_id=`
by the append script in the same atomic step as the game's first events."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from carcassonne.record import load_record
from services.command.app import create_app as create_command_app
from services.query.app import create_app as create_query_app
from services.redis_store import secrets_key
from services.redis_store.keys import index_shard, player_id_key

from .games import play
from .http_client import api_key


@pytest.fixture(scope="module")
def command(redis_url: str) -> Flask:
    # BROKER_URL: a Redis nobody listens on is fine, nothing here waits for the worker.
    return create_command_app({"REDIS_URL": redis_url, "BROKER_URL": redis_url})


@pytest.fixture(scope="module")
def query(redis_url: str) -> FlaskClient:
    """The query service, asked with the API key that creates this module's games (lists by
    player are the key's own)."""
    client = create_query_app({"REDIS_URL": redis_url}).test_client()
    client.environ_base["HTTP_X_API_KEY"] = api_key(redis_url)["X-Api-Key"]
    return client


def uid(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


def create(command: Flask, players: list[dict[str, Any]], **extra: Any) -> tuple[int, Any]:
    owner = api_key(command.config["REDIS_URL"])
    reply = command.test_client().post("/games", json={"players": players, **extra}, headers=owner)
    return reply.status_code, reply.get_json()


def test_each_seat_names_the_request_player_in_it(command, redis_client) -> None:
    players = [
        {"name": "ann", "player_id": uid("u-ann")},
        {"name": "bob"},
        {"name": "cy", "player_id": uid("u-cy")},
    ]
    status, body = create(command, players, seat_order=[2, 0, 1])
    assert status == 201, body
    seats = body["players"]
    assert [s["seat"] for s in seats] == [0, 1, 2]
    assert [s["player_index"] for s in seats] == [2, 0, 1]
    for seat in seats:
        asked = players[seat["player_index"]]
        assert seat["name"] == asked["name"]
        assert seat.get("player_id") == asked.get("player_id")
        assert isinstance(seat["token"], str)
    stored = json.loads(redis_client.get(secrets_key(body["game_id"])))
    assert stored["names"] == ["cy", "ann", "bob"]
    assert stored["player_ids"] == [players[2]["player_id"], players[0]["player_id"], None]


def test_a_random_seat_order_is_still_told(command) -> None:
    """Without seat_order the server shuffles (R2.2): the map is what tells an app who is who."""
    players = [{"name": f"p{i}", "player_id": uid(f"u{i}")} for i in range(4)]
    orders = set()
    for _ in range(12):
        status, body = create(command, players)
        assert status == 201
        order = tuple(s["player_index"] for s in body["players"])
        assert sorted(order) == [0, 1, 2, 3]
        assert [s["name"] for s in body["players"]] == [players[i]["name"] for i in order]
        assert [s["player_id"] for s in body["players"]] == [players[i]["player_id"] for i in order]
        orders.add(order)
    assert len(orders) > 1  # it does shuffle: 12 games all alike would be 1 in 4^11


@pytest.mark.parametrize(
    ("names", "indexes"),
    [(["Ann", "ann"], [0, 1]), (["ann", "bob", " ANN "], [0, 2]), (["x", "y", "y"], [1, 2])],
)
def test_duplicate_names_are_refused(command, names: list[str], indexes: list[int]) -> None:
    status, body = create(command, [{"name": n} for n in names])
    assert status == 422 and body["code"] == "duplicate_player_name", body
    assert body["details"]["indexes"] == indexes
    assert body["rule"] is None and "names must differ" in body["message"]


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, "é", "tab\t", 7, None])
def test_a_player_id_is_1_to_128_visible_ascii_characters(command, bad: Any) -> None:
    status, body = create(command, [{"name": "ann", "player_id": bad}, {"name": "bob"}])
    assert status == 422 and body["code"] == "invalid_body", body
    assert create(command, [{"name": "ann", "player_id": "~" * 128}, {"name": "bob"}])[0] == 201


def test_views_and_the_record_show_each_seats_player_id(command, query) -> None:
    ann, cy = uid("u-ann"), uid("u-cy")
    players = [{"name": "ann", "player_id": ann}, {"name": "bob"}, {"name": "cy", "player_id": cy}]
    status, body = create(command, players, seat_order=[1, 2, 0])
    assert status == 201, body
    game_id = body["game_id"]
    tokens = {s["seat"]: s["token"] for s in body["players"]}
    play(command, game_id, tokens, random.Random(4), turns=3)
    for view in ("board", "scores"):
        reply = query.get(f"/games/{game_id}/{view}")
        assert reply.status_code == 200
        seats = [(p["name"], p["player_id"]) for p in reply.get_json()["players"]]
        assert seats == [("bob", None), ("cy", cy), ("ann", ann)], view
    exported = command.test_client().get(f"/games/{game_id}/record").get_json()
    assert exported["names"] == ["bob", "cy", "ann"]
    assert exported["player_ids"] == [None, cy, ann]
    record = load_record(exported)  # still a carcassonne-record/1, read back whole
    assert record.names == ("bob", "cy", "ann") and record.player_ids == (None, cy, ann)


def test_games_are_listed_by_player_id(command, query, redis_client) -> None:
    mine, other = uid("user"), uid("user")
    made = []
    for i in range(3):
        players = [{"name": "ann", "player_id": mine}, {"name": f"opp{i}", "player_id": other}]
        made.append(create(command, players)[1]["game_id"])
    create(command, [{"name": "ann", "player_id": other}, {"name": "bob"}])
    create(command, [{"name": "ann"}, {"name": "bob"}])
    reply = query.get(f"/games?player_id={mine}")
    assert reply.status_code == 200
    # The listing caught the games directory up with the change feed: each game is indexed
    # by player id from its first events.
    for game_id in made:
        key = player_id_key(index_shard(game_id), mine)
        assert redis_client.zscore(key, game_id) is not None
    listed = reply.get_json()["games"]
    assert [g["game_id"] for g in listed] == made[::-1]  # newest first
    assert all(mine in g["player_ids"] and "ann" in g["players"] for g in listed)
    assert len(query.get(f"/games?player_id={other}").get_json()["games"]) == 4
    assert query.get(f"/games?player_id={mine.upper()}").get_json()["games"] == []  # exact
    page = query.get(f"/games?player_id={mine}&limit=2").get_json()
    rest = query.get(f"/games?player_id={mine}&cursor={page['next']}").get_json()
    assert [g["game_id"] for g in page["games"] + rest["games"]] == made[::-1]
    assert len(query.get(f"/games?player_id={mine}&status=in_progress").get_json()["games"]) == 3
    assert query.get(f"/games?player_id={mine}&status=over").get_json()["games"] == []
    bad = query.get("/games?player_id=has%20space")
    assert bad.status_code == 422 and bad.get_json()["code"] == "invalid_query"


def test_a_game_without_player_ids_lists_nulls(command, query, redis_client) -> None:
    name = uid("solo")
    status, body = create(command, [{"name": name}, {"name": "bob"}], seat_order=[0, 1])
    assert status == 201, body
    listed = query.get(f"/games?player={name}").get_json()["games"]
    assert [g["player_ids"] for g in listed] == [[None, None]]
    assert "player_ids" not in json.loads(redis_client.get(secrets_key(body["game_id"])))
