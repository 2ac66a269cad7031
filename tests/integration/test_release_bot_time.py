"""The repair that gives back bot seconds held for games that are gone
(services/redis_store/release_bot_time.py), against a real Redis: a game archived by an
archiver that did not give them back, and a game whose creation stopped after its
reservation, release theirs; a game in Redis, over or not, and one that got its stream during
the grace keep theirs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import BotBudget, ended_key, in_flight_key, takeover_member
from services.redis_store.indexes import text
from services.redis_store.keys import archived_key, game_keys, new_game_id
from services.redis_store.release_bot_time import run
from tests.redis_server import private_redis

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GREEDY = {"level": "greedy", "think_ms": 1}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with private_redis() as found:
        yield found


@pytest.fixture
def client(url: str) -> redis.Redis:
    client = redis.Redis.from_url(url)
    client.flushall()
    return client


def bot_game(service: GameService, key: str) -> tuple[str, list[dict[str, Any]]]:
    return service.create_game(["ann", "robot"], Ruleset(), [0, 1], key_id=key, bots=[None, GREEDY])


def archived_by_an_old_archiver(client: redis.Redis, game_id: str) -> None:
    """What an archiver from before it gave bot seconds back left: the tombstone alone."""
    client.delete(*client.keys("{g:" + game_id + "}*"))
    client.set(archived_key(game_id), 1)


def held(client: redis.Redis, key: str) -> set[str]:
    return {text(m) for m in client.zrange(in_flight_key(key), 0, -1)}


def test_archived_and_never_started_games_give_their_seconds_back_and_live_ones_keep_them(
    client: redis.Redis,
) -> None:
    budget = BotBudget(client, 1_000)
    service = GameService(RedisEventStore(client), RedisSecrets(client), bot_budget=budget)
    live, _ = bot_game(service, "k_a")
    over, seats = bot_game(service, "k_a")
    service.resign(over, seats[0]["token"])  # over, still in Redis: the bots consumer's
    gone, _ = bot_game(service, "k_a")
    assert budget.reserve_takeover("k_a", gone, 0, 5.0) is None  # a takeover bot's seconds
    archived_by_an_old_archiver(client, gone)
    stopped, late = new_game_id(), new_game_id()
    for game_id in (stopped, late):  # reserved, and the creation went no further
        assert budget.reserve("k_b", game_id, 9.0) is None
    waited: list[float] = []

    def grace(seconds: float) -> None:  # the late creation appends meanwhile
        waited.append(seconds)
        client.xadd(game_keys(late, MOVES)[0], {"type": "GameStarted"})

    counts = run(client, grace=5.0, sleep=grace)

    assert counts == {"kept": 3, "archived": 1, "never_started": 1, "released": 2}
    assert waited == [5.0]
    assert held(client, "k_a") == {live, over}  # `gone` and its takeover bot given back
    assert held(client, "k_b") == {late}
    for key, game_id in (("k_a", gone), ("k_b", stopped)):  # no takeover reserves after
        assert client.exists(ended_key(key, game_id))
    assert not client.exists(ended_key("k_a", live))
    assert run(client, grace=0) == {"kept": 3, "archived": 0, "never_started": 0, "released": 0}


def test_a_dry_run_counts_and_writes_nothing(client: redis.Redis) -> None:
    budget = BotBudget(client, 1_000)
    gone = new_game_id()
    assert budget.reserve_takeover("k_a", gone, 1, 5.0) is None  # a takeover member alone
    client.set(archived_key(gone), 1)
    assert budget.reserve("k_a", new_game_id(), 9.0) is None
    before = {k: client.dump(k) for k in client.keys("*")}
    counts = run(client, grace=0, dry_run=True)
    assert counts == {"kept": 0, "archived": 1, "never_started": 1, "released": 0}
    assert {k: client.dump(k) for k in client.keys("*")} == before
    run(client, grace=0)
    assert held(client, "k_a") == set()
    assert not client.exists(in_flight_key("k_a"))  # its last member left: ZREM drops the set
    assert takeover_member(gone, 1) not in held(client, "k_a")


def test_the_command_line_prints_its_counts_and_refuses_a_negative_grace(url: str) -> None:
    redis.Redis.from_url(url).flushall()
    BotBudget(redis.Redis.from_url(url), 1_000).reserve("k_a", new_game_id(), 9.0)
    tool = [sys.executable, "-m", "services.redis_store.release_bot_time", "--redis-url", url]
    done = subprocess.run([*tool, "--grace", "0"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "kept": 0, "archived": 0, "never_started": 1, "released": 1,
    }  # fmt: skip
    refused = subprocess.run([*tool, "--grace", "-1"], capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2 and "--grace" in refused.stderr
    down = subprocess.run(
        [*tool[:-2], "--redis-url", "redis://127.0.0.1:1/0"], capture_output=True, text=True,
        cwd=ROOT,
    )  # fmt: skip
    assert down.returncode == 1 and "cannot use the Redis" in down.stderr, down.stderr
    assert "Traceback" not in down.stderr
