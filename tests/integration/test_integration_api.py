"""The third-party endpoints against a real Redis: `POST /v1/score`, `POST /games/import`,
`GET /games/{id}/record`, webhook registration, API keys and their rate limit.

No worker here (tests/integration/test_integration_worker.py has it): imports are checked
against the engine, and hostile bodies against the Redis keys they must leave untouched.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from carcassonne import cli
from carcassonne.errors import GameError
from carcassonne.notation import format_record, parse_record
from carcassonne.record import load_record, record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore import port
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.command import apikeys
from services.command.apikeys import ApiKeys
from services.command.app import create_app
from services.common.notifications import owner_key
from services.redis_store import RedisEventStore
from services.redis_store.keys import game_subscriptions_key as hooks_key
from services.redis_store.keys import secrets_key
from tests.integration.openapi_client import PROBLEM_KEYS

from .games import new_game, play
from .http_client import ROOT, call, gunicorn

GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.json"))


def golden(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(record, expected scores) of a golden file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    expected = data.pop("expected")
    data.pop("why"), data.pop("regression", None)
    return data, expected


@pytest.fixture(scope="module")
def app(redis_url: str) -> Flask:
    # No notifications (no broker in these tests) and a rate limit nobody reaches here.
    return create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0, "WEBHOOK_ALLOW_PRIVATE": True,
                       "API_KEY_RATE": 10_000.0, "API_KEY_BURST": 10_000})  # fmt: skip


@pytest.fixture(scope="module")
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture(scope="module")
def key(redis_url: str) -> str:
    return ApiKeys(redis.Redis.from_url(redis_url)).create("acme")[1]


@pytest.fixture(scope="module")
def store(redis_url: str) -> RedisEventStore:
    return RedisEventStore(redis.Redis.from_url(redis_url))


def post(client: FlaskClient, path: str, key: str | None, **kwargs: Any) -> tuple[int, Any]:
    headers = {"X-Api-Key": key} if key else {}
    reply = client.post(path, headers=headers, **kwargs)
    return reply.status_code, reply.get_json()


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_games_through_v1_score_and_the_cli(client, key, path, capsys, tmp_path) -> None:
    record, expected = golden(path)
    status, body = post(client, "/v1/score", key, json=record)
    assert status == 200, body
    assert body["final_scores"] == expected["final_scores"]
    assert body["scores_before_final"] == expected["scores_before_final"]
    assert len(body["timeline"]) == len(record["turns"])
    top = max(body["final_scores"])
    assert body["winners"] == [p for p, s in enumerate(body["final_scores"]) if s == top]  # R7.5
    # The same record through the CLI (`carcassonne score`), in process.
    file = tmp_path / "record.json"
    file.write_text(json.dumps(record), encoding="utf-8")
    assert cli.main(["score", str(file)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["final_scores"] == expected["final_scores"]
    assert report["events"] == [
        {k: v for k, v in e.items() if k not in ("index", "totals")}  # same explanations
        for e in body["events"] + body["final_scoring"]
    ]


def test_the_notation_can_be_scored_as_text(client, key) -> None:
    record, expected = golden(GOLDEN[0])
    text = format_record(load_record(record))
    status, body = post(client, "/v1/score", key, data=text, content_type="text/plain")
    assert status == 200 and body["final_scores"] == expected["final_scores"]


def test_api_keys_are_required_and_checked(client, key, redis_url) -> None:
    record, _ = golden(GOLDEN[0])
    assert post(client, "/v1/score", None, json=record)[1]["code"] == "missing_api_key"
    status, body = post(client, "/v1/score", "cck_not-a-key", json=record)
    assert (status, body["code"]) == (403, "bad_api_key")
    status, body = post(client, "/games/import", None, json=record)
    assert (status, body["code"]) == (401, "missing_api_key")
    keys = ApiKeys(redis.Redis.from_url(redis_url))
    key_id, doomed = keys.create("short-lived")
    assert post(client, "/v1/score", doomed, json=record)[0] == 200
    assert keys.revoke(key_id)
    assert post(client, "/v1/score", doomed, json=record)[1]["code"] == "bad_api_key"
    assert not keys.revoke(key_id)


def test_each_key_has_its_own_rate_limit_with_retry_after(redis_url) -> None:
    limited = create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0, "API_KEY_RATE": 2.0,
                          "API_KEY_BURST": 3}).test_client()  # fmt: skip
    keys = ApiKeys(redis.Redis.from_url(redis_url))
    first, second = keys.create("a")[1], keys.create("b")[1]
    record, _ = golden(GOLDEN[0])
    codes = [post(limited, "/v1/score", first, json=record)[0] for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    reply = limited.post("/v1/score", json=record, headers={"X-Api-Key": first})
    assert reply.status_code == 429 and reply.get_json()["code"] == "rate_limited"
    assert reply.headers["Retry-After"] == "1"
    assert post(limited, "/v1/score", second, json=record)[0] == 200  # its own bucket
    time.sleep(0.6)  # 2 tokens per second: one is back
    assert post(limited, "/v1/score", first, json=record)[0] == 200


def _hostile_cases() -> list[tuple[str, Any, int, str, int | None]]:
    """(name, body, status, code, turn index) of records that must be refused."""
    record, _ = golden(ROOT / "tests" / "golden" / "readme_example_2p.json")

    def changed(change: Any) -> bytes:
        copy = json.loads(json.dumps(record))
        change(copy)
        return json.dumps(copy).encode()

    occupied = json.loads(json.dumps(record))
    occupied["turns"][0]["meeple"] = {"feature": "city", "edge": "N"}
    occupied["turns"][2] = {"tile": "E", "x": 1, "y": -1, "rotation": 3,
                            "meeple": {"feature": "city", "edge": "W"}}  # fmt: skip
    return [
        ("wrong format", changed(lambda r: r.update(format="pgn")), 422, "bad_format", None),
        ("not a record", b'["a", "list"]', 422, "bad_record", None),
        ("unknown tile", changed(lambda r: r["turns"][1].update(tile="ZZ")), 422,
         "unknown_tile", 1),
        ("overlapping tiles", changed(lambda r: r["turns"][2].update(x=0, y=-1)), 422,
         "square_taken", 2),
        ("meeple on an occupied feature", json.dumps(occupied).encode(), 422,
         "feature_occupied", 2),
        ("10 MB body", b'{"format": "' + b"x" * (10 * 1024 * 1024) + b'"}', 413,
         "body_too_large", None),
        ("deeply nested JSON", b"[" * 200_000 + b"]" * 200_000, 413, "body_too_large", None),
        ("nested JSON under the limit", b"[" * 60_000 + b"]" * 60_000, 400, "json_too_deep",
         None),
        ("nested objects", b'{"a":' * 30_000 + b"1" + b"}" * 30_000, 400, "json_too_deep",
         None),
        ("not JSON", b"{'format': 1}", 400, "invalid_json", None),
        ("not UTF-8", b"\xff\xfe\x00", 400, "invalid_json", None),
    ]  # fmt: skip


CASES = _hostile_cases()


def key_snapshot(client: redis.Redis) -> dict[bytes, bool]:
    """Every key of the store, and whether it is kept for good (no time to live). A rate
    limiter's bucket is left out: every request refills or makes its key's bucket before the
    body is read, refused or not, and a bucket expires about a second after it is full again
    (on a loaded machine, between a test's first request and its snapshot)."""
    keys = [k for k in client.scan_iter(count=1000) if not k.startswith(b"{apikeys}:bucket:")]
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.pttl(k)
    return {k: ttl == -1 for k, ttl in zip(keys, pipe.execute(), strict=True)}


def assert_nothing_stored(client: redis.Redis, before: dict[bytes, bool]) -> None:
    """No key was created, and every lasting key is still there. (Flags with a time to live,
    such as earlier tests' scoring notifications, may expire meanwhile: that is not a write.)"""
    after = key_snapshot(client)
    assert set(after) <= set(before), f"a refused record left keys: {set(after) - set(before)}"
    assert {k for k, kept in before.items() if kept} <= set(after), "a lasting key vanished"


@pytest.mark.parametrize("path", ["/v1/score", "/games/import"])
@pytest.mark.parametrize(("name", "body", "status", "code", "index"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_malformed_and_hostile_records_are_refused_and_store_nothing(
    client, key, redis_client, path, name, body, status, code, index
) -> None:
    record, _ = golden(GOLDEN[0])
    assert post(client, "/v1/score", key, json=record)[0] == 200  # the key works
    before = key_snapshot(redis_client)
    started = time.perf_counter()
    reply = client.post(path, data=body, content_type="application/json",
                        headers={"X-Api-Key": key})  # fmt: skip
    elapsed = time.perf_counter() - started
    error = reply.get_json()
    assert (reply.status_code, error["code"]) == (status, code), error
    assert set(error) == PROBLEM_KEYS
    if index is not None:
        assert error["details"]["index"] == index and error["rule"].startswith("R")
    assert_nothing_stored(redis_client, before)
    assert elapsed < 5.0, f"{name} took {elapsed:.2f} s"  # refused before it is all read


REFUSED_UNDER_SKIP = {"format": "carcassonne-record/1", "ruleset": {"tileset": "demo"},
                      "players": 3, "turns": [{"resign": 1, "takeover_refused": True}]}  # fmt: skip


@pytest.mark.parametrize("path", ["/v1/score", "/games/import"])
@pytest.mark.parametrize("form", ["json", "notation"])
def test_a_takeover_refused_that_the_replay_does_not_log_is_a_422_storing_nothing(
    client, key, redis_client, path, form
) -> None:
    """docs/takeover.md: no bot takes a seat over under `on_leave: "skip"`, so no takeover
    was refused; the record's flag would be dropped by its replay and re-export."""
    record = load_record(REFUSED_UNDER_SKIP)
    before = key_snapshot(redis_client)
    if form == "json":
        status, error = post(client, path, key, json=REFUSED_UNDER_SKIP)
    else:
        text = format_record(record)
        assert "resign:1/skip" in text
        status, error = post(client, path, key, data=text, content_type="text/plain")
    assert (status, error["code"], error["rule"]) == (422, "no_takeover_to_refuse", None), error
    assert error["details"] == {"player": 1, "index": 0} and set(error) == PROBLEM_KEYS
    assert error["type"] == "/errors#no_takeover_to_refuse"
    # The notation's suffix is read once: a second one is not a turn it writes.
    twice = format_record(record).replace("resign:1/skip", "resign:1/skip/skip")
    status, error = post(client, path, key, data=twice, content_type="text/plain")
    assert (status, error["code"]) == (422, "bad_notation"), error
    assert_nothing_stored(redis_client, before)


def test_a_body_without_content_length_is_cut_off_at_the_limit(client, key) -> None:
    """A chunked body (the server marks its stream as terminated) is read up to the limit."""
    reply = client.post("/v1/score", input_stream=io.BytesIO(b" " * (400 * 1024)),
                        content_type="application/json", headers={"X-Api-Key": key},
                        environ_overrides={"wsgi.input_terminated": True})  # fmt: skip
    assert reply.status_code == 413 and reply.get_json()["code"] == "body_too_large"


def random_records(count: int, seed: int) -> list[dict[str, Any]]:
    """Whole random legal games as records, over every ruleset option."""
    rng = random.Random(seed)
    rulesets = [Ruleset(), Ruleset(farm_scoring="1st"), Ruleset(farm_scoring="2nd"),
                Ruleset(tileset="demo", unplaceable="return"), Ruleset(area=(6, 5), meeples=3),
                Ruleset(farmers=False, incomplete_score=False),
                Ruleset(area=(7, 7), border_closes=True, hole_extra_turn=True),
                Ruleset(river=True), Ruleset(tileset="demo", river=True),
                Ruleset(river=True, abbot=True, tile_edition="2nd"),
                Ruleset(abbot=True),
                Ruleset(hand=3), Ruleset(hand=3, area=(5, 5), unplaceable="return")]  # fmt: skip
    out = []
    for i in range(count):
        _, events = random_game(rng, 2 + i % 5, rulesets[i % len(rulesets)])
        out.append(record_from_events(events).to_dict())
    return out


def test_import_then_export_round_trips_over_many_random_games(client, key, store) -> None:
    for i, record in enumerate(random_records(30, seed=6)):
        names = [f"p{i}-{n}" for n in range(record["players"])]
        status, created = post(client, "/games/import", key, json={**record, "names": names})
        assert status == 201, created
        assert (created["imported"], created["playable"]) == (True, False)
        assert [p["name"] for p in created["players"]] == names
        game_id = created["game_id"]
        exported = client.get(f"/games/{game_id}/record")
        assert exported.status_code == 200
        assert exported.headers["X-Carcassonne-Game-Over"] == "true"
        # The record with the import's names (an optional key of carcassonne-record/1).
        assert load_record(exported.get_json()) == load_record({**record, "names": names})
        assert exported.get_json() == {**load_record(record).to_dict(), "names": names}
        text = client.get(f"/games/{game_id}/record?format=notation")
        assert text.mimetype == "text/plain"
        notation = parse_record(text.get_data(as_text=True))  # names in its header too
        assert notation == load_record({**record, "names": names})
        status, scored = post(client, "/v1/score", key, json=exported.get_json())
        assert status == 200 and scored["final_scores"] == created["final_scores"]
        # The stored moves are the record's events: the same game for every reader.
        moves = store.read(game_id, MOVES)
        assert moves[-1].seq == created["seq"] and moves[-1].type == "GameEnded"
        logged = record_from_events(to_engine(e) for e in moves)  # names from the log itself
        assert logged == load_record({**record, "names": names})


def test_an_imported_game_is_over_and_cannot_be_played(client, key) -> None:
    record, expected = golden(GOLDEN[0])
    status, created = post(client, "/games/import", key, json=record)
    assert status == 201
    game_id = created["game_id"]
    turn = client.get(f"/games/{game_id}/turn").get_json()
    assert turn["over"] and turn["scores"] == expected["final_scores"] and turn["seed"] is None
    players = len(turn["scores"])
    assert [p["name"] for p in created["players"]] == [f"Player {i + 1}" for i in range(players)]
    reply = client.post(f"/games/{game_id}/turns", json={"x": 1, "y": 0, "rotation": 0},
                        headers={"Authorization": "Bearer anything"})  # fmt: skip
    assert reply.status_code == 403 and reply.get_json()["code"] == "bad_token"


def test_a_rated_import_says_so_in_its_record_and_a_bad_flag_is_refused(
    client, key, redis_client
) -> None:
    """`rated: true` marks the import for the ratings consumer (docs/ratings.md); a flag
    that is not a boolean is a 422 that stores nothing."""
    record, _ = golden(GOLDEN[0])
    status, created = post(client, "/games/import", key, json={**record, "rated": True})
    assert status == 201
    kept = json.loads(redis_client.get(secrets_key(created["game_id"])))
    assert kept["imported"]["rated"] is True
    before = key_snapshot(redis_client)
    status, body = post(client, "/games/import", key, json={**record, "rated": "yes"})
    assert (status, body["code"]) == (422, "bad_record") and "`rated`" in body["detail"]
    assert_nothing_stored(redis_client, before)


def test_bad_names_are_refused_before_anything_is_stored(client, key, redis_client) -> None:
    record, _ = golden(GOLDEN[0])
    before = key_snapshot(redis_client)
    status, body = post(client, "/games/import", key, json={**record, "names": ["only one"]})
    assert (status, body["code"], body["rule"]) == (422, "bad_names", "R1.3")
    assert_nothing_stored(redis_client, before)


def test_an_import_that_does_not_fit_the_log_is_refused_before_anything_is_stored(
    client, key, redis_client, monkeypatch
) -> None:
    """A hand record whose draw has a nonce longer than the log keeps (64 characters) replays
    by the rules; its events are checked against the stored schemas before anything is
    written (the store itself trusts what it is given, as the services run it)."""
    monkeypatch.setattr(port, "CHECK_PAYLOADS", False)
    record, _ = golden(ROOT / "tests" / "golden" / "hand_three_tiles_2p.json")
    record["draws"] = [{**d, "nonce": d["nonce"] + "x" * 64} for d in record["draws"]]
    assert post(client, "/v1/score", key, json=record)[0] == 200  # a legal game
    before = key_snapshot(redis_client)
    status, body = post(client, "/games/import", key, json=record)
    assert (status, body["code"]) == (422, "bad_record"), body
    assert "nonce" in body["message"]
    assert_nothing_stored(redis_client, before)


def test_a_game_in_progress_exports_its_turns_so_far(client) -> None:
    game_id, tokens = new_game(client.application, ["ann", "bob"])
    play(client.application, game_id, tokens, random.Random(3), turns=6)
    exported = client.get(f"/games/{game_id}/record")
    assert exported.headers["X-Carcassonne-Game-Over"] == "false"
    record = load_record(exported.get_json())
    # Six turns played; the server may also have discarded tiles that fit nowhere (R4.4).
    assert len([t for t in record.turns if not t.discard]) == 6
    assert record.names == ("ann", "bob")
    text = client.get(f"/games/{game_id}/record", headers={"Accept": "text/plain"})
    assert parse_record(text.get_data(as_text=True)) == record  # names in its header too
    etag = exported.headers["ETag"]
    again = client.get(f"/games/{game_id}/record", headers={"If-None-Match": etag})
    assert again.status_code == 304
    # Behind the proxy's gzip the ETag reaches the client weak (W/"…"): still a match.
    weak = client.get(f"/games/{game_id}/record", headers={"If-None-Match": "W/" + etag})
    assert weak.status_code == 304
    assert client.get(f"/games/{game_id}/record?format=pgn").status_code == 422
    assert client.get(f"/games/{'0' * 32}/record").get_json()["code"] == "game_not_found"
    assert client.get("/games/nope/record").status_code == 404


def test_webhook_registration_is_checked(client, key, redis_url) -> None:
    record, _ = golden(GOLDEN[0])
    game_id = post(client, "/games/import", key, json=record)[1]["game_id"]
    path = f"/games/{game_id}/webhooks"
    good = {"url": "http://127.0.0.1:9/in", "secret": "s" * 16}
    assert post(client, path, None, json=good)[0] == 401
    status, body = post(client, path, key, json={**good, "url": "gopher://x/"})
    assert (status, body["code"]) == (422, "bad_webhook_url")
    status, body = post(client, path, key, json={**good, "secret": "short"})
    assert (status, body["code"]) == (422, "bad_webhook_secret")
    assert post(client, path, key, json={**good, "extra": 1})[1]["code"] == "invalid_body"
    status, body = post(client, f"/games/{'f' * 32}/webhooks", key, json=good)
    assert (status, body["code"]) == (404, "game_not_found")
    strict = create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0}).test_client()
    status, body = post(strict, path, key, json=good)
    assert (status, body["code"]) == (422, "webhook_url_not_public")
    hooks = []
    for _ in range(10):
        status, body = post(client, path, key, json=good)
        assert status == 201
        hooks.append(body["hook_id"])
    assert post(client, path, key, json=good)[1]["code"] == "too_many_webhooks"
    log_path = f"{path}/{hooks[0]}/deliveries"
    reply = client.get(log_path, headers={"X-Api-Key": key})
    assert reply.status_code == 200 and reply.get_json()["deliveries"] == []
    other = ApiKeys(redis.Redis.from_url(redis_url)).create("someone else")[1]
    reply = client.get(log_path, headers={"X-Api-Key": other})
    assert reply.status_code == 404 and reply.get_json()["code"] == "hook_not_found"


def test_webhooks_are_registered_only_by_the_key_that_made_the_game(client, key, redis_url):
    """Issue 32, finding 5: another key could fill a game's hook slots. A hook is now a
    subscription of the key that registers it, on a game that key created or imported."""
    record, _ = golden(GOLDEN[0])
    game_id = post(client, "/games/import", key, json=record)[1]["game_id"]
    good = {"url": "http://127.0.0.1:9/in", "secret": "s" * 16}
    other = ApiKeys(redis.Redis.from_url(redis_url)).create("squatter")[1]
    status, body = post(client, f"/games/{game_id}/webhooks", other, json=good)
    assert (status, body["code"]) == (403, "not_game_owner")
    # A game without a key: only a development server (ANONYMOUS_GAMES) makes one.
    development = create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0, "ANONYMOUS_GAMES": True})
    players = [{"name": "a"}, {"name": "b"}]
    created = development.test_client().post("/games", json={"players": players})
    keyless = created.get_json()["game_id"]
    status, body = post(client, f"/games/{keyless}/webhooks", key, json=good)
    assert (status, body["code"]) == (403, "not_game_owner")
    assert post(client, f"/games/{game_id}/webhooks", key, json=good)[0] == 201
    # Managed through /games/{id}/webhooks only: the key's subscriptions list does not show it.
    listed = client.get("/v1/subscriptions", headers={"X-Api-Key": key}).get_json()
    assert listed["subscriptions"] == []


