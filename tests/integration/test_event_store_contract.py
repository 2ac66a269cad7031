"""One contract for every `EventStore` adapter: in-memory, Redis (a real redis-server) and
Redis Cluster (3 real primaries started by the tests: each game's keys on the node of its
slot, reached through the cluster adapter's per-node wires)."""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any

import pytest
import redis

from carcassonne.simulate import random_game
from eventstore import port
from eventstore.envelope import MOVES, SCORES, NewEvent, StoredEvent
from eventstore.errors import (
    CommandReused,
    ConcurrencyError,
    MarkerConflict,
    SchemaError,
    StoreError,
)
from eventstore.port import ANY, InMemoryEventStore
from eventstore.schemas import to_engine, to_new
from services.redis_store import RedisEventStore, game_keys
from services.redis_store.connect import connect, is_cluster
from services.redis_store.keys import key_slot
from tests.redis_cluster import redis_cluster, redis_cluster_url  # noqa: F401


@pytest.fixture(scope="module")
def cluster_client(redis_cluster_url: str) -> redis.Redis:  # noqa: F811
    client = connect(redis_cluster_url, role="contract", max_connections=24)
    assert is_cluster(client)
    return client


@pytest.fixture(params=["memory", "redis", "cluster"])
def store(request: pytest.FixtureRequest):
    if request.param == "memory":
        return InMemoryEventStore()
    if request.param == "cluster":
        return RedisEventStore(request.getfixturevalue("cluster_client"))
    return RedisEventStore(request.getfixturevalue("redis_client"))


def drawn(tile: str = "E") -> NewEvent:
    return NewEvent("TileDrawn", 1, {"tile": tile})


def new_game() -> str:
    return uuid.uuid4().hex


def test_append_assigns_sequences_and_read_returns_envelopes(store) -> None:
    game = new_game()
    result = store.append(game, MOVES, [drawn("E"), drawn("F")], expected=0, command_id="c1")
    assert (result.first_seq, result.last_seq, result.duplicate) == (1, 2, False)
    events = store.read(game, MOVES)
    assert [
        (e.seq, e.type, e.version, e.payload, e.command_id, e.game_id, e.stream) for e in events
    ] == [
        (1, "TileDrawn", 1, {"tile": "E"}, "c1", game, MOVES),
        (2, "TileDrawn", 1, {"tile": "F"}, "c1", game, MOVES),
    ]
    assert all(e.time_ms > 0 for e in events)
    assert store.last_seq(game, MOVES) == 2


def test_stale_expected_sequence_is_rejected_and_appends_nothing(store) -> None:
    game = new_game()
    store.append(game, MOVES, [drawn()], expected=0, command_id="c1")
    with pytest.raises(ConcurrencyError) as info:
        store.append(game, MOVES, [drawn()], expected=0, command_id="c2")
    assert (info.value.expected, info.value.actual) == (0, 1)
    assert store.last_seq(game, MOVES) == 1


def test_the_expected_sequence_can_also_name_the_command_of_its_event(store) -> None:
    """`after_command`: the same length is not enough, the event there must be that command's
    (a log that lost events and grew back holds another history)."""
    game = new_game()
    store.append(game, MOVES, [drawn(), drawn()], expected=0, command_id="c1")
    with pytest.raises(ConcurrencyError):
        store.append(game, MOVES, [drawn()], expected=2, command_id="c2", after_command="c0")
    assert store.last_seq(game, MOVES) == 2  # nothing appended
    store.append(game, MOVES, [drawn()], expected=2, command_id="c2", after_command="c1")
    store.append(game, MOVES, [drawn()], expected=3, command_id="c3", after_command="c2")
    assert [e.command_id for e in store.read(game, MOVES)] == ["c1", "c1", "c2", "c3"]


def test_a_repeated_command_id_returns_the_first_result_and_appends_nothing(store) -> None:
    game = new_game()
    first = store.append(game, MOVES, [drawn(), drawn()], expected=0, command_id="same")
    again = store.append(game, MOVES, [drawn()], expected=2, command_id="same")
    assert (again.first_seq, again.last_seq, again.duplicate, again.time_ms) == (1, 2, True, 0)
    assert first.duplicate is False
    assert store.last_seq(game, MOVES) == 2
    assert store.command_result(game, MOVES, "same") == again
    assert store.command_result(game, MOVES, "other") is None


