"""The change feed's consumer "bots" (services/bots/feed.py) on a real Redis of its own: the
command service appends and knows nothing of bot turns; the consumer sends the bot task for
every append to a game with a bot seat, once, after recording the game as due, and a task
lost between the two is found by the sweep's due index."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.ruleset import Ruleset
from services.bots.feed import BotFeed
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.common.access import RateLimited
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import BotBudget, in_flight_key
from services.redis_store.bot_index import due_games
from services.redis_store.keys import bots_due_key, index_shard
from tests.redis_server import private_redis

pytestmark = pytest.mark.integration

GREEDY = {"level": "greedy", "think_ms": 1}
NOW_MS, GRACE_MS = 1_000_000, 30_000


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    with private_redis() as url:
        yield redis.Redis.from_url(url)


@pytest.fixture
def service(client: redis.Redis) -> GameService:
    client.flushall()
    return GameService(RedisEventStore(client), RedisSecrets(client))


def consumer(client: redis.Redis, sent: list[str], fail: bool = False) -> BotFeed:
    def send(game_id: str) -> None:
        if fail:
            raise ConnectionError("broker down")  # as Celery would, the broker away
        sent.append(game_id)

    return BotFeed(client, send, GRACE_MS, clock=lambda: NOW_MS / 1000)


def due(client: redis.Redis, game_id: str) -> Any:
    return client.zscore(bots_due_key(index_shard(game_id)), game_id)


def test_each_append_to_a_bot_game_sends_its_task_once_and_human_games_none(
    client: redis.Redis, service: GameService
) -> None:
    sent: list[str] = []
    feed = consumer(client, sent)
    humans, _ = service.create_game(["ann", "bob"], Ruleset(), [0, 1])
    mixed, seats = service.create_game(["ann", "robot"], Ruleset(), [0, 1], bots=[None, GREEDY])
    assert feed.follower.catch_up() == 2
    # The game's creation: the human moves first, but the task finds that out itself.
    assert sent == [mixed] and due(client, mixed) == NOW_MS + GRACE_MS
    assert due(client, humans) is None
    assert feed.follower.catch_up() == 0 and sent == [mixed]  # nothing twice
    spot = service.turn_view(mixed)["placements"][0]
    service.play_turn(mixed, seats[0]["token"], spot["x"], spot["y"], spot["rotation"], None)
    assert feed.follower.catch_up() == 1
    assert sent == [mixed, mixed]  # the human's move handed the turn to the bot


def test_a_task_lost_after_the_record_is_left_to_the_sweep(
    client: redis.Redis, service: GameService
) -> None:
    sent: list[str] = []
    game_id, _ = service.create_game(["robot", "ann"], Ruleset(), [0, 1], bots=[GREEDY, None])
    with pytest.raises(ConnectionError):
        consumer(client, sent, fail=True).follower.catch_up()
    assert sent == []  # lost: and the batch is recorded, so no follower sends it again
    assert consumer(client, sent).follower.catch_up() == 0 and sent == []
    # ... but the game is due: the sweep sends it once its time has come, not before.
    assert list(due_games(client, NOW_MS + GRACE_MS - 1)) == []
    assert list(due_games(client, NOW_MS + GRACE_MS)) == [game_id]


def test_a_game_that_ended_leaves_the_due_index_without_a_task(
    client: redis.Redis, service: GameService
) -> None:
    sent: list[str] = []
    feed = consumer(client, sent)
    game_id, seats = service.create_game(["ann", "robot"], Ruleset(), [0, 1], bots=[None, GREEDY])
    feed.follower.catch_up()
    assert sent == [game_id] and due(client, game_id) is not None
    service.resign(game_id, seats[0]["token"])  # one player left: the game ends (R7)
    assert feed.follower.catch_up() == 1
    assert sent == [game_id] and due(client, game_id) is None


def test_a_consumer_that_was_down_sends_every_bot_game_created_meanwhile_once(
    client: redis.Redis, service: GameService
) -> None:
    games = [
        service.create_game(["robot", "ann"], Ruleset(), [0, 1], bots=[GREEDY, None])[0]
        for _ in range(30)
    ] + [service.create_game(["ann", "bob"], Ruleset())[0] for _ in range(30)]
    sent: list[str] = []
    first, second = consumer(client, sent), consumer(client, sent)
    assert first.follower.catch_up() + second.follower.catch_up() == 60
    assert sorted(sent) == sorted(games[:30])


def test_a_keys_bot_seconds_are_reserved_at_creation_and_given_back_when_a_game_ends(
    client: redis.Redis,
) -> None:
    """Issue 32, finding 2: bot CPU is a budget. A game with bot seats reserves what its bots
    may take (a greedy move is paced to the 250 ms floor: 36 moves of 71 tiles in a 2-player
    game, 9 s) against its API key's limit (20 s here); one more is refused with 429
    `bot_budget_exceeded`, writing nothing; another key has its own budget; when a game
    ends, the bot consumer gives its seconds back and the key may create again."""
    client.flushall()
    service = GameService(
        RedisEventStore(client), RedisSecrets(client), bot_budget=BotBudget(client, 20),
        move_floor_ms=250,
    )  # fmt: skip

    def create(key: str) -> tuple[str, list[dict[str, Any]]]:
        return service.create_game(
            ["ann", "robot"], Ruleset(), [0, 1], key_id=key, bots=[None, GREEDY]
        )

    first, seats = create("k_one")
    create("k_one")
    before = set(client.keys("*"))
    with pytest.raises(RateLimited) as refused:
        create("k_one")
    assert refused.value.status == 429 and refused.value.code == "bot_budget_exceeded"
    assert refused.value.details["in_flight_seconds"] == 18.0
    assert refused.value.details["asked_seconds"] == 9.0
    assert set(client.keys("*")) == before  # nothing of the refused game
    create("k_two")  # another key, another budget
    service.resign(first, seats[0]["token"])  # ann leaves: the game ends (R7)
    consumer(client, []).follower.catch_up()
    assert client.zscore(in_flight_key("k_one"), first) is None
    create("k_one")  # room again
