"""Bot seats end to end: the command service under gunicorn, the bot worker as real Celery
processes (killed with SIGKILL mid-think), beat's bot sweep, a real Redis."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.game import actions, fold
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.bots.feed import CONSUMER
from services.redis_store import RedisEventStore
from services.redis_store.changes import retire
from services.redis_store.keys import bots_due_key, index_shard
from tools import gameclient as demo  # the client `make demo` plays with
from tools.gameclient import hint as await_hint

from .http_client import api_key, call, gunicorn
from .workers import BOTS_APP, Process, beat, celery_env, running, worker

# The bot worker refuses a visibility timeout shorter than its longest think plus 5 s.
BOT_ENV = {"MAX_THINK_MS": "1000", "VISIBILITY_TIMEOUT": "7", "SWEEP_SECONDS": "1",
           "GRACE_SECONDS": "3"}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _retired(redis_url: str) -> Iterator[None]:
    """The bot workers of this module follow the change feed as the consumer "bots" on the
    session's Redis; once they are gone, nothing may hold that feed's trim back for the
    tests after (test_scoring_worker checks that only live consumers are registered)."""
    yield
    retire(redis.Redis.from_url(redis_url), CONSUMER)


@pytest.fixture(scope="module")
def command(redis_url: str) -> Iterator[str]:
    """One command service for the module: each test plays games of its own."""
    env = celery_env(redis_url, HINT_THINK_MS="200")
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 2) as base:
        yield base


def bot_worker(redis_url: str, name: str, **settings: str) -> Process:
    env = celery_env(redis_url, **BOT_ENV, **settings)
    return worker(env, name, concurrency=1, pool="prefork", queues="bots", app=BOTS_APP)


def undo_game_against_greedy(command: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A `free` undo game, ann (seat 0) against a greedy bot: its id, ann's Authorization
    header and a turn body for ann's first placement."""
    status, created = call(command, "POST", "/games", {
        "players": [{"name": "ann"}, {"name": "robot", "bot": "greedy"}],
        "ruleset": {"tileset": "demo", "undo": "free"},
        "seat_order": [0, 1],
    }, api_key(command))  # fmt: skip
    assert status == 201, created
    game_id = created["game_id"]
    auth = {"Authorization": f"Bearer {created['players'][0]['token']}"}
    spot = call(command, "GET", f"/games/{game_id}/turn")[1]["placements"][0]
    turn = {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"], "meeple": None}
    return game_id, auth, turn


def wait_until(what: str, check: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)
    return found


def placed(store: RedisEventStore, game_id: str) -> list[Any]:
    return [e for e in store.read(game_id, MOVES) if e.type == "TilePlaced"]


@pytest.mark.slow
def test_a_bot_game_finishes_with_each_turn_played_once_after_a_worker_is_killed_mid_think(
    redis_url: str, redis_client: redis.Redis, command: str
) -> None:
    store = RedisEventStore(redis_client)
    status, created = call(command, "POST", "/games", {
        "players": [{"name": "deep", "bot": "mcts", "think_ms": 400},
                    {"name": "quick", "bot": "greedy"}],
        "ruleset": {"tileset": "demo"},
        "seat_order": [0, 1],
    }, api_key(command))  # fmt: skip
    assert status == 201, created
    game_id = created["game_id"]
    assert [p["token"] for p in created["players"]] == [None, None]
    assert created["players"][0]["bot"] == {"level": "mcts", "think_ms": 400}
    first = bot_worker(redis_url, "bots1")
    sweeper = beat(celery_env(redis_url, **BOT_ENV), app=BOTS_APP)
    with running(first, sweeper):
        # Mid-think: some turns played, and a task received that has not finished.
        def thinking() -> bool:
            log = first.log.read_text(errors="replace")
            busy = log.count("bots.play") > 2 * log.count("succeeded in")
            return len(placed(store, game_id)) >= 4 and busy and "received" in log

        wait_until("the bot worker is thinking", thinking)
        killed_at = store.last_seq(game_id, MOVES)
        first.kill()
        second = bot_worker(redis_url, "bots2").start("ready.")
        try:
            wait_until(
                "the game is over",
                lambda: call(command, "GET", f"/games/{game_id}/turn")[1]["over"],
            )
        finally:
            second.stop()
    events = store.read(game_id, MOVES)
    state = fold(to_engine(e) for e in events)
    assert state.over and store.last_seq(game_id, MOVES) > killed_at
    turns = placed(store, game_id)
    ids = [e.command_id for e in turns]
    assert len(ids) == len(set(ids)) == state.turn  # every turn once
    for event in turns:  # each decided at the sequence just before it
        assert event.command_id == f"bot:{game_id}:{event.seq - 1}"
    assert [e.payload["player"] for e in turns] == [i % 2 for i in range(len(turns))]


def play_then_await_the_bot(
    command: str, game_id: str, turn: dict[str, Any], auth: dict[str, str]
) -> Any:
    """Play seat 0's `turn`, then wait until the bot in seat 1 has moved: the turn view."""
    status, played = call(command, "POST", f"/games/{game_id}/turns", turn, auth)
    assert status == 200, played
    seq = played["seq"]

    def bot_moved() -> Any:
        view = call(command, "GET", f"/games/{game_id}/turn")[1]
        return view if view["seq"] > seq and (view["over"] or view["player"] == 0) else None

    return wait_until("the bot has moved", bot_moved, timeout=30)


def test_a_human_plays_a_bot_over_http_and_asks_for_hints(
    redis_url: str, redis_client: redis.Redis, command: str
) -> None:
    status, created = call(command, "POST", "/games", {
        "players": [{"name": "ann"}, {"name": "robot", "bot": "greedy"}],
        "ruleset": {"tileset": "demo", "hints": True},
        "seat_order": [0, 1],
    }, api_key(command))  # fmt: skip
    assert status == 201, created
    game_id, token = created["game_id"], created["players"][0]["token"]
    auth = {"Authorization": f"Bearer {token}"}
    with running(bot_worker(redis_url, "bots3")):
        for _ in range(3):
            status, hint = await_hint(command, game_id, auth, "greedy", call=call)
            assert status == 200, hint
            turn = {k: hint[k] for k in ("x", "y", "rotation", "meeple")}
            view = play_then_await_the_bot(command, game_id, turn, auth)
            if view["over"]:
                break
    status, refused = call(
        command, "GET", f"/games/{game_id}/hint", headers={"Authorization": "Bearer nope"}
    )
    assert (status, refused["code"]) == (403, "bad_token")
    status, refused = call(command, "GET", f"/games/{game_id}/hint?level=genius", headers=auth)
    assert (status, refused["code"]) == (422, "invalid_query")


def test_against_a_bot_a_human_can_still_undo_and_the_bot_replies_after_the_grace(
    redis_url: str, redis_client: redis.Redis, command: str
) -> None:
    """docs/undo.md: the bot waits UNDO_GRACE_SECONDS (2 here) after a human's placement in
    a game with undo, so the human can take it back (before, a greedy bot closed the window
    within milliseconds); then it plays, once. The placement made again after the undo
    stands (one undo a turn): the bot has nothing to wait for then, and plays at once."""
    game_id, auth, turn = undo_game_against_greedy(command)
    store = RedisEventStore(redis_client)
    with running(bot_worker(redis_url, "bots-undo", UNDO_GRACE_SECONDS="2")):
        status, played = call(command, "POST", f"/games/{game_id}/turns", turn, auth)
        assert status == 200, played
        status, undone = call(command, "POST", f"/games/{game_id}/undo", {}, auth)
        assert status == 200, undone
        assert "TurnUndone" in [e["type"] for e in undone["events"]]
        assert call(command, "GET", f"/games/{game_id}/turn")[1]["player"] == 0
        play_then_await_the_bot(command, game_id, turn, auth)
    ann, robot = placed(store, game_id)[-2:]
    assert (ann.payload["player"], robot.payload["player"]) == (0, 1)
    assert robot.time_ms - ann.time_ms < 2_000  # ann's placement stands: no grace to wait
    assert len(placed(store, game_id)) == 3  # ann's undone placement, ann's, the bot's


@pytest.mark.slow
def test_a_bot_waiting_out_the_undo_grace_plays_once_after_its_worker_is_killed(
    redis_url: str, redis_client: redis.Redis, command: str
) -> None:
    """The bot's wait is a task held by the worker until the grace is over (a countdown).
    The worker is SIGKILLed while it holds it: the broker hands the task out again (late
    acknowledgement) and the sweep re-sends it; the bot plays once, after the grace (a second
    copy finds ann to move, or its turn's command id taken: it appends nothing)."""
    game_id, auth, turn = undo_game_against_greedy(command)
    store = RedisEventStore(redis_client)
    grace = {"UNDO_GRACE_SECONDS": "3"}
    first = bot_worker(redis_url, "bots-held", **grace)
    with running(first, beat(celery_env(redis_url, **BOT_ENV, **grace), app=BOTS_APP)):
        status, played = call(command, "POST", f"/games/{game_id}/turns", turn, auth)
        assert status == 200, played

        def holding() -> bool:  # it answered "waiting" and holds the countdown task
            log = first.log.read_text(errors="replace")
            return "'waiting'" in log and log.count("received") >= 2

        wait_until("the worker holds the bot's task", holding, timeout=30)
        assert len(placed(store, game_id)) == 1  # only ann's
        first.kill()
        second = bot_worker(redis_url, "bots-after", **grace).start("ready.")
        try:
            wait_until("the bot has moved", lambda: len(placed(store, game_id)) >= 2, timeout=60)
        finally:
            second.stop()
    ann, robot = placed(store, game_id)
    assert robot.time_ms - ann.time_ms >= 3_000
    assert robot.command_id == f"bot:{game_id}:{robot.seq - 1}"


def test_a_bot_plays_a_hand_game_and_hints_name_a_tile_of_the_hand(
    redis_url: str, command: str
) -> None:
    """R10.3: the bot worker plays its seat from its own hand; a hint names a tile of the
    asking seat's hand (GET /hand) with a legal placement for it."""
    status, created = call(command, "POST", "/games", {
        "players": [{"name": "ann"}, {"name": "robot", "bot": "greedy"}],
        "ruleset": {"hand": 3, "hints": True},
        "seat_order": [0, 1],
    }, api_key(command))  # fmt: skip
    assert status == 201, created
    game_id, token = created["game_id"], created["players"][0]["token"]
    auth = {"Authorization": f"Bearer {token}"}
    with running(bot_worker(redis_url, "bots4")):
        for _ in range(3):
            _, hand = call(command, "GET", f"/games/{game_id}/hand", headers=auth)
            status, hint = await_hint(command, game_id, auth, "greedy", call=call)
            assert status == 200, hint
            assert hint["tile"] in hand["hand"]
            turn = {k: hint[k] for k in ("tile", "x", "y", "rotation", "meeple")}
            assert {k: turn[k] for k in ("tile", "x", "y", "rotation")} in [
                {k: p[k] for k in ("tile", "x", "y", "rotation")} for p in hand["placements"]
            ]
            view = play_then_await_the_bot(command, game_id, turn, auth)
            assert view["hand_sizes"][1] >= 2  # the bot holds its own hand, refilled
    _, page = call(command, "GET", f"/games/{game_id}/turn")
    assert page["over"] is False and "hands" not in page


def test_hints_are_off_unless_the_ruleset_allows_them(command: str) -> None:
    status, created = call(
        command, "POST", "/games", {"players": [{"name": "a"}, {"name": "b"}]}, api_key(command)
    )
    assert status == 201
    token = created["players"][created["turn"]["player"]]["token"]
    status, refused = call(command, "GET", f"/games/{created['game_id']}/hint",
                           headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert (status, refused["code"]) == (403, "hints_disabled")
    status, missing = call(command, "GET", f"/games/{created['game_id']}/hint")
    assert (status, missing["code"]) == (401, "missing_token")


def test_bad_bot_seats_are_refused(command: str) -> None:
    for player in ({"name": "x", "bot": "genius"}, {"name": "x", "think_ms": 100},
                   {"name": "x", "bot": "mcts", "think_ms": 0},
                   {"name": "x", "bot": "mcts", "think_ms": 10_001}):  # fmt: skip
        status, refused = call(
            command, "POST", "/games", {"players": [{"name": "a"}, player]}, api_key(command)
        )
        assert (status, refused["code"]) == (422, "invalid_body"), player


def test_make_demo_pits_a_server_bot_against_its_client_bot(redis_url: str, command: str) -> None:
    """tools/demo.py with `--bots greedy`: seat "Ada" is the server's, "Brunel" the
    script's random client; the game is played to the end."""
    owner = api_key(command)["X-Api-Key"]
    game = demo.create_game(command, ["Ada", "Brunel"], "demo", bots=["greedy"], api_key=owner)
    assert sorted(t is None for t in game.tokens.values()) == [False, True]
    with running(bot_worker(redis_url, "bots4")):
        demo.play_game(command, game, random.Random(3))
    view = demo.turn_view(command, game)
    assert view["over"] and any(t.get("bot") for t in game.turns)


def test_a_bot_move_no_replica_confirmed_is_looked_at_again_soon_and_played_once(
    redis_url: str, redis_client: redis.Redis, command: str
) -> None:
    """REDIS_WAIT_REPLICAS=1 on a Redis without replicas: every bot move is stored on the
    primary only, as before a failover that could lose it. The task does not count it as
    played (it answers "unconfirmed" and leaves the game due after the grace, not after the
    long recheck of a human's turn), so a move a failover lost is played again
    (tests/hosts); here it was not lost: the next look (the feed's task for the bot's own
    append) finds the human to move, and the game goes on with that one move."""
    status, created = call(command, "POST", "/games", {
        "players": [{"name": "ann"}, {"name": "robot", "bot": "greedy"}],
        "ruleset": {"tileset": "demo"},
        "seat_order": [0, 1],
    }, api_key(command))  # fmt: skip
    assert status == 201, created
    game_id, token = created["game_id"], created["players"][0]["token"]
    store = RedisEventStore(redis_client)
    state = fold(to_engine(e) for e in store.read(game_id, MOVES))
    x, y, rotation, _ = actions(state)[0]
    turn = {"x": x, "y": y, "rotation": rotation, "meeple": None}
    bots = bot_worker(redis_url, "unconfirmed", REDIS_WAIT_REPLICAS="1", REDIS_WAIT_MS="10")
    with running(bots):
        status, played = call(command, "POST", f"/games/{game_id}/turns", turn,
                              {"Authorization": f"Bearer {token}"})  # fmt: skip
        assert status == 200, played
        wait_until("the bot's move", lambda: len(placed(store, game_id)) == 2, timeout=30)
        wait_until("its warning", lambda: "not confirmed by replicas" in bots.log.read_text())
        wait_until("the task's answer", lambda: "'unconfirmed'" in bots.log.read_text())
        wait_until("the human's turn seen", lambda: "'human'" in bots.log.read_text())
    assert redis_client.zscore(bots_due_key(index_shard(game_id)), game_id) is not None
    assert len(placed(store, game_id)) == 2  # the bot's move once