def test_a_command_id_reused_for_another_request_is_refused_and_appends_nothing(store) -> None:
    game = new_game()
    first = store.append(game, MOVES, [drawn("E")], expected=0, command_id="k", fingerprint="a1")
    with pytest.raises(CommandReused) as info:
        store.append(game, MOVES, [drawn("F")], expected=1, command_id="k", fingerprint="b2")
    assert (info.value.stored_fingerprint, info.value.given_fingerprint) == ("a1", "b2")
    assert store.last_seq(game, MOVES) == 1
    again = store.append(game, MOVES, [drawn("E")], expected=0, command_id="k", fingerprint="a1")
    assert (again.first_seq, again.last_seq, again.duplicate) == (1, 1, True)
    assert again.fingerprint == "a1"
    assert first.duplicate is False
    seen = store.command_result(game, MOVES, "k")
    assert (seen.first_seq, seen.last_seq, seen.fingerprint) == (1, 1, "a1")


def test_a_command_without_fingerprint_matches_any(store) -> None:
    game = new_game()
    store.append(game, MOVES, [drawn()], expected=0, command_id="k")
    again = store.append(game, MOVES, [drawn()], expected=0, command_id="k", fingerprint="z")
    assert again.duplicate and again.fingerprint == ""


def test_idempotency_is_checked_before_the_expected_sequence(store) -> None:
    """A retry arriving after other moves still gets its original result, not a conflict."""
    game = new_game()
    store.append(game, MOVES, [drawn()], expected=0, command_id="a")
    store.append(game, MOVES, [drawn()], expected=1, command_id="b")
    assert store.append(game, MOVES, [drawn()], expected=0, command_id="a").duplicate


def test_any_position_append_and_marker_in_the_same_step(store) -> None:
    game = new_game()
    store.append(game, MOVES, [drawn()], expected=ANY, command_id="c1", marker="$seq")
    store.append(game, MOVES, [drawn(), drawn()], expected=ANY, command_id="c2", marker="$seq")
    assert store.marker(game, MOVES) == "3"
    store.append(
        game,
        SCORES,
        [NewEvent("TileDrawn", 1, {"tile": "A"})],
        expected=0,
        command_id="w1",
        marker="2",
    )
    assert store.marker(game, SCORES) == "2"
    assert store.marker(new_game(), MOVES) is None


def test_progress_is_conditional_on_the_expected_marker(store) -> None:
    """A consumer saves progress only from where it started; a zero-event save is allowed."""
    game = new_game()
    first = store.append(game, SCORES, [], expected=0, command_id="p1", marker="3",
                         expected_marker="")  # fmt: skip
    assert (first.first_seq, first.last_seq) == (1, 0)  # nothing appended, progress saved
    assert store.marker(game, SCORES) == "3"
    with pytest.raises(MarkerConflict) as info:  # a racing consumer that also started at ""
        store.append(game, SCORES, [drawn()], expected=0, command_id="p2", marker="5",
                     expected_marker="")  # fmt: skip
    assert (info.value.expected_marker, info.value.actual_marker) == ("", "3")
    assert store.last_seq(game, SCORES) == 0 and store.marker(game, SCORES) == "3"
    store.append(game, SCORES, [drawn()], expected=0, command_id="p3", marker="5",
                 expected_marker="3")  # fmt: skip
    assert (store.last_seq(game, SCORES), store.marker(game, SCORES)) == (1, "5")
    with pytest.raises(StoreError):  # no events and nothing to save
        store.append(game, SCORES, [], expected=ANY, command_id="p4")


def test_invalid_payload_is_rejected_and_nothing_is_written(store) -> None:
    """With the suite's payload check (`CHECK_PAYLOADS`, on in every test)."""
    game = new_game()
    with pytest.raises(SchemaError):
        store.append(
            game,
            MOVES,
            [drawn(), NewEvent("TileDrawn", 1, {"tile": 7})],
            expected=0,
            command_id="bad",
        )
    with pytest.raises(SchemaError):
        store.append(game, MOVES, [NewEvent("Nope", 1, {})], expected=0, command_id="bad2")
    assert store.last_seq(game, MOVES) == 0
    # The rejected command id was not consumed.
    assert not store.append(game, MOVES, [drawn()], expected=0, command_id="bad").duplicate


def test_as_the_services_run_only_unreadable_events_are_refused(store, monkeypatch) -> None:
    """Without the payload check (the services' way: they append the engine's events, and
    an import checks its record's first), an event no schema describes or a payload that is
    not an object is still refused, whole; a payload is otherwise stored as it is given."""
    monkeypatch.setattr(port, "CHECK_PAYLOADS", False)
    game = new_game()
    not_an_object: Any = ["E"]
    unreadable = [
        NewEvent("Nope", 1, {}),
        NewEvent("TileDrawn", 9, {"tile": "E"}),
        NewEvent("TileDrawn", 1, not_an_object),
    ]
    for event in unreadable:
        with pytest.raises(SchemaError):
            store.append(game, MOVES, [drawn(), event], expected=0, command_id="bad")
    assert store.last_seq(game, MOVES) == 0
    store.append(game, MOVES, [NewEvent("TileDrawn", 1, {"tile": 7})], expected=0, command_id="c")
    assert [e.payload for e in store.read(game, MOVES)] == [{"tile": 7}]


