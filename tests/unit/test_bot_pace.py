"""Paced bot moves and hints (issue 32, finding 1): a move's search, over every view of a hand
(R10.3), ends by one deadline, and the move is appended a fixed time after it started, however
many distinct tiles the hand held; think_ms is the whole move's, and a game with no human seat
has a lower ceiling. On a fake clock, so exact; the opponent's view on a real Redis is
tests/integration/test_bot_timing.py."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from flask import Flask

from carcassonne.bots import Budget, Choice, PlayerView, choose, choose_in_hand, hand_views
from carcassonne.errors import GameError
from carcassonne.ruleset import Ruleset
from eventstore.envelope import NewEvent
from eventstore.port import AppendResult, InMemoryEventStore
from services.bots import hints as worker_hints
from services.bots.player import PLAYED, BotPlayer
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService
from services.common.pace import Paced, move_ms, search_ms

HAND = Ruleset(hand=3)


class FakeTime:
    """A clock (seconds) that moves only when something sleeps or says it worked."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class TimedStore(InMemoryEventStore):
    """An in-memory store that notes the fake clock at every append of a bot's move."""

    def __init__(self, fake: FakeTime) -> None:
        super().__init__()
        self.fake = fake
        self.appended_at: list[float] = []

    def append(
        self, game_id: str, stream: str, events: Sequence[NewEvent], **kwargs: Any
    ) -> AppendResult:
        if kwargs.get("command_id", "").startswith("bot:"):
            self.appended_at.append(self.fake.now)
        return super().append(game_id, stream, events, **kwargs)


def hand_game(seed: str = "pace-1") -> tuple[GameService, str]:
    service = GameService(InMemoryEventStore(), MemorySecrets())
    game_id, _ = service.create_game(["a", "b"], HAND, [0, 1], None, seed=seed)
    return service, game_id


def test_the_views_of_a_hand_share_one_deadline_each_a_share_of_it() -> None:
    """One time budget for the whole move: view k of n searches until k/n of it has passed
    from the move's start (not the whole budget each, which took n times as long)."""
    fake = FakeTime()
    seen: list[tuple[str, float | None]] = []

    def spy(level: str, view: PlayerView, seed: str, budget: Budget) -> Choice:
        seen.append((view.tile, budget.deadline))
        fake.now += 0.01  # each view's search takes 10 ms of the fake clock
        return choose(level, view, seed, Budget(playouts=4))

    three = next(vs for vs in (_views(f"share-{seed}") for seed in range(40)) if len(vs) == 3)
    # with a deadline before think_ms is up (the move's), the shares are of the time to it
    for deadline, shares in ((None, [0.1, 0.2, 0.3]), (0.12, [0.04, 0.08, 0.12])):
        seen.clear()
        start = fake.now
        ends = None if deadline is None else start + deadline
        budget = Budget(think_ms=300, clock=fake.clock, deadline=ends)
        choose_in_hand("mcts", three, "s", budget, spy)
        assert [round(d - start, 6) for _, d in seen if d is not None] == shares
    seen.clear()
    choose_in_hand("mcts", three, "s", Budget(playouts=4), spy)  # no time: nothing shared
    assert [d for _, d in seen] == [None, None, None]


def _views(seed: str) -> list[PlayerView]:
    service, game_id = hand_game(seed)
    return hand_views(service.load(game_id).state)


def test_mcts_stops_at_the_deadline_whatever_its_think_ms() -> None:
    service, game_id = hand_game()
    view = hand_views(service.load(game_id).state)[0]
    t0 = time.perf_counter()
    budget = Budget(think_ms=5_000, clock=time.perf_counter, deadline=t0 + 0.15)
    choice = choose("mcts", view, 1, budget)
    assert time.perf_counter() - t0 < 1.0  # not 5 s: the deadline came first
    assert choice.playouts > 0


@pytest.mark.parametrize(("level", "think_ms"), [("greedy", 1), ("random", 1), ("mcts", 200)])
def test_every_bot_move_is_appended_its_fixed_time_after_it_started_whatever_the_hand(
    level: str, think_ms: int
) -> None:
    """Each view's search costs 9 ms of the fake clock, so a hand of 1, 2 or 3 distinct
    tiles works 9, 18 or 27 ms; every move is appended exactly its duration (mcts: its
    think_ms; greedy, random: the floor) after its start, and no search of a move runs past
    its one deadline (`search_ms` of the duration after the start)."""
    fake = FakeTime()
    store, secrets = TimedStore(fake), MemorySecrets()
    service = GameService(store, secrets)
    bot = {"level": level, "think_ms": think_ms}
    game_id, _ = service.create_game(["a", "b"], HAND, [0, 1], None, bots=[bot, bot], seed="p")
    deadlines: list[float | None] = []

    def working(level: str, view: PlayerView, seed: str, budget: Budget) -> Choice:
        deadlines.append(budget.deadline)
        fake.now += 0.009
        return choose("random", view, seed)  # quick: the fake clock says what it cost

    views_per_move: list[int] = []
    player = BotPlayer(
        store, secrets.get, clock=fake.clock, sleep=fake.sleep, floor_ms=100, policy=working
    )
    duration = move_ms(level, think_ms, 100)
    assert duration == (200 if level == "mcts" else 100)
    gaps: list[float] = []
    while True:
        started, before = fake.now, len(deadlines)
        done = player.play(game_id)
        if done.kind != PLAYED:
            break
        assert done.late_ms == 0
        views_per_move.append(len(deadlines) - before)
        gaps.append(store.appended_at[-1] - started)
        move_deadline = started + min(think_ms, search_ms(duration)) / 1000
        assert all(d is not None and d <= move_deadline + 1e-9 for d in deadlines[before:])
    assert set(views_per_move) == {1, 2, 3}  # hands of 1, 2 and 3 distinct tiles (or fewer left)
    assert [round(g, 9) for g in gaps] == [duration / 1000] * len(gaps)  # and times do not


