"""The cross-game indexes (issue 14), on a real Redis: each is right after every kind of write,
a killed Redis never leaves one out of step with its game, the readers cost the same with
1,000 or 20,000 stored games, and the backfill indexes old games exactly once."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis

from carcassonne.record import record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from deploy.local.host import redis_server_binary
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_new
from services.command.hooks import Webhooks
from services.command.imports import import_game
from services.command.records import replay_record
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.query.directory import RedisDirectory
from services.redis_store import RedisEventStore, game_keys, hook_keys
from services.redis_store.backfill import index_game, run
from services.redis_store.keys import (
    IN_PROGRESS,
    OVER,
    SHARD_TAGS,
    SHARDS,
    derived_game_id,
    games_key,
    hook_member,
    hooks_due_key,
    index_shard,
    legacy_shard,
    player_key,
    shard_of,
    shard_slot,
    status_key,
    unscored_key,
)
from services.scoring.posting import Answer
from services.scoring.scorer import Scorer
from services.scoring.sweep import unscored_games
from services.scoring.webhooks import Dispatcher, hook_deliverer, stalled
from tests.integration.index_data import write_finished_games
from tests.redis_server import free_port, private_redis

SECRET = "s" * 32


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def stored_game(
    store: RedisEventStore, name: str, names: list[str], moves: int | None = None
) -> tuple[str, list[Any]]:
    """A random game appended as the command service appends it (secrets first, a turn or
    so per append, moves marker), stopping after `moves` events if given."""
    game_id = derived_game_id(f"{name}-{os.getpid()}-{time.time_ns()}".encode())
    RedisSecrets(store.client).put(game_id, {"names": names, "seed": None, "tokens": {}})
    _, events = random_game(random.Random(name), len(names), Ruleset())
    events = events[:moves] if moves is not None else events
    for start in range(0, len(events), 3):
        store.append(game_id, MOVES, [to_new(e) for e in events[start : start + 3]],
                     expected=start, command_id=f"c{start}", marker="$seq")  # fmt: skip
    return game_id, events


def members(client: redis.Redis, key: str) -> dict[str, int]:
    pairs: Any = client.zrange(key, 0, -1, withscores=True)
    return {m.decode(): int(s) for m, s in pairs}


def where(client: redis.Redis, game_id: str) -> dict[str, Any]:
    """Every index entry of a game in its shard."""
    shard = index_shard(game_id)
    return {
        "games": client.zscore(games_key(shard), game_id),
        "in_progress": client.zscore(status_key(shard, IN_PROGRESS), game_id),
        "over": client.zscore(status_key(shard, OVER), game_id),
        "unscored": client.zscore(unscored_key(shard), game_id),
    }


def first_time(store: RedisEventStore, game_id: str, after: int = 0) -> int:
    return store.read(game_id, MOVES, after=after, limit=1)[0].time_ms


# ------------------------------------------------------------------------ each write


def test_create_moves_scoring_and_end_keep_every_index(redis_client, store) -> None:
    game_id, _ = stored_game(store, "life", ["Ann", "Émile"], moves=12)
    shard = shard_of(game_id)
    assert shard is not None
    created = first_time(store, game_id)
    seen = where(redis_client, game_id)
    assert seen == {"games": created, "in_progress": created, "over": None, "unscored": created}
    for name in ("ann", "ÉMILE"):  # by name, any case
        assert redis_client.zscore(player_key(shard, name), game_id) == created
    # Scored up to the end: out of the unscored index, in the same append as the progress.
    Scorer(store).catch_up(game_id)
    assert where(redis_client, game_id)["unscored"] is None
    # New moves: back in, with the time of its first unscored move (kept by later moves).
    _, whole = random_game(random.Random("life"), 2, Ruleset())
    store.append(game_id, MOVES, [to_new(e) for e in whole[12:15]], expected=12,
                 command_id="more", marker="$seq")  # fmt: skip
    first_unscored = first_time(store, game_id, after=12)
    assert where(redis_client, game_id)["unscored"] == first_unscored
    store.append(game_id, MOVES, [to_new(e) for e in whole[15:-1]], expected=15,
                 command_id="most", marker="$seq")  # fmt: skip
    assert where(redis_client, game_id)["unscored"] == first_unscored
    # Progress part of the way: still in, at the first move not scored yet.
    store.append(game_id, SCORES, [], expected=store.last_seq(game_id, SCORES), command_id="p",
                 marker="13", expected_marker=store.marker(game_id, SCORES))  # fmt: skip
    assert where(redis_client, game_id)["unscored"] == first_time(store, game_id, after=13)
    # GameEnded: status over (keeping its creation time); scored: out of unscored.
    assert whole[-1].__class__.__name__ == "GameEnded"
    store.append(game_id, MOVES, [to_new(whole[-1])], expected=len(whole) - 1,
                 command_id="end", marker="$seq")  # fmt: skip
    Scorer(store).catch_up(game_id)
    assert where(redis_client, game_id) == {"games": created, "in_progress": None,
                                            "over": created, "unscored": None}  # fmt: skip


def test_the_command_service_and_import_index_their_games(redis_client, store) -> None:
    service = GameService(store, RedisSecrets(redis_client))
    game_id, _ = service.create_game(["Zoë", "bob"], Ruleset())
    shard = shard_of(game_id)
    assert shard is not None
    created = first_time(store, game_id)
    assert where(redis_client, game_id) == {"games": created, "in_progress": created,
                                            "over": None, "unscored": created}  # fmt: skip
    assert redis_client.zscore(player_key(shard, "ZOË"), game_id) == created
    # An import: one append of a whole game, so it is over from the start.
    _, events = random_game(random.Random(3), 2, Ruleset())
    replayed = replay_record(record_from_events(events))
    done = import_game(service, replayed, ["Kim", "Lee"], "k_idx", f"key-{time.time_ns()}")
    imported = shard_of(done.game_id)
    assert imported is not None
    at = first_time(store, done.game_id)
    assert where(redis_client, done.game_id) == {"games": at, "in_progress": None, "over": at,
                                                 "unscored": at}  # fmt: skip
    assert redis_client.zscore(player_key(imported, "kim"), done.game_id) == at
    Scorer(store).catch_up(done.game_id)
    assert where(redis_client, done.game_id)["unscored"] is None


class Poster:
    """A fake receiver answering from `statuses` (then 200)."""

    def __init__(self, statuses: list[int | None] | None = None) -> None:
        self.statuses = list(statuses or [])

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        status = self.statuses.pop(0) if self.statuses else 200
        return Answer(status) if status is not None else Answer(None, "down")


def test_a_hook_is_in_the_due_index_exactly_while_it_has_work(redis_client, store) -> None:
    game_id, _ = stored_game(store, "hooked", ["a", "b"])
    Scorer(store).catch_up(game_id)
    hooks = Webhooks(redis_client, store, None, allow_private=True)
    before = int(time.time() * 1000)
    hook_id = hooks.register(game_id, "http://127.0.0.1:9/in", SECRET, "k")["hook_id"]
    due = hooks_due_key(index_shard(game_id))
    member = hook_member(game_id, hook_id)
    assert before <= members(redis_client, due)[member]  # score events to dispatch
    Dispatcher(redis_client, store, window_s=60).dispatch(game_id)
    dispatched = members(redis_client, due)[member]
    assert dispatched >= before
    deliverer = hook_deliverer(redis_client, store, Poster([500]), backoff_base=30, backoff_max=30)
    ran = deliverer.run(game_id, hook_id)
    assert ran.outcome == "retrying"
    head = json.loads(redis_client.hget(hook_keys(game_id, hook_id)[1], "1"))
    assert members(redis_client, due)[member] == head["next_ms"]  # at its retry's time
    deliverer.post = Poster()
    redis_client.zadd(due, {member: 0})  # as if its retry were due: the sweep resends it
    assert (game_id, hook_id) not in list(stalled(redis_client, store, grace_ms=0))  # not yet
    assert members(redis_client, due)[member] == head["next_ms"]  # settled back
    for entry in redis_client.hkeys(hook_keys(game_id, hook_id)[1]):  # make it due now
        raw = json.loads(redis_client.hget(hook_keys(game_id, hook_id)[1], entry))
        raw["next_ms"] = 0
        redis_client.hset(hook_keys(game_id, hook_id)[1], entry, json.dumps(raw))
    ran = deliverer.run(game_id, hook_id, max_deliveries=10_000, max_seconds=60)
    assert ran.outcome == "idle"
    assert member not in members(redis_client, due)  # all delivered: out of the index
    # A new score event (a late append by the worker) puts it back, in the same append.
    store.append(game_id, SCORES, [late_score(store, game_id)],
                 expected=store.last_seq(game_id, SCORES), command_id="late",
                 marker=store.marker(game_id, SCORES))  # fmt: skip
    assert member in members(redis_client, due)
    assert (game_id, None) in list(stalled(redis_client, store, grace_ms=0))


def late_score(store: RedisEventStore, game_id: str) -> Any:
    """A copy of the game's last score event, as a new one (a valid payload)."""
    from eventstore.envelope import NewEvent

    last = store.read(game_id, SCORES)[-1]
    return NewEvent(last.type, last.version, last.payload)