def test_read_after_and_limit(store) -> None:
    game = new_game()
    store.append(game, MOVES, [drawn(t) for t in "ABCDE"], expected=0, command_id="c")
    assert [e.payload["tile"] for e in store.read(game, MOVES, after=2)] == ["C", "D", "E"]
    assert [e.seq for e in store.read(game, MOVES, after=1, limit=2)] == [2, 3]
    assert store.read(game, MOVES, after=5) == []


def test_games_and_streams_are_separate(store) -> None:
    a, b = new_game(), new_game()
    store.append(a, MOVES, [drawn("A")], expected=0, command_id="x")
    store.append(b, MOVES, [drawn("B")], expected=0, command_id="x")
    assert [e.payload["tile"] for e in store.read(a, MOVES)] == ["A"]
    assert store.read(a, SCORES) == []


def test_an_old_schema_version_is_upcast_on_read(store) -> None:
    """TilePlaced v1 stored the rotation as `rot`; it reads back as v3 (v2's `rotation`, and
    no bank: docs/clocks.md)."""
    game = new_game()
    store.put_raw(
        StoredEvent(
            game,
            MOVES,
            1,
            "TilePlaced",
            1,
            1,
            "old",
            {"player": 0, "tile": "E", "x": 0, "y": -1, "rot": 2, "meeple": None},
        )
    )
    (event,) = store.read(game, MOVES)
    assert event.version == 3
    assert event.payload == {
        "player": 0,
        "tile": "E",
        "x": 0,
        "y": -1,
        "rotation": 2,
        "meeple": None,
    }


def test_a_whole_game_round_trips_through_the_store(store) -> None:
    game = new_game()
    _, events = random_game(random.Random(5), players=3)
    store.append(game, MOVES, [to_new(e) for e in events], expected=0, command_id="all")
    assert [to_engine(e) for e in store.read(game, MOVES)] == events


def test_concurrent_appends_at_the_same_position_accept_exactly_one(store) -> None:
    game = new_game()
    store.append(game, MOVES, [drawn()], expected=0, command_id="setup")
    outcomes: list[str] = []
    barrier = threading.Barrier(20)

    def contender(i: int) -> None:
        barrier.wait()
        try:
            store.append(game, MOVES, [drawn()], expected=1, command_id=f"c{i}")
            outcomes.append("ok")
        except ConcurrencyError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 19 + ["ok"]
    assert store.last_seq(game, MOVES) == 2


def test_every_key_of_a_game_shares_one_cluster_hash_tag() -> None:
    keys = [k for stream in (MOVES, SCORES) for k in game_keys("abc", stream)]
    assert all(k.startswith("{g:abc}:") for k in keys)
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_a_flushed_append_script_is_loaded_again(kind: str, request: pytest.FixtureRequest) -> None:
    client = request.getfixturevalue("redis_client" if kind == "redis" else "cluster_client")
    store = RedisEventStore(client)
    store.append(new_game(), MOVES, [drawn()], expected=0, command_id="warm")
    client.script_flush()  # on a cluster: every primary
    for i in range(12):  # games on every node: each node loads it again on its NOSCRIPT
        result = store.append(new_game(), MOVES, [drawn()], expected=0, command_id=f"c{i}")
        assert (result.first_seq, result.duplicate) == (1, False)


def test_games_on_a_cluster_live_on_the_nodes_of_their_slots(
    cluster_client: redis.Redis,
    redis_cluster,  # noqa: F811
) -> None:
    store = RedisEventStore(cluster_client)
    primaries = redis_cluster.primary_ports()
    on: dict[int, list[str]] = {port: [] for port in primaries}
    while any(len(ids) < 10 for ids in on.values()):  # 10 games on each primary, by their slot
        game = new_game()
        ids = on[redis_cluster.port_of_slot(key_slot("g:" + game))]
        if len(ids) < 10:
            ids.append(game)
    games = [game for ids in on.values() for game in ids]
    for game in games:
        store.append(game, MOVES, [drawn(), drawn("F")], expected=0, command_id="c")
    nodes = set()
    for game in games:
        key = game_keys(game, MOVES)[0]
        port = redis_cluster.port_of_slot(key_slot("g:" + game))  # the {g:<id>} tag
        assert redis_cluster.node_client(port).xlen(key) == 2  # on its slot's primary
        nodes.add(port)
        assert [e.seq for e in store.read(game, MOVES)] == [1, 2]
    assert nodes == set(primaries) and len(nodes) == 3  # every primary holds its games
