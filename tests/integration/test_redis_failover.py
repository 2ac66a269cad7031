"""Failover, honestly: what an acknowledged append survives on a Redis Cluster with one
replica per primary (a fresh cluster per test, started on free ports).

- with WAIT (REDIS_WAIT_REPLICAS=1) an acknowledged append survives `CLUSTER FAILOVER` and a
  SIGKILLed primary (its replica is promoted and has it);
- without WAIT an acknowledged append can be lost: the replica is held (SIGSTOP, its link cut)
  so it has not got the write, the primary is killed, the replica is promoted without it;
- with WAIT the same situation answers `NotReplicated` (HTTP 503 `not_replicated`), and a
  retry with the same command id / Idempotency-Key appends nothing and answers the original.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from eventstore.envelope import MOVES, NewEvent
from services.redis_store import RedisEventStore
from services.redis_store.connect import connect
from services.redis_store.keys import key_slot
from services.redis_store.replication import NotReplicated
from tests.integration.http_client import api_key
from tests.redis_cluster import Cluster, start_cluster

pytestmark = pytest.mark.slow  # failovers: real waits for a replica's promotion

NODE_TIMEOUT_MS = 1000  # a dead primary is replaced within ~2-3 s


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = start_cluster(primaries=3, replicas=1, node_timeout_ms=NODE_TIMEOUT_MS)
    try:
        yield made
    finally:
        for proc in made.procs.values():  # a node left stopped must still take SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
        made.stop()


def drawn(tile: str = "E") -> NewEvent:
    return NewEvent("TileDrawn", 1, {"tile": tile})


def _placed(cluster: Cluster, client: redis.Redis, game: str) -> tuple[int, int]:
    """(primary, its replica) of the game's slot."""
    primary = cluster.port_of_slot(key_slot("g:" + game))
    return primary, cluster.replicas_of(primary)[0]


def _wait_primary(cluster: Cluster, client: redis.Redis, game: str, port: int) -> None:
    slot = key_slot("g:" + game)
    deadline = time.monotonic() + 30
    while cluster.port_of_slot(slot) != port:
        assert time.monotonic() < deadline, "the replica was not promoted"
        time.sleep(0.05)


def _manual_failover(cluster: Cluster, game: str, replica: int) -> None:
    """CLUSTER FAILOVER on the replica until it is the slot's primary: a manual failover is
    abandoned when the primary does not answer within 5 s (a loaded machine), so ask again."""
    slot = key_slot("g:" + game)
    deadline = time.monotonic() + 60
    while cluster.port_of_slot(slot) != replica:
        assert time.monotonic() < deadline, "the replica was not promoted"
        cluster.node_client(replica).execute_command("CLUSTER", "FAILOVER")
        wait_until = time.monotonic() + 6
        while cluster.port_of_slot(slot) != replica and time.monotonic() < wait_until:
            time.sleep(0.05)


def _fresh_read(cluster: Cluster, game: str) -> list[int]:
    """The game's moves as a new client sees them (nothing cached from before)."""
    client = connect(cluster.url, role="check", max_connections=2)
    try:
        return [e.seq for e in RedisEventStore(client).read(game, MOVES)]
    finally:
        client.close()


def test_an_append_confirmed_by_wait_survives_a_manual_failover(cluster: Cluster) -> None:
    client = connect(cluster.url, role="test", max_connections=4)
    store = RedisEventStore(client, wait_replicas=1, wait_ms=2000)
    game = uuid.uuid4().hex
    store.append(game, MOVES, [drawn(), drawn()], expected=0, command_id="c1")
    _, replica = _placed(cluster, client, game)
    _manual_failover(cluster, game, replica)
    assert _fresh_read(cluster, game) == [1, 2]
    # The same client goes on on the new primary, still confirmed (the old one replicates it).
    deadline = time.monotonic() + 30
    while True:
        try:
            store.append(game, MOVES, [drawn()], expected=2, command_id="c2")
            break
        except NotReplicated:  # the old primary is still becoming the new one's replica
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert [e.seq for e in store.read(game, MOVES)] == [1, 2, 3]


def test_an_append_confirmed_by_wait_survives_a_killed_primary(cluster: Cluster) -> None:
    client = connect(cluster.url, role="test", max_connections=4)
    store = RedisEventStore(client, wait_replicas=1, wait_ms=2000)
    game = uuid.uuid4().hex
    store.append(game, MOVES, [drawn()], expected=0, command_id="c1")
    primary, replica = _placed(cluster, client, game)
    cluster.kill_node(primary)  # SIGKILL right after the acknowledgement
    _wait_primary(cluster, client, game, replica)
    assert _fresh_read(cluster, game) == [1]