# ------------------------------------------------------------------------ a killed Redis


def invariant_breaks(client: redis.Redis, game_ids: list[str]) -> list[str]:
    """Where an index disagrees with its game's keys."""
    wrong = []
    for game_id in game_ids:
        entry = where(client, game_id)
        stream = client.xrevrange(game_keys(game_id, MOVES)[0], count=1)
        if not stream:
            if any(v is not None for v in entry.values()):
                wrong.append(f"{game_id}: indexed without a stream")
            continue
        over = stream[0][1][b"type"] == b"GameEnded"  # type: ignore[index]
        moved = int(client.get(game_keys(game_id, MOVES)[2]) or 0)
        scored = int(client.get(game_keys(game_id, SCORES)[2]) or 0)
        if entry["games"] is None or (entry["over"] is None) == over:
            wrong.append(f"{game_id}: status {entry} but over={over}")
        if (entry["in_progress"] is None) != over:
            wrong.append(f"{game_id}: in_progress {entry} but over={over}")
        if (entry["unscored"] is not None) != (moved > scored):
            wrong.append(f"{game_id}: unscored {entry} but moved={moved} scored={scored}")
    return wrong


class Finished:
    """Games the writers have written whole, counted under a lock; a waiter is woken by each."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def add(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        """Whether `count` games were finished within `timeout` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, timeout)


