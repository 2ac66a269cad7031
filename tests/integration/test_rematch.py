"""`POST /games/{id}/rematch` and a matchmaking match end to end: real Redis, the command
service under gunicorn (two workers), a Celery worker and beat, and a subscription receiver.
A match of three tickets is delivered to the key as one `match_found` naming every seat's
ticket. Twenty rematch requests at
once make one game (one 201 with the tokens, the others 200 with none), seats rotated by one;
its tokens play; the key's subscription hears `game_started` with every seat; and the
refusals (a game not over, another key's game, no key, no game) change nothing."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES
from services.archive.archiver import Archiver
from services.archive.sqlite import SqliteArchive
from services.command.apikeys import ApiKeys
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.redis_store import RedisEventStore, secrets_key
from services.redis_store.bot_budget import BotBudget, day_key, in_flight_key, release
from services.redis_store.keys import index_shard
from services.scoring.scorer import Scorer

from .http_client import call, gunicorn
from .test_subscriptions_worker import Receiver, wait_for
from .workers import beat, celery_env, running, worker


@pytest.fixture(scope="module")
def suite(redis_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(command base URL, the key's headers) with a worker and beat running."""
    env = celery_env(redis_url, WEBHOOK_ALLOW_PRIVATE="1", SWEEP_SECONDS="2")
    _, key = ApiKeys(redis.Redis.from_url(redis_url)).create("rematches")
    processes = (worker(env, name="rw1", queues="scoring,webhooks"), beat(env))
    with (
        running(*processes),
        gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, workers=2) as base,
    ):
        yield base, {"X-Api-Key": key}


def finished_game(base: str, headers: dict[str, str]) -> tuple[str, dict[int, str]]:
    """A 2-player game (Ann seat 0, Bob seat 1) ended by Bob's resignation."""
    body = {
        "players": [{"name": "Ann", "player_id": "u-ann"}, {"name": "Bob", "player_id": "u-bob"}],
        "seat_order": [0, 1],
    }
    status, created = call(base, "POST", "/games", body, headers)
    assert status == 201, created
    game_id = created["game_id"]
    tokens = {p["seat"]: p["token"] for p in created["players"]}
    status, resigned = call(base, "POST", f"/games/{game_id}/resign", None,
                            {"Authorization": f"Bearer {tokens[1]}"})  # fmt: skip
    assert status == 200 and resigned["next"]["over"], resigned
    return game_id, tokens


def test_rematches_at_once_make_one_game_with_seats_rotated_and_every_player_hears_of_it(
    suite: tuple[str, dict[str, str]], redis_client: redis.Redis
) -> None:
    base, headers = suite
    receiver = Receiver()
    receiver.up()
    try:
        status, sub = call(base, "POST", "/v1/subscriptions",
                           {"url": receiver.url, "kinds": ["game_started"]}, headers)  # fmt: skip
        assert status == 201, sub
        game_id, _ = finished_game(base, headers)

        def rematch(_: int) -> tuple[int, Any]:
            return call(base, "POST", f"/games/{game_id}/rematch", None, headers)

        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(rematch, range(20)))
        made = [answer for status, answer in answers if status == 201]
        again = [answer for status, answer in answers if status == 200]
        assert len(made) == 1 and len(again) == 19, [status for status, _ in answers]
        new_id = made[0]["game_id"]
        assert new_id != game_id and {a["game_id"] for a in again} == {new_id}
        assert all(not a["created"] and all(p["token"] is None for p in a["players"])
                   for a in again)  # fmt: skip
        seats = [(p["seat"], p["previous_seat"], p["player_id"]) for p in made[0]["players"]]
        assert seats == [(0, 1, "u-bob"), (1, 0, "u-ann")]
        record = json.loads(redis_client.get(secrets_key(new_id)) or "{}")
        assert record["rematch_of"] == game_id and record["names"] == ["Bob", "Ann"]
        # The new tokens are the new seats': Bob moves first now.
        status, turn = call(base, "GET", f"/games/{new_id}/turn")
        assert status == 200 and turn["player"] == 0 and turn["player_name"] == "Bob"
        first = made[0]["players"][0]["token"]
        place = {k: turn["placements"][0][k] for k in ("x", "y", "rotation")} | {"meeple": None}
        status, played = call(base, "POST", f"/games/{new_id}/turns", place,
                              {"Authorization": f"Bearer {first}"})  # fmt: skip
        assert status == 200, played

        # One `game_started` per game, each naming every seat: the new one rotated.
        def heard() -> list[dict[str, Any]]:
            return [b for b in receiver.bodies("game_started") if b["game_id"] == new_id]

        body = wait_for("game_started of the rematch", heard)[0]
        assert body["data"]["players"] == [
            {"seat": 0, "player_id": "u-bob", "name": "Bob"},
            {"seat": 1, "player_id": "u-ann", "name": "Ann"},
        ]
        first_game = [b for b in receiver.bodies("game_started") if b["game_id"] == game_id]
        wait_for("game_started of the first game", lambda: first_game or [
            b for b in receiver.bodies("game_started") if b["game_id"] == game_id
        ])  # fmt: skip
        assert len(heard()) == 1
    finally:
        receiver.down()


