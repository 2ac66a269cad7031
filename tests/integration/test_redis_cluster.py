"""The whole suite on a real Redis Cluster (3 primaries started by the tests on free ports):
the command service under gunicorn, the scoring worker (Celery, broker on a single Redis) and
the query service, all with REDIS_URL=redis+cluster://…

- full games over HTTP: the worker's finals equal `carcassonne score` of the exported record,
  and the query service shows them;
- a live game's slot migrated to another primary while it is played (CLUSTER SETSLOT
  IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE): every turn is accepted once, none lost,
  duplicated or refused (MOVED/ASK/TRYAGAIN followed by the clients);
- a rate-limit check (a script naming two keys) while its slot is split by a migration for
  longer than redis-py retries TRYAGAIN: it waits for the migration instead of failing;
- live (SSE) streams of games on every primary, opened before the games are played: each
  gets every move and score event once, in order, then `end`.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot
from redis.exceptions import ClusterError, TryAgainError

from eventstore.envelope import MOVES, SCORES
from services.command.apikeys import KEYS, ApiKeys, bucket_key, key_hash
from services.redis_store import RedisEventStore, game_keys
from services.redis_store.connect import connect
from services.redis_store.ratelimit import GATE_LUA, RateLimiter
from tests.integration.http_client import ROOT, api_key, gunicorn
from tests.integration.live_checks import assert_every_event_in_order, opened
from tests.integration.workers import running, wait_scored, worker
from tests.redis_cluster import Cluster, redis_cluster, redis_cluster_url  # noqa: F401
from tools.gameclient import Game, choose, create_game
from tools.gameclient import call as http


@pytest.fixture(scope="module")
def suite(
    redis_cluster_url: str,  # noqa: F811
    redis_url: str,
) -> Iterator[dict[str, Any]]:
    """Command (2 workers), query (1 worker) and a scoring worker on the cluster."""
    broker = redis_url.rsplit("/", 1)[0] + "/1"  # the broker stays a single Redis
    env = {"REDIS_URL": redis_cluster_url, "BROKER_URL": broker, "SWEEP_SECONDS": "2"}
    client = connect(redis_cluster_url, role="test", max_connections=8)
    with (
        running(worker(env, name="cw1", queues="scoring,webhooks")),
        gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 2) as command,
        gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, 1) as query,
    ):
        yield {
            "command": command,
            "query": query,
            "client": client,
            "store": RedisEventStore(client),
            "key": api_key(command)["X-Api-Key"],  # games are created with a key
        }


def _turn(
    command: str,
    game: Game,
    rng: random.Random,
    statuses: list[int],
    spans: list[tuple[float, float]] | None = None,
) -> bool:
    """Play one random legal turn (retrying a 5xx with the same Idempotency-Key, as clients
    are told to); False once the game is over."""
    status, view = http(command, "GET", f"/games/{game.game_id}/turn")
    assert status == 200, view
    if view["over"]:
        return False
    headers = {
        "Authorization": f"Bearer {game.tokens[int(view['player'])]}",
        "Idempotency-Key": uuid.uuid4().hex,
        "If-Match": str(view["seq"]),
    }
    move = choose(view, rng, 0.5)
    start = time.monotonic()
    for _ in range(20):
        status, body = http(command, "POST", f"/games/{game.game_id}/turns", move, headers)
        statuses.append(status)
        if status < 500:
            break
        time.sleep(0.1)
    assert status == 200, (status, body)
    if spans is not None:
        spans.append((start, time.monotonic()))
    return True


def _cli_score(command: str, game_id: str) -> dict[str, Any]:
    status, record = http(command, "GET", f"/games/{game_id}/record")
    assert status == 200, record
    done = subprocess.run(
        [sys.executable, "-m", "carcassonne.cli", "score", "-"],
        input=json.dumps(record).encode(),
        capture_output=True,
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    return dict(json.loads(done.stdout))


def _check_scored(suite: dict[str, Any], game_id: str) -> None:
    store = suite["store"]
    final = store.read(game_id, SCORES)[-1]
    assert final.type == "GameScored"
    expected = _cli_score(suite["command"], game_id)
    assert final.payload["final_scores"] == expected["final_scores"]
    status, view = http(suite["query"], "GET", f"/games/{game_id}/scores")
    assert status == 200, view
    assert [p["score"] for p in view["players"]] == expected["final_scores"]


def test_full_games_over_http_on_a_cluster_score_as_the_cli_does(
    suite: dict[str, Any],
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    rng = random.Random(14)
    games = [
        create_game(suite["command"], ["ann", "bob", "cy"][: 2 + i % 2], api_key=suite["key"])
        for i in range(3)
    ]
    statuses: list[int] = []

    def play(game: Game) -> None:
        while _turn(suite["command"], game, random.Random(rng.random()), statuses):
            pass

    threads = [threading.Thread(target=play, args=(g,)) for g in games]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert set(statuses) == {200}
    ids = [g.game_id for g in games]
    wait_scored(suite["client"], suite["store"], ids, timeout=60)
    for game_id in ids:
        _check_scored(suite, game_id)
    client = suite["client"]
    owners = {redis_cluster.port_of_slot(client.keyslot(game_keys(g, MOVES)[0])) for g in ids}
    assert owners <= set(redis_cluster.primary_ports())


def _node_id(node: redis.Redis) -> str:
    raw = node.execute_command("CLUSTER", "MYID")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _start_migration(cluster: Cluster, slot: int, source: int, target: int) -> None:
    """Mark `slot` as moving from the primary at `source` to the one at `target`."""
    src, dst = cluster.node_client(source), cluster.node_client(target)
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", _node_id(src))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", _node_id(dst))


def _migrate_slot(
    cluster: Cluster, slot: int, source: int, target: int, between: Callable[[], None]
) -> None:
    """Move `slot` from the primary at `source` to the one at `target`, two keys at a time,
    calling `between()` after each batch (the game goes on while its keys are split: its
    append script, which names several of them, waits with TRYAGAIN until they are together
    again; single-key commands follow ASK)."""
    src, dst_id = cluster.node_client(source), _node_id(cluster.node_client(target))
    _start_migration(cluster, slot, source, target)
    for _ in range(1000):
        keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 2)
        if not keys:
            break
        src.execute_command("MIGRATE", cluster.host, target, "", 0, 5000, "KEYS", *keys)
        between()
    for port in cluster.primary_ports():
        cluster.node_client(port).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)


@pytest.mark.slow
def test_a_live_games_slot_migrated_while_it_is_played_loses_and_refuses_nothing(
    suite: dict[str, Any],
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    command, client = suite["command"], suite["client"]
    game = create_game(command, ["ann", "bob"], api_key=suite["key"])
    statuses: list[int] = []
    rng = random.Random(5)
    for _ in range(10):  # under way before the move
        _turn(command, game, rng, statuses)
    slot = int(client.keyslot(game_keys(game.game_id, MOVES)[0]))
    source = redis_cluster.port_of_slot(slot)
    target = next(p for p in redis_cluster.primary_ports() if p != source)
    errors: list[BaseException] = []
    spans: list[tuple[float, float]] = []

    def play() -> None:
        try:
            while _turn(command, game, rng, statuses, spans):
                pass
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    player = threading.Thread(target=play)
    player.start()

    try:
        begun = time.monotonic()
        _migrate_slot(redis_cluster, slot, source, target, lambda: time.sleep(0.1))
        ended = time.monotonic()
    finally:
        player.join(timeout=120)
    assert not errors, errors
    # Turns were under way while the slot moved (some of them waited for the split to end).
    assert any(t0 < ended and t1 > begun for t0, t1 in spans)
    while _turn(command, game, rng, statuses):  # to the end, on the slot's new owner
        pass
    assert redis_cluster.port_of_slot(slot) == target
    assert redis_cluster.node_client(target).exists(game_keys(game.game_id, MOVES)[0])
    assert set(statuses) == {200}  # no turn refused or failed, retries included
    store = suite["store"]
    moves = store.read(game.game_id, MOVES)
    assert [e.seq for e in moves] == list(range(1, len(moves) + 1))
    played = sum(1 for e in moves if e.type == "TilePlaced")
    assert played == len(statuses)  # each accepted turn once: none lost, none twice
    wait_scored(client, store, [game.game_id], timeout=60)
    _check_scored(suite, game.game_id)


@pytest.mark.slow
def test_a_script_call_while_its_slot_is_split_waits_for_the_migration_to_end(
    redis_cluster_url: str,  # noqa: F811
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    """A rate-limit check names the API keys hash and the key's bucket (one slot). With the
    bucket moved and the hash not yet, Redis answers TRYAGAIN; redis-py gives up after ~0.5 s,
    so before `scripts.script` the check failed (a 503) during a resharding. The split is held
    here for 1.5 s."""
    client = connect(redis_cluster_url, role="test", max_connections=8)
    _, key = ApiKeys(client).create("migrating")
    limiter = RateLimiter(client, rate=100, burst=10)
    assert limiter.check(key).allowed  # its bucket exists now
    hashed = key_hash(key)
    slot = key_slot(KEYS.encode())
    source = redis_cluster.port_of_slot(slot)
    target = next(p for p in redis_cluster.primary_ports() if p != source)
    _start_migration(redis_cluster, slot, source, target)
    src = redis_cluster.node_client(source)
    src.execute_command("MIGRATE", redis_cluster.host, target, "", 0, 5000, "KEYS",
                        bucket_key(hashed))  # fmt: skip
    split = time.monotonic()
    raw = client.register_script(GATE_LUA)  # redis-py alone: gives up while the slot is split
    with pytest.raises((TryAgainError, ClusterError)):
        raw(keys=[KEYS, bucket_key(hashed)], args=[hashed, "100.0", 10, 1])
    outcome: dict[str, Any] = {}

    def check() -> None:
        try:
            outcome["decision"] = limiter.check(key)
        except BaseException as exc:  # reported by the test's thread
            outcome["error"] = exc
        outcome["at"] = time.monotonic()

    checker = threading.Thread(target=check)
    checker.start()
    time.sleep(max(0.0, split + 1.5 - time.monotonic()))  # the split lasts 1.5 s: the scenario
    assert checker.is_alive()  # still waiting for the migration, not failed
    ended = time.monotonic()
    _migrate_slot(redis_cluster, slot, source, target, lambda: None)  # the rest, then NODE
    checker.join(timeout=10)
    assert "error" not in outcome, outcome
    assert outcome["decision"].allowed and outcome["at"] >= ended
    assert redis_cluster.port_of_slot(slot) == target


def test_live_streams_of_games_on_every_primary_get_every_event_once_in_order(
    suite: dict[str, Any],
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    """The query service's live reader on a cluster reads each watched game on the primary
    that holds it (one XREAD names keys of one slot only)."""
    command, query, client = suite["command"], suite["query"], suite["client"]
    primaries = set(redis_cluster.primary_ports())
    games: list[Game] = []
    for _ in range(30):  # until the games sit on every primary (random ids: a few tries)
        game = create_game(command, ["ann", "bob"], api_key=suite["key"])
        games.append(game)
        owners = {
            redis_cluster.port_of_slot(client.keyslot(game_keys(g.game_id, MOVES)[0]))
            for g in games
        }
        if owners == primaries and len(games) >= 4:
            break
    assert owners == primaries
    statuses: list[int] = []

    def play(game: Game, seed: int) -> None:
        rng = random.Random(seed)
        while _turn(command, game, rng, statuses):
            pass

    async def scenario() -> list[Any]:
        streams = [await opened(query, g.game_id) for g in games]
        for stream in streams:  # subscribed once its "live from" comment came
            while not stream.comments:
                await stream.next()
        playing = [asyncio.to_thread(play, g, i) for i, g in enumerate(games)]
        await asyncio.wait_for(asyncio.gather(*playing), timeout=180)
        await asyncio.wait_for(asyncio.gather(*(s.until_end() for s in streams)), timeout=60)
        return streams

    streams = asyncio.run(scenario())
    assert set(statuses) == {200}
    for stream in streams:
        assert_every_event_in_order(stream, suite["store"])
        assert any(e["event"] == "score" for e in stream.events)  # the worker's too


def test_the_api_key_cli_works_on_a_cluster_url(redis_cluster_url: str) -> None:  # noqa: F811
    def cli(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "services.command.apikeys", "--redis-url", redis_cluster_url,
             *args],
            capture_output=True, cwd=ROOT, check=True, timeout=60,
        )  # fmt: skip
        return json.loads(done.stdout)

    created = cli("create", "--name", "acme", "--json")
    assert created["key"].startswith("cck_")
    assert created["id"] in [k["id"] for k in cli("list", "--json")]