def write(
    store: RedisEventStore, stop: threading.Event, name: str, done: Finished, ids: list[str]
) -> None:
    """Append whole games, a few moves and a partial progress at a time, until stopped or
    Redis goes away."""
    rng = random.Random(name)
    for n in range(100_000):
        if stop.is_set():
            return
        game_id = derived_game_id(f"kill-{name}-{n}".encode())
        ids.append(game_id)
        _, events = random_game(rng, 2, Ruleset())
        try:
            for start in range(0, len(events), 4):
                store.append(game_id, MOVES, [to_new(e) for e in events[start : start + 4]],
                             expected=start, command_id=f"c{start}", marker="$seq")  # fmt: skip
                if start % 8 == 4:  # the worker's progress, part of the way
                    store.append(game_id, SCORES, [], expected=-1, command_id=f"p{start}",
                                 marker=str(start))  # fmt: skip
            store.append(game_id, SCORES, [], expected=-1, command_id="pend",
                         marker=str(len(events)))  # fmt: skip
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return
        done.add()


@pytest.mark.slow
def test_a_redis_killed_mid_writes_leaves_no_index_out_of_step(tmp_path) -> None:
    """Writers append moves and progress as fast as they can; Redis (append-only file,
    fsync always) is SIGKILLed under them, then restarted from its file: every game's index
    entries agree with its keys, whatever was cut."""
    port = free_port()
    command = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "yes", "--appendfsync", "always",
               "--dir", str(tmp_path)]  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"

    def started() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return proc
            except (redis.ConnectionError, redis.BusyLoadingError):
                time.sleep(0.02)
        proc.kill()
        raise RuntimeError("redis-server did not start")

    game_ids: list[str] = []
    proc = started()
    try:
        for round_ in range(3):
            client = redis.Redis.from_url(url, socket_timeout=2)
            store = RedisEventStore(client)
            stop = threading.Event()
            done = Finished()

            threads = [
                threading.Thread(target=write, args=(store, stop, f"{round_}-{w}", done, game_ids))
                for w in range(3)
            ]
            for thread in threads:
                thread.start()
            # Let writes pile up, more each round (the kill cuts a different point), however
            # slow the machine: the writers go on appending, so the kill lands mid-append.
            wanted = 2 + 2 * round_
            piled = done.wait_for(wanted, timeout=120)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            stop.set()
            for thread in threads:  # each returns at its next append (Redis is gone)
                thread.join(timeout=60)
            assert piled, f"round {round_}: {done.count} of {wanted} games written in 120 s"
            assert not any(thread.is_alive() for thread in threads)
            proc = started()
            check = redis.Redis.from_url(url)
            assert invariant_breaks(check, game_ids) == []
    finally:
        proc.kill()
        proc.wait(timeout=10)


