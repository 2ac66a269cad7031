"""Webhooks through real Celery worker processes (issue 13, finding 1 and "webhooks that lose
nothing"): real Redis, a worker on the webhook queue (tests/integration/workers.py), and
receivers that are small HTTP servers on free loopback ports started here.

- finding 1: one receiver, a game with 130 score events: every event delivered exactly as
  logged, signed, in order; the worker's `cc:webhooks` connections (CLIENT LIST, sampled all
  along) stay within the bound the worker says it configured;
- one worker process runs 2,000+ dispatch and deliver tasks within the same bound, and every
  event is delivered;
- receivers down for two backoff caps (connections refused), then up: every event arrives,
  in seq order per hook, signed;
- a receiver that answers 500 to the first try of some seqs, with extra deliver tasks sent
  at the same time: it still sees the seqs of each hook in order.
"""

from __future__ import annotations

import json
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from celery import Celery

from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES, NewEvent, StoredEvent
from eventstore.schemas import to_new
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED, score_events
from services.command.hooks import Webhooks
from services.common.signing import SIGNATURE_HEADER, verify
from services.redis_store import RedisEventStore
from services.redis_store.connect import connect
from services.redis_store.keys import subscription_keys as hook_keys
from services.scoring.webhooks import delivery_body

from .workers import Process, celery_env, running, wait_tasks_done, worker

SECRET = "a-shared-secret-of-some-length"
ROLE_NAME = "cc:webhooks"


# ------------------------------------------------------------------ receivers and watchers


