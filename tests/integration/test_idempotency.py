"""Idempotency-Key as in the IETF draft and Stripe (issue 13, finding 7), over real HTTP
(gunicorn, the deploy config, 2 workers: a game's requests reach both, so a trusted cached state
is often stale and its append refused) against a real Redis.

A key is bound to a fingerprint of its request (method, path, canonical body; a turn's also
names the token's seat), atomically with the append. The same key with the same request
answers the original result; with another request `422 idempotency_key_reused` and nothing
is appended. `POST /games/import` with a key makes one game per (API key, key).
"""

from __future__ import annotations

import http.client
import json
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.notation import format_record
from carcassonne.record import load_record, record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore.envelope import MOVES
from services.command.apikeys import ApiKeys
from services.redis_store import game_keys, secrets_key
from tests.integration.openapi_client import PROBLEM_KEYS

from .http_client import api_key, call, gunicorn

ENV = {"NOTIFY_MS": "0", "API_KEY_RATE": "10000", "API_KEY_BURST": "10000"}


@pytest.fixture(scope="module")
def server(redis_url: str) -> Iterator[str]:
    with gunicorn(
        "services.command.wsgi:app", "deploy/gunicorn/command.py",
        {"REDIS_URL": redis_url, **ENV}, workers=2,
    ) as base:  # fmt: skip
        yield base


@pytest.fixture(scope="module")
def keys(redis_url: str) -> list[str]:
    api = ApiKeys(redis.Redis.from_url(redis_url))
    return [api.create("idem-a")[1], api.create("idem-b")[1]]


def moves(client: redis.Redis, game_id: str) -> list[Any]:
    return list(client.xrange(game_keys(game_id, MOVES)[0]) or [])


def game_streams(client: redis.Redis) -> set[bytes]:
    return set(client.scan_iter(match="{g:*}:moves", count=1000))


def new_game(base: str) -> tuple[str, dict[int, str]]:
    body = {"players": [{"name": "a"}, {"name": "b"}], "seat_order": [0, 1]}
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


def turn_view(base: str, game_id: str) -> dict[str, Any]:
    status, view = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200, view
    return view


def headers(token: str, key: str | None = None) -> dict[str, str]:
    sent = {"Authorization": f"Bearer {token}"}
    if key is not None:
        sent["Idempotency-Key"] = key
    return sent


