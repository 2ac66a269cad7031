"""Lobbies (`/lobbies`, docs/lobby.md) against a real Redis: a lobby that fills starts its
game with the tokens its players got when they joined; every bad request — a second join,
a full, started or expired lobby, an unknown ruleset, another key's lobby, hostile JSON — is
a 4xx with a stable code that changes nothing; and over real HTTP (two gunicorn instances) a
thousand joins for one seat seat exactly one player."""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from eventstore.envelope import MOVES
from services.archive.archiver import Archiver
from services.archive.sqlite import SqliteArchive
from services.command import lobby as lobby_module
from services.command.apikeys import ApiKeys
from services.command.app import create_app
from services.command.secrets_store import token_hash
from services.redis_store import RedisEventStore, secrets_key
from services.redis_store.keys import index_shard, lobbies_key, lobby_key
from services.scoring.scorer import Scorer

from .http_client import call


@pytest.fixture(scope="module")
def app(redis_url: str) -> Flask:
    return create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0,
                       "API_KEY_RATE": 10_000.0, "API_KEY_BURST": 10_000})  # fmt: skip


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def new_key(redis_url: str) -> tuple[str, dict[str, str]]:
    key_id, secret = ApiKeys(redis.Redis.from_url(redis_url)).create("lobbies")
    return key_id, {"X-Api-Key": secret}


@pytest.fixture
def key(redis_url: str) -> tuple[str, dict[str, str]]:
    return new_key(redis_url)


