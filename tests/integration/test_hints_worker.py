"""Hints worked out by the bot worker (issue 32, finding 4), with real parts: the command
service under gunicorn with ONE sync worker, the bot worker as a real prefork Celery process,
a private Redis (its broker on db 1).

An mcts hint used to hold the sync web worker for HINT_THINK_MS: with one worker, every other
request of the service waited behind it. Now the request answers 202 at once (`Location`,
Retry-After), the bot worker searches, and the same URL answers 200 with the hint from its
fixed duration on. Every searched hint is charged to the seat's hint seconds in the game and
to its API key's bot budgets (in flight, per day, hints at once): over any of them a 429
with the budget named and a hint of what to do; asked again for the same position it costs
nothing. With no bot worker the hint answers 503 `hint_unavailable` once HINT_WAIT_MS has
passed, and its charges are given back.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from services.redis_store.apikeys import ApiKeys
from services.redis_store.bot_budget import day_key, hints_key
from services.redis_store.hint_store import HintStore, Limits
from tests.redis_server import private_redis
from tools.gameclient import hint as await_hint

from .http_client import call, free_port, gunicorn
from .workers import BOTS_APP, Process, celery_env, running, worker

pytestmark = pytest.mark.integration

THINK_MS, FLOOR_MS, WAIT_MS = 400, 100, 1_500
SETTINGS = {
    "NOTIFY_MS": "0",
    "HINT_THINK_MS": str(THINK_MS),
    "HINT_FLOOR_MS": str(FLOOR_MS),
    "HINT_WAIT_MS": str(WAIT_MS),
    "HINTS_IN_FLIGHT": "2",
    "HINT_SECONDS_PER_SEAT": "0.45",  # an mcts hint (0.4 s), then a greedy one is too many
    "BOT_SECONDS_PER_DAY": "8",  # one demo game with a greedy bot (6 s) and a few hints
    "BOT_SECONDS_IN_FLIGHT": "100",
}
HINTS_GAME = {"players": [{"name": "ann"}, {"name": "bob"}], "seat_order": [0, 1],
              "ruleset": {"tileset": "demo", "hints": True}}  # fmt: skip


@dataclass
class Stack:
    command: str  # one sync gunicorn worker
    url: str
    client: redis.Redis
    keys: ApiKeys

    def key(self) -> dict[str, str]:
        """A fresh API key of the test's own (its budgets untouched)."""
        return {"X-Api-Key": self.keys.create("hints")[1]}

    def game(self, key: dict[str, str], body: dict[str, Any] = HINTS_GAME) -> tuple[str, list[str]]:
        status, created = call(self.command, "POST", "/games", body, key)
        assert status == 201, created
        return created["game_id"], [p["token"] for p in created["players"]]

    def bot_worker(self, name: str) -> Process:
        env = celery_env(self.url, MAX_THINK_MS="1000", VISIBILITY_TIMEOUT="7")
        return worker(env, name, concurrency=1, pool="prefork", queues="bots", app=BOTS_APP)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with private_redis() as url:
        env = celery_env(url, **SETTINGS)
        with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 1) as base:
            client = redis.Redis.from_url(url)
            yield Stack(base, url, client, ApiKeys(client))
            client.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def get_hint(stack: Stack, game_id: str, token: str, level: str) -> tuple[int, Any, float]:
    """One GET of the hint: (status, body, seconds it took)."""
    t0 = time.perf_counter()
    status, body = call(stack.command, "GET", f"/games/{game_id}/hint?level={level}",
                        headers=bearer(token))  # fmt: skip
    return status, body, time.perf_counter() - t0


def day_charge(stack: Stack, key: dict[str, str]) -> float:
    key_id = stack.keys.get(key["X-Api-Key"])
    assert key_id is not None
    raw = stack.client.get(day_key(str(key_id["id"]), time.time()))
    return float(raw or 0)


def test_an_mcts_hint_is_asked_of_the_bot_worker_and_holds_no_web_worker(stack: Stack) -> None:
    """One sync web worker: the mcts hint answers 202 at once, and `GET /turn` on that same
    worker is answered meanwhile; the hint is shown from its fixed duration on (never
    sooner), the same move every time after, from one search."""
    key = stack.key()
    game_id, tokens = stack.game(key)
    with running(stack.bot_worker("hints1")):
        asked = time.perf_counter()
        status, pending, _ = get_hint(stack, game_id, tokens[0], "mcts")
        # 202 from the one web worker: it answered without searching (a search in the
        # request would have answered the hint itself).
        assert status == 202 and pending["status"] == "pending", pending
        assert pending["think_ms"] == THINK_MS and 200 <= pending["retry_after_ms"] <= THINK_MS
        served_while_pending = 0
        while True:  # the one web worker serves other requests while the hint is worked out
            status, view = call(stack.command, "GET", f"/games/{game_id}/turn")
            assert status == 200, view
            status, answer, _ = get_hint(stack, game_id, tokens[0], "mcts")
            if status == 200:
                break
            assert status == 202, answer
            served_while_pending += 1  # that /turn came while the hint was still pending
            assert time.perf_counter() - asked < 10, "no hint in 10 s"
        shown = time.perf_counter() - asked
        assert shown >= THINK_MS / 1000, shown  # its fixed duration: never sooner
        assert served_while_pending >= 1
        assert (
            answer["level"] == "mcts" and answer["player"] == 0 and answer["think_ms"] == THINK_MS
        )
        legal = {(p["x"], p["y"], p["rotation"]) for p in view["placements"]}
        assert (answer["x"], answer["y"], answer["rotation"]) in legal
        for _ in range(20):  # asked again: at once, the same, no new search nor charge
            status, again, _ = get_hint(stack, game_id, tokens[0], "mcts")
            assert (status, again) == (200, answer)
    assert day_charge(stack, key) == pytest.approx(THINK_MS / 1000)


