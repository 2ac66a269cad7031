"""The query service against a real Redis, with games played through the command service and
scored by a real Celery worker: every view is compared with the engine's fold of the same
move stream and with what the worker appended to the score stream."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from flask import Flask
from flask.testing import FlaskClient

from carcassonne.game import fold
from carcassonne.projection import open_features, projected_scores
from carcassonne.state import GameState
from carcassonne.track import track_position
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_engine
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED
from services.command.app import create_app as create_command_app
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore
from tests.integration.openapi_client import PROBLEM_KEYS
from tests.unit.test_query_games import long_game, store_game

from .games import new_game, play
from .http_client import api_key
from .workers import celery_env, running, wait_scored, worker


@pytest.fixture(scope="module")
def env(redis_url: str) -> Iterator[dict[str, str]]:
    """One scoring worker for the whole module (its start-up is the slow part)."""
    environment = celery_env(redis_url)
    with running(worker(environment)):
        yield environment


@pytest.fixture(scope="module")
def command(env: dict[str, str]) -> Flask:
    return create_command_app({"REDIS_URL": env["REDIS_URL"], "BROKER_URL": env["BROKER_URL"]})


@pytest.fixture(scope="module")
def query(env: dict[str, str]) -> FlaskClient:
    """The query service, asked with the API key that creates this module's games (lists by
    player are the key's own: tests/integration/test_access_limits.py)."""
    client = create_query_app({"REDIS_URL": env["REDIS_URL"], "SNAPSHOT_EVERY": 8}).test_client()
    client.environ_base["HTTP_X_API_KEY"] = api_key(env["REDIS_URL"])["X-Api-Key"]
    return client


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


def engine_state(store: RedisEventStore, game_id: str, upto: int | None = None) -> GameState:
    """The engine's fold of the stored move stream (its first `upto` moves)."""
    return fold((to_engine(e) for e in store.read(game_id, MOVES)), upto)


def assert_board_is_engine(view: dict[str, Any], state: GameState) -> None:
    snap = state.snapshot()
    tiles = sorted(((t["x"], t["y"]), t["tile"], t["rotation"]) for t in view["tiles"])
    assert tiles == snap["tiles"]
    meeples = sorted(
        (m["player"], (m["x"], m["y"]), m["feature"], m["spot"], m.get("abbot", False))
        for m in view["meeples"]
    )
    assert meeples == snap["meeples"]
    assert view["phase"] == state.phase and view["tiles_left"] == state.bag_size
    if view["turn"] is not None:
        assert (view["turn"]["player"], view["turn"]["tile"]) == (state.current, state.drawn)
    assert [p["score"] for p in view["players"]] == state.scores
    assert [p["supply"] for p in view["players"]] == state.supply
    assert view["open_features"] == [f.to_dict() for f in open_features(state)]
    assert view["scores_if_ended"] == list(projected_scores(state))


def get(client: FlaskClient, path: str, **headers: str) -> tuple[int, Any, Any]:
    reply = client.get(path, headers=headers)
    json_types = ("application/json", "application/problem+json")  # a view, an error
    body = reply.get_json() if reply.data and reply.mimetype in json_types else None
    return reply.status_code, body, reply