# ------------------------------------------------------------------------ cost: what is stored


@pytest.fixture(scope="module")
def lone_redis() -> Iterator[str]:
    """A Redis of this module's own: commands are counted on it (INFO commandstats)."""
    with private_redis() as url:
        yield url


HANDSHAKE = {"cmdstat_info", "cmdstat_config", "cmdstat_client", "cmdstat_client|setinfo",
             "cmdstat_hello", "cmdstat_select"}  # fmt: skip


def commands(client: redis.Redis) -> dict[str, int]:
    """Commands the server ran since the last CONFIG RESETSTAT, by name (INFO commandstats),
    less the INFO calls and the connection handshake of a new client."""
    stats = client.info("commandstats")
    return {k[8:]: int(v["calls"]) for k, v in stats.items() if k not in HANDSHAKE}


def counted(url: str, work: Any) -> dict[str, int]:
    """Redis commands `work(client)` sent, by name, on a client of its own."""
    client = redis.Redis.from_url(url)
    meter = redis.Redis.from_url(url)
    meter.config_resetstat()
    work(client)
    return commands(meter)


def readers(client: redis.Redis) -> dict[str, int]:
    """What each periodic or request-path reader returns."""
    directory = RedisDirectory(client)
    first, cursor = directory.page(None, None, None, 50)
    second, _ = directory.page(None, None, cursor, 50)
    return {
        "sweep": len(list(unscored_games(client))),
        "webhook_sweep": len(list(stalled(client, RedisEventStore(client), grace_ms=0))),
        "list": len(first) + len(second),
        "over": len(directory.page(OVER, None, None, 20)[0]),
        "in_progress": len(directory.page(IN_PROGRESS, None, None, 20)[0]),
    }


