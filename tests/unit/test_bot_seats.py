"""Bot seats on the command side and in the bot worker's player (in-memory store: the real
Celery worker and Redis are in tests/integration/test_bot_worker.py)."""

from __future__ import annotations

from typing import Any

import pytest

from carcassonne.bots import Choice, PlayerView, choose
from carcassonne.errors import GameError
from carcassonne.game import actions, fold
from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_engine
from services.bots.hints import work_out
from services.bots.player import GONE, HUMAN, OVER, PLAYED, RACED, WAITING, BotPlayer, command_id
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService

GREEDY = {"level": "greedy", "think_ms": 1}
RANDOM = {"level": "random", "think_ms": 1}


def make(**kwargs: Any) -> tuple[GameService, InMemoryEventStore, MemorySecrets]:
    """The command service over an in-memory store. Who sends the bot task is the change
    feed's consumer (tests/integration/test_bot_feed.py): here a test calls `play` itself."""
    store, secrets = InMemoryEventStore(), MemorySecrets()
    return GameService(store, secrets, **kwargs), store, secrets


def player(store: InMemoryEventStore, secrets: MemorySecrets, **kwargs: Any) -> BotPlayer:
    return BotPlayer(store, secrets.get, **kwargs)


def test_two_bots_play_a_whole_game_each_turn_once() -> None:
    service, store, secrets = make()
    game_id, seats = service.create_game(
        ["ann", "bob"], Ruleset(tileset="demo"), [0, 1], None, bots=[GREEDY, RANDOM]
    )
    assert [s["token"] for s in seats] == [None, None]
    assert seats[0]["bot"] == GREEDY
    bots = player(store, secrets)
    turns = 0
    while (done := bots.play(game_id)).kind == PLAYED:
        turns += 1
        assert done.choice is not None
    assert done.kind == OVER
    events = store.read(game_id, MOVES)
    state = fold(to_engine(e) for e in events)
    assert state.over and state.turn == turns
    placed = [e for e in events if e.type == "TilePlaced"]
    ids = [e.command_id for e in placed]
    assert len(ids) == len(set(ids)) == turns  # one command per turn, none twice
    assert all(i.startswith(f"bot:{game_id}:") for i in ids)


def test_a_human_move_hands_the_turn_to_the_bot() -> None:
    service, store, secrets = make()
    game_id, seats = service.create_game(
        ["ann", "bot"], Ruleset(), [0, 1], None, bots=[None, GREEDY]
    )
    assert seats[0]["token"] and seats[1]["token"] is None
    bots = player(store, secrets)
    assert bots.play(game_id).kind == HUMAN  # not the bot's turn: nothing appended
    spot = service.turn_view(game_id)["placements"][0]
    service.play_turn(game_id, seats[0]["token"], spot["x"], spot["y"], spot["rotation"], None)
    done = bots.play(game_id)
    assert done.kind == PLAYED and not done.next_bot
    assert service.turn_view(game_id)["player"] == 0  # the human's turn again


def test_nobody_plays_a_bot_seat_by_token() -> None:
    service, _, _ = make()
    game_id, _ = service.create_game(["bot", "ann"], Ruleset(), [0, 1], None, bots=[GREEDY, None])
    with pytest.raises(GameError) as info:
        service.play_turn(game_id, None, 0, -1, 0, None)
    assert info.value.code == "missing_token"


def test_a_duplicated_task_plays_the_turn_once() -> None:
    """Two copies of the task decide at the same sequence: the second's append carries the
    same command id and appends nothing."""
    service, store, secrets = make()
    game_id, _ = service.create_game(["a", "b"], Ruleset(), [0, 1], None, bots=[GREEDY, None])
    inner: list[str] = []
    twin = player(store, secrets)

    def racing(level: str, view: PlayerView, seed: str, budget: Any) -> Choice:
        if not inner:  # while this copy thinks, the other copy plays the turn
            inner.append(twin.play(game_id).kind)
        return choose(level, view, seed, budget)

    before = store.last_seq(game_id, MOVES)
    done = player(store, secrets, policy=racing).play(game_id)
    assert inner == [PLAYED] and done.kind == RACED
    placed = [e for e in store.read(game_id, MOVES, after=before) if e.type == "TilePlaced"]
    assert [e.command_id for e in placed] == [command_id(game_id, before)]