def test_a_rematch_is_refused_before_the_end_to_other_keys_and_without_a_key(
    suite: tuple[str, dict[str, str]], redis_url: str, redis_client: redis.Redis
) -> None:
    base, headers = suite
    status, created = call(base, "POST", "/games",
                           {"players": [{"name": "A"}, {"name": "B"}]}, headers)  # fmt: skip
    live = created["game_id"]
    over, _ = finished_game(base, headers)
    other = {"X-Api-Key": ApiKeys(redis.Redis.from_url(redis_url)).create("other")[1]}
    refusals = [
        (live, headers, 409, "game_not_over"),
        (over, other, 403, "not_game_owner"),
        (over, {}, 401, "missing_api_key"),
        (over, {"X-Api-Key": "cck_unknown"}, 403, "bad_api_key"),
        ("0" * 32, headers, 404, "game_not_found"),
        ("not-a-game", headers, 404, "game_not_found"),
    ]
    keys_before = set(redis_client.scan_iter(match="*:secrets"))
    for game_id, sent, status, code in refusals:
        got, answer = call(base, "POST", f"/games/{game_id}/rematch", None, sent)
        assert (got, answer["code"]) == (status, code), (game_id, answer)
    assert set(redis_client.scan_iter(match="*:secrets")) == keys_before


def test_a_rematch_retried_after_its_first_request_died_charges_its_bots_once(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rematch reserves its bot seats' seconds (docs/bots.md) before it stores the new game.
    A first request that dies between the two (the store went away: a 503 the platform
    retries), or a second request at once, must not charge the key's day (or its in-flight
    check) twice for the one game the rematch's id names."""
    key = "k_rematch_" + uuid.uuid4().hex[:8]
    budget = BotBudget(redis_client, 7_200, 28_800)
    games = GameService(RedisEventStore(redis_client), RedisSecrets(redis_client),
                        bot_budget=budget, move_floor_ms=250)  # fmt: skip
    game_id, seats = games.create_game(
        ["ann", "robot"], Ruleset(tileset="demo"), [0, 1], key_id=key,
        bots=[None, {"level": "greedy", "think_ms": 1}],
    )  # fmt: skip
    games.resign(game_id, seats[0]["token"])  # the last human leaves: over
    release(redis_client, key, game_id)  # the bot consumer saw its end
    day_before = float(redis_client.get(day_key(key, time.time())) or 0)

    def down(*_: Any) -> Any:
        raise redis.ConnectionError("the store went away")

    monkeypatch.setattr(games, "start_prepared", down)
    with pytest.raises(redis.ConnectionError):
        games.rematch(game_id, key)
    monkeypatch.undo()
    made = games.rematch(game_id, key)
    assert made["created"] and made["players"][0]["bot"]
    share = redis_client.zscore(in_flight_key(key), made["game_id"])
    assert share and share > 0
    assert float(redis_client.get(day_key(key, time.time())) or 0) == day_before + share
    assert not games.rematch(game_id, key)["created"]  # a repeat: nothing more
    assert float(redis_client.get(day_key(key, time.time())) or 0) == day_before + share


def test_a_rematch_asked_again_after_its_game_went_to_the_archive_makes_it_no_second_time(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The rematch's id is derived from its old game's, so once the rematch was played and
    archived (its secrets and streams left Redis, its tombstone stayed) while the old game
    is still in Redis (held back from the archive, or restored for support), a rematch asked
    again names the archived game: 200, `created` false, no tokens — not a second game
    started under that id with new tokens beside the one in the archive."""
    key = "k_rematch_" + uuid.uuid4().hex[:8]
    store = RedisEventStore(redis_client)
    games = GameService(store, RedisSecrets(redis_client))
    game_id, seats = games.create_game(["ann", "bob"], Ruleset(tileset="demo"), [0, 1], key_id=key)
    games.resign(game_id, seats[1]["token"])
    made = games.rematch(game_id, key)
    new_id = made["game_id"]
    games.resign(new_id, made["players"][0]["token"])  # the rematch is over too
    for played in (game_id, new_id):
        Scorer(store).catch_up(played)
    archiver = Archiver(redis_client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.archive_game(index_shard(new_id), new_id) == "archived"

    again = games.rematch(game_id, key)
    assert (again["game_id"], again["created"]) == (new_id, False)
    assert all(p["token"] is None for p in again["players"])
    assert not redis_client.exists(secrets_key(new_id)) and store.last_seq(new_id, MOVES) == 0


def test_a_match_is_delivered_to_the_key_as_match_found_with_every_seats_ticket(
    suite: tuple[str, dict[str, str]],
) -> None:
    base, headers = suite
    receiver = Receiver()
    receiver.up()
    try:
        status, sub = call(base, "POST", "/v1/subscriptions",
                           {"url": receiver.url, "kinds": ["match_found"]}, headers)  # fmt: skip
        assert status == 201, sub
        tickets = {}
        for player in ("m-ann", "m-bob", "m-cy"):
            body = {"player_id": player, "ruleset": "classic", "players": 3}
            status, ticket = call(base, "POST", "/tickets", body, headers)
            assert status == 201, ticket
            tickets[player] = ticket["ticket_id"]
        game_id = ticket["game_id"]
        assert ticket["state"] == "matched" and game_id

        def heard() -> list[dict[str, Any]]:
            return [b for b in receiver.bodies("match_found") if b["game_id"] == game_id]

        body = wait_for("match_found", heard)[0]
        seats = body["data"]["players"]
        assert sorted(s["seat"] for s in seats) == [0, 1, 2]
        assert {s["player_id"]: s["ticket_id"] for s in seats} == tickets
        for seat in seats:  # the seat a poll of its ticket says
            status, polled = call(base, "GET", f"/tickets/{seat['ticket_id']}", None, headers)
            assert polled["seat"] == seat["seat"] and polled["game_id"] == game_id
        assert not [b for b in receiver.bodies() if b["kind"] != "match_found"]
    finally:
        receiver.down()