@pytest.mark.slow
def test_readers_cost_the_same_with_1000_or_20000_stored_games(lone_redis) -> None:
    client = redis.Redis.from_url(lone_redis)
    client.flushdb()
    write_finished_games(client, 1_000, start_ms=1_000_000, seed=1)
    costs = {}
    for name, work in (
        ("sweep", lambda c: list(unscored_games(c))),
        ("webhook_sweep", lambda c: list(stalled(c, RedisEventStore(c), grace_ms=0))),
        ("first_page", lambda c: RedisDirectory(c).page(None, None, None, 50)),
        ("status_page", lambda c: RedisDirectory(c).page(OVER, None, None, 50)),
        ("next_page", lambda c: RedisDirectory(c).page(
            None, None, RedisDirectory(c).page(None, None, None, 50)[1], 50)),
    ):  # fmt: skip
        costs[name] = [counted(lone_redis, work)]
    small = readers(client)
    write_finished_games(client, 19_000, start_ms=2_000_000, seed=2)
    assert client.dbsize() > 20_000 * 4  # streams, markers, command hashes of 20,000 games
    for name, work in (
        ("sweep", lambda c: list(unscored_games(c))),
        ("webhook_sweep", lambda c: list(stalled(c, RedisEventStore(c), grace_ms=0))),
        ("first_page", lambda c: RedisDirectory(c).page(None, None, None, 50)),
        ("status_page", lambda c: RedisDirectory(c).page(OVER, None, None, 50)),
        ("next_page", lambda c: RedisDirectory(c).page(
            None, None, RedisDirectory(c).page(None, None, None, 50)[1], 50)),
    ):  # fmt: skip
        costs[name].append(counted(lone_redis, work))
    large = readers(client)
    assert all(a == b for a, b in costs.values()), costs
    assert costs["sweep"][0] == {"zrangebyscore": SHARDS}  # one per shard, pipelined
    assert costs["first_page"][0] == {"zrange": SHARDS, "xrevrange": 100, "get": 50}
    assert small == large == {"sweep": 0, "webhook_sweep": 0, "list": 100, "over": 20,
                              "in_progress": 0}  # fmt: skip
    # Newest first: the first page is the 50 last created, in order.
    page, _ = RedisDirectory(client).page(None, None, None, 50)
    scored: list[Any] = []
    for shard in range(SHARDS):
        scored += cast(Any, client.zrange(games_key(shard), 0, -1, withscores=True))
    newest = sorted(((s, m) for m, s in scored), reverse=True)[:50]
    assert [g["game_id"] for g in page] == [m.decode() for _, m in newest]


def test_a_page_walk_lists_every_game_once_newest_first_even_with_ties(lone_redis) -> None:
    client = redis.Redis.from_url(lone_redis)
    client.flushdb()
    ids = write_finished_games(client, 300, start_ms=5_000_000, seed=3)
    for game_id in ids[:150]:  # half of them created in the very same millisecond
        shard = shard_of(game_id)
        assert shard is not None
        for key in (games_key(shard), status_key(shard, OVER)):
            client.zadd(key, {game_id: 4_000_000})
    directory = RedisDirectory(client)
    for limit in (1, 7, 50):
        seen, cursor = [], None
        for _ in range(400):
            page, cursor = directory.page(OVER, None, cursor, limit)
            seen += [g["game_id"] for g in page]
            if cursor is None:
                break
        assert sorted(seen) == sorted(ids) and len(seen) == len(ids), limit
        assert seen[-150:] == sorted(ids[:150], reverse=True)  # the ties: by id, last


# ------------------------------------------------------------------------ the backfill


