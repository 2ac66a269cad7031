"""Several instances on a Redis Cluster (issue 14): 2 command instances and a query instance
behind nginx (each game routed to one command instance by a consistent hash of its id),
2 scoring worker processes, the event store on a 3-primary cluster, the broker a single Redis.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from carcassonne.errors import GameError
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.score_stream import GAME_SCORED, score_events
from services.redis_store import RedisEventStore
from services.redis_store.connect import connect
from tests.nginx import find_nginx, nginx, ring_server
from tests.redis_cluster import redis_cluster, redis_cluster_url  # noqa: F401

from .http_client import ROOT, api_key, call, gunicorn
from .workers import beat, running, worker

COMMAND = "deploy/gunicorn/command.py"
QUERY = "deploy/gunicorn/query.py"


@dataclass
class Stack:
    proxy: str  # the API's one public URL (nginx)
    query: str  # the query service alone (its operator port on nginx)
    instances: list[str]  # each command instance's own URL (behind nginx)
    env: dict[str, str]  # the services' environment (REDIS_URL, BROKER_URL)
    client: redis.Redis  # a cluster client of the event store
    store: RedisEventStore


@pytest.fixture(scope="module")
def stack(redis_cluster_url: str, redis_url: str) -> Iterator[Stack]:  # noqa: F811
    binary, why = find_nginx()
    if binary is None:
        pytest.skip(why)
    broker = redis_url.rsplit("/", 1)[0] + "/1"
    env = {"REDIS_URL": redis_cluster_url, "BROKER_URL": broker}
    # One worker per command instance, as deployed: the proxy routes each game to an instance,
    # whose one worker then serves all of the game's turns on a current cached state.
    with (
        gunicorn("services.command.wsgi:app", COMMAND, env, 1) as first,
        gunicorn("services.command.wsgi:app", COMMAND, env, 1) as second,
        gunicorn("services.query.wsgi:app", QUERY, env, 1) as query,
    ):
        hosts = [base.removeprefix("http://") for base in (first, second)]
        upstreams = {"command": hosts, "query": query.removeprefix("http://")}
        with nginx(upstreams) as public:
            client = connect(redis_cluster_url, role="test-instances", max_connections=8)
            try:
                yield Stack(
                    public["public"],
                    public["query"],
                    [first, second],
                    env,
                    client,
                    RedisEventStore(client),
                )
            finally:
                client.close()


def _metric(base: str, name: str) -> float:
    """A counter's total (all labels) on a service's /metrics."""
    with urllib.request.urlopen(base + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    pattern = re.compile(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", re.M)
    return sum(float(v) for v in pattern.findall(text))


def _turns(base: str) -> float:
    """Turns a command instance answered 200 to (its request counter for the turn route)."""
    with urllib.request.urlopen(base + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    found = re.findall(
        r'^carcassonne_http_requests_total\{[^}]*method="POST"[^}]*route="[^"]*turns"[^}]*'
        r'status="200"[^}]*\} ([0-9.e+]+)$',
        text,
        re.M,
    )
    found += re.findall(
        r'^carcassonne_http_requests_total\{[^}]*route="[^"]*turns"[^}]*method="POST"[^}]*'
        r'status="200"[^}]*\} ([0-9.e+]+)$',
        text,
        re.M,
    )
    return sum(float(v) for v in found)


def _new_game(base: str, players: int = 2) -> tuple[str, dict[int, str]]:
    body = {
        "players": [{"name": f"p{i}"} for i in range(players)],
        "seat_order": list(range(players)),
    }
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


def _games_on_each_instance(stack: Stack, per_instance: int) -> list[tuple[str, dict[int, str]]]:
    """New games through the proxy, `per_instance` of them routed to each command instance
    (by the proxy's own ring, `ring_server`), alternating instances, 2, 3, 4 players in turn.
    The server draws each id at random: a game whose instance has enough already is left
    unplayed (one in two draws, on average)."""
    hosts = [base.removeprefix("http://") for base in stack.instances]
    wanted: dict[str, list[tuple[str, dict[int, str]]]] = {host: [] for host in hosts}
    for _ in range(64 * per_instance):  # a bound: ~2 draws per game are needed
        if all(len(games) == per_instance for games in wanted.values()):
            break
        game_id, tokens = _new_game(stack.proxy, 2 + sum(map(len, wanted.values())) % 3)
        games = wanted[ring_server(game_id, hosts)]
        if len(games) < per_instance:
            games.append((game_id, tokens))
    assert all(len(games) == per_instance for games in wanted.values()), wanted
    return [game for pair in zip(*wanted.values(), strict=True) for game in pair]


def _play_http(base: str, game_id: str, tokens: dict[int, str], rng: random.Random) -> int:
    """A whole game of random legal turns over HTTP, as a client plays it (the turn view, then
    the turn, until a turn's reply says the game is over); returns the turns played."""
    for played in range(1, 200):  # a game has at most 72 tiles
        status, view = call(base, "GET", f"/games/{game_id}/turn")
        assert status == 200 and not view["over"], view
        spot = rng.choice(view["placements"])
        meeple = rng.choice(spot["meeples"]) if spot["meeples"] and rng.random() < 0.5 else None
        body = {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"], "meeple": meeple}
        auth = {"Authorization": f"Bearer {tokens[view['player']]}"}
        status, reply = call(base, "POST", f"/games/{game_id}/turns", body, auth)
        assert status == 200, reply
        if reply["next"]["over"]:
            return played
    raise AssertionError("the game did not end")


def _race(
    bases: list[str], path: str, body: dict[str, Any], auth: dict[str, str], clients: int
) -> list[int]:
    """`clients` threads POST the same request at once, spread over `bases`; their statuses."""
    statuses: list[int] = []
    gate = threading.Barrier(clients)

    def send(i: int) -> None:
        gate.wait(timeout=10)
        statuses.append(call(bases[i % len(bases)], "POST", path, body, auth)[0])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return statuses


def _scored(store: RedisEventStore, game_id: str) -> bool:
    return int(store.marker(game_id, SCORES) or 0) == store.last_seq(game_id, MOVES)


def _wait_scored(store: RedisEventStore, games: list[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not all(_scored(store, g) for g in games):
        if time.monotonic() > deadline:
            late = [g for g in games if not _scored(store, g)]
            raise AssertionError(f"{len(late)} games not scored, e.g. {late[:3]}")
        time.sleep(0.1)


def _cli_score(record: dict[str, Any]) -> list[int]:
    done = subprocess.run(
        [sys.executable, "-m", "carcassonne.cli", "score", "-"],
        input=json.dumps(record).encode(),
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    return list(json.loads(done.stdout)["final_scores"])


def test_full_games_through_two_instances_are_routed_by_game_and_scored_by_two_workers(
    stack: Stack,
) -> None:
    """8 games over HTTP through the proxy, 4 on each instance by the proxy's consistent hash
    of the game id: each instance serves exactly the turns of its games, each game's turns
    read (almost) no events (its instance's cache is current: ≤ 1.2 events read per turn),
    2 worker processes score them, and each game's final scores — in the score stream and
    through the query service — equal the CLI's score of the exported record."""
    rng = random.Random(14)
    hosts = [base.removeprefix("http://") for base in stack.instances]
    read_before = sum(_metric(b, "carcassonne_events_read_total") for b in stack.instances)
    turns_before = [_turns(b) for b in stack.instances]
    games: list[str] = []
    routed = dict.fromkeys(hosts, 0)  # turns each instance should serve
    played = 0
    with running(worker(stack.env, "w1"), worker(stack.env, "w2")):
        for game_id, tokens in _games_on_each_instance(stack, 4):
            turns = _play_http(stack.proxy, game_id, tokens, rng)
            routed[ring_server(game_id, hosts)] += turns
            played += turns
            games.append(game_id)
        _wait_scored(stack.store, games)
    served = [_turns(b) - t for b, t in zip(stack.instances, turns_before, strict=True)]
    assert served == [routed[h] for h in hosts] and sum(served) == played, (served, routed)
    read = sum(_metric(b, "carcassonne_events_read_total") for b in stack.instances) - read_before
    assert read / played <= 1.2, f"{read:.0f} events read for {played} turns"
    for game_id in games:
        status, record = call(stack.proxy, "GET", f"/games/{game_id}/record")
        assert status == 200, record
        cli = _cli_score(record)
        scores = [e for e in stack.store.read(game_id, SCORES)]
        assert scores[-1].type == GAME_SCORED
        assert scores[-1].payload["final_scores"] == cli
        moves = stack.store.read(game_id, MOVES)
        expected = [(e.type, e.payload) for e in score_events(GameState(), moves)]
        assert [(e.type, e.payload) for e in scores] == expected  # each score event once
        status, view = call(stack.query, "GET", f"/games/{game_id}/scores")
        assert status == 200, view
        assert view["over"] and [p["score"] for p in view["players"]] == cli


def test_twenty_conflicting_writers_on_both_instances_get_exactly_one_turn_each_round(
    stack: Stack,
) -> None:
    """20 clients send the same player's turn at once, 10 straight to each instance (past the
    proxy's routing): exactly one is accepted per turn, the stream grows by that one turn."""
    game_id, tokens = _new_game(stack.proxy)
    for round_ in range(6):
        status, view = call(stack.proxy, "GET", f"/games/{game_id}/turn")
        assert status == 200 and not view["over"], view
        spot = view["placements"][0]
        body = {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"], "meeple": None}
        auth = {"Authorization": f"Bearer {tokens[view['player']]}"}
        before = stack.store.last_seq(game_id, MOVES)
        placed_before = sum(1 for e in stack.store.read(game_id, MOVES) if e.type == "TilePlaced")
        statuses = _race(stack.instances, f"/games/{game_id}/turns", body, auth, 20)
        assert len(statuses) == 20
        assert statuses.count(200) == 1, (round_, sorted(statuses))
        assert all(s in (200, 409, 422) for s in statuses), sorted(statuses)
        placed = sum(1 for e in stack.store.read(game_id, MOVES) if e.type == "TilePlaced")
        assert placed == placed_before + 1
        assert stack.store.last_seq(game_id, MOVES) > before


@pytest.mark.slow
def test_a_worker_process_killed_mid_catch_up_leaves_every_score_event_exactly_once(
    stack: Stack,
) -> None:
    """Games played through the proxy; a worker process with tiny batches catches them up
    and is SIGKILLed while a game is half scored; two worker processes (and the sweep) then
    finish: every game's score stream equals the engine's, each event exactly once."""
    rng = random.Random(41)
    games = []
    for _ in range(4):
        game_id, tokens = _new_game(stack.proxy)
        _play_http(stack.proxy, game_id, tokens, rng)
        games.append(game_id)
    env = {**stack.env, "SCORING_BATCH": "2", "VISIBILITY_TIMEOUT": "2", "SWEEP_SECONDS": "1"}
    killed = worker(env, "k1").start("ready.")
    try:
        deadline = time.monotonic() + 60
        while True:
            progress = [
                (int(stack.store.marker(g, SCORES) or 0), stack.store.last_seq(g, MOVES))
                for g in games
            ]
            if any(0 < done < last for done, last in progress):
                break
            assert time.monotonic() < deadline, f"no game was ever half scored: {progress}"
            time.sleep(0.002)
    finally:
        killed.kill()
    assert not all(_scored(stack.store, g) for g in games)
    with running(worker(env, "k2"), worker(env, "k3"), beat(env)):
        _wait_scored(stack.store, games)
    for game_id in games:
        moves = stack.store.read(game_id, MOVES)
        expected = [(e.type, e.payload) for e in score_events(GameState(), moves)]
        actual = [(e.type, e.payload) for e in stack.store.read(game_id, SCORES)]
        assert actual == expected


class CountingRedisStore(RedisEventStore):
    """The cluster adapter, counting the events each read returns (XRANGE entries)."""

    events_read = 0

    def read(self, game_id: str, stream: str, after: int = 0, limit: int | None = None) -> Any:
        found = super().read(game_id, stream, after, limit)
        self.events_read += len(found)
        return found


def test_a_stale_instance_whose_append_is_refused_reads_only_the_missing_events(
    stack: Stack,
) -> None:
    """Two instances' services on the cluster: one plays 20 turns, the other cached the game
    and is then one turn behind. It decides that turn again on its stale state (trusting its
    cache, as a game's owner does): the append is refused, and it reads exactly the events
    from its cached sequence on (not the game from 0) before refusing the turn by the rules."""
    from services.command.secrets_store import RedisSecrets
    from services.command.service import GameService

    store = CountingRedisStore(stack.client)
    secrets = RedisSecrets(stack.client)
    stale, other = GameService(store, secrets), GameService(store, secrets)
    game_id, tokens = _new_game(stack.proxy)
    rng = random.Random(8)
    for _ in range(20):
        view = other.turn_view(game_id)
        spot = rng.choice(view["placements"])
        other.play_turn(
            game_id, tokens[view["player"]], spot["x"], spot["y"], spot["rotation"], None
        )
    stale.load(game_id)
    cached_seq = store.last_seq(game_id, MOVES)
    view = other.turn_view(game_id)
    spot = view["placements"][0]
    turn = (tokens[view["player"]], spot["x"], spot["y"], spot["rotation"], None)
    other.play_turn(game_id, *turn)
    missing = store.last_seq(game_id, MOVES) - cached_seq
    before = store.events_read
    with pytest.raises(GameError):
        stale.play_turn(game_id, *turn, trust_cache=True)
    # The gap, and the cached sequence's own event (checked still there: a failover may have
    # lost it, services/command/cache.py); not the game from 0.
    assert store.events_read - before == missing + 1 < cached_seq