def test_the_policy_is_given_the_view_and_never_the_seed() -> None:
    service, store, secrets = make()
    game_id, _ = service.create_game(["a", "b"], Ruleset(), [0, 1], None, bots=[GREEDY, GREEDY])
    seed = secrets.get(game_id)["seed"]  # type: ignore[index]
    given: list[tuple[Any, ...]] = []

    def spy(*args: Any) -> Choice:
        given.append(args)
        return choose(*args)

    bots = player(store, secrets, policy=spy)
    for _ in range(6):
        assert bots.play(game_id).kind == PLAYED
    for level, view, move_seed, _budget in given:
        assert type(view) is PlayerView and level == "greedy"
        assert seed not in repr(view) and seed not in move_seed
        assert seed not in repr(view.position().snapshot())


def test_bots_do_nothing_in_finished_unknown_or_imported_games() -> None:
    service, store, secrets = make()
    bots = player(store, secrets)
    assert bots.play("0" * 32).kind == GONE
    game_id, _ = service.create_game(["a", "b"], Ruleset(), [0, 1])  # no bot seat
    assert bots.play(game_id).kind == GONE
    record = dict(secrets.get(game_id) or {})
    record.update(imported={"key_id": "k"}, bots=[GREEDY, GREEDY])
    secrets.put(game_id, record)
    before = store.last_seq(game_id, MOVES)
    assert bots.play(game_id).kind == GONE
    assert store.last_seq(game_id, MOVES) == before


def test_hints_are_refused_unless_the_ruleset_allows_them() -> None:
    service, _, _ = make()
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(), [0, 1])
    with pytest.raises(GameError) as info:
        service.hint(game_id, seats[0]["token"], "greedy")
    assert (info.value.code, info.value.status) == ("hints_disabled", 403)


def test_a_hint_is_a_legal_move_for_the_seat_to_move() -> None:
    """The web side refuses a seat not to move and a bad token before asking anything (a
    service without a bot worker to ask answers 503); the worker's hint is a legal move of
    the seat to move, the same for the same position, and playable as a turn."""
    service, store, secrets = make()
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(hints=True), [0, 1])
    with pytest.raises(GameError) as info:
        service.hint(game_id, seats[1]["token"], "greedy")
    assert info.value.code == "not_your_turn"
    with pytest.raises(GameError) as info:
        service.hint(game_id, "nope", "greedy")
    assert info.value.status == 403
    with pytest.raises(GameError) as info:
        service.hint(game_id, seats[0]["token"], "greedy")
    assert (info.value.code, info.value.status) == ("hint_unavailable", 503)
    cached = service.load(game_id)
    legal = {(x, y, r) for x, y, r, _ in actions(cached.state)}
    for level in ("random", "greedy", "mcts"):
        worked = work_out(store, secrets.get, game_id, cached.seq, level, 60, 50)
        assert worked is not None
        hint = worked[0]
        assert (hint["x"], hint["y"], hint["rotation"]) in legal
        assert hint["player"] == 0 and hint["level"] == level and hint["think_ms"] == 60
    first = work_out(store, secrets.get, game_id, cached.seq, "greedy", 10, 10)
    again = work_out(store, secrets.get, game_id, cached.seq, "greedy", 10, 10)
    assert first is not None and again is not None and first[0] == again[0]
    hint = first[0]
    result = service.play_turn(game_id, seats[0]["token"], hint["x"], hint["y"], hint["rotation"],
                               None)  # fmt: skip
    assert result.events[0].type == "TilePlaced"
    # The game moved on: the old position's hint is not worked out (nobody asks for it).
    assert work_out(store, secrets.get, game_id, cached.seq, "greedy", 10, 10) is None


def test_a_resignation_that_passes_the_turn_to_a_bot_hands_it_over() -> None:
    service, store, secrets = make()
    game_id, seats = service.create_game(
        ["ann", "bot", "cid"], Ruleset(), [0, 1, 2], None, bots=[None, GREEDY, None]
    )
    bots = player(store, secrets)
    assert bots.play(game_id).kind == HUMAN
    service.resign(game_id, seats[0]["token"])  # ann is to move: the bot is next
    assert bots.play(game_id).kind == PLAYED