def post(client: FlaskClient, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    reply = client.post(path, json=body, headers=headers)
    return reply.status_code, reply.get_json()


def open_lobby(client: FlaskClient, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    status, opened = post(client, "/lobbies", {"ruleset": "classic", "seats": 2, **body}, headers)
    assert status == 201, opened
    return dict(opened)


def stored(redis_client: redis.Redis, lobby_id: str) -> dict[str, Any]:
    return dict(json.loads(redis_client.get(lobby_key(lobby_id)) or "null"))


def test_a_full_lobby_starts_its_game_with_the_tokens_its_players_joined_with(
    client: FlaskClient, key: tuple[str, dict[str, str]], redis_client: redis.Redis
) -> None:
    key_id, headers = key
    opened = open_lobby(client, headers, seats=3, host={"player_id": "u-1", "name": "Ann"})
    lobby_id, tokens = opened["lobby_id"], {"u-1": opened["token"]}
    assert opened["state"] == "open" and opened["host"] == "u-1" and opened["game_id"] is None
    for player in ("u-2", "u-3"):
        status, joined = post(client, f"/lobbies/{lobby_id}/join", {"player_id": player}, headers)
        assert status == 200 and joined["player_id"] == player, joined
        tokens[player] = joined["token"]
    assert joined["lobby"]["state"] == "started" and joined["lobby"]["game_id"] == lobby_id
    record = json.loads(redis_client.get(secrets_key(lobby_id)) or "{}")
    assert record["key_id"] == key_id and sorted(record["player_ids"]) == ["u-1", "u-2", "u-3"]
    # Each token is its player's seat (seats drawn from a random first player, R2.2).
    seat_of = {pid: seat for seat, pid in enumerate(record["player_ids"])}
    assert {record["tokens"][token_hash(t)] for t in tokens.values()} == {0, 1, 2}
    assert all(record["tokens"][token_hash(t)] == seat_of[p] for p, t in tokens.items())
    # The lobby says who sits where once started (never before).
    assert {p["player_id"]: p["seat"] for p in joined["lobby"]["players"]} == seat_of
    assert all(p["seat"] is None for p in opened["players"])
    turn = client.get(f"/games/{lobby_id}/turn").get_json()
    mover = record["player_ids"][turn["player"]]
    place = {k: turn["placements"][0][k] for k in ("x", "y", "rotation")} | {"meeple": None}
    other = next(p for p in tokens if p != mover)
    refused = client.post(f"/games/{lobby_id}/turns", json=place,
                          headers={"Authorization": f"Bearer {tokens[other]}"})  # fmt: skip
    assert refused.get_json()["code"] == "not_your_turn"  # the token is its seat's
    played = client.post(f"/games/{lobby_id}/turns", json=place,
                         headers={"Authorization": f"Bearer {tokens[mover]}"})  # fmt: skip
    assert played.status_code == 200, played.get_json()
    assert client.get(f"/lobbies/{lobby_id}", headers=headers).get_json()["state"] == "started"
    # A join whose answer was lost: the key re-issues its seat's token, as for any game.
    reissued = client.post(f"/games/{lobby_id}/players/{seat_of['u-3']}/token", headers=headers)
    assert reissued.status_code == 200 and reissued.get_json()["token"] != tokens["u-3"]


def test_listing_is_per_key_ruleset_and_size_and_drops_what_left_it(
    client: FlaskClient, redis_url: str
) -> None:
    _, mine = new_key(redis_url)
    _, theirs = new_key(redis_url)
    a = open_lobby(client, mine, seats=3)
    b = open_lobby(client, mine, seats=3, host={"player_id": "h"})
    open_lobby(client, mine, seats=2)  # another size
    open_lobby(client, mine, seats=3, ruleset="demo")  # another ruleset
    open_lobby(client, mine, seats=3, visibility="invite")  # not listed
    open_lobby(client, theirs, seats=3)  # another key's

    def listed(headers: dict[str, str]) -> list[str]:
        reply = client.get("/lobbies?ruleset=classic&seats=3", headers=headers)
        assert reply.status_code == 200, reply.get_json()
        return [lobby["lobby_id"] for lobby in reply.get_json()["lobbies"]]

    assert listed(mine) == [a["lobby_id"], b["lobby_id"]]
    assert a["lobby_id"] not in listed(theirs) and len(listed(theirs)) == 1
    post(client, f"/lobbies/{b['lobby_id']}/join", {"player_id": "x"}, mine)
    post(client, f"/lobbies/{b['lobby_id']}/join", {"player_id": "y"}, mine)  # full: started
    assert listed(mine) == [a["lobby_id"]]


def test_bad_requests_get_a_stable_code_and_change_nothing(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    key_id, headers = new_key(redis_url)
    _, other = new_key(redis_url)
    opened = open_lobby(client, headers, seats=3, host={"player_id": "u-1", "name": "Ann"})
    lobby_id = opened["lobby_id"]
    before = stored(redis_client, lobby_id)
    refusals = [
        (f"/lobbies/{lobby_id}/join", {"player_id": "u-1"}, headers, 409, "already_joined"),
        (f"/lobbies/{lobby_id}/join", {"player_id": "u-2", "name": " ANN "}, headers, 409,
         "name_taken"),
        (f"/lobbies/{lobby_id}/join", {"player_id": "u-2"}, other, 404, "lobby_not_found"),
        (f"/lobbies/{lobby_id}/leave", {"player_id": "u-1"}, other, 404, "lobby_not_found"),
        (f"/lobbies/{lobby_id}/start", {"player_id": "u-1"}, other, 404, "lobby_not_found"),
        (f"/lobbies/{lobby_id}/leave", {"player_id": "u-9"}, headers, 409, "not_in_lobby"),
        (f"/lobbies/{lobby_id}/start", {"player_id": "u-9"}, headers, 403, "not_lobby_host"),
        (f"/lobbies/{lobby_id}/start", {"player_id": "u-1"}, headers, 409, "lobby_too_small"),
        ("/lobbies/" + "0" * 32 + "/join", {"player_id": "u-2"}, headers, 404, "lobby_not_found"),
        ("/lobbies/nope/join", {"player_id": "u-2"}, headers, 404, "lobby_not_found"),
        (f"/lobbies/{lobby_id}/join", {"player_id": "u 2"}, headers, 422, "invalid_body"),
        (f"/lobbies/{lobby_id}/join", {"player_id": "u-2", "seat": 1}, headers, 422,
         "invalid_body"),
        (f"/lobbies/{lobby_id}/join", {"player_id": "u-2"}, {}, 401, "missing_api_key"),
        (f"/lobbies/{lobby_id}/join", {"player_id": "u-2"}, {"X-Api-Key": "cck_x"}, 403,
         "bad_api_key"),
    ]  # fmt: skip
    for path, body, sent, status, code in refusals:
        got, answer = post(client, path, body, sent)
        assert (got, answer["code"]) == (status, code), (path, body, answer)
    assert client.get(f"/lobbies/{lobby_id}", headers=other).status_code == 404
    assert stored(redis_client, lobby_id) == before
    # Unknown rulesets and hostile bodies store no lobby at all.
    lobbies_before = set(redis_client.scan_iter(match="*:lobby"))
    hostile: list[tuple[Any, int, str]] = [
        ({"ruleset": "chess", "seats": 2}, 422, "unknown_ruleset"),
        ({"ruleset": "classic", "seats": 6}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 1}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": "2"}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 2.5}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 2, "visibility": "secret"}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 2, "expires_seconds": 10**12}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 2, "host": {"player_id": ""}}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 2, "host": "u-1"}, 422, "invalid_body"),
        ({"ruleset": ["classic"], "seats": 2}, 422, "invalid_body"),
        ({"ruleset": "classic", "seats": 2, "key_id": key_id}, 422, "invalid_body"),
        ([], 422, "invalid_body"),
        ("classic", 422, "invalid_body"),
    ]
    for body, status, code in hostile:
        got, answer = post(client, "/lobbies", body, headers)
        assert (got, answer["code"]) == (status, code), (body, answer)
    for raw, code in ((b'{"ruleset": "classic", "seats": 2', "invalid_json"),
                      (b"[" * 500 + b"]" * 500, "json_too_deep")):  # fmt: skip
        reply = client.post("/lobbies", data=raw, headers=headers,
                            content_type="application/json")  # fmt: skip
        assert reply.status_code == 400 and reply.get_json()["code"] == code
    assert set(redis_client.scan_iter(match="*:lobby")) == lobbies_before
    assert client.get("/lobbies?ruleset=chess&seats=2", headers=headers).status_code == 422


def test_an_invite_lobby_is_unlisted_and_joined_only_with_its_code(
    client: FlaskClient, key: tuple[str, dict[str, str]]
) -> None:
    _, headers = key
    opened = open_lobby(client, headers, visibility="invite")
    lobby_id, code = opened["lobby_id"], opened["invite_code"]
    assert opened["visibility"] == "invite" and "token" not in opened
    listed = client.get("/lobbies?ruleset=classic&seats=2", headers=headers).get_json()
    assert lobby_id not in [lobby["lobby_id"] for lobby in listed["lobbies"]]
    for wrong in ({}, {"invite_code": "inv_wrong"}):
        status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "a", **wrong},
                              headers)  # fmt: skip
        assert (status, answer["code"]) == (403, "bad_invite_code")
    status, joined = post(client, f"/lobbies/{lobby_id}/join",
                          {"player_id": "a", "invite_code": code}, headers)  # fmt: skip
    assert status == 200 and [p["player_id"] for p in joined["lobby"]["players"]] == ["a"]
    assert "invite_code" not in client.get(f"/lobbies/{lobby_id}", headers=headers).get_json()


def test_leaving_frees_the_seat_passes_the_host_and_the_last_one_out_closes_it(
    client: FlaskClient, key: tuple[str, dict[str, str]], redis_client: redis.Redis
) -> None:
    _, headers = key
    opened = open_lobby(client, headers, seats=3, host={"player_id": "h"})
    lobby_id = opened["lobby_id"]
    post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    status, left = post(client, f"/lobbies/{lobby_id}/leave", {"player_id": "h"}, headers)
    assert status == 200 and left["host"] == "b"
    assert [p["player_id"] for p in left["players"]] == ["b"]
    status, left = post(client, f"/lobbies/{lobby_id}/leave", {"player_id": "b"}, headers)
    assert status == 200 and left["state"] == "closed" and left["host"] is None
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "c"}, headers)
    assert (status, answer["code"]) == (409, "lobby_closed")
    # A seat given back before the start plays no part in the game: its token never works.
    again = open_lobby(client, headers, seats=3, host={"player_id": "h"})["lobby_id"]
    gone = post(client, f"/lobbies/{again}/join", {"player_id": "b"}, headers)[1]["token"]
    post(client, f"/lobbies/{again}/leave", {"player_id": "b"}, headers)
    post(client, f"/lobbies/{again}/join", {"player_id": "c"}, headers)
    status, joined = post(client, f"/lobbies/{again}/join", {"player_id": "d"}, headers)
    assert status == 200 and joined["lobby"]["state"] == "started"
    record = json.loads(redis_client.get(secrets_key(again)) or "{}")
    assert record["player_ids"] and "b" not in record["player_ids"]
    assert token_hash(gone) not in record["tokens"]


