"""Who played is in the game's log (real Redis): a created or imported game's `GameStarted`
(schema version 2) lists its seats' names and player ids, so the views, the exported record
and the NDJSON export name the players from the log itself; a game stored with the old
`GameStarted` v1 is read upcast (null seats) and named from its secrets record instead; an
import keeps its record's `player_ids` (shown, and indexed for `GET /games?player_id=`).

On the code before this change each test fails: the first event was stored as v1 with a
count of players, `record_from_events` took names only from the secrets record (so
overwriting it changed the export), and an import dropped `player_ids`.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from carcassonne.export import record_from_export
from carcassonne.notation import format_record
from carcassonne.record import load_record, record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore.envelope import MOVES, NewEvent
from eventstore.schemas import to_new
from services.command.apikeys import ApiKeys
from services.command.app import create_app as create_command_app
from services.command.secrets_store import RedisSecrets
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore, secrets_key
from services.redis_store.keys import new_game_id
from services.redis_store.seats import write_both

from .games import play
from .http_client import api_key


@pytest.fixture(scope="module")
def command(redis_url: str) -> Flask:
    return create_command_app(
        {"REDIS_URL": redis_url, "NOTIFY_MS": 0, "API_KEY_RATE": 1000.0, "API_KEY_BURST": 1000}
    )


@pytest.fixture(scope="module")
def query(redis_url: str) -> FlaskClient:
    return create_query_app({"REDIS_URL": redis_url}).test_client()


@pytest.fixture(scope="module")
def key(redis_url: str) -> str:
    return ApiKeys(redis.Redis.from_url(redis_url)).create("names-in-log")[1]


def uid(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


def first_event(redis_client: redis.Redis, game_id: str) -> dict[str, Any]:
    """The game's first move as stored (the raw stream entry, not upcast)."""
    entries: Any = redis_client.xrange(f"{{g:{game_id}}}:moves", count=1)
    fields = {k.decode(): v.decode() for k, v in entries[0][1].items()}
    return {"type": fields["type"], "version": int(fields["v"]), **json.loads(fields["data"])}


def seats_of(query: FlaskClient, game_id: str) -> list[tuple[str, str | None]]:
    players = query.get(f"/games/{game_id}/board").get_json()["players"]
    return [(p["name"], p["player_id"]) for p in players]


def ndjson_record(query: FlaskClient, game_id: str) -> Any:
    reply = query.get(f"/games/{game_id}/events?format=ndjson")
    assert reply.status_code == 200
    return record_from_export(reply.get_data(as_text=True))


def test_a_created_game_names_its_seats_in_its_first_event(command, query, redis_client) -> None:
    ann = uid("u-ann")
    players = [{"name": "Ann Lee", "player_id": ann}, {"name": 'Bob "B" #1'}]
    owner = api_key(command.config["REDIS_URL"])
    created = command.test_client().post(
        "/games", json={"players": players, "seat_order": [1, 0]}, headers=owner
    )
    assert created.status_code == 201
    game_id = created.get_json()["game_id"]
    tokens = {s["seat"]: s["token"] for s in created.get_json()["players"]}
    stored = first_event(redis_client, game_id)
    assert (stored["type"], stored["version"]) == ("GameStarted", 2)
    assert stored["players"] == [
        {"name": 'Bob "B" #1', "player_id": None},
        {"name": "Ann Lee", "player_id": ann},
    ]
    play(command, game_id, tokens, random.Random(5), turns=4)
    # The secrets and seats records are no longer where readers look for a new game's
    # names: change the names in both (this test's own game) and every reader still shows
    # the logged ones.
    secrets = json.loads(redis_client.get(secrets_key(game_id)))
    write_both(redis_client, game_id, {**secrets, "names": ["x", "y"]})
    expected = [('Bob "B" #1', None), ("Ann Lee", ann)]
    assert seats_of(query, game_id) == expected
    exported = command.test_client().get(f"/games/{game_id}/record").get_json()
    assert (exported["names"], exported["player_ids"]) == (['Bob "B" #1', "Ann Lee"], [None, ann])
    notation = command.test_client().get(f"/games/{game_id}/record?format=notation")
    assert (
        notation.get_data(as_text=True)
        .splitlines()[0]
        .endswith(' names=["Bob \\"B\\" #1","Ann Lee"] player_ids=[null,"' + ann + '"]')
    )
    from_log = ndjson_record(query, game_id)  # a replay viewer holding only the export
    assert from_log == load_record(exported)
    assert from_log.names == ('Bob "B" #1', "Ann Lee") and from_log.player_ids == (None, ann)


