"""The session's running suite: both services under gunicorn with their deploy configs (one
worker each), a real scoring worker, a private Redis, and games made and played over HTTP.

One per test session (per pytest-xdist worker): the contract tests fuzz it, and every
integration test that only needs "a running suite" uses it (`suite` in tests/conftest.py).
Tests keep to their own games and API keys, so they stay independent; a test that changes a
setting starts private servers instead."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis

from services.command.apikeys import ApiKeys
from tests.integration.http_client import api_key, call, gunicorn
from tests.integration.workers import celery_env, running, worker

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
QUERY = ("services.query.wsgi:app", "deploy/gunicorn/query.py")


@dataclass
class Game:
    """A game made for the tests: its id and each seat's token."""

    game_id: str
    tokens: dict[int, str]


@dataclass
class Stack:
    command: str  # base URLs
    query: str
    redis_url: str
    api_key: str
    games: dict[str, Game] = field(default_factory=dict)
    subscription_id: str = ""  # one of the key's subscriptions, kept all run


@contextmanager
def running_stack(
    redis_url: str, users: Mapping[str, str] | None = None, **query_settings: str
) -> Iterator[Stack]:
    """Both services (1 sync command worker, 1 gevent query worker), a scoring worker, and an
    API key; everything stopped afterwards. `users`: each role's URL (tests/redis_server.py
    `acl_redis`): each part connects as its role's Redis user, as `make run` runs them;
    `query_settings` override the query service's."""
    env = celery_env(redis_url)
    role = dict(users or {})
    if users:
        env = {"REDIS_URL": role["worker"], "BROKER_URL": role["broker"]}
    command_env = {
        **env,
        "REDIS_URL": role.get("command", env["REDIS_URL"]),
        "API_KEY_RATE": "0",  # no rate limit: the fuzzer would spend its examples on 429s
    }
    query_env = {"REDIS_URL": role.get("query", redis_url), "SSE_MAX_SECONDS": "0.5",
                 "SSE_HEARTBEAT_SECONDS": "0.2", **query_settings}  # fmt: skip
    client = redis.Redis.from_url(role.get("admin", redis_url))
    key_id, key = ApiKeys(client).create("contract-tests")
    with ExitStack() as stack:
        command = stack.enter_context(gunicorn(*COMMAND, command_env, workers=1))
        query = stack.enter_context(gunicorn(*QUERY, query_env, workers=1))
        stack.enter_context(running(worker(env, name="contract")))
        try:
            yield Stack(command, query, redis_url, key)
        finally:
            ApiKeys(client).revoke(key_id)
            client.close()


def new_game(base: str, names: list[str], ruleset: dict[str, Any] | None = None) -> Game:
    """A game with its seats in the order of `names`, created with the tests' API key (not
    the stack's: its subscription covers none of these games)."""
    body: dict[str, Any] = {
        "players": [{"name": n} for n in names],
        "seat_order": list(range(len(names))),
    }
    if ruleset is not None:
        body["ruleset"] = ruleset
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return Game(created["game_id"], {p["seat"]: p["token"] for p in created["players"]})


def play(base: str, game: Game, rng: random.Random, turns: int | None = None) -> dict[str, Any]:
    """Legal turns from GET /turn's placements (all of them by default); the last turn view."""
    for played in range(1_000):  # bounded: a game has at most 72 draws
        status, view = call(base, "GET", f"/games/{game.game_id}/turn")
        assert status == 200, view
        if view["over"] or (turns is not None and played >= turns):
            return dict(view)
        place = rng.choice(view["placements"])
        meeple = rng.choice([None, *place["meeples"]])
        body = {"x": place["x"], "y": place["y"], "rotation": place["rotation"], "meeple": meeple}
        auth = {"Authorization": f"Bearer {game.tokens[view['player']]}"}
        status, result = call(base, "POST", f"/games/{game.game_id}/turns", body, auth)
        assert status == 200, result
    raise AssertionError("the game did not end")


# A public https URL (the stack runs without WEBHOOK_ALLOW_PRIVATE, as in production). Its
# `.example` name never resolves (RFC 2606), and the stack's worker consumes only the scoring
# queue: no delivery nor ping ever leaves the machine.
RECEIVER = "https://receiver.example/carcassonne"


def new_subscription(base: str, api_key: str) -> str:
    """A subscription of the key's games to every event kind; its id."""
    body = {"url": RECEIVER, "kinds": ["turn_started", "move_made", "game_over"]}
    status, created = call(base, "POST", "/v1/subscriptions", body, {"X-Api-Key": api_key})
    assert status == 201, created
    return str(created["subscription_id"])


def wait_scored(query: str, game_id: str, timeout: float = 60) -> dict[str, Any]:
    """The scores view once the worker has scored every move and the game's end."""
    deadline = time.monotonic() + timeout
    while True:
        status, scores = call(query, "GET", f"/games/{game_id}/scores")
        if status == 200 and scores["over"] and scores["result"] and not scores["unscored_moves"]:
            return dict(scores)
        if time.monotonic() > deadline:
            raise AssertionError(f"game {game_id} not scored: {status} {scores}")
        time.sleep(0.05)
