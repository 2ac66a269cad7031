"""Who pays for a bot that takes a seat over (docs/takeover.md, "Who pays"), on a real Redis of
its own: the resignation (the command service) and the turn timer (the scoring worker) reserve
the takeover against the game's API key before their append, the bot consumer of the change
feed gives it back with the game's seconds when the game ends (or the archiver, when it
archives the game first); a key that cannot pay gets no bot (`TakeoverRefused`, the seat
skipped); a process killed between the reservation and the append leaves it held only until
a retry appends (charged once) or the game ends.

The workers' own processes run these paths in tests/integration/test_takeover.py (slow)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.record import record_from_events, replay
from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.archive.archiver import Archiver
from services.archive.sqlite import SqliteArchive
from services.bots.feed import BotFeed
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.common.takeover import TakeoverPayer
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import (
    BotBudget,
    day_key,
    in_flight_key,
    release,
    takeover_member,
)
from services.redis_store.keys import secrets_key
from services.scoring.feed import feed_items
from services.scoring.scorer import Scorer
from services.scoring.timer import Timer
from tests.redis_server import private_redis

pytestmark = pytest.mark.integration

FLOOR_MS = 250  # the command service's BOT_MOVE_FLOOR_MS: a greedy bot's paced move
DEMO_TILES = 47  # the demo set's 48 tiles, less the start tile: the first one is drawn


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with private_redis() as url:
        yield url


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """The private Redis, emptied for each test (only these tests use it)."""
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    yield client
    client.close()


def service(client: redis.Redis, limit: float = 7_200, day: float = 28_800) -> GameService:
    budget = BotBudget(client, limit, day)
    return GameService(
        RedisEventStore(client), RedisSecrets(client), bot_budget=budget, move_floor_ms=FLOOR_MS
    )


def create(games: GameService, key: str, players: int = 3, **rules: Any) -> tuple[str, list[str]]:
    names = ["ann", "bob", "cid", "dee"][:players]
    rules = {"tileset": "demo", "on_leave": "bot:greedy", **rules}
    game_id, seats = games.create_game(names, Ruleset(**rules), list(range(players)), key_id=key)
    return game_id, [seat["token"] for seat in seats]


def held(client: redis.Redis, key: str) -> dict[str, float]:
    """The key's in-flight set: member -> seconds."""
    pairs: Any = client.zrange(in_flight_key(key), 0, -1, withscores=True)
    return {member.decode(): float(score) for member, score in pairs}


def charged_today(client: redis.Redis, key: str) -> float:
    return float(client.get(day_key(key, time.time())) or 0)


def types(result: Any) -> list[str]:
    return [event.type for event in result.events]


def bot_feed(client: redis.Redis) -> BotFeed:
    return BotFeed(client, lambda _game: None, 30_000)


def greedy_share(players: int) -> float:
    """A greedy takeover's reservation at the start of a demo game of `players` seats."""
    return FLOOR_MS * math.ceil(DEMO_TILES / players) / 1000


def test_a_takeover_is_reserved_at_the_resignation_and_given_back_when_the_game_ends(client):
    games = service(client)
    game_id, tokens = create(games, "k_pay")
    first = games.resign(game_id, tokens[2])
    assert types(first)[:2] == ["PlayerResigned", "SeatTakenOver"]
    share = greedy_share(3)  # 16 moves of the 47 tiles, 250 ms each
    assert held(client, "k_pay") == {takeover_member(game_id, 2): share} and share == 4.0
    assert charged_today(client, "k_pay") == share
    again = games.resign(game_id, tokens[2])  # a retry answers the first result, charged once
    assert again.replayed and held(client, "k_pay") == {takeover_member(game_id, 2): share}
    assert charged_today(client, "k_pay") == share
    assert types(games.resign(game_id, tokens[1]))[:2] == ["PlayerResigned", "SeatTakenOver"]
    assert held(client, "k_pay")[takeover_member(game_id, 1)] == share
    bot_feed(client).follower.catch_up()  # the game goes on: nothing given back
    assert len(held(client, "k_pay")) == 2
    assert types(games.resign(game_id, tokens[0]))[-1] == "GameEnded"  # the last seat still in
    bot_feed(client).follower.catch_up()  # the bot consumer sees the end
    assert held(client, "k_pay") == {}
    assert charged_today(client, "k_pay") == 2 * share  # the day's charge is what was started


