"""Subscriptions per API key end to end (issue 17): real Redis, the command service under
gunicorn, a Celery worker (scoring and webhook queues) and beat, and a receiver that is a real
HTTP server on a loopback port (the development setting allows it).

- a 3-player game created with the key, played through the HTTP API to its end, with the
  receiver down in the middle for two backoff caps (8 s, connections refused): every
  `turn_started` and `move_made` arrives once, in the game's order, each signature valid; the
  seats and player ids are the ones the game's move stream says;
- a ping, a secret rotation (both secrets sign during the overlap), the delivery log.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis

from eventstore.envelope import MOVES
from services.command.apikeys import ApiKeys
from services.common.signing import SIGNATURE_HEADER, verify
from services.redis_store import RedisEventStore

from .http_client import call, free_port, gunicorn
from .workers import beat, celery_env, running, worker

BACKOFF_MAX_S = 4.0
# Two backoff caps: long enough that retries reach the cap and wait it out at least once;
# a longer outage only repeats the same capped retry (it proves nothing more).
OUTAGE_S = 2 * BACKOFF_MAX_S


class Receiver:
    """An HTTP receiver on a fixed loopback port that can go down (connections refused) and
    come back; keeps every POST it answered 200, in arrival order."""

    def __init__(self) -> None:
        self.port = free_port()  # kept across down() and up(): the receiver's one address
        self.url = f"http://127.0.0.1:{self.port}/carcassonne/in"
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.got.append((dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def bodies(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            out = [json.loads(b) for _, b in self.got]
        return [b for b in out if kind is None or b["kind"] == kind]


def wait_for(what: str, check: Any, timeout: float = 60.0) -> Any:
    """Poll `check()` until it is truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def suite(redis_url: str) -> Iterator[tuple[str, str, str]]:
    """(command base URL, API key, key id) with a worker and beat running."""
    env = celery_env(
        redis_url,
        WEBHOOK_ALLOW_PRIVATE="1",
        WEBHOOK_BACKOFF_BASE="0.5",
        WEBHOOK_BACKOFF_MAX=str(BACKOFF_MAX_S),
        SWEEP_SECONDS="2",
    )
    key_id, key = ApiKeys(redis.Redis.from_url(redis_url)).create("subscriber")
    processes = (worker(env, name="sw1", queues="scoring,webhooks"), beat(env))
    with (
        running(*processes),
        gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, workers=2) as base,
    ):
        yield base, key, key_id


def play_turn(base: str, game_id: str, tokens: dict[int, str], rng: random.Random) -> bool:
    """One random legal turn over HTTP; False once the game is over."""
    status, view = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200, view
    if view["over"]:
        return False
    placement = rng.choice(view["placements"])
    meeple = rng.choice([None, *placement["meeples"]])
    body = {"x": placement["x"], "y": placement["y"], "rotation": placement["rotation"],
            "meeple": meeple}  # fmt: skip
    auth = {"Authorization": f"Bearer {tokens[view['player']]}"}
    status, result = call(base, "POST", f"/games/{game_id}/turns", body, auth)
    assert status == 200, result
    return True


def expected_feed(store: RedisEventStore, game_id: str) -> list[tuple[str, int, int]]:
    """(kind, move seq, seat) of every turn_started and move_made, from the move stream
    read here: a placement or discard is its player's move; a drawn tile starts the turn of
    the seat that places or discards next."""
    events = store.read(game_id, MOVES)
    out: list[tuple[str, int, int]] = []
    for i, event in enumerate(events):
        if event.type in ("TilePlaced", "TileDiscarded"):
            out.append(("move_made", event.seq, int(event.payload["player"])))
        elif event.type == "TileDrawn":
            after = [e for e in events[i + 1 :] if e.type in ("TilePlaced", "TileDiscarded")]
            if after:
                out.append(("turn_started", event.seq, int(after[0].payload["player"])))
    return out