def spot_body(spot: dict[str, Any]) -> dict[str, Any]:
    return {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"]}


def test_a_key_reused_with_another_turn_is_422_and_appends_nothing(server, redis_client) -> None:
    game_id, tokens = new_game(server)
    view = turn_view(server, game_id)
    first_spot, other_spot = view["placements"][0], view["placements"][1]
    token, path = tokens[view["player"]], f"/games/{game_id}/turns"
    status, first = call(server, "POST", path, spot_body(first_spot), headers(token, "move-1"))
    assert status == 200 and not first["replayed"]
    stream = moves(redis_client, game_id)
    status, error = call(server, "POST", path, spot_body(other_spot), headers(token, "move-1"))
    assert (status, error["code"]) == (422, "idempotency_key_reused"), error
    assert set(error) == PROBLEM_KEYS
    assert moves(redis_client, game_id) == stream
    # The same request, spelled differently (key order, an explicit "meeple": null): the
    # original answer, nothing appended.
    same = dict(reversed(list({**spot_body(first_spot), "meeple": None}.items())))
    status, again = call(server, "POST", path, same, headers(token, "move-1"))
    assert status == 200 and again["replayed"] is True
    assert (again["seq"], again["events"]) == (first["seq"], first["events"])
    assert moves(redis_client, game_id) == stream


def test_a_key_reused_for_a_later_legal_turn_is_refused_by_the_append(server, redis_client):
    """Turn 3 is the first seat's again: a legal placement, decided from the owning worker's
    cached state without reading the stream. Its key was bound to turn 1: the append script
    refuses it and the game goes on."""
    game_id, tokens = new_game(server)
    path = f"/games/{game_id}/turns"
    view = turn_view(server, game_id)
    first_seat = view["player"]
    spot = spot_body(view["placements"][0])
    assert call(server, "POST", path, spot, headers(tokens[first_seat], "mine"))[0] == 200
    view = turn_view(server, game_id)
    body = spot_body(view["placements"][0])
    assert call(server, "POST", path, body, headers(tokens[view["player"]]))[0] == 200
    view = turn_view(server, game_id)
    assert view["player"] == first_seat
    later = spot_body(view["placements"][0])
    stream = moves(redis_client, game_id)
    status, error = call(server, "POST", path, later, headers(tokens[first_seat], "mine"))
    assert (status, error["code"]) == (422, "idempotency_key_reused"), error
    assert moves(redis_client, game_id) == stream
    status, played = call(server, "POST", path, later, headers(tokens[first_seat], "mine-2"))
    assert status == 200 and played["seq"] > len(stream), played


def test_racing_requests_with_one_key_append_once(server, redis_client) -> None:
    """Eight clients send the same key at once, half of them with another placement: one
    request is appended; the others with its body get it back, the rest 422 (or a refusal
    decided on the state after it, which appends nothing either)."""
    game_id, tokens = new_game(server)
    view = turn_view(server, game_id)
    bodies = [spot_body(view["placements"][i % 2]) for i in range(8)]
    token, path = tokens[view["player"]], f"/games/{game_id}/turns"
    replies: list[tuple[int, Any]] = [(0, None)] * 8
    barrier = threading.Barrier(8)

    def send(i: int) -> None:
        barrier.wait()
        replies[i] = call(server, "POST", path, bodies[i], headers(token, "race"))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placed = [f for _, f in moves(redis_client, game_id)[2:] if f[b"type"] == b"TilePlaced"]
    assert len(placed) == 1
    winner = json.loads(placed[0][b"data"])
    won = {k: winner[k] for k in ("x", "y", "rotation")}
    for body, (status, reply) in zip(bodies, replies, strict=True):
        if body == won:
            assert status == 200, reply
        else:
            assert status in (409, 422), reply  # reused key, or not this seat's turn anymore


RECORDS = [
    record_from_events(random_game(random.Random(seed), 2, Ruleset())[1]).to_dict()
    for seed in (11, 12)
]


def post_import(
    base: str,
    key: str,
    body: Any,
    idem: str | None,
    raw: bytes | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any, dict[str, str]]:
    """POST /games/import; (status, decoded body, response headers)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    sent = {"X-Api-Key": key, "Content-Type": content_type}
    if idem is not None:
        sent["Idempotency-Key"] = idem
    try:
        conn.request("POST", "/games/import", body=raw or json.dumps(body).encode(), headers=sent)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read()), dict(reply.getheaders())
    finally:
        conn.close()


def test_import_twice_with_one_key_makes_one_game(server, redis_client, keys) -> None:
    before = game_streams(redis_client)
    record = {**RECORDS[0], "names": ["ann", "bob"]}
    status, first, head = post_import(server, keys[0], record, "import-1")
    assert status == 201 and "Idempotent-Replayed" not in head, first
    status, again, head = post_import(server, keys[0], record, "import-1")
    assert status == 201 and head.get("Idempotent-Replayed") == "true"
    assert again == first  # the same body: the same game id, sequence, names, scores
    assert len(game_streams(redis_client) - before) == 1
    # The same record as notation (without names: other names, so another request) ...
    notation = format_record(load_record(RECORDS[0])).encode()
    status, error, _ = post_import(server, keys[0], None, "import-1", notation, "text/plain")
    assert (status, error["code"]) == (422, "idempotency_key_reused"), error
    # ... another record under the key: 422, nothing stored
    stream = moves(redis_client, first["game_id"])
    status, error, _ = post_import(server, keys[0], RECORDS[1], "import-1")
    assert (status, error["code"]) == (422, "idempotency_key_reused"), error
    assert len(game_streams(redis_client) - before) == 1
    assert moves(redis_client, first["game_id"]) == stream
    # The key is per API key: another API key's "import-1" is its own game.
    status, other, _ = post_import(server, keys[1], record, "import-1")
    assert status == 201 and other["game_id"] != first["game_id"]
    # Without a key every import is a new game, as before.
    assert post_import(server, keys[0], record, None)[1]["game_id"] != first["game_id"]
    assert len(game_streams(redis_client) - before) == 3


def test_an_import_key_is_bound_to_the_record_not_its_spelling(server, keys) -> None:
    """JSON and the notation of one record, without names, are the same import."""
    status, first, _ = post_import(server, keys[0], RECORDS[1], "spelling")
    assert status == 201, first
    notation = format_record(load_record(RECORDS[1])).encode()
    status, again, head = post_import(server, keys[0], None, "spelling", notation, "text/plain")
    assert status == 201 and again == first and head.get("Idempotent-Replayed") == "true"


def test_an_import_key_sent_again_with_another_listing_is_another_request(
    server, redis_client, keys
) -> None:
    """`public` is part of an import's body as the record and the names are: the same key
    with `public: true` after a private import is another request (422, the game left
    private), not a replay that answers 201 and ignores the flag (before: the fingerprint
    left `public` out)."""
    status, first, _ = post_import(server, keys[0], RECORDS[0], "listing")
    assert status == 201, first
    status, error, _ = post_import(server, keys[0], {**RECORDS[0], "public": True}, "listing")
    assert (status, error["code"]) == (422, "idempotency_key_reused"), error
    stored = json.loads(redis_client.get(secrets_key(first["game_id"])))
    assert "public" not in stored
    # Sent as it was (public false said out loud, or left out): the same request.
    for body in (RECORDS[0], {**RECORDS[0], "public": False}):
        status, again, head = post_import(server, keys[0], body, "listing")
        assert status == 201 and again == first and head.get("Idempotent-Replayed") == "true"
    # A public import's retry is its replay; a private body under its key, another request.
    status, shown, _ = post_import(server, keys[0], {**RECORDS[1], "public": True}, "shown")
    assert status == 201, shown
    status, again, _ = post_import(server, keys[0], {**RECORDS[1], "public": True}, "shown")
    assert status == 201 and again == shown
    status, error, _ = post_import(server, keys[0], RECORDS[1], "shown")
    assert (status, error["code"]) == (422, "idempotency_key_reused"), error


def test_racing_imports_with_one_key_make_one_game_with_the_winners_names(
    server, redis_client, keys
) -> None:
    """Six imports at once under one key, three records apart (other names): one game; the
    requests with the winning body get it (201), the others 422; the stored names are the
    winner's."""
    before = game_streams(redis_client)
    bodies = [{**RECORDS[0], "names": [f"p{i % 3}", "q"]} for i in range(6)]
    replies: list[tuple[int, Any, dict[str, str]]] = [(0, None, {})] * 6
    barrier = threading.Barrier(6)

    def send(i: int) -> None:
        barrier.wait()
        replies[i] = post_import(server, keys[0], bodies[i], "race")

    threads = [threading.Thread(target=send, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = game_streams(redis_client) - before
    assert len(created) == 1
    won = [r for s, r, _ in replies if s == 201]
    assert won and all(r == won[0] for r in won)
    names = [p["name"] for p in won[0]["players"]]
    for body, (status, reply, _) in zip(bodies, replies, strict=True):
        assert status == (201 if body["names"] == names else 422), reply
    stored = json.loads(redis_client.get(secrets_key(won[0]["game_id"])))
    assert stored["names"] == names
    status, record = call(server, "GET", f"/games/{won[0]['game_id']}/record")
    assert status == 200 and record == {**RECORDS[0], "names": names}


def test_a_bad_idempotency_key_is_refused(server, keys) -> None:
    for bad in ("", "x" * 129):
        status, error, _ = post_import(server, keys[0], RECORDS[0], bad)
        assert (status, error["code"]) == (422, "bad_idempotency_key"), error
