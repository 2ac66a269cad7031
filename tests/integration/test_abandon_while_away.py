"""A game waiting on a player who declared a vacation is not abandoned meanwhile
(docs/lifecycle.md "Abandoned games", docs/clocks.md): the abandon sweep counts the wait on
the clock of the seat to move, its declared absences left out.

A vacation declared to start later is logged at its declaration, so without this the days
before it starts and the days of it would add up to `ABANDON_AFTER` while the player is
still away with a deadline to come. Real parts: a private Redis, the command service's
`GameService`, the timer's own index (the change feed's consumer "timer") and its sweep,
given the time as data.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import redis

from carcassonne.events import PauseClock, ResumeClock
from carcassonne.game import decide
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine, to_new
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.redis_store import RedisEventStore
from services.redis_store import store as store_module
from services.redis_store.keys import idle_key, index_shard
from services.scoring.timer import Timer
from tests.redis_server import private_redis

DAY = 86_400_000
AFTER = 30 * DAY  # ABANDON_AFTER's default


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    with private_redis() as url:
        client = redis.Redis.from_url(url)
        yield client
        client.close()


def folded(store: RedisEventStore, game_id: str) -> tuple[GameState, int, int]:
    """The game's state, its last sequence and its last move's time."""
    stored = store.read(game_id, MOVES)
    state = GameState()
    for event in stored:
        state.apply(to_engine(event))
    return state, stored[-1].seq, stored[-1].time_ms


def away(store: RedisEventStore, game_id: str, from_ms: int, until_ms: int, now_ms: int) -> None:
    """The seat to move declares a vacation from `from_ms` (later than now) to `until_ms`,
    appended as the vacation service does: the engine's `ClockPaused`, logged at once."""
    state, seq, _ = folded(store, game_id)
    events = decide(state, PauseClock(state.current, now_ms, until_ms, from_ms))
    assert [type(e).__name__ for e in events] == ["ClockPaused"]
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=seq, command_id="away")


def test_a_game_waiting_on_a_player_away_is_abandoned_only_once_their_clock_ran_the_time(
    client: redis.Redis,
) -> None:
    store = RedisEventStore(client)
    games = GameService(store, RedisSecrets(client))
    rules = Ruleset(tileset="demo", turn_seconds=7 * 86_400)
    game_id, _ = games.create_game(["ann", "bob"], rules, [0, 1])
    _, _, declared = folded(store, game_id)
    start, end = declared + 10 * DAY, declared + 38 * DAY  # 28 days away, from 10 days on
    away(store, game_id, start, end, declared)
    last = declared  # the wait counts from the last move, the draw: the pause is none
    timer = Timer(store, client)
    timer.index.catch_up()
    shard = index_shard(game_id)
    assert client.zscore(idle_key(shard), game_id) == last

    # 35 days on, inside the vacation: the seat's clock ran only until it began (10 days).
    now = last + 35 * DAY
    ran = start - last
    assert not timer.abandon(game_id, now, AFTER)
    assert [e.type for e in store.read(game_id, MOVES)][-1] == "ClockPaused"
    # Due again when 30 days could have run on the seat's clock, not at every tick.
    assert client.zscore(idle_key(shard), game_id) == now - ran
    later = end + 19 * DAY  # 29 days ran, less a millisecond
    assert not timer.abandon(game_id, later, AFTER)
    assert client.zscore(idle_key(shard), game_id) == later - (ran + 19 * DAY)

    # What the index's consumer wrote meanwhile stands: a later move's time is never moved
    # back, and a game it dropped (ended) is not put back.
    client.zadd(idle_key(shard), {game_id: later})
    assert not timer.abandon(game_id, later, AFTER)
    assert client.zscore(idle_key(shard), game_id) == later
    client.zrem(idle_key(shard), game_id)
    assert not timer.abandon(game_id, later, AFTER)
    assert client.zscore(idle_key(shard), game_id) is None

    done = end + AFTER - ran  # 30 days ran: abandoned, the wait on the seat's clock logged
    assert timer.abandon(game_id, done, AFTER)
    ended = store.read(game_id, MOVES)[-1]
    assert ended.type == "GameAbandoned" and ended.payload["idle_ms"] == AFTER


def test_a_game_with_nobody_away_is_abandoned_after_the_time_as_before(
    client: redis.Redis,
) -> None:
    store = RedisEventStore(client)
    games = GameService(store, RedisSecrets(client))
    game_id, _ = games.create_game(["ann", "bob"], Ruleset(tileset="demo"), [0, 1])
    _, _, last = folded(store, game_id)
    timer = Timer(store, client)
    assert not timer.abandon(game_id, last + AFTER - 1, AFTER)
    assert timer.abandon(game_id, last + AFTER, AFTER)
    assert store.read(game_id, MOVES)[-1].payload["idle_ms"] == AFTER


def test_another_seats_vacation_is_no_move_of_the_seat_that_keeps_the_game_waiting(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seat 0 is to move and gone; seat 1 declares a vacation of its own (and calls it off:
    that costs no day, so it can be done again and again). Neither is a move: the game is
    abandoned when seat 0's clock has run the time since the last move, as without them."""
    store = RedisEventStore(client)
    games = GameService(store, RedisSecrets(client))
    game_id, _ = games.create_game(["ann", "bob"], Ruleset(tileset="demo"), [0, 1])
    _, _, moved = folded(store, game_id)  # the first draw: seat 0's turn from then
    state, seq, _ = folded(store, game_id)
    declared = moved + 29 * DAY
    start, until = declared + DAY, declared + 5 * DAY
    # the store stamps its appends with its own clock: 29 days on, for these two
    monkeypatch.setattr(store_module, "time", SimpleNamespace(time=lambda: declared / 1000))
    events = decide(state, PauseClock(1, declared, until, start, "v"))
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=seq, command_id="away")
    state, seq, _ = folded(store, game_id)
    events = decide(state, ResumeClock(1, declared, start, "v"))  # called off at once
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=seq, command_id="back")
    assert store.read(game_id, MOVES)[-1].time_ms == declared
    timer = Timer(store, client)
    timer.index.catch_up()
    assert client.zscore(idle_key(index_shard(game_id)), game_id) == moved  # still due then
    assert not timer.abandon(game_id, moved + AFTER - 1, AFTER)
    assert timer.abandon(game_id, moved + AFTER, AFTER)
    assert store.read(game_id, MOVES)[-1].payload["idle_ms"] == AFTER