def test_the_host_starts_early_and_the_game_has_the_players_seated(
    client: FlaskClient, key: tuple[str, dict[str, str]], redis_client: redis.Redis
) -> None:
    _, headers = key
    opened = open_lobby(client, headers, seats=5, host={"player_id": "h"})
    lobby_id = opened["lobby_id"]
    post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    status, started = post(client, f"/lobbies/{lobby_id}/start", {"player_id": "h"}, headers)
    assert status == 200 and started["state"] == "started" and started["game_id"] == lobby_id
    assert client.get(f"/games/{lobby_id}/turn").get_json()["scores"] == [0, 0]
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "c"}, headers)
    assert (status, answer["code"]) == (409, "lobby_started")
    status, answer = post(client, f"/lobbies/{lobby_id}/start", {"player_id": "h"}, headers)
    assert (status, answer["code"]) == (409, "lobby_started")
    assert stored(redis_client, lobby_id)["state"] == "started"


def test_a_lobby_that_never_fills_expires_and_leaves_the_listing(
    client: FlaskClient,
    key: tuple[str, dict[str, str]],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_id, headers = key
    opened = open_lobby(client, headers, expires_seconds=60, host={"player_id": "h"})
    lobby_id = opened["lobby_id"]
    index = lobbies_key(index_shard(lobby_id), key_id, "classic", 2)
    assert redis_client.zscore(index, lobby_id) == opened["expires_ms"]
    later = opened["expires_ms"] + 1
    monkeypatch.setattr(lobby_module, "now_ms", lambda: later)
    listed = client.get("/lobbies?ruleset=classic&seats=2", headers=headers).get_json()
    assert listed == {"lobbies": []} and redis_client.zscore(index, lobby_id) is None
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    assert (status, answer["code"]) == (409, "lobby_expired")
    assert client.get(f"/lobbies/{lobby_id}", headers=headers).get_json()["state"] == "expired"
    assert not redis_client.exists(secrets_key(lobby_id))  # no game
    assert 0 < (redis_client.pttl(lobby_key(lobby_id)) or 0) <= 60_000 + lobby_module.KEPT_MS


def test_a_start_cut_short_keeps_the_token_and_the_next_read_makes_the_game(
    app: Flask,
    client: FlaskClient,
    key: tuple[str, dict[str, str]],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, headers = key
    opened = open_lobby(client, headers, host={"player_id": "h"})
    lobby_id = opened["lobby_id"]
    service = app.extensions["game_service"]

    def down(*_: Any) -> Any:
        raise redis.ConnectionError("the store went away")

    monkeypatch.setattr(service, "start_prepared", down)
    status, joined = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    assert status == 200 and joined["token"] and joined["lobby"]["state"] == "starting"
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "c"}, headers)
    assert (status, answer["code"]) == (409, "lobby_full")
    monkeypatch.undo()
    # A join refused as full finishes the start on its way (so does any read).
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "c"}, headers)
    assert (status, answer["code"]) == (409, "lobby_full")
    assert stored(redis_client, lobby_id)["state"] == "started"
    view = client.get(f"/lobbies/{lobby_id}", headers=headers).get_json()
    assert view["state"] == "started" and view["game_id"] == lobby_id
    record = json.loads(redis_client.get(secrets_key(lobby_id)) or "{}")
    assert token_hash(joined["token"]) in record["tokens"]
    # Finishing again (another reader) makes no second start.
    client.get(f"/lobbies/{lobby_id}", headers=headers)
    assert client.get(f"/games/{lobby_id}/turn").get_json()["seq"] == view_seq(client, lobby_id)