def test_a_bot_seat_gets_no_reissued_token() -> None:
    service, _, _ = make()
    game_id, _ = service.create_game(
        ["ann", "bot"], Ruleset(), [0, 1], None, key_id="k1", bots=[None, GREEDY]
    )
    with pytest.raises(GameError) as info:
        service.reissue_token(game_id, 1, "k1")
    assert (info.value.code, info.value.status) == ("bot_seat", 409)


def test_a_human_turn_with_a_limit_tells_the_sweep_its_deadline() -> None:
    service, store, secrets = make()
    game_id, _ = service.create_game(
        ["ann", "bot"], Ruleset(turn_seconds=60), [0, 1], None, bots=[None, GREEDY]
    )
    done = player(store, secrets).play(game_id)
    assert done.kind == HUMAN and done.due_ms is not None
    assert done.due_ms == service.load(game_id).state.deadline_ms


def _placed_by_ann(service: GameService, game_id: str, token: str) -> None:
    spot = service.turn_view(game_id)["placements"][0]
    service.play_turn(game_id, token, spot["x"], spot["y"], spot["rotation"], None)


def test_a_bot_consents_to_an_undo_in_the_same_append_as_the_request() -> None:
    """docs/undo.md: in a `consent` game a bot seat accepts at once; with only bots to ask,
    the undo is granted by the request itself (a bot never leaves it to expire)."""
    service, store, _ = make()
    game_id, seats = service.create_game(
        ["ann", "bot"], Ruleset(undo="consent"), [0, 1], None, bots=[None, GREEDY]
    )
    _placed_by_ann(service, game_id, seats[0]["token"])
    before = len(store.read(game_id, MOVES))
    result = service.request_undo(game_id, seats[0]["token"])
    types = [e.type for e in result.events]
    assert types[:3] == ["UndoRequested", "UndoAccepted", "TurnUndone"]
    assert result.events[1].payload["player"] == 1  # the bot's seat
    assert all(e.command_id == result.events[0].command_id for e in result.events)  # one append
    assert len(store.read(game_id, MOVES)) == before + len(result.events)
    assert service.turn_view(game_id)["player"] == 0  # ann places again


def test_with_a_human_and_a_bot_to_ask_the_request_waits_for_the_human_only() -> None:
    service, _, _ = make()
    game_id, seats = service.create_game(
        ["ann", "bob", "bot"], Ruleset(undo="consent"), [0, 1, 2], None, bots=[None, None, GREEDY]
    )
    _placed_by_ann(service, game_id, seats[0]["token"])
    asked = service.request_undo(game_id, seats[0]["token"])
    assert [e.type for e in asked.events] == ["UndoRequested", "UndoAccepted"]
    assert asked.events[1].payload["player"] == 2
    request = asked.events[0].payload["request"]
    answered = service.answer_undo(game_id, seats[1]["token"], request, True)
    assert [e.type for e in answered.events][:2] == ["UndoAccepted", "TurnUndone"]


def test_in_a_free_undo_game_a_bot_is_not_asked() -> None:
    service, _, _ = make()
    game_id, seats = service.create_game(
        ["ann", "bot"], Ruleset(undo="free"), [0, 1], None, bots=[None, GREEDY]
    )
    _placed_by_ann(service, game_id, seats[0]["token"])
    result = service.request_undo(game_id, seats[0]["token"])
    assert [e.type for e in result.events][:2] == ["UndoRequested", "TurnUndone"]


def _placed_at(store: InMemoryEventStore, game_id: str) -> int:
    """When the last placement was appended (Unix ms, the store's stamp)."""
    return next(e.time_ms for e in reversed(store.read(game_id, MOVES)) if e.type == "TilePlaced")


