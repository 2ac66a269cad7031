"""A game's public seats record (services/redis_store/seats.py, issue 32 finding 11) on a real
Redis: written with the secrets record wherever one is written (creation, import with and
without an Idempotency-Key), holding names, ids, bots and owner and nothing secret; the query
service answers from it with the secrets record gone; the one-off migration gives every older
game its own, once."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask

from carcassonne.record import record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from services.command.app import create_app as create_command_app
from services.query.app import create_app as create_query_app
from services.redis_store.apikeys import ApiKeys
from services.redis_store.keys import seats_key, secrets_key
from services.redis_store.migrate_seats import run as migrate
from services.redis_store.seats import public_seats
from tests.redis_server import private_redis

SECRET_FIELDS = {"seed", "tokens", "imported"}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with private_redis() as found:
        yield found


@pytest.fixture(scope="module")
def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


@pytest.fixture(scope="module")
def key(client: redis.Redis) -> tuple[str, str]:
    return ApiKeys(client).create("seats")


@pytest.fixture(scope="module")
def command(url: str) -> Flask:
    return create_command_app({"REDIS_URL": url, "BROKER_URL": url})


def records(client: redis.Redis, game_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    secrets, seats = client.get(secrets_key(game_id)), client.get(seats_key(game_id))
    assert secrets is not None and seats is not None, game_id
    return json.loads(secrets), json.loads(seats)


def test_a_created_game_has_a_seats_record_with_nothing_secret(command, client, key) -> None:
    key_id, raw = key
    body = {
        "players": [
            {"name": "Ann", "player_id": "u-ann"},
            {"name": "Robot", "bot": "greedy"},
        ],
        "seat_order": [0, 1],
        "public": True,
    }
    reply = command.test_client().post("/games", json=body, headers={"X-Api-Key": raw})
    assert reply.status_code == 201, reply.get_json()
    secrets, seats = records(client, reply.get_json()["game_id"])
    assert seats == public_seats(secrets)
    assert seats["names"] == ["Ann", "Robot"] and seats["player_ids"] == ["u-ann", None]
    assert seats["bots"][0] is None and seats["bots"][1]["level"] == "greedy"
    assert (seats["key_id"], seats["public"]) == (key_id, True)
    assert not SECRET_FIELDS & set(seats) and secrets["seed"] not in json.dumps(seats)


@pytest.mark.parametrize("idempotency_key", [None, "seats-once"])
def test_an_import_writes_its_seats_record(command, client, key, idempotency_key) -> None:
    key_id, raw = key
    _, events = random_game(random.Random(3), 2, Ruleset())
    record = {**record_from_events(events).to_dict(), "names": ["Cy", "Di"]}
    headers = {"X-Api-Key": raw} | ({"Idempotency-Key": idempotency_key} if idempotency_key else {})
    reply = command.test_client().post("/games/import", json=record, headers=headers)
    assert reply.status_code == 201, reply.get_json()
    secrets, seats = records(client, reply.get_json()["game_id"])
    assert "fingerprint" in secrets["imported"] if idempotency_key else True
    assert seats == {"names": ["Cy", "Di"], "key_id": key_id}


def test_the_query_service_answers_from_the_seats_record_alone(command, client, key, url) -> None:
    body = {"players": [{"name": "Eve"}, {"name": "Fay"}]}
    reply = command.test_client().post("/games", json=body, headers={"X-Api-Key": key[1]})
    game_id = reply.get_json()["game_id"]
    client.delete(secrets_key(game_id))  # as the query role sees it: no secrets at all
    query = create_query_app({"REDIS_URL": url}).test_client()
    board = query.get(f"/games/{game_id}/board")
    assert board.status_code == 200, board.get_json()
    listed = query.get("/games", headers={"X-Api-Key": key[1]}).get_json()
    assert {"Eve", "Fay"} <= {p for g in listed["games"] for p in g["players"]}


def test_the_migration_writes_each_older_games_seats_record_once(command, client, key) -> None:
    body = {"players": [{"name": "Gus"}, {"name": "Hal", "player_id": "u-hal"}]}
    reply = command.test_client().post("/games", json=body, headers={"X-Api-Key": key[1]})
    game_id = reply.get_json()["game_id"]
    secrets, seats = records(client, game_id)
    client.delete(seats_key(game_id))  # a game from before the seats record
    done = migrate(client)
    assert done["written"] == 1 and done["present"] >= 1
    assert json.loads(client.get(seats_key(game_id)) or b"{}") == seats == public_seats(secrets)
    again = migrate(client)
    assert again["written"] == 0 and again["present"] == done["written"] + done["present"]
