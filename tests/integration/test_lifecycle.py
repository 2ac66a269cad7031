"""The game lifecycle end to end (docs/lifecycle.md) on real parts: a private Redis, the
command service under gunicorn, two Celery worker processes and beat running the turn timer.

A 2 s turn limit expires with both workers ticking (and extra ticks sent at once so that
they race): exactly one `TurnTimedOut` per expired turn, the next player gets the turn; a
resigned seat is skipped and the game ends with final scoring when one player is left; an
idle game is ended as abandoned and listed so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from carcassonne.game import actions
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.schemas import to_engine
from services.command.apikeys import ApiKeys
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore
from tests.redis_server import private_redis

from .http_client import api_key, call, gunicorn
from .workers import beat, celery_env, running, worker

pytestmark = pytest.mark.slow  # turn timeouts and abandon sweeps: real waits

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
TURN_SECONDS = 2
ABANDON_AFTER = 6.0


@pytest.fixture(scope="module")
def suite() -> Iterator[dict[str, Any]]:
    """A private Redis (the abandon sweep must see only this module's games), two worker
    processes, beat ticking every 0.25 s, and the command service."""
    with private_redis() as url:
        env = celery_env(url, TIMER_SECONDS="0.25", ABANDON_AFTER=str(ABANDON_AFTER))
        workers = [worker(env, "life1", concurrency=2), worker(env, "life2", concurrency=2)]
        with (
            running(*workers, beat(env)),
            gunicorn(*COMMAND, {**env, "NOTIFY_MS": "0"}, workers=2) as base,
        ):
            client = redis.Redis.from_url(url)
            yield {
                "base": base,
                "client": client,
                "store": RedisEventStore(client),
                "celery": Celery(broker=env["BROKER_URL"]),
                "workers": workers,
                "url": url,
            }


def create(base: str, names: list[str], **rules: Any) -> tuple[str, dict[int, str]]:
    body = {"players": [{"name": n} for n in names], "seat_order": list(range(len(names)))}
    if rules:
        body["ruleset"] = rules
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


def moves(store: RedisEventStore, game_id: str) -> list[StoredEvent]:
    return store.read(game_id, MOVES)


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_an_expired_turn_times_out_exactly_once_with_two_workers_and_beat(suite):
    base, store = suite["base"], suite["store"]
    game_id, tokens = create(base, ["Ann", "Bob", "Cy"], turn_seconds=TURN_SECONDS)
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200 and turn["player"] == 0
    first_deadline = turn["deadline_ms"]
    assert first_deadline == moves(store, game_id)[-1].payload["deadline_ms"]
    # More ticks than beat sends, all at once: both workers run ticks against the same turns.
    stop = time.monotonic() + 3 * TURN_SECONDS + 2
    while time.monotonic() < stop and _timeouts(store, game_id) < 3:
        for _ in range(4):
            suite["celery"].send_task("lifecycle.tick", queue="scoring")
        time.sleep(0.1)
    timed_out = wait_for(
        lambda: _timeouts(store, game_id) >= 3, 4 * TURN_SECONDS + 10, "three timeouts"
    )
    assert timed_out
    log = moves(store, game_id)
    state = GameState()
    deadline = None
    seen = []
    for event in log:
        if event.type == "TurnTimedOut":
            # never before its deadline, never twice for one deadline
            assert deadline is not None and event.time_ms >= deadline
            seen.append((deadline, event.payload["player"]))
            deadline = None
        elif event.type == "TileDrawn":
            deadline = event.payload["deadline_ms"]
        state.apply(to_engine(event))
    assert [p for _, p in seen[:3]] == [0, 1, 2]  # each in turn; the next player got the turn
    assert len({d for d, _ in seen}) == len(seen)  # one TurnTimedOut per expiry
    assert first_deadline == seen[0][0]
    # the player who timed out last is too late: a clean refusal, nothing appended
    x, y, rotation, _ = actions(state)[0]
    late = {"x": x, "y": y, "rotation": rotation, "meeple": None}
    late_seat = seen[-1][1]
    assert late_seat != state.current
    status, body = call(base, "POST", f"/games/{game_id}/turns", late, bearer(tokens[late_seat]))
    assert status == 409 and body["code"] == "not_your_turn", body
    # both worker processes ran ticks: the single TurnTimedOut per expiry held under a race
    for process in suite["workers"]:
        assert "lifecycle.tick" in process.log.read_text(errors="replace"), process.name


def _timeouts(store: RedisEventStore, game_id: str) -> int:
    return sum(e.type == "TurnTimedOut" for e in moves(store, game_id))


def test_max_timeouts_put_the_seat_out_and_end_a_two_player_game_with_final_scoring(suite):
    base, store = suite["base"], suite["store"]
    game_id, _ = create(base, ["Ann", "Bob"], turn_seconds=1, max_timeouts=1)
    wait_for(
        lambda: any(e.type == "GameScored" for e in store.read(game_id, SCORES)),
        20,
        "the game's final scoring",
    )
    kinds = [e.type for e in moves(store, game_id)]
    assert kinds[-3:] == ["TurnTimedOut", "PlayerTimedOut", "GameEnded"]
    assert kinds.count("TurnTimedOut") == 1
    result = store.read(game_id, SCORES)[-1].payload
    assert result["ranks"] == [2, 1] and result["winners"] == [1]  # out: ranks after Bob
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200
    assert turn["out"] == ["timed_out", None] and turn["status"] == "over"


def test_a_resigned_seat_is_skipped_and_the_last_one_left_wins(suite):
    base, store = suite["base"], suite["store"]
    game_id, tokens = create(base, ["Ann", "Bob", "Cy"])
    path = f"/games/{game_id}/resign"
    assert call(base, "POST", path)[1]["code"] == "missing_token"
    status, body = call(base, "POST", path, headers=bearer("not-a-token"))
    assert status == 403 and body["code"] == "bad_token"
    # Bob resigns out of turn: Ann still plays, then Cy (Bob is skipped)
    status, body = call(base, "POST", path, headers=bearer(tokens[1]))
    assert status == 200 and [e["type"] for e in body["events"]] == ["PlayerResigned"]
    assert body["next"]["player"] == 0
    status, again = call(base, "POST", path, headers=bearer(tokens[1]))
    assert status == 200 and again["replayed"] is True and again["seq"] == body["seq"]
    _play_one(base, store, game_id, tokens[0])
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert turn["player"] == 2 and turn["out"] == [None, "resigned", None]
    # Cy resigns on her turn: one player left, the game ends with final scoring
    status, body = call(base, "POST", path, headers=bearer(tokens[2]))
    assert status == 200, body
    assert [e["type"] for e in body["events"]] == ["PlayerResigned", "GameEnded"]
    assert body["next"]["over"] is True
    status, refused = call(base, "POST", path, headers=bearer(tokens[0]))
    assert status == 409 and refused["code"] == "game_over"
    wait_for(
        lambda: any(e.type == "GameScored" for e in store.read(game_id, SCORES)), 20, "scoring"
    )
    result = store.read(game_id, SCORES)[-1].payload
    assert result["winners"] == [0] and result["ranks"][0] == 1
    assert min(result["ranks"][1:]) >= 2
    # the resignations survive the record format: export, official scoring, import
    status, record = call(base, "GET", f"/games/{game_id}/record")
    assert status == 200 and {"resign": 1} in record["turns"] and {"resign": 2} in record["turns"]
    key = {"X-Api-Key": ApiKeys(suite["client"]).create("lifecycle-tests")[1]}
    status, scored = call(base, "POST", "/v1/score", record, key)
    assert status == 200, scored
    assert scored["ranks"] == result["ranks"] and scored["winners"] == [0]
    assert scored["out"] == [None, "resigned", "resigned"]
    assert [t["action"] for t in scored["timeline"]].count("resigned") == 2
    status, imported = call(base, "POST", "/games/import", record, key)
    assert status == 201, imported
    copy = imported["game_id"]
    wait_for(lambda: any(e.type == "GameScored" for e in store.read(copy, SCORES)), 20, "import")
    assert store.read(copy, SCORES)[-1].payload["ranks"] == result["ranks"]
    assert [e.type for e in moves(store, copy)].count("PlayerResigned") == 2


def _play_one(base: str, store: RedisEventStore, game_id: str, token: str) -> None:
    state = GameState()
    for event in moves(store, game_id):
        state.apply(to_engine(event))
    x, y, rotation, _ = actions(state)[0]
    turn = {"x": x, "y": y, "rotation": rotation, "meeple": None}
    status, body = call(base, "POST", f"/games/{game_id}/turns", turn, bearer(token))
    assert status == 200, body


def test_an_idle_game_is_ended_as_abandoned_and_listed_so(suite):
    base, store = suite["base"], suite["store"]
    players = [{"name": "Ann", "player_id": "u-idle"}, {"name": "Bob"}]
    status, created = call(base, "POST", "/games", {"players": players}, api_key(base))
    assert status == 201, created
    game_id = created["game_id"]
    wait_for(
        lambda: moves(store, game_id)[-1].type == "GameAbandoned",
        ABANDON_AFTER + 10,
        "the game to be abandoned",
    )
    last = moves(store, game_id)[-1]
    assert last.payload["idle_ms"] >= ABANDON_AFTER * 1000
    assert sum(e.type == "GameAbandoned" for e in moves(store, game_id)) == 1
    assert not any(e.type == "GameScored" for e in store.read(game_id, SCORES))
    query = create_query_app({"REDIS_URL": suite["url"]}).test_client()
    owner = api_key(base)  # the key that created it lists it
    listed = query.get("/games?status=abandoned", headers=owner).get_json()
    assert game_id in [g["game_id"] for g in listed["games"]]
    assert all(g["status"] == "abandoned" for g in listed["games"])
    in_progress = query.get("/games?status=in_progress", headers=owner).get_json()
    assert game_id not in [g["game_id"] for g in in_progress["games"]]
    mine = query.get("/games?player_id=u-idle&status=abandoned", headers=owner).get_json()
    assert [g["game_id"] for g in mine["games"]] == [game_id]
    gone = query.get("/games?player_id=u-idle&status=in_progress", headers=owner).get_json()
    assert gone["games"] == []
    board = query.get(f"/games/{game_id}/board").get_json()
    assert board["status"] == "abandoned" and board["over"] is True
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200
    assert turn["status"] == "abandoned"
    assert json.loads(suite["client"].get(f"{{g:{game_id}}}:secrets"))["seed"]


def test_a_reissued_token_replaces_the_old_one_at_once(suite):
    base, store = suite["base"], suite["store"]
    keys = ApiKeys(suite["client"])
    owner = {"X-Api-Key": keys.create("lifecycle-owner")[1]}
    stranger = {"X-Api-Key": keys.create("lifecycle-stranger")[1]}
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}], "seat_order": [0, 1]}
    status, created = call(base, "POST", "/games", body, owner)
    assert status == 201, created
    game_id = created["game_id"]
    old = {p["seat"]: p["token"] for p in created["players"]}
    _play_one(base, store, game_id, old[0])  # every process that served it has it cached
    path = f"/games/{game_id}/players/1/token"
    status, refused = call(base, "POST", path, headers=stranger)
    assert status == 403 and refused["code"] == "not_game_owner"
    status, missing = call(base, "POST", f"/games/{game_id}/players/5/token", headers=owner)
    assert status == 404 and missing["code"] == "seat_not_found"
    assert call(base, "POST", path)[1]["code"] == "missing_api_key"
    status, issued = call(base, "POST", path, headers=owner)
    assert status == 200 and issued["seat"] == 1 and issued["token"] != old[1]
    assert moves(store, game_id)[-1].type == "TokenReissued"
    assert old[1] not in json.dumps([e.payload for e in moves(store, game_id)])
    # the old token is dead on every gunicorn worker at once, the new one plays
    for _ in range(4):  # several requests: whichever worker process answers
        state = GameState()
        for event in moves(store, game_id):
            state.apply(to_engine(event))
        x, y, rotation, _ = actions(state)[0]
        turn = {"x": x, "y": y, "rotation": rotation, "meeple": None}
        status, body = call(base, "POST", f"/games/{game_id}/turns", turn, bearer(old[1]))
        assert status == 403 and body["code"] == "bad_token", body
    _play_one(base, store, game_id, issued["token"])
    status, turn_view = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200 and turn_view["player"] == 0
    # a game created without an API key has no owner to re-issue its tokens
    plain, _ = create(base, ["Cy", "Di"])
    status, body = call(base, "POST", f"/games/{plain}/players/0/token", headers=owner)
    assert status == 403 and body["code"] == "not_game_owner"