def test_a_bot_waits_before_it_closes_a_humans_window_to_undo() -> None:
    """docs/undo.md: a bot's placement closes the window in which the human who placed last
    may undo, and a bot replies in milliseconds. In a game with undo it waits the grace
    after a human's placement; an undo meanwhile gives the turn back to the human, and the
    bot plays once the grace is over. After its own placements, and in games without undo,
    a bot does not wait."""
    now = [0]
    for mode in ("free", "off"):
        service, store, secrets = make()
        game_id, seats = service.create_game(
            ["ann", "bot"], Ruleset(undo=mode), [0, 1], None, bots=[None, GREEDY]
        )
        bots = player(store, secrets, undo_grace_ms=3_000, wall=lambda: now[0] / 1000)
        _placed_by_ann(service, game_id, seats[0]["token"])
        placed = _placed_at(store, game_id)
        now[0] = placed + 1_000
        before = store.last_seq(game_id, MOVES)
        done = bots.play(game_id)
        if mode == "off":
            assert done.kind == PLAYED  # nothing to wait for
            continue
        assert (done.kind, done.due_ms) == (WAITING, placed + 3_000)
        assert store.last_seq(game_id, MOVES) == before  # nothing appended
        service.request_undo(game_id, seats[0]["token"])  # within the grace: granted
        assert bots.play(game_id).kind == HUMAN  # ann's turn again
        _placed_by_ann(service, game_id, seats[0]["token"])
        now[0] = _placed_at(store, game_id) + 3_000
        assert bots.play(game_id).kind == PLAYED  # the grace is over
        with pytest.raises(GameError) as info:
            service.request_undo(game_id, seats[0]["token"])
        assert info.value.code == "undo_not_allowed"
    service, store, secrets = make()
    game_id, _ = service.create_game(
        ["bot a", "bot b"], Ruleset(undo="free"), [0, 1], None, bots=[GREEDY, RANDOM]
    )
    bots = player(store, secrets, undo_grace_ms=3_000, wall=lambda: now[0] / 1000)
    for _ in range(3):  # a bot's own placement: the next bot plays at once
        now[0] = max(now[0], max(e.time_ms for e in store.read(game_id, MOVES)))
        assert bots.play(game_id).kind == PLAYED


def test_a_bot_waits_for_a_pending_undo_request_and_plays_once_it_is_refused() -> None:
    """`consent`: while ann's request waits for bob, the bot to move waits until the
    request's deadline (its placement would refuse the request for it, though bots accept);
    bob's refusal hands the turn to the bot at once."""
    now = [0]
    service, store, secrets = make(undo_seconds=60)
    game_id, seats = service.create_game(
        ["ann", "bot", "bob"], Ruleset(undo="consent"), [0, 1, 2], None, bots=[None, GREEDY, None]
    )
    bots = player(store, secrets, undo_grace_ms=3_000, wall=lambda: now[0] / 1000)
    _placed_by_ann(service, game_id, seats[0]["token"])
    asked = service.request_undo(game_id, seats[0]["token"])
    request = asked.events[0].payload
    now[0] = _placed_at(store, game_id) + 10_000  # the grace is over; the request is not
    done = bots.play(game_id)
    assert (done.kind, done.due_ms) == (WAITING, request["deadline_ms"])
    service.answer_undo(game_id, seats[2]["token"], request["request"], False)
    assert bots.play(game_id).kind == PLAYED  # the refusal lets the bot play at once


def test_a_waiting_bot_still_plays_before_its_own_turn_limit() -> None:
    """With a turn limit (`turn_seconds`) shorter than the undo request's deadline, the bot
    waits only until its turn limit less its think time and a margin: waiting never makes
    its own turn time out."""
    from services.bots.player import TURN_MARGIN_MS

    now = [0]
    service, store, secrets = make(undo_seconds=120)
    game_id, seats = service.create_game(
        ["ann", "bot", "bob"],
        Ruleset(undo="consent", turn_seconds=30),
        [0, 1, 2],
        None,
        bots=[None, GREEDY, None],
    )
    bots = player(store, secrets, undo_grace_ms=3_000, wall=lambda: now[0] / 1000)
    _placed_by_ann(service, game_id, seats[0]["token"])
    asked = service.request_undo(game_id, seats[0]["token"])
    deadline = service.load(game_id).state.deadline_ms  # the bot's turn limit
    assert deadline is not None and asked.events[0].payload["deadline_ms"] > deadline
    now[0] = _placed_at(store, game_id) + 5_000
    done = bots.play(game_id)
    think = int(str(GREEDY["think_ms"]))
    assert (done.kind, done.due_ms) == (WAITING, deadline - think - TURN_MARGIN_MS)
    now[0] = deadline - TURN_MARGIN_MS
    assert bots.play(game_id).kind == PLAYED  # the request is still open: the bot refuses it