def test_a_move_whose_work_overran_its_duration_is_late_not_cut() -> None:
    fake = FakeTime()
    store, secrets = TimedStore(fake), MemorySecrets()
    service = GameService(store, secrets)
    bot = {"level": "greedy", "think_ms": 1}
    game_id, _ = service.create_game(["a", "b"], Ruleset(), [0, 1], None, bots=[bot, bot])

    def slow(level: str, view: PlayerView, seed: str, budget: Budget) -> Choice:
        fake.now += 0.15
        return choose(level, view, seed)

    player = BotPlayer(
        store, secrets.get, clock=fake.clock, sleep=fake.sleep, floor_ms=100, policy=slow
    )
    done = player.play(game_id)
    assert (done.kind, done.late_ms, fake.slept) == (PLAYED, 50, [])


def test_paced_waits_for_a_deadline_from_the_start_not_a_sleep_after_the_work() -> None:
    fake = FakeTime()
    paced = Paced(300, 300, fake.clock, fake.sleep)
    budget = paced.budget()
    assert budget.deadline == pytest.approx(fake.now + search_ms(300) / 1000)
    assert search_ms(300) == 240 and search_ms(10_000) == 9_800 and search_ms(1) == 1
    fake.now += 0.1
    assert paced.wait() == 0 and fake.slept == [pytest.approx(0.2)]
    assert move_ms("greedy", 5_000, 250) == 250 and move_ms("mcts", 100, 250) == 250