def test_a_hint_asked_by_the_seat_not_to_move_is_refused_and_charges_nothing(
    stack: Stack,
) -> None:
    key = stack.key()
    game_id, tokens = stack.game(key)
    status, refused, _ = get_hint(stack, game_id, tokens[1], "mcts")
    assert (status, refused["code"]) == (409, "not_your_turn")
    status, refused, _ = get_hint(stack, game_id, "not-a-token", "mcts")
    assert (status, refused["code"]) == (403, "bad_token")
    assert day_charge(stack, key) == 0


def test_hint_spam_from_one_key_is_bounded_by_its_budgets(stack: Stack) -> None:
    """No worker runs: asks stay pending. The same position asked 30 times is one ask; a
    key's third hint at once is refused (HINTS_IN_FLIGHT 2: 429 bot_budget_exceeded,
    `hints_in_flight`); a seat's hints past HINT_SECONDS_PER_SEAT are refused (429
    hint_budget_exceeded), and past the key's bot seconds for the day (429
    bot_day_budget_exceeded, Retry-After until UTC midnight), games too."""
    key = stack.key()
    games = [stack.game(key) for _ in range(3)]
    for _ in range(30):
        status, body, _ = get_hint(stack, games[0][0], games[0][1][0], "mcts")
        assert status == 202, body
    assert day_charge(stack, key) == pytest.approx(THINK_MS / 1000)
    status, body, _ = get_hint(stack, games[1][0], games[1][1][0], "mcts")
    assert status == 202, body
    status, refused, _ = get_hint(stack, games[2][0], games[2][1][0], "mcts")
    assert (status, refused["code"]) == (429, "bot_budget_exceeded"), refused
    assert refused["details"]["budget"] == "hints_in_flight" and refused["hint"]
    # A seat's own budget: an mcts hint (0.4 s) of its 0.45 s, then a greedy one (0.1 s)
    # does not fit.
    key2 = stack.key()
    game_id, tokens = stack.game(key2)
    assert get_hint(stack, game_id, tokens[0], "mcts")[0] == 202
    status, refused, _ = get_hint(stack, game_id, tokens[0], "greedy")
    assert (status, refused["code"]) == (429, "hint_budget_exceeded"), refused
    assert refused["details"]["limit_seconds"] == 0.45 and refused["details"]["budget"] == "seat"
    # The key's day: a demo game with a greedy bot reserves 6 s of its 8, an mcts hint 0.4
    # s more; the next game is refused until the day's end (UTC).
    key3 = stack.key()
    body = {**HINTS_GAME, "players": [{"name": "ann"}, {"name": "robo", "bot": "greedy"}]}
    game_id, tokens = stack.game(key3, body)
    assert get_hint(stack, game_id, tokens[0], "mcts")[0] == 202
    assert day_charge(stack, key3) == pytest.approx(6.4)
    host, port = stack.command.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/games", json.dumps(body), {**key3, "Content-Type": "application/json"})
    reply = conn.getresponse()
    refused = json.loads(reply.read())
    conn.close()
    assert (reply.status, refused["code"]) == (429, "bot_day_budget_exceeded"), refused
    assert refused["details"]["budget"] == "day" and refused["details"]["used_seconds"] == 6.4
    to_midnight = 86_400 - int(time.time()) % 86_400
    assert abs(int(reply.getheader("Retry-After") or 0) - to_midnight) <= 5


def test_with_no_bot_worker_a_hint_answers_503_in_time_and_its_charge_is_given_back(
    stack: Stack,
) -> None:
    """The bot worker is down: the hint is pending for its duration + HINT_WAIT_MS, then a
    clear 503 `hint_unavailable` with Retry-After (never a request that hangs), its charges
    given back. With a worker started, asked again, it is answered."""
    key = stack.key()
    game_id, tokens = stack.game(key)
    asked = time.perf_counter()
    answers = []
    while True:
        status, body, took = get_hint(stack, game_id, tokens[0], "greedy")
        answers.append(status)
        assert took < 5, took  # never a request that waits for the hint
        if status != 202:
            break
        assert time.perf_counter() - asked < 10
        time.sleep(0.1)
    waited = time.perf_counter() - asked
    assert (status, body["code"]) == (503, "hint_unavailable"), body
    assert (FLOOR_MS + WAIT_MS) / 1000 <= waited < (FLOOR_MS + WAIT_MS) / 1000 + 2, waited
    assert day_charge(stack, key) == pytest.approx(0)
    with running(stack.bot_worker("hints2")):
        status, answer = await_hint(stack.command, game_id, bearer(tokens[0]), "greedy", 15,
                                    call)  # fmt: skip
    assert status == 200 and answer["level"] == "greedy", answer
    assert day_charge(stack, key) == pytest.approx(FLOOR_MS / 1000)