def test_an_old_v1_game_is_named_from_its_secrets_record(command, query, redis_client) -> None:
    """A game stored before v2: GameStarted v1 holds a count; its names live in secrets."""
    game_id = new_game_id()
    names, bob = ["ann", "bob"], uid("u-bob")
    RedisSecrets(redis_client).put(
        game_id, {"seed": "s", "names": names, "player_ids": [None, bob], "tokens": {}}
    )
    _, events = random_game(random.Random(8), 2, Ruleset())
    old = NewEvent("GameStarted", 1, {"ruleset": Ruleset().to_dict(), "players": 2})
    RedisEventStore(redis_client).append(
        game_id, MOVES, [old] + [to_new(e) for e in events[1:20]], expected=0,
        command_id="create", marker="$seq",
    )  # fmt: skip
    assert first_event(redis_client, game_id)["version"] == 1  # stored as it was
    read = query.get(f"/games/{game_id}/events?limit=1").get_json()["items"][0]
    assert read["version"] == 2  # upcast on read: seats without names
    assert read["payload"]["players"] == [{"name": None, "player_id": None}] * 2
    assert seats_of(query, game_id) == [("ann", None), ("bob", bob)]
    exported = command.test_client().get(f"/games/{game_id}/record").get_json()
    assert (exported["names"], exported["player_ids"]) == (names, [None, bob])
    # The export of the log alone cannot name an old game's players: it has no names.
    assert ndjson_record(query, game_id).names is None


def test_an_import_logs_names_and_keeps_player_ids(command, query, key, redis_client) -> None:
    _, events = random_game(random.Random(11), 3, Ruleset())
    record = record_from_events(events).to_dict()
    cy = uid("u-cy")
    body = {**record, "names": ["ann", "bob", "cy"], "player_ids": [None, None, cy]}
    headers = {"X-Api-Key": key}
    reply = command.test_client().post("/games/import", json=body, headers=headers)
    assert reply.status_code == 201, reply.get_json()
    created = reply.get_json()
    assert created["players"][2] == {"seat": 2, "name": "cy", "player_id": cy}
    assert "player_id" not in created["players"][0]
    game_id = created["game_id"]
    assert first_event(redis_client, game_id)["players"] == [
        {"name": "ann", "player_id": None},
        {"name": "bob", "player_id": None},
        {"name": "cy", "player_id": cy},
    ]
    assert seats_of(query, game_id) == [("ann", None), ("bob", None), ("cy", cy)]
    listed = query.get(f"/games?player_id={cy}", headers=headers).get_json()["games"]
    assert [g["game_id"] for g in listed] == [game_id]
    assert listed[0]["player_ids"] == [None, None, cy]
    assert ndjson_record(query, game_id) == load_record(body)

    # The notation with names in its header: an import names its seats from it.
    text = format_record(load_record({**record, "names": ["Dee Dee", "Éa", "#3"]}))
    reply = command.test_client().post(
        "/games/import", data=text, headers={**headers, "Content-Type": "text/plain"}
    )
    assert reply.status_code == 201, reply.get_json()
    imported = reply.get_json()["game_id"]
    assert [p["name"] for p in reply.get_json()["players"]] == ["Dee Dee", "Éa", "#3"]
    assert seats_of(query, imported) == [("Dee Dee", None), ("Éa", None), ("#3", None)]