def view_seq(client: FlaskClient, game_id: str) -> int:
    return int(client.get(f"/games/{game_id}/turn").get_json()["seq"])


def test_a_thousand_joins_for_the_last_seat_seat_exactly_one_player(
    two_commands: list[str], redis_url: str, redis_client: redis.Redis
) -> None:
    key_id, headers = new_key(redis_url)
    status, opened = call(two_commands[0], "POST", "/lobbies",
                          {"ruleset": "classic", "seats": 2, "host": {"player_id": "h"}},
                          headers)  # fmt: skip
    assert status == 201, opened
    lobby_id = opened["lobby_id"]

    def join(i: int) -> tuple[int, Any]:
        body = {"player_id": f"p{i}"}
        return call(two_commands[i % 2], "POST", f"/lobbies/{lobby_id}/join", body, headers)

    with ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(join, range(1000)))
    won = [answer for status, answer in answers if status == 200]
    codes = Counter(answer["code"] for status, answer in answers if status != 200)
    assert len(won) == 1 and sum(codes.values()) == 999, codes
    assert set(codes) <= {"lobby_full", "lobby_started"}, codes
    status, view = call(two_commands[1], "GET", f"/lobbies/{lobby_id}", None, headers)
    assert view["state"] == "started"
    assert [p["player_id"] for p in view["players"]] == ["h", won[0]["player_id"]]
    record = json.loads(redis_client.get(secrets_key(lobby_id)) or "{}")
    assert sorted(record["player_ids"]) == sorted(["h", won[0]["player_id"]])
    assert token_hash(won[0]["token"]) in record["tokens"] and record["key_id"] == key_id
    status, turn = call(two_commands[0], "GET", f"/games/{lobby_id}/turn")
    assert status == 200 and turn["seq"] >= 2