def test_a_key_lists_rotates_and_deletes_its_webhooks_and_has_a_cap_over_its_games(
    client, redis_url, monkeypatch
) -> None:
    """Issue 32, findings 5 and 6: hooks belong to the key that made them (listed, deleted,
    rotated by it alone; another key sees none of them), never show a secret, and a key has
    at most MAX_HOOKS_PER_KEY over all its games (here 3)."""
    from services.command import hooks as command_hooks
    from services.redis_store.keys import key_hooks_key, subscription_keys

    monkeypatch.setattr(command_hooks, "MAX_HOOKS_PER_KEY", 3)
    keys = ApiKeys(redis.Redis.from_url(redis_url))
    owner, other = keys.create("owner")[1], keys.create("other")[1]
    record, _ = golden(GOLDEN[0])
    games = [post(client, "/games/import", owner, json=record)[1]["game_id"] for _ in range(2)]
    good = {"url": "http://127.0.0.1:9/in", "secret": "s" * 16}
    made = [post(client, f"/games/{g}/webhooks", owner, json=good)[1]["hook_id"]
            for g in (games[0], games[0], games[1])]  # fmt: skip
    status, body = post(client, f"/games/{games[1]}/webhooks", owner, json=good)
    assert (status, body["code"]) == (422, "too_many_webhooks")  # the key's cap, over games

    def listed(game_id: str, key: str) -> list[dict[str, Any]]:
        reply = client.get(f"/games/{game_id}/webhooks", headers={"X-Api-Key": key})
        assert reply.status_code == 200, reply.get_json()
        return list(reply.get_json()["hooks"])

    hooks = listed(games[0], owner)
    assert sorted(h["hook_id"] for h in hooks) == sorted(made[:2])  # (same ms: either order)
    assert all(h["secrets_live"] == 1 and "secret" not in h for h in hooks)
    assert listed(games[0], other) == []  # another key's hooks are not its to know
    path = f"/games/{games[0]}/webhooks/{made[0]}"
    for key in (other, None):
        reply = client.delete(path, headers={"X-Api-Key": key} if key else {})
        assert reply.status_code == (404 if key else 401)
    status, rotated = post(client, path + "/rotate", owner,
                           json={"secret": "t" * 20, "overlap_seconds": 60})  # fmt: skip
    assert status == 200 and rotated["secrets_live"] == 2, rotated  # the old one overlaps
    assert "secret" not in rotated and rotated["signature"].startswith("Carcassonne-Signature")
    status, body = post(client, path + "/rotate", owner, json={"secret": "short"})
    assert (status, body["code"]) == (422, "invalid_body")
    status, body = post(client, path + "/rotate", other, json={"secret": "t" * 20})
    assert (status, body["code"]) == (404, "hook_not_found")

    reply = client.delete(path, headers={"X-Api-Key": owner})
    assert reply.status_code == 204
    assert [h["hook_id"] for h in listed(games[0], owner)] == [made[1]]
    assert client.delete(path, headers={"X-Api-Key": owner}).status_code == 404
    raw = redis.Redis.from_url(redis_url)
    assert not any(raw.exists(k) for k in subscription_keys(games[0], made[0]))
    record_of_owner = keys.get(owner)
    assert record_of_owner is not None
    assert raw.scard(key_hooks_key(record_of_owner["id"])) == 2  # its place given back
    assert post(client, f"/games/{games[1]}/webhooks", owner, json=good)[0] == 201


