"""The archiver on a real Redis (one of its own: an archiver moves every due game it finds)
and a real archive: a finished game is due after ARCHIVE_AFTER, copied, verified, removed in
one step that refuses a game appended since, and restored exactly; an archive that is down,
an archiver SIGKILLed at each step and a Redis restarting mid-run lose nothing and leave no
game half in each place (tests/postgres_server.py's private PostgreSQL for the outage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.events import GameAbandoned
from eventstore.archive import Summary
from eventstore.envelope import MOVES, SCORES, STREAMS, NewEvent
from eventstore.schemas import to_new
from services.archive import open_archive
from services.archive.archiver import Archiver, NotArchivable, _entry, _events
from services.archive.sqlite import SqliteArchive
from services.redis_store import RedisEventStore
from services.redis_store.directory_index import DirectoryIndex
from services.redis_store.keys import (
    archive_due_key,
    archived_key,
    game_keys,
    games_key,
    key_games_key,
    key_player_id_key,
    key_player_key,
    player_id_key,
    player_key,
    public_key,
    seats_key,
    secrets_key,
    shard_of,
    status_key,
)
from tests.archive_games import play
from tests.postgres_server import postgres_missing, private_postgres
from tests.redis_server import private_redis

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    with private_redis() as url:
        yield redis.Redis.from_url(url)


@pytest.fixture
def store(client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(client)


def game_keys_in(client: redis.Redis, game_id: str) -> list[str]:
    found: Any = client.keys("{g:" + game_id + "}:*")
    return sorted(k.decode() for k in found)


def hot(client: redis.Redis, game_id: str) -> dict[str, Any]:
    """A game's streams (raw entries, ids and all) and markers in Redis, and the span of
    each command that appended events (what a restore rebuilds of the command records)."""
    out: dict[str, Any] = {}
    for stream in STREAMS:
        key, commands, marker = game_keys(game_id, stream)
        out[key] = client.xrange(key)
        out[marker] = client.get(marker)
        records: Any = client.hgetall(commands)
        spans = {k: v.decode().split(":")[:2] for k, v in records.items()}
        out[commands] = {k: s for k, s in spans.items() if int(s[0]) <= int(s[1])}
    return out


def test_a_finished_game_is_due_after_its_end_then_moved_and_restored_exactly(
    client, store, tmp_path
) -> None:
    game_id = play(store, 1)
    before = hot(client, game_id)
    seats = json.loads(client.get(seats_key(game_id)))
    assert seats["names"] and "seed" not in seats and "tokens" not in seats
    archive = SqliteArchive(tmp_path / "a.sqlite3")
    archiver = Archiver(client, archive, after_ms=3_600_000)
    DirectoryIndex(client).catch_up()
    assert client.zscore(games_key(shard_of(game_id) or 0), game_id) is not None
    archiver.due_index.follower.catch_up()
    shard = shard_of(game_id)
    assert shard is not None
    due = client.zscore(archive_due_key(shard), game_id)
    ended = store.read(game_id, SCORES)[-1]
    assert ended.type == "GameScored" and due == ended.time_ms + 3_600_000
    assert archiver.run(int(time.time() * 1000)) == {}  # not due yet
    outcomes = archiver.run(int(due) + 1)
    assert outcomes == {"archived": 1}
    assert game_keys_in(client, game_id) == [archived_key(game_id)]
    assert client.zscore(archive_due_key(shard), game_id) is None
    listed = [games_key(shard), status_key(shard, "over"), player_key(shard, "player 0"),
              player_id_key(shard, "u1-0")]  # fmt: skip
    assert [client.zscore(k, game_id) for k in listed] == [None] * 4  # lists: the archive's
    copy = archive.read(game_id)
    assert copy is not None and copy.meta.status == "over"
    assert copy.meta.names == ["Player 0", "Player 1", "Player 2"][: len(copy.meta.names)]
    assert "tokens" not in copy.meta.record and "seed" not in copy.meta.record
    # Restored: the streams and markers byte for byte, each command's span.
    archiver.restore(game_id, schedule=False)
    assert hot(client, game_id) == before
    assert client.exists(archived_key(game_id)) == 0
    assert None not in [client.zscore(k, game_id) for k in listed]
    assert '"tokens": {}' in client.get(secrets_key(game_id)).decode()
    # The public seats record (the query's, issue 32 finding 11) is back with the secrets.
    assert json.loads(client.get(seats_key(game_id))) == seats
    # In both places now: the next run only removes (the copy verifies).
    client.zadd(archive_due_key(shard), {game_id: 0})
    assert archiver.run() == {"removed": 1}


def test_an_abandoned_game_is_due_once_its_end_is_scored(client, store, tmp_path) -> None:
    game_id = play(store, 2)
    # Its last move replaced by an abandon: rebuild a game that stops short.
    other = play(store, 3)
    moves = store.read(other, MOVES)
    store.append(other, MOVES, [to_new(GameAbandoned(1))], expected=len(moves),
                 command_id="abandon", marker="$seq")  # fmt: skip
    archiver = Archiver(client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)
    outcomes = archiver.run(int(time.time() * 1000) + 1)
    # The abandon is not scored yet: the game waits; the finished one goes.
    assert outcomes == {"archived": 1, "waiting": 1}
    assert client.exists(game_keys(other, MOVES)[0])
    from services.scoring.scorer import Scorer

    Scorer(store).catch_up(other)
    assert archiver.run(int(time.time() * 1000) + 120_000) == {"archived": 1}
    copy = archiver.archive.read(other)
    assert copy is not None and copy.meta.status == "abandoned"
    assert game_id != other


def test_a_game_appended_to_after_its_copy_is_not_removed(client, store, tmp_path) -> None:
    from services.redis_store.keys import game_subscriptions_key, key_hooks_key

    game_id = play(store, 4)
    scores = store.last_seq(game_id, SCORES)
    client.hset(game_subscriptions_key(game_id), "h1", '{"key_id": "k9"}')  # a webhook
    client.sadd(key_hooks_key("k9"), f"{game_id}:h1")
    archive = SqliteArchive(tmp_path / "a.sqlite3")

    class Meddling(SqliteArchive):
        def put_many(self, games: Any) -> None:
            super().put_many(games)
            # A score event lands between the copy and the removal.
            last = store.read(game_id, SCORES)[-1]
            late = NewEvent(last.type, last.version, last.payload)
            store.append(game_id, SCORES, [late], expected=-1, command_id="late")

    archiver = Archiver(client, Meddling(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.run(int(time.time() * 1000) + 1) == {"changed": 1}
    assert client.exists(game_keys(game_id, MOVES)[0]) and not client.exists(archived_key(game_id))
    # Its webhook stays, counted in its key's cap as before.
    assert client.smembers(key_hooks_key("k9")) == {f"{game_id}:h1".encode()}
    # The next run copies the game as it is now, and moves it.
    client.zadd(archive_due_key(shard_of(game_id) or 0), {game_id: 0})
    archiver = Archiver(client, archive, after_ms=0)
    assert archiver.run() == {"archived": 1}
    copy = archive.read(game_id)
    assert copy is not None and copy.count(SCORES) == scores + 1
    assert copy.events[-1].command_id == "late"
    assert not client.exists(key_hooks_key("k9"))


def command(
    redis_url: str, archive_url: str, *args: str, crash: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARCHIVE_CRASH_AT": crash, "PYTHONPATH": f"{ROOT}/shared:{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "services.archive", "--redis-url", redis_url,
         "--archive-url", archive_url, "--after", "0", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def whole_or_gone(
    client: redis.Redis, archive: Any, games: dict[str, dict[str, Any]]
) -> dict[str, str]:
    """Each game's place: "redis" (whole, as before), "archive" (only its tombstone left and
    a verified copy), "both" (whole in Redis and a verified copy); anything else fails."""
    places = {}
    for game_id, before in games.items():
        copy = archive.read(game_id)
        in_redis = bool(client.exists(game_keys(game_id, MOVES)[0]))
        if in_redis:
            assert hot(client, game_id) == before, game_id
        else:
            assert game_keys_in(client, game_id) == [archived_key(game_id)], game_id
            assert copy is not None
        if copy is not None:
            assert Summary.of(copy) == archive.summary(game_id)
            restored = {k: v for k, v in before.items()}
            assert copy.count(MOVES) == len(restored[game_keys(game_id, MOVES)[0]])
        places[game_id] = ("both" if in_redis else "archive") if copy else "redis"
    return places


@pytest.mark.slow
@pytest.mark.parametrize("step", ["copied", "verified", "released", "removed"])
def test_an_archiver_killed_at_each_step_loses_nothing(client, store, tmp_path, step) -> None:
    games = {g: hot(client, g) for g in (play(store, 10 + i) for i in range(3))}
    url = client.connection_pool.connection_kwargs
    redis_url = f"redis://{url['host']}:{url['port']}/0"
    archive_url = f"sqlite:///{tmp_path}/a.sqlite3"
    killed = command(redis_url, archive_url, "run", crash=step)
    assert killed.returncode == -9, killed.stderr
    archive = open_archive(archive_url)
    places = whole_or_gone(client, archive, games)
    # The three are one batch: all copied (and still in Redis), or all removed too.
    assert set(places.values()) == {"archive" if step == "removed" else "both"}
    done = command(redis_url, archive_url, "run", "--quiet")
    assert done.returncode == 0, done.stderr
    assert set(whole_or_gone(client, archive, games).values()) == {"archive"}
    status = command(redis_url, archive_url, "status")
    assert "waiting for the archive: 0 games" in status.stdout
    assert "archived: 3 games" in status.stdout
    for game_id, before in games.items():  # restored, each is as it was
        assert command(redis_url, archive_url, "restore", game_id, "--keep").returncode == 0
        assert hot(client, game_id) == before


@pytest.mark.slow
def test_an_archive_database_down_leaves_games_in_redis_for_later(client, store) -> None:
    why = postgres_missing()
    if why:
        pytest.skip(f"no PostgreSQL server: {why}")
    games = {g: hot(client, g) for g in (play(store, 20 + i) for i in range(3))}
    with private_postgres() as pg:
        archive = open_archive(pg.url)
        archiver = Archiver(client, archive, after_ms=0, retry_ms=60_000)
        pg.stop("immediate")
        now = int(time.time() * 1000) + 1
        outcomes = archiver.run(now)
        assert outcomes == {"failed": 3}
        assert set(whole_or_gone(client, _Down(), games).values()) == {"redis"}
        # Tried again later: not before `retry_ms`.
        assert archiver.run(now + 1_000) == {}
        pg.start()
        assert archiver.run(now + 61_000) == {"archived": 3}
        assert set(whole_or_gone(client, archive, games).values()) == {"archive"}
        archive.close()


@pytest.mark.slow
def test_the_workers_archive_run_opens_its_archive_once_and_again_after_an_outage(
    client, store, monkeypatch
) -> None:
    """The scoring worker's `archive.run` (ARCHIVE_RUN's beat task): the archive is opened on
    the first tick that reaches it and kept; a tick while the database is down opens nothing
    and moves nothing (tried again next tick); after the server restarts, the kept
    connection is replaced within the same tick, which archives as usual."""
    why = postgres_missing()
    if why:
        pytest.skip(f"no PostgreSQL server: {why}")
    import services.archive
    from services.scoring import celery_app

    opened: list[str] = []
    real_open = services.archive.open_archive

    def counting_open(url: str) -> Any:
        opened.append(url)
        return real_open(url)

    monkeypatch.setattr(services.archive, "open_archive", counting_open)
    monkeypatch.setattr(celery_app, "scorer_client", lambda: client)
    monkeypatch.setattr(celery_app, "_archiver", None)
    monkeypatch.setitem(celery_app.settings, "ARCHIVE_AFTER", 0.0)
    with private_postgres() as pg:
        monkeypatch.setitem(celery_app.settings, "ARCHIVE_URL", pg.url)
        first = play(store, 60)
        pg.stop("immediate")
        assert celery_app.archive_run() == {}  # cannot open: logged, the game stays
        assert celery_app._archiver is None and client.exists(game_keys(first, MOVES)[0])
        pg.start()
        assert celery_app.archive_run() == {"archived": 1}
        assert celery_app.archive_run() == {}
        assert len(opened) == 2  # the failed opening, then one kept
        pg.stop("immediate")
        pg.start()  # the kept connection is stale now
        second = play(store, 61)
        assert celery_app.archive_run() == {"archived": 1}
        assert len(opened) == 2
        archive = celery_app.archiver().archive
        assert {g for g in (first, second) if archive.read(g) is not None} == {first, second}
        archive.close()


class _Down:
    """An archive seen while down: holds nothing anyone can read."""

    def read(self, game_id: str) -> None:
        return None


def persistent_redis(port: int, workdir: str) -> subprocess.Popen[bytes]:
    """A redis-server that writes every command to its AOF before answering (a restart
    keeps everything acknowledged), started as `make run` starts it (deploy/local/aof.py)."""
    from deploy.local.cluster import redis_argv

    proc = subprocess.Popen(redis_argv(port, Path(workdir), aof="always"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


@pytest.mark.slow
def test_redis_restarting_mid_run_leaves_every_game_whole_in_one_place(tmp_path) -> None:
    from deploy.local.host import free_port

    port = free_port()
    proc = persistent_redis(port, str(tmp_path))
    try:
        client = redis.Redis(port=port)
        store = RedisEventStore(client)
        games = {g: hot(client, g) for g in (play(store, 40 + i, score_every=1000)
                                             for i in range(40))}  # fmt: skip
        redis_url, archive_url = f"redis://127.0.0.1:{port}/0", f"sqlite:///{tmp_path}/a.db"
        env = {**os.environ, "PYTHONPATH": f"{ROOT}/shared:{ROOT}"}
        run = subprocess.Popen(
            [sys.executable, "-m", "services.archive", "--redis-url", redis_url,
             "--archive-url", archive_url, "--after", "0", "run", "--batch", "1"],
            cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        assert run.stderr is not None
        seen = b""
        while b" 5/40" not in seen and run.poll() is None:  # a few games moved: restart
            seen += run.stderr.read(1)
        proc.kill()
        proc.wait()
        proc = persistent_redis(port, str(tmp_path))
        assert run.wait(60) != 0  # the run stopped on the lost connection
        archive = open_archive(archive_url)
        places = whole_or_gone(client, archive, games)
        assert 5 <= list(places.values()).count("archive") < 40
        assert command(redis_url, archive_url, "run", "--quiet").returncode == 0
        assert set(whole_or_gone(client, archive, games).values()) == {"archive"}
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_the_command_says_in_one_line_that_the_archive_is_down(client, store) -> None:
    """`python -m services.archive` with its PostgreSQL down: exit 3 and one line on stderr
    naming the outage, for each subcommand (before: a traceback and exit 1, the status of a
    game that failed); every game stays in Redis."""
    why = postgres_missing()
    if why:
        pytest.skip(f"no PostgreSQL server: {why}")
    games = {g: hot(client, g) for g in (play(store, 40 + i) for i in range(2))}
    url = client.connection_pool.connection_kwargs
    redis_url = f"redis://{url['host']}:{url['port']}/0"
    with private_postgres() as pg:
        pg.stop("immediate")
        for args in (["status"], ["run", "--quiet"], ["restore", next(iter(games))]):
            done = command(redis_url, pg.url, *args)
            assert done.returncode == 3, (args, done.stderr)
            assert "Traceback" not in done.stderr, args
            assert done.stderr.startswith("error: the archive is unavailable"), done.stderr
            assert done.stderr.count("\n") == 1, done.stderr
    assert set(whole_or_gone(client, _Down(), games).values()) == {"redis"}


def test_a_game_with_deliveries_due_waits_and_its_hooks_go_with_it(client, store, tmp_path) -> None:
    """A subscription delivery still due keeps the game in Redis (it would be lost with the
    game's keys); once delivered the game goes, its webhook's state and its place in the
    key's set of hooks with it."""
    from services.redis_store.keys import (
        game_subscriptions_key,
        key_hooks_key,
        subs_due_key,
        subscription_keys,
    )

    game_id = play(store, 5)
    shard = shard_of(game_id)
    assert shard is not None
    client.hset(game_subscriptions_key(game_id), "h1", '{"key_id": "k9"}')
    client.sadd(key_hooks_key("k9"), f"{game_id}:h1")
    state, log, _ = subscription_keys(game_id, "h1")
    client.hset(state, "moves", "1")
    client.hset(log, "1", "{}")
    client.zadd(subs_due_key(shard), {f"{game_id}:h1": 0})
    archiver = Archiver(client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0, retry_ms=0)
    now = int(time.time() * 1000) + 1
    assert archiver.run(now) == {"waiting": 1}
    client.zrem(subs_due_key(shard), f"{game_id}:h1")
    assert archiver.run(now + 1) == {"archived": 1}
    assert game_keys_in(client, game_id) == [archived_key(game_id)]
    assert not client.sismember(key_hooks_key("k9"), f"{game_id}:h1")


@pytest.mark.slow
def test_an_archiver_killed_after_the_removal_leaves_no_webhook_counted_for_its_key(
    client, store, tmp_path
) -> None:
    """A webhook's place in its API key's set (`MAX_HOOKS_PER_KEY`) goes with its game even
    when the archiver is SIGKILLed right after the removal: the rerun finds the game gone
    (and its webhooks with it), so nothing would free the place again (a DELETE of the hook
    answers 404 once archived): each such crash took one of the key's places for ever."""
    from services.redis_store.keys import game_subscriptions_key, key_hooks_key

    game_id = play(store, 6)
    client.hset(game_subscriptions_key(game_id), "h1", '{"key_id": "k9"}')
    client.sadd(key_hooks_key("k9"), f"{game_id}:h1", "other-game:h2")
    url = client.connection_pool.connection_kwargs
    redis_url = f"redis://{url['host']}:{url['port']}/0"
    archive_url = f"sqlite:///{tmp_path}/a.sqlite3"
    killed = command(redis_url, archive_url, "run", crash="removed")
    assert killed.returncode == -9, killed.stderr
    assert game_keys_in(client, game_id) == [archived_key(game_id)]
    done = command(redis_url, archive_url, "run", "--quiet")
    assert done.returncode == 0, done.stderr
    assert client.smembers(key_hooks_key("k9")) == {b"other-game:h2"}


def test_a_webhook_registered_after_the_read_keeps_its_game_in_redis(
    client, store, tmp_path
) -> None:
    """A webhook registered between the archiver's read and its removal (its registration
    answered 201) is the game changing: the removal refuses, the game and the webhook stay
    (before: the removal deleted the new webhook with the game's hash, left its place in the
    key's set taken for ever and its delivery due for an archived game)."""
    from services.command.hooks import Webhooks
    from services.redis_store.keys import game_subscriptions_key, key_hooks_key, subs_due_key

    game_id = play(store, 7)
    shard = shard_of(game_id)
    assert shard is not None
    hooks = Webhooks(client, store, None, allow_private=True)
    old = hooks.register(game_id, "https://example.com/old", "s" * 20, "k9")["hook_id"]
    client.zrem(subs_due_key(shard), f"{game_id}:{old}")  # delivered
    made: list[str] = []

    class Meddling(SqliteArchive):
        def put_many(self, games: Any) -> None:
            super().put_many(games)
            hooks.delete(game_id, old, "k9")  # its place given back: not counted again
            made.append(hooks.register(game_id, "https://example.com/h", "s" * 20, "k9")["hook_id"])

    archiver = Archiver(client, Meddling(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.run(int(time.time() * 1000) + 1) == {"changed": 1}
    member = f"{game_id}:{made[0]}"
    assert client.hexists(game_subscriptions_key(game_id), made[0])
    assert client.smembers(key_hooks_key("k9")) == {member.encode()}
    # Its deliveries are due: the game waits for them, then goes with its webhook.
    assert client.zscore(subs_due_key(shard), member) is not None
    client.zrem(subs_due_key(shard), member)
    client.zadd(archive_due_key(shard), {game_id: 0})
    # (its copy, made before the webhook, verifies still: only removed)
    assert Archiver(client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0).run() == {
        "removed": 1
    }
    assert game_keys_in(client, game_id) == [archived_key(game_id)]
    assert not client.exists(key_hooks_key("k9"))


def test_streams_are_read_by_columns_as_entry_by_entry_and_odd_entries_are_refused(
    client, store
) -> None:
    """`_events` reads a stream the append script wrote by columns: the very events the
    entry-by-entry reader gives; an entry a round trip would change is refused whichever
    entry it is (and what is wrong said), a stream past the column reader's ids too."""
    game_id = play(store, 40)
    archiver = Archiver(client, SqliteArchive(":memory:"), after_ms=0)
    key = game_keys(game_id, MOVES)[0]
    raw: Any = archiver._reader.xrange(key)
    by_entry = [_entry(game_id, MOVES, i, f) for i, f in raw]
    assert _events(game_id, MOVES, raw) == by_entry
    snap = archiver.snapshot(game_id)
    assert snap is not None and snap.game.events[: len(by_entry)] == tuple(by_entry)
    odd = [(b"v", b"01"), (b"t", b" 5"), (b"type", b"\xff")]
    for n, (field, value) in enumerate(odd):
        entries = [[i, list(f)] for i, f in raw]
        fields = entries[5 + n][1]
        fields[fields.index(field) + 1] = value
        with pytest.raises(NotArchivable, match=f"moves entry {5 + n + 1}-0 is not an event"):
            _events(game_id, MOVES, entries)
    long = [[b"%d-0" % (s + 1), raw[s % len(raw)][1]] for s in range(5_000)]
    assert [e.seq for e in _events(game_id, MOVES, long)] == list(range(1, 5_001))
    client.xadd(key, {"type": "Odd", "v": "1", "cmd": "c", "t": "1", "data": "{}", "x": "y"},
                id=f"{len(raw) + 1}-0")  # fmt: skip
    with pytest.raises(NotArchivable, match="is not an event"):
        archiver.snapshot(game_id)


def test_an_api_keys_public_game_leaves_the_keys_lists_and_comes_back_to_them(
    client, store, tmp_path
) -> None:
    """The public list and the owner key's lists (its games, by player name and id) drop an
    archived game with the directory's other lists (lists read the archive for it; nothing
    of it stays in Redis but the tombstone), and a restore lists it there again."""
    game_id = play(store, 41, names=["Ada", "Bo"], record={"key_id": "k41", "public": True})
    DirectoryIndex(client).catch_up()
    shard = shard_of(game_id)
    assert shard is not None
    key = "k41"
    listed = [public_key(shard), key_games_key(shard, key), key_player_key(shard, key, "ada"),
              key_player_key(shard, key, "bo"), key_player_id_key(shard, key, "u41-1")]  # fmt: skip
    assert None not in [client.zscore(k, game_id) for k in listed]
    archiver = Archiver(client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.run(int(time.time() * 1000) + 1) == {"archived": 1}
    assert [client.zscore(k, game_id) for k in listed] == [None] * len(listed)
    assert game_keys_in(client, game_id) == [archived_key(game_id)]
    archiver.restore(game_id, schedule=False)
    assert None not in [client.zscore(k, game_id) for k in listed]


def test_a_name_that_is_no_text_does_not_hold_up_the_archive(client, store, tmp_path) -> None:
    """A seat name holding a lone UTF-16 surrogate (stored before notation imports refused
    one) cannot be written as UTF-8 text. Its game is archived with the name as JSON keeps
    it (escaped), and the games archived in the same batch with it are archived too: a copy
    that failed at every run would have held them all in Redis for good. Restored, it is
    listed again as the directory lists it (without that name)."""
    games = [play(store, 2, names=["\ud800x", "Kim"]), play(store, 3)]
    archive = SqliteArchive(tmp_path / "a.sqlite3")
    archiver = Archiver(client, archive, after_ms=0)
    DirectoryIndex(client).catch_up()
    archiver.due_index.follower.catch_up()
    assert archiver.run(int(time.time() * 1000) + 1) == {"archived": 2}
    copy = archive.read(games[0])
    assert copy is not None and copy.meta.names == ["\ud800x", "Kim"]
    assert [game_keys_in(client, g) for g in games] == [[archived_key(g)] for g in games]
    archiver.restore(games[0], schedule=False)  # back, listed but under that name
    assert json.loads(client.get(seats_key(games[0])))["names"] == ["\ud800x", "Kim"]
    assert client.zscore(player_key(shard_of(games[0]) or 0, "kim"), games[0]) is not None