def test_a_scored_game_seen_through_every_view(command, query, store, redis_client) -> None:
    names = [f"ann-{uuid.uuid4().hex[:6]}", "bob"]
    game_id, tokens = new_game(command, names)
    rng = random.Random(21)
    play(command, game_id, tokens, rng, turns=20)

    # Mid-game: the board is the engine's, with whose turn it is and the drawn tile.
    status, board, reply = get(query, f"/games/{game_id}/board")
    assert status == 200
    assert_board_is_engine(board, engine_state(store, game_id))
    assert board["turn"]["name"] == names[board["turn"]["player"]] and not board["over"]
    etag = reply.headers["ETag"]
    assert etag == f'"m{store.last_seq(game_id, MOVES)}"'
    assert get(query, f"/games/{game_id}/board", **{"If-None-Match": etag})[0] == 304
    play(command, game_id, tokens, rng, turns=1)  # a move changes the view and its ETag
    status, _, reply = get(query, f"/games/{game_id}/board", **{"If-None-Match": etag})
    assert status == 200 and reply.headers["ETag"] != etag

    play(command, game_id, tokens, rng)
    wait_scored(redis_client, store, [game_id])
    last = store.last_seq(game_id, MOVES)
    final = engine_state(store, game_id)
    assert final.over

    status, board, _ = get(query, f"/games/{game_id}/board")
    assert_board_is_engine(board, final)
    assert board["over"] and board["turn"] is None and board["tiles_left"] == 0

    # Scores: the worker's stream, totals equal to its GameScored (R7.5) and to the engine.
    status, scores, reply = get(query, f"/games/{game_id}/scores")
    assert status == 200
    stream = store.read(game_id, SCORES)
    (result,) = [e.payload for e in stream if e.type == GAME_SCORED]
    totals = [p["score"] for p in scores["players"]]
    assert totals == result["final_scores"] == final.scores
    assert scores["result"] == result and scores["over"]
    assert [p["rank"] for p in scores["players"]] == result["ranks"]
    assert scores["scored_up_to"] == last and scores["unscored_moves"] == 0
    assert [e["seq"] for e in scores["events"]] == [
        e.seq for e in stream if e.type == FEATURE_SCORED
    ]
    for player, p in zip(scores["players"], range(2), strict=True):
        assert sum(player["points"].values()) == player["score"]
        assert player["track"]["space"] == track_position(player["score"]).space
        on_board = sum(1 for m in final.meeples.values() if m.player == p)
        assert player["meeples"] == {"supply": final.supply[p], "on_board": on_board}
    etag = reply.headers["ETag"]
    assert get(query, f"/games/{game_id}/scores", **{"If-None-Match": etag})[0] == 304

    # Every past view equals the engine right after that move; scores up to that move.
    for at in range(1, last + 1):
        status, past, _ = get(query, f"/games/{game_id}/board?at={at}")
        assert status == 200 and past["seq"] == at
        assert_board_is_engine(past, engine_state(store, game_id, at))
        status, past_scores, _ = get(query, f"/games/{game_id}/scores?at={at}")
        awarded = [0, 0]
        for e in stream:
            if e.type == FEATURE_SCORED and e.payload["move"] <= at:
                awarded = [a + b for a, b in zip(awarded, e.payload["awarded"], strict=True)]
        assert [p["score"] for p in past_scores["players"]] == awarded
        assert past_scores["scored_up_to"] == at

    # The merged log: pages of any size and the NDJSON export agree, each event once.
    everything = [(e.stream, e.seq) for e in store.read(game_id, MOVES) + stream]
    for limit in (1, 17, 1000):
        seen, cursor = [], "0-0"
        while True:
            status, page, _ = get(query, f"/games/{game_id}/events?after={cursor}&limit={limit}")
            assert status == 200
            seen += [(i["stream"], i["seq"]) for i in page["items"]]
            cursor = page["next"]
            if not page["more"]:
                break
        assert sorted(seen) == sorted(everything) and len(seen) == len(everything)
        assert cursor == f"{last}-{len(stream)}"
    reply = query.get(f"/games/{game_id}/events", headers={"Accept": "application/x-ndjson"})
    assert reply.mimetype == "application/x-ndjson"
    lines = [json.loads(line) for line in reply.data.decode().splitlines()]
    assert [(i["stream"], i["seq"]) for i in lines] == seen
    half = lines[len(lines) // 2]["cursor"]
    rest = query.get(f"/games/{game_id}/events?format=ndjson&after={half}").data.splitlines()
    assert [json.loads(line) for line in rest] == lines[len(lines) // 2 + 1 :]
    status, page, reply = get(query, f"/games/{game_id}/events?after=0-0&limit=5")
    assert get(query, f"/games/{game_id}/events?after=0-0&limit=5",
               **{"If-None-Match": reply.headers["ETag"]})[0] == 304  # fmt: skip

    # The list: this game is over; its player's name finds it (any case); no secrets shown.
    status, listed, _ = get(query, f"/games?player={names[0].upper()}")
    assert status == 200
    (summary,) = listed["games"]
    assert summary["game_id"] == game_id and summary["status"] == "over"
    assert summary["players"] == names and summary["scores"] == final.scores
    assert "seed" not in json.dumps(listed) and "token" not in json.dumps(listed)
    assert get(query, f"/games?player={names[0]}&status=in_progress")[1]["games"] == []


def test_a_river_abbot_game_seen_through_the_views(command, query, store, redis_client) -> None:
    """R9.1, R9.2: the board shows river tiles, gardens and abbots (`"abbot": true`) as the
    engine has them at every move; the scores view adds up (garden points under
    `monasteries`) to the worker's and the engine's totals."""
    ruleset = {"river": True, "abbot": True, "tile_edition": "2nd"}
    game_id, tokens = new_game(command, ["ann", "bob"], ruleset)
    rng = random.Random(8)
    abbots_seen = 0
    while not engine_state(store, game_id).over:
        play(command, game_id, tokens, rng, turns=1)
        status, board, _ = get(query, f"/games/{game_id}/board")
        assert status == 200
        assert_board_is_engine(board, engine_state(store, game_id))
        abbots_seen += sum(1 for m in board["meeples"] if m.get("abbot"))
    assert abbots_seen, "no abbot was ever on the board"
    wait_scored(redis_client, store, [game_id])
    final = engine_state(store, game_id)
    status, scores, _ = get(query, f"/games/{game_id}/scores")
    assert status == 200 and [p["score"] for p in scores["players"]] == final.scores
    for player in scores["players"]:
        assert sum(player["points"].values()) == player["score"]


def test_track_laps_of_a_game_past_100_points(env, query, store, redis_client) -> None:
    """A greedy engine game stored as the command service stores it, scored by the worker:
    its winner passes 100 points, so the track shows 2 laps and a 100 tile (R8.1)."""
    state, events = long_game()
    game_id = uuid.uuid4().hex
    store_game(store, game_id, events)
    sender = Celery("test-sender", broker=env["BROKER_URL"])
    sender.send_task("scoring.catch_up", args=[game_id], queue="scoring")
    sender.close()
    wait_scored(redis_client, store, [game_id])
    _, view, _ = get(query, f"/games/{game_id}/scores")
    (result,) = [e.payload for e in store.read(game_id, SCORES) if e.type == GAME_SCORED]
    assert [p["score"] for p in view["players"]] == result["final_scores"] == state.scores
    laps = []
    for player in view["players"]:
        score, track = player["score"], player["track"]
        assert (track["space"], track["laps"]) == (score % 50, score // 50)
        assert list(track_position(score).point_tiles) == track["point_tiles"]
        laps.append(track["laps"])
    winner = view["players"][max(range(2), key=lambda p: state.scores[p])]
    assert winner["score"] >= 100 and winner["track"]["laps"] >= 2
    assert winner["track"]["point_tiles"][0] == 100  # the 50 tile turned over (R8.1)
    # Past the first 50 points, in the middle of the game: one lap, a 50 tile.
    for at in range(1, len(events) + 1):
        _, past, _ = get(query, f"/games/{game_id}/scores?at={at}")
        score = past["players"][0]["score"]
        if 50 <= score < 100:
            assert past["players"][0]["track"]["laps"] == 1
            assert past["players"][0]["track"]["point_tiles"] == [50]
            break
    else:
        pytest.fail("player 0 never stood between 50 and 99")


def test_games_list_pages_and_status_filter(command, query) -> None:
    name = f"cid-{uuid.uuid4().hex[:8]}"
    ids = {new_game(command, [name, f"other{i}"])[0] for i in range(3)}
    seen, cursor = [], None
    while True:
        path = f"/games?player={name}&limit=1" + (f"&cursor={cursor}" if cursor else "")
        status, listed, _ = get(query, path)
        assert status == 200 and len(listed["games"]) <= 1
        seen += [g["game_id"] for g in listed["games"]]
        cursor = listed["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)
    _, progress, _ = get(query, f"/games?player={name}&status=in_progress")
    assert {g["game_id"] for g in progress["games"]} == ids
    assert all(g["status"] == "in_progress" for g in progress["games"])


def test_errors_share_the_command_service_shape(command, query) -> None:
    game_id, _ = new_game(command, ["a", "b"])
    unknown = uuid.uuid4().hex
    for path in (f"/games/{unknown}/board", f"/games/{unknown}/scores", f"/games/{unknown}/events",
                 f"/games/{unknown}/live", "/games/not-an-id/board"):  # fmt: skip
        status, body, reply = get(query, path)
        assert status == 404, path
        assert reply.mimetype == "application/problem+json" and set(body) == PROBLEM_KEYS
        assert {k: body[k] for k in ("code", "rule", "details", "status", "type")} == {
            "code": "game_not_found", "rule": None, "details": {}, "status": 404,
            "type": "/errors#game_not_found"}  # fmt: skip
    for path in (f"/games/{game_id}/board?at=0", f"/games/{game_id}/scores?at=x",
                 f"/games/{game_id}/events?limit=0", f"/games/{game_id}/events?after=1",
                 "/games?status=done"):  # fmt: skip
        status, body, _ = get(query, path)
        assert status == 422, path
        assert body["code"] == "invalid_query" and body["details"]["fields"], path
    status, body, _ = get(query, f"/games/{game_id}/board?at=9999")
    assert status == 422 and body["code"] == "at_out_of_range"
    assert body["details"] == {"at": 9999, "last_seq": body["details"]["last_seq"]}
    status, body, _ = get(query, f"/games/{game_id}/live", **{"Last-Event-ID": "x"})
    assert status == 422 and body["code"] == "bad_cursor"
    assert set(query.get("/openapi.json").get_json()["paths"]) >= {
        "/games", "/games/{game_id}/board", "/games/{game_id}/scores",
        "/games/{game_id}/events", "/games/{game_id}/live",
    }  # fmt: skip
    assert query.get("/healthz").get_json() == {"status": "ok"}