@pytest.mark.slow
def test_a_three_player_game_is_delivered_once_in_order_across_an_outage(
    suite: tuple[str, str, str], redis_url: str
) -> None:
    base, key, _ = suite
    receiver = Receiver()
    receiver.up()
    headers = {"X-Api-Key": key}
    body = {"url": receiver.url, "kinds": ["turn_started", "move_made"]}
    status, sub = call(base, "POST", "/v1/subscriptions", body, headers)
    assert status == 201, sub
    secret = sub["secret"]
    ids = ["ann-1", "bob-2", "cy-3"]
    players = [{"name": n, "player_id": i} for n, i in zip(["Ann", "Bob", "Cy"], ids, strict=True)]
    game = {"players": players, "seat_order": [0, 1, 2]}
    status, created = call(base, "POST", "/games", game, headers)
    assert status == 201, created
    game_id = created["game_id"]
    tokens = {p["seat"]: p["token"] for p in created["players"]}
    rng = random.Random(17)
    # The first turn is announced without any move (the worker passes the game's start).
    wait_for("the first turn_started", lambda: receiver.bodies("turn_started"))
    for _ in range(15):
        assert play_turn(base, game_id, tokens, rng)
    wait_for("the first moves", lambda: len(receiver.bodies("move_made")) >= 15)
    receiver.down()
    down_at = time.monotonic()
    for _ in range(10):  # played while the receiver is down
        assert play_turn(base, game_id, tokens, rng)

    def refused() -> bool:
        _, log = call(base, "GET", f"/v1/subscriptions/{sub['subscription_id']}/deliveries",
                      headers=headers)  # fmt: skip
        return any(a["status"] is None and a["outcome"] == "retrying" for a in log["attempts"])

    wait_for("a refused attempt in the delivery log", refused)
    while time.monotonic() - down_at < OUTAGE_S:  # the outage itself
        time.sleep(0.5)
    receiver.up()
    while play_turn(base, game_id, tokens, rng):
        pass
    store = RedisEventStore(redis.Redis.from_url(redis_url))
    expected = expected_feed(store, game_id)
    wait_for(
        "every notification",
        lambda: len(receiver.bodies()) >= len(expected),
        timeout=120,
    )
    got = receiver.bodies()
    assert [(b["kind"], b["seq"], b["data"]["seat"]) for b in got] == expected
    assert len({b["delivery"] for b in got}) == len(got)  # each once
    assert all(b["game_id"] == game_id for b in got)
    assert all(b["data"]["player_id"] == ids[b["data"]["seat"]] for b in got)
    assert all(b["data"]["deadline_ms"] is None for b in got if b["kind"] == "turn_started")
    now = time.time()
    with receiver.lock:
        raw = list(receiver.got)
    for sent, payload in raw:
        assert verify(sent[SIGNATURE_HEADER], payload, secret, now, window=600), sent
        assert not verify(sent[SIGNATURE_HEADER], payload + b" ", secret, now, window=600)
    receiver.down()


def test_ping_rotation_and_the_delivery_log(suite: tuple[str, str, str]) -> None:
    base, key, _ = suite
    receiver = Receiver()
    receiver.up()
    headers = {"X-Api-Key": key}
    status, sub = call(base, "POST", "/v1/subscriptions", {"url": receiver.url, "kinds": ["score"]},
                       headers)  # fmt: skip
    assert status == 201
    path = f"/v1/subscriptions/{sub['subscription_id']}"
    status, sent = call(base, "POST", path + "/ping", headers=headers)
    assert status == 202
    ping = wait_for("the ping", lambda: receiver.bodies("ping"))[0]
    assert ping["delivery"] == sent["delivery"]
    status, rotated = call(base, "POST", path + "/rotate", {"overlap_seconds": 600}, headers)
    assert status == 200 and rotated["secrets_live"] == 2 and rotated["secret"] != sub["secret"]
    assert call(base, "POST", path + "/ping", headers=headers)[0] == 202
    wait_for("the second ping", lambda: len(receiver.bodies("ping")) == 2)
    with receiver.lock:
        (first_headers, first), (second_headers, second) = receiver.got[:2]
    now = time.time()
    assert first_headers[SIGNATURE_HEADER].count("v1=") == 1
    assert second_headers[SIGNATURE_HEADER].count("v1=") == 2  # both secrets sign
    for secret in (sub["secret"], rotated["secret"]):
        assert verify(second_headers[SIGNATURE_HEADER], second, secret, now)
    assert not verify(first_headers[SIGNATURE_HEADER], first, rotated["secret"], now)

    def logged() -> list[dict[str, Any]]:  # the worker logs an attempt after its POST ends
        status, log = call(base, "GET", path + "/deliveries?limit=5", headers=headers)
        assert status == 200
        return list(log["attempts"]) if len(log["attempts"]) >= 2 else []

    attempts = wait_for("both pings in the delivery log", logged)
    assert [a["kind"] for a in attempts] == ["ping", "ping"]
    assert all(a["status"] == 200 and a["outcome"] == "delivered" for a in attempts)
    # No overlap: the old secret stops at once.
    status, again = call(base, "POST", path + "/rotate", {"overlap_seconds": 0}, headers)
    assert status == 200 and again["secrets_live"] == 1
    assert call(base, "DELETE", path, headers=headers)[0] == 204
    assert call(base, "GET", path, headers=headers)[1]["code"] == "subscription_not_found"
    receiver.down()


def test_turn_started_carries_the_turn_deadline(suite: tuple[str, str, str]) -> None:
    base, key, _ = suite
    receiver = Receiver()
    receiver.up()
    headers = {"X-Api-Key": key}
    body = {"url": receiver.url, "kinds": ["turn_started"]}
    assert call(base, "POST", "/v1/subscriptions", body, headers)[0] == 201
    before = int(time.time() * 1000)
    game = {"players": [{"name": "Ann"}, {"name": "Bob"}], "ruleset": {"turn_seconds": 3600}}
    status, created = call(base, "POST", "/games", game, headers)
    assert status == 201, created
    first = wait_for("the first turn", lambda: receiver.bodies("turn_started"))[0]
    assert first["game_id"] == created["game_id"]
    deadline = first["data"]["deadline_ms"]
    assert isinstance(deadline, int)
    assert before + 3_600_000 <= deadline <= int(time.time() * 1000) + 3_600_000
    receiver.down()