def test_a_key_that_cannot_pay_gets_no_bot_and_the_seat_is_skipped_as_a_fact_in_the_log(client):
    games = service(client, limit=3.9)  # less than one greedy takeover (4 s)
    game_id, tokens = create(games, "k_poor")
    result = games.resign(game_id, tokens[2])
    assert types(result) == ["PlayerResigned", "TakeoverRefused"]
    assert result.events[1].payload == {"player": 2, "level": "greedy"}
    assert held(client, "k_poor") == {} and charged_today(client, "k_poor") == 0
    state = result.state
    assert state.taken_over == [None, None, None] and state.playing == [0, 1] and not state.over
    assert games.resign(game_id, tokens[2]).replayed  # a retry: the same refusal, no charge
    assert held(client, "k_poor") == {}
    # Skipped as under `skip`: with one seat still in, the next leaving ends the game.
    assert types(games.resign(game_id, tokens[1]))[-2:] == ["TakeoverRefused", "GameEnded"]
    moves = RedisEventStore(client).read(game_id, MOVES)
    items = feed_items(moves, [])
    leaving = [i.kind for i in items if i.kind in ("player_out", "takeover_refused")]
    assert leaving == ["player_out", "takeover_refused"] * 2  # each right after its player_out
    told = [i.data for i in items if i.kind == "takeover_refused"]
    refusal = {"player_id": None, "level": "greedy", "reason": "bot_budget"}
    assert told == [{"seat": 2, **refusal}, {"seat": 1, **refusal}]  # the platform is told
    # The record replays into the same end: the refusals are in it, not decided again.
    record = record_from_events([to_engine(event) for event in moves])
    assert [t.takeover_refused for t in record.turns if t.resign is not None] == [True, True]
    again = replay(record)
    assert again.over and again.out == [None, "resigned", "resigned"]
    assert again.taken_over == [None, None, None]


def test_the_day_budget_refuses_a_takeover_too(client):
    games = service(client, limit=0, day=10)
    game_id, tokens = create(games, "k_day", players=2)
    assert types(games.resign(game_id, tokens[1]))[:2] == ["PlayerResigned", "SeatTakenOver"]
    other, tokens = create(games, "k_day", players=2)  # 6 s a takeover: 12 of 10 today
    refused = games.resign(other, tokens[1])
    assert types(refused)[:3] == ["PlayerResigned", "TakeoverRefused", "GameEnded"]
    assert charged_today(client, "k_day") == greedy_share(2) == 6.0


def test_a_timeout_reserves_the_takeover_in_the_timer_or_skips_the_seat_when_unpaid(client):
    games = service(client)
    rules = {"turn_seconds": 10, "max_timeouts": 1, "on_leave": "bot:mcts"}
    paid, _ = create(games, "k_time", players=2, **rules)
    broke, _ = create(games, "k_broke", players=2, **rules)
    store = RedisEventStore(client)
    payer = TakeoverPayer(BotBudget(client, 7_200), FLOOR_MS)
    timer = Timer(store, client, payer=payer)
    later = int(time.time() * 1000) + 11_000
    client.zadd(in_flight_key("k_broke"), {"other games": 7_200})  # its budget is used up
    assert timer.expire(paid, later) and timer.expire(broke, later)
    kinds = [e.type for e in store.read(paid, MOVES)]
    assert kinds[-3:] == ["PlayerTimedOut", "SeatTakenOver", "TileDrawn"]
    # an mcts bot that took over thinks TAKEOVER_THINK_MS (1 s) a move: 24 of 47 tiles
    assert held(client, "k_time") == {takeover_member(paid, 0): 24.0}
    kinds = [e.type for e in store.read(broke, MOVES)]
    assert kinds[-3:] == ["PlayerTimedOut", "TakeoverRefused", "GameEnded"]
    assert held(client, "k_broke") == {"other games": 7_200}


KILLED_RESIGN = """
import os, signal, sys
import redis
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.redis_store import RedisEventStore
from services.redis_store.keys import secrets_key
from services.redis_store.bot_budget import BotBudget

url, game_id, token = sys.argv[1:4]
client = redis.Redis.from_url(url)
store = RedisEventStore(client)

def killed(*args, **kwargs):  # the process dies after the reservation, before the append
    os.kill(os.getpid(), signal.SIGKILL)

store.append = killed
GameService(store, RedisSecrets(client), bot_budget=BotBudget(client, 7200, 28800),
            move_floor_ms=250).resign(game_id, token)
"""