def test_a_retried_join_of_a_seated_player_is_already_joined_after_the_start_too(
    app: Flask,
    client: FlaskClient,
    key: tuple[str, dict[str, str]],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/lobby.md, "A lost answer": a join whose answer was lost is retried and answered
    409 `already_joined` — the player holds a seat, its token is re-issued by the key. That
    holds for the join that took the last seat too (the lobby `starting` or `started` by it):
    not `lobby_full` / `lobby_started`, which tell the player it has no seat. A player who is
    not seated still gets those."""
    _, headers = key
    lobby_id = open_lobby(client, headers, host={"player_id": "h"})["lobby_id"]
    status, joined = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    assert status == 200 and joined["lobby"]["state"] == "started"
    before = stored(redis_client, lobby_id)
    for player in ("b", "h"):
        status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": player}, headers)
        assert (status, answer["code"]) == (409, "already_joined"), answer
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "c"}, headers)
    assert (status, answer["code"]) == (409, "lobby_started")
    assert stored(redis_client, lobby_id) == before

    # Its game cut short (`starting`): the retry is `already_joined`, and makes the game.
    lobby_id = open_lobby(client, headers, host={"player_id": "h"})["lobby_id"]
    service = app.extensions["game_service"]

    def down(*_: Any) -> Any:
        raise redis.ConnectionError("the store went away")

    monkeypatch.setattr(service, "start_prepared", down)
    status, joined = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    assert status == 200 and joined["lobby"]["state"] == "starting"
    monkeypatch.undo()
    status, answer = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    assert (status, answer["code"]) == (409, "already_joined"), answer
    assert stored(redis_client, lobby_id)["state"] == "started"
    record = json.loads(redis_client.get(secrets_key(lobby_id)) or "{}")
    assert token_hash(joined["token"]) in record["tokens"]


def test_a_lobby_left_starting_whose_game_was_played_and_archived_is_not_started_again(
    app: Flask,
    client: FlaskClient,
    key: tuple[str, dict[str, str]],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The last join made the game but the store went away before the lobby turned `started`:
    the lobby stays `starting` and the next read finishes it. If that read comes after the
    game was played and archived (its secrets and streams left Redis, its tombstone
    stayed), finishing must not start a second game under the archived game's id (the same
    token hashes, a fresh log): the lobby only turns `started`."""
    _, headers = key
    lobby_id = open_lobby(client, headers, host={"player_id": "h"})["lobby_id"]
    lobbies = app.extensions["lobbies"]

    def down(*_: Any, **__: Any) -> Any:
        raise redis.ConnectionError("the store went away")

    monkeypatch.setattr(lobbies, "_started", down)
    status, joined = post(client, f"/lobbies/{lobby_id}/join", {"player_id": "b"}, headers)
    assert status == 200 and joined["lobby"]["state"] == "starting"
    monkeypatch.undo()
    reply = client.post(f"/games/{lobby_id}/resign",
                        headers={"Authorization": f"Bearer {joined['token']}"})  # fmt: skip
    assert reply.status_code == 200 and reply.get_json()["next"]["over"], reply.get_json()
    store = RedisEventStore(redis_client)
    Scorer(store).catch_up(lobby_id)
    archiver = Archiver(redis_client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.archive_game(index_shard(lobby_id), lobby_id) == "archived"

    view = client.get(f"/lobbies/{lobby_id}", headers=headers).get_json()
    assert view["state"] == "started" and view["game_id"] == lobby_id
    assert not redis_client.exists(secrets_key(lobby_id))
    assert store.last_seq(lobby_id, MOVES) == 0