def test_the_backfill_indexes_old_games_exactly_once_even_run_twice(redis_client, store) -> None:
    old = []
    for i in range(6):  # ids of the old layout (uuid4): off the shard slots, no index written
        game_id = f"{i:04x}" + os.urandom(14).hex()
        while shard_of(game_id) is not None:
            game_id = f"{i:04x}" + os.urandom(14).hex()
        RedisSecrets(redis_client).put(game_id, {"names": [f"Old{i}", "Bo"], "tokens": {}})
        _, events = random_game(random.Random(i), 2, Ruleset())
        events = events if i % 2 else events[:9]  # some over, some still being played
        store.append(game_id, MOVES, [to_new(e) for e in events], expected=0, command_id="c",
                     marker="$seq")  # fmt: skip
        if i % 3 == 0:
            Scorer(store).catch_up(game_id)
        old.append(game_id)
    assert all(v is None for g in old for v in where(redis_client, g).values())
    hooked = old[3]  # scored: its new hook has score events to dispatch
    hook_id = Webhooks(redis_client, store, None, allow_private=True).register(
        hooked, "http://127.0.0.1:9/in", SECRET, "k")["hook_id"]  # fmt: skip
    fresh, _ = stored_game(store, "fresh", ["x", "y"])  # indexed by the script already

    def snapshot() -> dict[str, dict[str, int]]:
        keys = [k.decode() for k in redis_client.keys("{ix*}:idx:*")]
        return {key: members(redis_client, key) for key in sorted(keys)}

    assert index_game(redis_client, fresh) is False
    first = run(redis_client, count=50)
    after_first = snapshot()
    second = run(redis_client, count=7)
    assert snapshot() == after_first  # idempotent: the same entries, nothing added
    assert first.indexed >= len(old) and second.indexed == first.indexed
    for i, game_id in enumerate(old):
        shard = legacy_shard(game_id)
        events = store.read(game_id, MOVES)
        created, over = events[0].time_ms, events[-1].type == "GameEnded"
        counts = sum(game_id in m for m in after_first.values() if True)
        scored = i % 3 == 0
        assert where(redis_client, game_id) == {
            "games": created,
            "in_progress": None if over else created,
            "over": created if over else None,
            "unscored": None if scored else created,
        }
        assert redis_client.zscore(player_key(shard, f"OLD{i}"), game_id) == created
        assert counts == 4 + (0 if scored else 1)  # games, status, 2 players[, unscored]
    assert hook_member(hooked, hook_id) in after_first[hooks_due_key(legacy_shard(hooked))]
    # The readers see them: the sweep (after checking markers) and the list.
    behind = {g for g in unscored_games(redis_client) if g in old}
    assert behind == {g for i, g in enumerate(old) if i % 3}
    listed, _ = RedisDirectory(redis_client).page(None, "old4", None, 10)
    assert [g["game_id"] for g in listed] == [old[4]]


def test_the_backfill_command_shows_progress_and_resumes(redis_url) -> None:
    env = {**os.environ, "REDIS_URL": redis_url}
    helped = subprocess.run([sys.executable, "-m", "services.redis_store.backfill", "--help"],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert helped.returncode == 0 and "once after upgrading" in " ".join(helped.stdout.split())
    ran = subprocess.run([sys.executable, "-m", "services.redis_store.backfill", "--count", "5"],
                         capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "keys" in ran.stderr and "cursor 0" in ran.stderr and "100%" in ran.stderr
    assert set(json.loads(ran.stdout)) == {"indexed", "already_indexed"}


def _cluster_enabled_server(workdir: str) -> tuple[subprocess.Popen[bytes], redis.Redis]:
    """A cluster-enabled redis-server on a free port, answering PING. A port taken between
    `free_port` and the server's bind makes it exit at once: try another (a CI run lost one)."""
    for _attempt in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", f"{workdir}/nodes-{port}.conf",
             "--save", "", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=port)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                client.ping()
                return proc, client
            except redis.ConnectionError:
                time.sleep(0.02)
        proc.kill()
        proc.wait(timeout=10)
    raise AssertionError("no cluster-enabled redis-server could be started")


def test_shard_tags_agree_with_cluster_keyslot() -> None:
    """CLUSTER KEYSLOT of a cluster-enabled redis-server agrees with the hard-coded slots."""
    workdir = tempfile.mkdtemp(prefix="cc-keyslot-")
    proc, client = _cluster_enabled_server(workdir)
    try:
        for i, tag in enumerate(SHARD_TAGS):
            assert client.execute_command("CLUSTER", "KEYSLOT", f"{{{tag}}}:idx:games") == (
                shard_slot(i)
            )
        game_id = derived_game_id(b"slot")
        assert client.execute_command("CLUSTER", "KEYSLOT", game_keys(game_id, MOVES)[0]) == (
            shard_slot(shard_of(game_id) or 0)
        )
    finally:
        proc.kill()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