def resign_and_die(url: str, game_id: str, token: str) -> None:
    """Resign in a process of its own that is killed between the reservation and the append."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RESIGN, url, game_id, token],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


def test_a_process_killed_between_the_reservation_and_the_append_leaks_nothing_for_ever(
    client, redis_url
):
    games = service(client)
    game_id, tokens = create(games, "k_crash", players=2)
    resign_and_die(redis_url, game_id, tokens[1])
    store = RedisEventStore(client)
    assert "PlayerResigned" not in [e.type for e in store.read(game_id, MOVES)]
    share = greedy_share(2)
    assert held(client, "k_crash") == {takeover_member(game_id, 1): share}  # held meanwhile
    retried = games.resign(game_id, tokens[1])  # the client retries: appended, charged once
    assert types(retried)[:2] == ["PlayerResigned", "SeatTakenOver"] and not retried.replayed
    assert held(client, "k_crash") == {takeover_member(game_id, 1): share}
    assert charged_today(client, "k_crash") == share

    # Never retried: the reservation is given back when the game ends (here: abandoned).
    other, tokens = create(games, "k_crash", players=2)
    resign_and_die(redis_url, other, tokens[1])
    assert takeover_member(other, 1) in held(client, "k_crash")
    now = int(time.time() * 1000)
    assert Timer(store, client).abandon(other, now, 0)
    bot_feed(client).follower.catch_up()
    assert held(client, "k_crash") == {takeover_member(game_id, 1): share}


def test_a_takeover_reserved_after_its_game_was_given_back_holds_nothing(client):
    """The race a resignation may lose: its game ended (and was given back) after it was
    folded, before it reserved; its append then fails, and nothing of it stays held."""
    budget = BotBudget(client, 7_200, 28_800)
    release(client, "k_late", "g-ended")  # the bot consumer saw the end
    assert budget.reserve_takeover("k_late", "g-ended", 1, 6.0) is None
    assert held(client, "k_late") == {} and charged_today(client, "k_late") == 0
    assert budget.reserve_takeover("k_late", "g-running", 1, 6.0) is None
    assert held(client, "k_late") == {takeover_member("g-running", 1): 6.0}


def ended_holding_bot_time(client: redis.Redis, key: str) -> list[str]:
    """Two games of `key` that ended holding bot seconds, scored to their end (due in the
    archive): one whose two seats a bot took over, one with a bot seat."""
    games = service(client)
    taken, tokens = create(games, key)
    for token in tokens[2::-1]:  # seats 2 and 1 taken over; seat 0, the last in, ends it
        games.resign(taken, token)
    robot, seats = games.create_game(
        ["ann", "robot"], Ruleset(tileset="demo"), [0, 1], key_id=key,
        bots=[None, {"level": "greedy", "think_ms": 1}],
    )  # fmt: skip
    assert types(games.resign(robot, seats[0]["token"]))[-1] == "GameEnded"
    store = RedisEventStore(client)
    for game_id in (taken, robot):
        Scorer(store).catch_up(game_id)
    members = {takeover_member(taken, 2), takeover_member(taken, 1), robot}
    assert set(held(client, key)) == members  # the bot consumer has not seen the ends
    return [taken, robot]


def test_a_game_archived_before_the_bot_consumer_saw_its_end_gives_its_bot_time_back(
    client, tmp_path
):
    """The bot worker down longer than ARCHIVE_AFTER: the games are archived (their secrets
    records, which name the key, deleted) before the bot consumer reaches their ends; the
    archiver gives their seconds back, so the consumer, started cold, has nothing to do."""
    ended = ended_holding_bot_time(client, "k_arch")
    archiver = Archiver(client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.run(int(time.time() * 1000) + 1) == {"archived": 2}
    assert [client.exists(secrets_key(g)) for g in ended] == [0, 0]
    assert held(client, "k_arch") == {}
    bot_feed(client).follower.catch_up()  # the worker back, its cache cold
    assert held(client, "k_arch") == {}
    assert charged_today(client, "k_arch") > 0  # the day's charge is kept, as at any end


def test_an_archiver_stopped_between_giving_back_and_removing_leaks_nothing(
    client, tmp_path, monkeypatch
):
    """The seconds go back before the removal deletes the record naming the key: an
    archiver stopped between the two leaves the games whole in Redis, nothing held; the
    next run only removes them."""
    ended = ended_holding_bot_time(client, "k_stop")
    archiver = Archiver(client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)

    def stopped(*_args: Any) -> list[int]:
        raise RuntimeError("stopped before the removal")

    monkeypatch.setattr(archiver, "_remove_many", stopped)
    now = int(time.time() * 1000) + 1
    assert archiver.run(now) == {"failed": 2}
    assert [client.exists(secrets_key(g)) for g in ended] == [1, 1]
    assert held(client, "k_stop") == {}
    monkeypatch.undo()  # the archiver runs again
    assert archiver.run(now + archiver.retry_ms) == {"removed": 2}
    bot_feed(client).follower.catch_up()
    assert held(client, "k_stop") == {}