def test_the_api_key_cli_creates_lists_and_revokes(client, redis_url, capsys) -> None:
    assert apikeys.main(["--redis-url", redis_url, "create", "--name", "cli-co", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["key"].startswith("cck_") and made["name"] == "cli-co"
    record, _ = golden(GOLDEN[0])
    assert post(client, "/v1/score", made["key"], json=record)[0] == 200
    assert apikeys.main(["--redis-url", redis_url, "list"]) == 0
    listing = capsys.readouterr().out
    assert made["id"] in listing and "cli-co" in listing and made["key"] not in listing
    stored = redis.Redis.from_url(redis_url).hgetall(apikeys.KEYS)
    assert made["key"] not in repr(stored)  # only its hash is stored
    assert apikeys.main(["--redis-url", redis_url, "revoke", made["id"]]) == 0
    assert post(client, "/v1/score", made["key"], json=record)[0] == 403
    assert apikeys.main(["--redis-url", redis_url, "revoke", made["id"]]) == 1
    help_text = subprocess.run(
        [sys.executable, "-m", "services.command.apikeys", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert all(word in help_text.stdout for word in ("create", "list", "revoke"))  # fmt: skip


def test_v1_score_under_gunicorn(redis_url: str, key: str) -> None:
    """The deploy config serves it; hostile bodies get their 4xx over a real socket too."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 1) as base:
        for path in GOLDEN[:3]:
            record, expected = golden(path)
            status, body = call(base, "POST", "/v1/score", record, {"X-Api-Key": key})
            assert status == 200 and body["final_scores"] == expected["final_scores"]
        deep = b"[" * 60_000 + b"]" * 60_000
        status, body = call(base, "POST", "/v1/score", raw=deep, headers={"X-Api-Key": key})
        assert (status, body["code"]) == (400, "json_too_deep")
        big = b" " * (300 * 1024)
        status, body = call(base, "POST", "/v1/score", raw=big, headers={"X-Api-Key": key})
        assert (status, body["code"]) == (413, "body_too_large")


def test_concurrent_registrations_never_pass_the_hook_limit(app: Flask, client, key) -> None:
    """Review finding: the limit was read (HLEN) before the script added the hook, so two
    registrations at once could both take the last place. 30 at once: exactly 10 stored."""
    record, _ = golden(GOLDEN[0])
    game_id = post(client, "/games/import", key, json=record)[1]["game_id"]
    hooks = app.extensions["integration"].hooks
    owner = owner_key(app.extensions["integration"].service.secrets.get(game_id))
    assert owner is not None  # hooks are registered by the key that imported the game
    gate = threading.Barrier(30)
    outcomes: list[str] = []

    def register() -> None:
        gate.wait(timeout=10)
        try:
            hooks.register(game_id, "http://127.0.0.1:9/in", "s" * 16, owner)
            outcomes.append("added")
        except GameError as refused:
            outcomes.append(refused.code)

    threads = [threading.Thread(target=register) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(set(outcomes)) == ["added", "too_many_webhooks"]
    assert outcomes.count("added") == 10
    stored = app.extensions["integration"].hooks.client.hlen(hooks_key(game_id))
    assert stored == 10