def test_without_wait_an_acknowledged_append_can_be_lost_with_wait_it_is_refused(
    cluster: Cluster,
) -> None:
    client = connect(cluster.url, role="test", max_connections=4)
    plain = RedisEventStore(client)
    waiting = RedisEventStore(client, wait_replicas=1, wait_ms=200)
    game = uuid.uuid4().hex
    plain.append(game, MOVES, [drawn()], expected=0, command_id="c1")
    primary, replica = _placed(cluster, client, game)
    assert waiting.append(game, MOVES, [drawn()], expected=1, command_id="c2").last_seq == 2
    held = cluster.procs[replica]
    os.kill(held.pid, signal.SIGSTOP)  # the replica stops; its link to the primary is cut
    # (a stopped replica would still find the writes in its socket's buffer when resumed)
    cluster.node_client(primary).execute_command("CLIENT", "KILL", "TYPE", "slave")
    try:
        # With WAIT: stored on the primary, not confirmed: the caller is told.
        with pytest.raises(NotReplicated) as refused:
            waiting.append(game, MOVES, [drawn("F")], expected=2, command_id="c3")
        assert (refused.value.result.last_seq, refused.value.acked) == (3, 0)
        # A retry appends nothing, and is not confirmed either: the replica never got c3,
        # so neither the retry nor a lookup of the command may answer it as done.
        with pytest.raises(NotReplicated) as retried:
            waiting.append(game, MOVES, [drawn("F")], expected=2, command_id="c3")
        assert (retried.value.result.duplicate, retried.value.result.last_seq) == (True, 3)
        with pytest.raises(NotReplicated):
            waiting.command_result(game, MOVES, "c3")
        assert plain.command_result(game, MOVES, "c3") is not None  # on the primary alone
        # Without WAIT: acknowledged as usual.
        assert plain.append(game, MOVES, [drawn("G")], expected=3, command_id="c4").last_seq == 4
        cluster.kill_node(primary)
    finally:
        os.kill(held.pid, signal.SIGCONT)
    _wait_primary(cluster, client, game, replica)
    # The promoted replica has what it had confirmed, not the acknowledged c3 and c4.
    assert _fresh_read(cluster, game) == [1, 2]


def test_a_turn_not_confirmed_answers_503_and_its_retry_the_original_events(
    cluster: Cluster, redis_url: str
) -> None:
    from services.command.app import create_app

    # Celery's broker cannot live on a cluster: the command service (bot seats) needs its own.
    app = create_app(
        {
            "REDIS_URL": cluster.url,
            "BROKER_URL": redis_url,
            "REDIS_WAIT_REPLICAS": 1,
            "REDIS_WAIT_MS": 200,
            "NOTIFY_MS": 0,
        }
    )
    http = app.test_client()
    players = [{"name": "ann"}, {"name": "bob"}]
    created = http.post("/games", json={"players": players}, headers=api_key(cluster.url))
    assert created.status_code == 201, created.get_json()
    body = created.get_json()
    game = body["game_id"]
    tokens = {p["seat"]: p["token"] for p in body["players"]}
    turn = http.get(f"/games/{game}/turn").get_json()
    place = turn["placements"][0]
    move = {"x": place["x"], "y": place["y"], "rotation": place["rotation"], "meeple": None}
    headers = {"Authorization": f"Bearer {tokens[turn['player']]}", "Idempotency-Key": "k1"}
    client = connect(cluster.url, role="test", max_connections=2)
    _, replica = _placed(cluster, client, game)
    held = cluster.procs[replica]
    os.kill(held.pid, signal.SIGSTOP)
    try:
        refused = http.post(f"/games/{game}/turns", json=move, headers=headers)
        # A retry while the replica is still away is not answered as done either.
        held_retry = http.post(f"/games/{game}/turns", json=move, headers=headers)
    finally:
        os.kill(held.pid, signal.SIGCONT)
    assert held_retry.status_code == 503, held_retry.get_json()
    assert refused.status_code == 503, refused.get_json()
    assert refused.get_json()["code"] == "not_replicated"
    assert refused.headers["Retry-After"] == "1"
    deadline = time.monotonic() + 10
    while (retried := http.post(f"/games/{game}/turns", json=move, headers=headers)).status_code:
        if retried.status_code != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # the replica is catching up
    assert retried.status_code == 200, retried.get_json()
    events = RedisEventStore(client).read(game, MOVES)
    assert sum(1 for e in events if e.type == "TilePlaced") == 1  # appended once


def _state(cluster: Cluster, port: int) -> str:
    info = cluster.node_client(port).execute_command("CLUSTER", "INFO")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return text.split("cluster_state:", 1)[1].split()[0]


def test_an_append_to_a_primary_that_says_the_cluster_is_down_gives_up_in_seconds(
    cluster: Cluster,
) -> None:
    """A primary cut off in the minority answers CLUSTERDOWN until its partition heals. The
    append (with WAIT) gives up after PATIENCE seconds asleep in all, re-reading the
    topology between attempts, and the caller answers 503; doubling its pause eight times
    held the command instance's one worker ~25 s (tests/hosts' one-way partition: 22 s with
    no turn answered). Here the primary refuses because it no longer covers one of its own
    slots (taken away by DELSLOTS), which it reports as the cluster being down."""
    from services.redis_store.replication import MAX_PAUSE, PATIENCE

    client = connect(cluster.url, role="test", max_connections=2)
    store = RedisEventStore(client, wait_replicas=1, wait_ms=200)
    game = uuid.uuid4().hex
    store.append(game, MOVES, [drawn()], expected=0, command_id="c1")
    primary = cluster.port_of_slot(key_slot("g:" + game))
    node = cluster.node_client(primary)
    spare = next(s for s in range(16384) if cluster.port_of_slot(s) == primary
                 and s != key_slot("g:" + game))  # fmt: skip
    node.execute_command("CLUSTER", "DELSLOTS", spare)
    try:
        deadline = time.monotonic() + 10
        while _state(cluster, primary) != "fail" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(cluster, primary) == "fail"
        began = time.monotonic()
        with pytest.raises(redis.RedisError) as refused:
            store.append(game, MOVES, [drawn()], expected=1, command_id="c2")
        took = time.monotonic() - began
        assert "CLUSTERDOWN" in str(refused.value).upper() or "down" in str(refused.value)
        # Asleep at most PATIENCE; each attempt's round trips and topology reads are local.
        assert took < PATIENCE + MAX_PAUSE + 3, took
    finally:
        node.execute_command("CLUSTER", "ADDSLOTS", spare)
    assert store.last_seq(game, MOVES) == 1  # nothing appended while refused