def test_a_hint_takes_its_fixed_time_with_one_deadline_for_the_hand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hint worked out by the bot worker may be shown a fixed time after the worker
    started it (mcts HINT_THINK_MS, greedy the floor), whatever its work took, with one
    budget for every view of the hand; the worker does not wait for it (its `ready_ms`
    does: the command service answers 202 until then)."""
    fake = FakeTime()
    budgets: list[Budget] = []
    real = worker_hints.choose_in_hand

    def spy(level: str, views: list[PlayerView], seed: str, budget: Budget) -> Any:
        budgets.append(budget)
        fake.now += 0.009 * len(views)  # the work grows with the distinct tiles
        return real(level, views, seed, Budget(playouts=2))

    monkeypatch.setattr(worker_hints, "choose_in_hand", spy)
    store, secrets = InMemoryEventStore(), MemorySecrets()
    service = GameService(store, secrets)
    game_id, _ = service.create_game(["a", "b"], Ruleset(hand=3, hints=True), [0, 1])
    seq = service.load(game_id).seq
    starts = []
    for level, duration in (("mcts", 500), ("greedy", 150)):
        start = fake.now
        starts.append(start)
        worked = worker_hints.work_out(store, secrets.get, game_id, seq, level, duration,
                                       500, fake.clock,
                                       fake.clock)  # fmt: skip
        assert worked is not None
        answer, ready_ms = worked
        assert fake.slept == []  # never waits: the answer is shown from `ready_ms`
        assert ready_ms == int(start * 1000) + duration and answer["think_ms"] == duration
    # one deadline a hint, before its end (greedy's, `search_ms(150)`, is not read)
    assert [b.deadline for b in budgets] == [
        pytest.approx(starts[0] + search_ms(500) / 1000),
        pytest.approx(starts[1] + search_ms(150) / 1000),
    ]


def test_a_game_with_no_human_seat_may_not_ask_its_mcts_bots_to_think_long() -> None:
    service = GameService(InMemoryEventStore(), MemorySecrets())
    deep: dict[str, Any] = {"level": "mcts", "think_ms": 1_001}
    with pytest.raises(GameError) as info:
        service.create_game(
            ["a", "b"], Ruleset(), None, None, bots=[deep, deep], bot_only_max_think_ms=1_000
        )
    assert (info.value.code, info.value.status) == ("bot_only_think_ms", 422)
    assert info.value.details == {"max_think_ms": 1_000, "players": [0, 1]}
    ok: dict[str, Any] = {"level": "mcts", "think_ms": 1_000}
    slow_greedy: dict[str, Any] = {"level": "greedy", "think_ms": 10_000}  # takes the floor
    allowed: list[list[dict[str, Any] | None]] = [[deep, None], [ok, ok], [slow_greedy, ok]]
    for bots in allowed:
        service.create_game(
            ["a", "b"], Ruleset(), None, None, bots=bots, bot_only_max_think_ms=1_000
        )
    service.create_game(["a", "b"], Ruleset(), None, None, bots=[deep, deep])  # no ceiling


def test_post_games_answers_the_ceiling_as_a_problem_with_a_hint() -> None:
    from services.command.app import create_app

    service = GameService(InMemoryEventStore(), MemorySecrets())
    app: Flask = create_app(
        {"REDIS_URL": "redis://127.0.0.1:1/0", "GAME_SERVICE": service, "NOTIFY_MS": 0,
         "ANONYMOUS_GAMES": True, "ADDRESS_WRITE_RATE": 0}  # no Redis here: no key, no gate
    )  # fmt: skip
    client = app.test_client()
    deep = {"bot": "mcts", "think_ms": 5_000}
    answer = client.post("/games", json={"players": [{"name": "a", **deep}, {"name": "b", **deep}]})
    assert answer.status_code == 422 and answer.mimetype == "application/problem+json"
    body = answer.get_json()
    assert body["code"] == "bot_only_think_ms" and body["type"] == "/errors#bot_only_think_ms"
    assert body["details"] == {"max_think_ms": 1_000, "players": [0, 1]}
    assert "details.max_think_ms" in body["hint"] and "human" in body["hint"]
    human = client.post("/games", json={"players": [{"name": "a", **deep}, {"name": "b"}]})
    assert human.status_code == 201


def test_the_worker_caps_think_ms_where_every_seat_still_in_is_a_bot() -> None:
    store, secrets = InMemoryEventStore(), MemorySecrets()
    service = GameService(store, secrets)
    deep = {"level": "mcts", "think_ms": 5_000}
    player = BotPlayer(store, secrets.get, bot_only_max_think_ms=1_000)
    bots_only, _ = service.create_game(["a", "b"], Ruleset(), [0, 1], None, bots=[deep, deep])
    with_human, seats = service.create_game(
        ["a", "b", "c"], Ruleset(), [0, 1, 2], None, bots=[deep, deep, None]
    )
    state = service.load(bots_only).state
    assert player.think_ms(state, [deep, deep], deep) == 1_000  # made before the ceiling
    state = service.load(with_human).state
    assert player.think_ms(state, [deep, deep, None], deep) == 5_000
    service.resign(with_human, seats[2]["token"])  # the human leaves: bots only now
    state = service.load(with_human).state
    assert player.think_ms(state, [deep, deep, None], deep) == 1_000


def _three_distinct(bots: list[dict[str, Any] | None] | None, **rules: Any) -> tuple[Any, ...]:
    """A new hand game whose first mover holds three distinct tiles: service, store, secrets,
    game id, seats."""
    for number in range(100):
        store, secrets = InMemoryEventStore(), MemorySecrets()
        service = GameService(store, secrets)
        game_id, seats = service.create_game(
            ["a", "b"], Ruleset(hand=3, **rules), [0, 1], None, bots=bots, seed=f"three-{number}"
        )
        state = service.load(game_id).state
        if len({held.tile for held in state.hands[state.current]}) == 3:
            return service, store, secrets, game_id, seats
    raise AssertionError("no seed deals three distinct tiles")


def test_think_ms_is_the_whole_moves_on_the_real_clock_not_each_tiles() -> None:
    """A hand of three distinct tiles, mcts thinking 200 ms: the bot's move and an mcts hint
    each take 200 ms from their start (no less: the pace), not three times 200 ms (before
    issue 32 each tile's search had the whole think time: on 7d564d4 the same move took
    0.66 s and the hint 0.62 s)."""
    mcts: dict[str, Any] = {"level": "mcts", "think_ms": 200}
    _, store, secrets, game_id, _ = _three_distinct([mcts, mcts])
    player = BotPlayer(store, secrets.get)
    t0 = time.perf_counter()
    assert player.play(game_id).kind == PLAYED
    took = time.perf_counter() - t0
    assert 0.2 <= took < 0.55, took
    service, store, secrets, game_id, _ = _three_distinct(None, hints=True)
    t0 = time.perf_counter()
    worked = worker_hints.work_out(store, secrets.get, game_id, service.load(game_id).seq,
                                   "mcts", 200, 200)  # fmt: skip
    took = time.perf_counter() - t0
    assert worked is not None and worked[0]["think_ms"] == 200
    assert 0.1 <= took < 0.4, took  # its search ended by the deadline (the ready time waits)