class Receiver:
    """A webhook receiver on 127.0.0.1: keeps every POST in arrival order; answers 500 to
    the first try of each seq in `fail_first`, 200 otherwise."""

    def __init__(self, fail_first: set[int] | None = None) -> None:
        # Bound but not listening until `start`: the port stays ours, connections are refused.
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/hooks/in"
        self.fail_first = set(fail_first or ())
        self.received: list[tuple[int, int, dict[str, str], bytes]] = []  # seq, status, ...
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                seq = int(json.loads(body)["seq"])
                with receiver.lock:
                    status = 500 if seq in receiver.fail_first else 200
                    receiver.fail_first.discard(seq)
                    receiver.received.append((seq, status, dict(self.headers.items()), body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler, False)
        self.server.socket.close()
        self.server.socket = self.sock  # the reserved port
        self.server.server_activate()  # listen
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        self.sock.close()

    def accepted(self, hook_id: str = "") -> list[tuple[int, dict[str, str], bytes]]:
        """The POSTs answered 200 (of one hook, if given), in arrival order."""
        with self.lock:
            return [
                (seq, h, b)
                for seq, status, h, b in self.received
                if status == 200 and h["X-Carcassonne-Delivery"].startswith(hook_id)
            ]

    def seqs(self) -> list[int]:
        with self.lock:
            return [seq for seq, *_ in self.received]


class ConnectionWatch:
    """Samples CLIENT LIST every 20 ms; keeps the most connections of the webhook tasks seen
    (named `cc:webhooks`, and `cc:webhooks:wire` for the store's reads)."""

    def __init__(self, url: str) -> None:
        self.client = connect(url, role="test-watch", max_connections=1)
        self.most = 0
        self.samples = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        names = (c.get("name", "") for c in self.client.client_list())
        return sum(1 for n in names if n == ROLE_NAME or n.startswith(ROLE_NAME + ":"))

    def _run(self) -> None:
        while not self.stopped.wait(0.02):
            self.most = max(self.most, self.count())
            self.samples += 1

    def __enter__(self) -> ConnectionWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.client.close()


def configured_bound(proc: Process) -> int:
    """The connections the worker process says its webhook client and store may hold."""
    found = re.findall(r"webhook Redis pool: max_connections=(\d+)", proc.log.read_text())
    assert found, "the worker never made its webhook client"
    assert len(found) == 1, f"one client per process, made once (log: {found})"
    return int(found[0])


def tasks_run(proc: Process) -> dict[str, int]:
    """Webhook tasks the worker finished (succeeded or sent back for a retry), by name."""
    text = proc.log.read_text(errors="replace")
    return {
        name: len(re.findall(rf"Task subscriptions\.{name}\[[^\]]+\] (?:succeeded|retry)", text))
        for name in ("dispatch", "deliver")
    }


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------ games and hooks


def score_pool(seed: int) -> list[NewEvent]:
    """FeatureScored events as the worker writes them, from random 5-player games."""
    rng = random.Random(seed)
    out: list[NewEvent] = []
    for _ in range(6):
        _, events = random_game(rng, 5, Ruleset(meeples=40))
        stored = [StoredEvent("x", MOVES, i + 1, e.type, e.version, 0, "c", e.payload)
                  for i, e in enumerate(to_new(e) for e in events)]  # fmt: skip
        out += [e for e in score_events(GameState(), stored) if e.type == FEATURE_SCORED]
    return out


class Game:
    """A game (a real move stream) whose score stream the test writes `chunk` events at a
    time, sending `subscriptions.dispatch` after each append as the scoring worker does.

    The engine scores at most ~60 features in a game; a longer score stream (finding 1 had
    130) is made of the FeatureScored events of several games, then one GameScored."""

    def __init__(self, store: RedisEventStore, game_id: str, seed: int, count: int) -> None:
        self.store, self.game_id = store, game_id
        _, events = random_game(random.Random(seed), 5)
        store.append(game_id, MOVES, [to_new(e) for e in events], expected=0,
                     command_id="moves", marker="$seq")  # fmt: skip
        pool = score_pool(seed)
        assert len(pool) >= count - 1
        final = NewEvent(GAME_SCORED, 1, {"move": len(events), "final_scores": [1, 2, 3, 4, 5],
                                          "scores_before_final": [1, 2, 3, 4, 5],
                                          "ranks": [5, 4, 3, 2, 1], "winners": [4]})  # fmt: skip
        self.scores = [*pool[: count - 1], final]
        self.appended = 0

    def append(self, sender: Celery, chunk: int) -> None:
        """Append the next `chunk` score events, then send a dispatch."""
        batch = self.scores[self.appended : self.appended + chunk]
        self.store.append(self.game_id, SCORES, batch, expected=self.appended,
                          command_id=f"s{self.appended}", marker="x")  # fmt: skip
        self.appended += len(batch)
        sender.send_task("subscriptions.dispatch", args=[self.game_id], queue="webhooks")

    def done(self) -> bool:
        return self.appended == len(self.scores)


def add_hook(client: redis.Redis, store: RedisEventStore, game_id: str, url: str) -> str:
    hooks = Webhooks(client, store, None, allow_private=True)
    return str(hooks.register(game_id, url, SECRET, "k_test")["hook_id"])


Accepted = list[tuple[int, dict[str, str], bytes]]


def check_delivered(store: RedisEventStore, game_id: str, hook_id: str, accepted: Accepted) -> None:
    """Each score event accepted exactly once, in seq order, exactly as logged, signed."""
    scores = store.read(game_id, SCORES)
    assert [seq for seq, _, _ in accepted] == [e.seq for e in scores], "once each, in order"
    for (_, headers, body), event in zip(accepted, scores, strict=True):
        assert body == delivery_body(game_id, hook_id, event)
        assert verify(headers[SIGNATURE_HEADER], body, SECRET, time.time())  # timed (issue 32)
        assert headers["X-Carcassonne-Delivery"] == f"{hook_id}.{event.seq}"
        assert headers["X-Carcassonne-Event"] == event.type
    assert scores[-1].type == GAME_SCORED


def assert_in_seq_order(got: Receiver) -> None:
    """What the receiver saw, tries included, never goes back: seq N+1 only after N."""
    seqs = got.seqs()
    assert seqs == sorted(seqs), f"out of order: {seqs}"


def log_entries(client: redis.Redis, game_id: str, hook_id: str) -> dict[int, dict[str, Any]]:
    raw = client.hgetall(hook_keys(game_id, hook_id)[1])
    return {int(k): json.loads(v) for k, v in raw.items()}


@pytest.fixture
def sender(redis_url: str) -> Iterator[Celery]:
    app = Celery("webhook-tests", broker=celery_env(redis_url)["BROKER_URL"])
    yield app
    app.close()


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def new_id(tag: str) -> str:
    return f"{tag}{random.getrandbits(96):024x}"[:32]


# ------------------------------------------------------------------ tests


def test_finding_1_every_event_of_a_long_game_delivered_within_the_connection_bound(
    redis_url, redis_client, store, sender
) -> None:
    """Before issue 13 a worker built a new store per task, each pinning a connection per
    thread: 59 of 130 events were never delivered, "Too many connections"."""
    env = celery_env(redis_url, WEBHOOK_ALLOW_PRIVATE="1")
    proc = worker(env, name="wh-f1", concurrency=4, queues="webhooks")
    receiver = Receiver().start()
    game = Game(store, new_id("f1"), seed=1, count=130)
    hook_id = add_hook(redis_client, store, game.game_id, receiver.url)
    try:
        with running(proc), ConnectionWatch(redis_url) as watch:
            while not game.done():  # a live game: a few score events at a time
                game.append(sender, chunk=5)
            wait_for(lambda: len(receiver.accepted()) >= 130, 60, "130 deliveries")
            # A duplicate could only come from a task still queued or running: wait for none.
            wait_tasks_done(env["BROKER_URL"], None, about=game.game_id)
            bound = configured_bound(proc)
            assert 1 <= watch.most <= bound, (watch.most, bound)
            assert watch.count() <= bound
        check_delivered(store, game.game_id, hook_id, receiver.accepted())
        assert_in_seq_order(receiver)
        logged = log_entries(redis_client, game.game_id, hook_id)
        assert len(logged) == 130
        assert all(e["outcome"] == "delivered" and e["tries"] == 1 for e in logged.values())
        assert bound == (4 + 2) + 4  # --concurrency 4: client threads + 2, wire threads
    finally:
        receiver.stop()


@pytest.mark.slow
def test_one_worker_process_runs_2000_webhook_tasks_within_its_connection_bound(
    redis_url, redis_client, store, sender
) -> None:
    # One delivery per deliver task, and one dispatch per score event: 2,000+ tasks.
    env = celery_env(redis_url, WEBHOOK_ALLOW_PRIVATE="1", WEBHOOK_TASK_DELIVERIES="1")
    proc = worker(env, name="wh-2k", concurrency=2, queues="webhooks")  # as deploy runs it
    receiver = Receiver().start()
    games = [Game(store, new_id(f"k{i}"), seed=100 + i, count=50) for i in range(20)]
    hooks = [add_hook(redis_client, store, g.game_id, receiver.url) for g in games]
    try:
        with running(proc), ConnectionWatch(redis_url) as watch:
            for _ in range(50):  # the games' score events interleaved, one at a time
                for game in games:
                    game.append(sender, chunk=1)
            wait_for(lambda: len(receiver.accepted()) >= 1000, 120, "1,000 deliveries")
            # Each kind's count, not their sum: deliveries retried for a moment can make
            # up 2,000 log lines while dispatch tasks still wait in the queue.
            wait_for(
                lambda: all(n >= 1000 for n in tasks_run(proc).values()),
                60,
                "1,000 dispatch and 1,000 deliver tasks' log lines",
            )
            bound = configured_bound(proc)
            assert 1 <= watch.most <= bound == (2 + 2) + 2, (watch.most, bound)
        ran = tasks_run(proc)
        assert ran["dispatch"] == 1000 and ran["deliver"] >= 1000, ran
        for game, hook_id in zip(games, hooks, strict=True):
            check_delivered(store, game.game_id, hook_id, receiver.accepted(hook_id + "."))
        assert "Too many connections" not in proc.log.read_text(errors="replace")
    finally:
        receiver.stop()


# The outage lasts two backoff caps: the retries reach the cap and wait it out at least once
# (a longer outage only repeats the same capped retry). With base 0.25 s the first four
# retries wait at most 0.25 + 0.5 + 1 + 2 s, so at least five attempts fail in the outage.
BACKOFF_MAX_S = 4.0
OUTAGE_S = 2 * BACKOFF_MAX_S


@pytest.mark.slow
def test_receivers_down_for_two_backoff_caps_get_every_event_in_order_once_they_are_up(
    redis_url, redis_client, store, sender
) -> None:
    # Backoff shortened so the test ends soon after the receivers come back; the outage is
    # real: nothing listens on their ports for OUTAGE_S (connection refused).
    env = celery_env(redis_url, WEBHOOK_ALLOW_PRIVATE="1", WEBHOOK_BACKOFF_BASE="0.25",
                     WEBHOOK_BACKOFF_MAX=str(BACKOFF_MAX_S),
                     WEBHOOK_RETRY_SECONDS="600")  # fmt: skip
    proc = worker(env, name="wh-down", concurrency=2, queues="webhooks")
    receivers = [Receiver(), Receiver()]
    game = Game(store, new_id("dn"), seed=7, count=60)
    hooks = [add_hook(redis_client, store, game.game_id, r.url) for r in receivers]
    try:
        with running(proc), ConnectionWatch(redis_url) as watch:
            while not game.done():
                game.append(sender, chunk=6)
            down_until = time.monotonic() + OUTAGE_S
            # While they are down only each hook's first delivery is tried (and retried).
            wait_for(lambda: all(log_entries(redis_client, game.game_id, h).get(1, {})
                                 .get("tries", 0) >= 3 for h in hooks), 30, "retries")  # fmt: skip
            time.sleep(max(0.0, down_until - time.monotonic()))  # the outage itself
            for hook_id in hooks:
                logged = log_entries(redis_client, game.game_id, hook_id)
                assert logged[1]["outcome"] == "retrying" and logged[1]["tries"] >= 5
                assert all(e["tries"] == 0 and e["outcome"] == "pending"
                           for seq, e in logged.items() if seq > 1)  # fmt: skip
            up_ms = time.time() * 1000  # the worker stamps with this host's clock too
            for receiver in receivers:
                receiver.start()
            wait_for(lambda: all(len(r.accepted()) >= 60 for r in receivers), 30, "recovery")
            assert 1 <= watch.most <= configured_bound(proc)
        for receiver, hook_id in zip(receivers, hooks, strict=True):
            check_delivered(store, game.game_id, hook_id, receiver.accepted())
            assert_in_seq_order(receiver)
            first = log_entries(redis_client, game.game_id, hook_id)[1]
            assert first["outcome"] == "delivered" and first["tries"] >= 6
            times = [a["at_ms"] for a in first["attempts"]]
            # Delivered once the receivers were up, not before (measured from their start:
            # the item's own creation may come late in the outage, after scoring).
            assert first["delivered_ms"] >= up_ms - 1 > first["created_ms"]
            assert times == sorted(times)
            assert all("Refused" in a["error"] for a in first["attempts"][:-1]), first["attempts"]
    finally:
        for receiver in receivers:
            receiver.stop()


def test_each_hook_sees_its_seqs_in_order_through_failures_and_duplicate_tasks(
    redis_url, redis_client, store, sender
) -> None:
    env = celery_env(redis_url, WEBHOOK_ALLOW_PRIVATE="1", WEBHOOK_BACKOFF_BASE="0.2",
                     WEBHOOK_BACKOFF_MAX="1", WEBHOOK_TASK_DELIVERIES="3")  # fmt: skip
    proc = worker(env, name="wh-order", concurrency=4, queues="webhooks")
    fails = {2, 3, 7, 15, 16, 30, 44}
    receivers = [Receiver(fail_first=fails).start(), Receiver(fail_first={1, 45}).start()]
    game = Game(store, new_id("or"), seed=11, count=45)
    hooks = [add_hook(redis_client, store, game.game_id, r.url) for r in receivers]
    try:
        with running(proc):
            while not game.done():
                game.append(sender, chunk=5)
                for hook_id in hooks:  # extra deliver tasks racing the ones dispatch sends
                    sender.send_task("subscriptions.deliver", args=[game.game_id, hook_id],
                                     queue="webhooks")  # fmt: skip
            wait_for(lambda: all(len(r.accepted()) >= 45 for r in receivers), 60, "deliveries")
            wait_tasks_done(
                env["BROKER_URL"], None, about=game.game_id
            )  # the racing extra tasks have all run
        for receiver, hook_id, failed in zip(receivers, hooks, [fails, {1, 45}], strict=True):
            assert_in_seq_order(receiver)
            check_delivered(store, game.game_id, hook_id, receiver.accepted())
            seqs = receiver.seqs()
            assert all(seqs.count(s) == 2 for s in failed) and len(seqs) == 45 + len(failed)
    finally:
        for receiver in receivers:
            receiver.stop()