def test_a_worker_late_for_a_hint_given_up_writes_nothing(stack: Stack) -> None:
    """HintStore on the real Redis: a hint given up (its charges back, its in-flight entry
    gone) is not written by a worker that comes to it later; asked again, it is a new ask
    (another nonce), which that late worker cannot answer either."""
    store = HintStore(stack.client)
    limits = Limits(in_flight=100, day=100, seat=10, at_once=4)
    record, new, refused = store.ask("k_late", "g-late", 3, "greedy", 0, 150, 1_000, limits)
    assert new and refused is None and record is not None
    assert stack.client.zcard(hints_key("k_late")) == 1
    assert store.abandon("k_late", "g-late", 3, "greedy", record)
    assert not store.abandon("k_late", "g-late", 3, "greedy", record)  # once
    assert stack.client.zcard(hints_key("k_late")) == 0
    assert float(stack.client.get(day_key("k_late", time.time())) or 0) == 0
    assert not store.done("k_late", "g-late", 3, "greedy", 150, record["nonce"], {"x": 1}, 0)
    assert store.get("k_late", "g-late", 3, "greedy") is None
    again, new, _ = store.ask("k_late", "g-late", 3, "greedy", 0, 150, 1_000, limits)
    assert new and again is not None and again["nonce"] != record["nonce"]
    assert not store.done("k_late", "g-late", 3, "greedy", 150, record["nonce"], {"x": 1}, 0)
    assert store.done("k_late", "g-late", 3, "greedy", 150, again["nonce"], {"x": 2}, 5)
    written = store.get("k_late", "g-late", 3, "greedy")
    assert written is not None and written["state"] == "ready" and written["ready_ms"] == 5
    assert json.loads(written["answer"]) == {"x": 2} and written["asked_ms"] == again["asked_ms"]


def test_a_hint_whose_task_cannot_be_sent_answers_503_at_once(stack: Stack) -> None:
    """The broker is down (nothing listens at BROKER_URL): the hint answers 503
    `hint_unavailable` at once, never a request that hangs, and charges nothing."""
    env = {**celery_env(stack.url, **SETTINGS), "BROKER_URL": f"redis://127.0.0.1:{free_port()}/1"}
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 1) as base:
        key = stack.key()
        status, created = call(base, "POST", "/games", HINTS_GAME, key)
        assert status == 201, created
        t0 = time.perf_counter()
        status, refused = call(base, "GET", f"/games/{created['game_id']}/hint?level=mcts",
                               headers=bearer(created["players"][0]["token"]))  # fmt: skip
        took = time.perf_counter() - t0
    assert (status, refused["code"]) == (503, "hint_unavailable") and took < 3, (refused, took)
    assert day_charge(stack, key) == 0


def test_a_late_worker_leaves_the_in_flight_entry_of_the_hint_asked_again(
    redis_client: redis.Redis,
) -> None:
    """A hint given up (the worker late) and asked again is a new ask under the same
    in-flight member (position, level, ms). The late worker's copy of the old task found its
    nonce gone and dropped that member (`drop`), and a stale `done` removed it before it
    checked the nonce: the new ask, still queued, no longer counted against the key's hints
    at once or seconds in flight, so a slow worker's backlog could grow past them."""
    store, key = HintStore(redis_client), "k_relate"
    limits = Limits(in_flight=100, day=100, seat=10, at_once=4)
    first, new, _ = store.ask(key, "g-relate", 3, "greedy", 0, 150, 1_000, limits)
    assert new and first is not None
    assert store.abandon(key, "g-relate", 3, "greedy", first)
    again, new, _ = store.ask(key, "g-relate", 3, "greedy", 0, 150, 1_000, limits)
    assert new and again is not None
    assert redis_client.zcard(hints_key(key)) == 1
    assert not store.is_pending(key, "g-relate", 3, "greedy", first["nonce"])
    store.drop(key, "g-relate", 3, "greedy", 150, first["nonce"])  # the late task: gone
    assert redis_client.zcard(hints_key(key)) == 1
    assert not store.done(key, "g-relate", 3, "greedy", 150, first["nonce"], {"x": 1}, 0)
    assert redis_client.zcard(hints_key(key)) == 1
    assert store.done(key, "g-relate", 3, "greedy", 150, again["nonce"], {"x": 2}, 5)
    assert redis_client.zcard(hints_key(key)) == 0
