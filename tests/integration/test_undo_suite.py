"""Undo end to end (docs/undo.md): the command and query services under gunicorn, a real Redis
and a real Celery scoring worker.

The game is found by tests/undo_games.py: a seed and moves after which a placement completes
a city holding a meeple of each of two players. It is created with that seed by the command
service's own code on the suite's Redis (a seed is never taken from a request), then played
over HTTP. Every answer is checked against docs/openapi.json (the package's conftest).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.events import Event, TilePlaced, TurnUndone
from carcassonne.game import fold
from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_engine
from eventstore.score_stream import FEATURE_SCORED, SCORE_REVERTED
from services.command.apikeys import ApiKeys
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.redis_store import RedisEventStore
from tests.undo_games import CityJoin, city_join

from .http_client import api_key, call, gunicorn
from .workers import celery_env, running, wait_scored, worker

UNDO_SECONDS = 30


@pytest.fixture(scope="module")
def env(redis_url: str) -> dict[str, str]:
    return celery_env(redis_url, UNDO_SECONDS=str(UNDO_SECONDS))


@pytest.fixture(scope="module")
def command(env: dict[str, str]) -> Iterator[str]:
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 2) as base:
        yield base


@pytest.fixture(scope="module")
def query(env: dict[str, str]) -> Iterator[str]:
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, 1) as base:
        yield base


@pytest.fixture
def store(redis_client: redis.Redis) -> RedisEventStore:
    return RedisEventStore(redis_client)


class Game:
    """A game of the city-join scenario, played over HTTP."""

    def __init__(self, command: str, client: redis.Redis, mode: str) -> None:
        self.join: CityJoin = city_join(Ruleset(undo=mode))
        service = GameService(RedisEventStore(client), RedisSecrets(client))
        self.id, seats = service.create_game(
            ["Ann", "Bob"], Ruleset(undo=mode), [0, 1], seed=self.join.seed
        )
        self.tokens = {s["seat"]: s["token"] for s in seats}
        self.command = command

    def turn(self) -> dict[str, Any]:
        status, view = call(self.command, "GET", f"/games/{self.id}/turn")
        assert status == 200, view
        return view

    def play(self, move: dict[str, Any], seat: int | None = None) -> tuple[int, Any]:
        seat = self.turn()["player"] if seat is None else seat
        return call(self.command, "POST", f"/games/{self.id}/turns", move, self.auth(seat))

    def auth(self, seat: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[seat]}"}

    def post(self, path: str, seat: int) -> tuple[int, Any]:
        return call(self.command, "POST", f"/games/{self.id}{path}", None, self.auth(seat))

    def up_to_goal(self) -> int:
        """Play the moves before the goal; the seat that will place it."""
        for move in self.join.moves:
            status, body = self.play(move)
            assert status == 200, body
        return int(self.turn()["player"])


def engine_events(store: RedisEventStore, game_id: str) -> list[Event]:
    return [to_engine(e) for e in store.read(game_id, MOVES)]


def turn_ends(events: list[Event]) -> list[int]:
    """Independently of the projector: for each turn N (placements made, undone ones too),
    how many moves its view holds — up to the next placement, or to the `TurnUndone` that
    takes the N-th placement back."""
    ends: list[int] = []
    placed = 0
    for index, event in enumerate(events):
        if isinstance(event, TilePlaced | TurnUndone) and len(ends) == placed:
            ends.append(index)
        if isinstance(event, TilePlaced):
            placed += 1
    if len(ends) == placed:
        ends.append(len(events))
    return ends


def check_every_turn(query: str, game_id: str, events: list[Event]) -> None:
    """Board and score totals at every `?turn=` equal the fold of the moves it holds, and the
    current board counts every turn (what the viewer steps through)."""
    ends = turn_ends(events)
    status, now = call(query, "GET", f"/games/{game_id}/board")
    assert status == 200 and now["turns"] == len(ends) - 1 > now["tiles_placed"]
    for turn, end in enumerate(ends):
        state = fold(events[:end])
        status, board = call(query, "GET", f"/games/{game_id}/board?turn={turn}")
        assert status == 200, board
        assert board["seq"] == end and board["turns"] == turn
        assert [p["score"] for p in board["players"]] == state.scores
        assert len(board["meeples"]) == len(state.meeples)
        status, scores = call(query, "GET", f"/games/{game_id}/scores?turn={turn}")
        assert status == 200, scores
        assert [p["score"] for p in scores["players"]] == state.scores, turn


def test_undo_of_a_two_meeple_city_reverts_exactly_its_points(
    command: str, query: str, env: dict[str, str], redis_client: redis.Redis, store
) -> None:
    """Consent: the placement completes a city with a meeple of each player and the worker
    scores it; the undo is accepted; the worker appends one ScoreReverted taking exactly
    those points back, the two meeples stand on the board again, and every `?turn=` shows
    the right totals, the undone placement's turn included."""
    game = Game(command, redis_client, "consent")
    with running(worker(env, "undo1")):
        placer = game.up_to_goal()
        wait_scored(redis_client, store, [game.id])
        status, before = call(query, "GET", f"/games/{game.id}/board")
        assert status == 200
        status, placed = game.play(game.join.goal)
        assert status == 200, placed
        wait_scored(redis_client, store, [game.id])
        scored = store.read(game.id, SCORES)[-1]
        assert scored.type == FEATURE_SCORED and scored.payload["meeples"] == [1, 1]
        assert scored.payload["awarded"] == [game.join.points] * 2

        status, asked = game.post("/undo", placer)
        assert status == 200 and [e["type"] for e in asked["events"]] == ["UndoRequested"]
        request = asked["events"][0]["payload"]["request"]
        assert asked["events"][0]["payload"]["deadline_ms"] is not None
        view = game.turn()
        assert view["undo"]["request"]["request"] == request and view["player"] == 1 - placer
        status, accepted = game.post(f"/undo/{request}/accept", 1 - placer)
        assert status == 200, accepted
        assert [e["type"] for e in accepted["events"]] == ["UndoAccepted", "TurnUndone"]
        assert accepted["next"]["player"] == placer  # the same player, the same tile
        assert accepted["next"]["tile"] == placed["events"][0]["payload"]["tile"]
        wait_scored(redis_client, store, [game.id])
        reverted = store.read(game.id, SCORES)[-1]
        assert reverted.type == SCORE_REVERTED
        assert reverted.payload["reverted"] == scored.payload["awarded"]
        assert reverted.payload["restored"] == [1, 1]
        assert reverted.payload["totals"] == [p["score"] for p in before["players"]]

        status, after = call(query, "GET", f"/games/{game.id}/board")
        assert sorted(map(str, after["meeples"])) == sorted(map(str, before["meeples"]))
        assert after["tiles"] == before["tiles"]
        status, scores = call(query, "GET", f"/games/{game.id}/scores")
        assert [p["score"] for p in scores["players"]] == reverted.payload["totals"]
        assert [r["seq"] for r in scores["reverted"]] == [reverted.seq]

        # Placed again (the same way): scored again, and the game goes on.
        status, again = game.play(game.join.goal)
        assert status == 200, again
        wait_scored(redis_client, store, [game.id])
        events = engine_events(store, game.id)
        check_every_turn(query, game.id, events)
        status, page = call(query, "GET", f"/games/{game.id}/events?limit=1000")
        types = [i["type"] for i in page["items"]]
        assert types.count("TilePlaced") == len(game.join.moves) + 2  # nothing deleted
        assert {"UndoRequested", "UndoAccepted", "TurnUndone", SCORE_REVERTED} <= set(types)

        # The record keeps the undo, and an import of it is the same game.
        status, record = call(command, "GET", f"/games/{game.id}/record")
        assert status == 200 and {"undo": True} in record["turns"]


def test_undo_is_refused_after_the_next_placement_and_a_refusal_is_final(
    command: str, redis_client: redis.Redis, store
) -> None:
    game = Game(command, redis_client, "consent")
    placer = game.up_to_goal()
    status, _ = game.play(game.join.goal)
    assert status == 200
    status, error = game.post("/undo", 1 - placer)
    assert (status, error["code"]) == (409, "undo_not_allowed")  # not their placement
    status, error = call(command, "POST", f"/games/{game.id}/undo", None, {})
    assert (status, error["code"]) == (401, "missing_token")
    status, error = call(
        command, "POST", f"/games/{game.id}/undo", None, {"Authorization": "Bearer nope"}
    )
    assert (status, error["code"]) == (403, "bad_token")
    status, error = game.post("/undo/1/accept", 1 - placer)
    assert (status, error["code"]) == (404, "no_such_request")

    assert game.post("/undo", placer)[0] == 200
    status, error = game.post("/undo", placer)
    assert (status, error["code"]) == (409, "undo_pending")
    status, error = game.post("/undo/1/accept", placer)
    assert (status, error["code"]) == (409, "own_undo_request")
    seq = store.last_seq(game.id, MOVES)
    status, refused = game.post("/undo/1/refuse", 1 - placer)
    assert status == 200 and [e["type"] for e in refused["events"]] == ["UndoRefused"]
    status, error = game.post("/undo/1/accept", 1 - placer)
    assert (status, error["code"]) == (409, "undo_closed")
    status, error = game.post("/undo", placer)
    assert (status, error["code"]) == (409, "undo_not_allowed")
    assert store.last_seq(game.id, MOVES) == seq + 1  # refusals of refusals append nothing

    # The next player places: from then on the placement before is out of reach.
    free = Game(command, redis_client, "free")
    placer = free.up_to_goal()
    assert free.play(free.join.goal)[0] == 200
    view = free.turn()
    assert view["undo"]["may_request"] == placer
    first = view["placements"][0]
    move = {"x": first["x"], "y": first["y"], "rotation": first["rotation"], "meeple": None}
    assert free.play(move)[0] == 200
    status, error = free.post("/undo", placer)
    assert (status, error["code"]) == (409, "undo_not_allowed")
    status, error = free.post("/undo/5/refuse", placer)
    assert (status, error["code"]) == (404, "no_such_request")


def test_undo_is_refused_when_the_ruleset_has_none(command: str) -> None:
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}], "seat_order": [0, 1]}
    status, created = call(command, "POST", "/games", body, api_key(command))
    assert status == 201 and "undo" not in created["turn"]
    game_id, token = created["game_id"], created["players"][0]["token"]
    first = created["turn"]["placements"][0]
    move = {"x": first["x"], "y": first["y"], "rotation": first["rotation"], "meeple": None}
    auth = {"Authorization": f"Bearer {token}"}
    assert call(command, "POST", f"/games/{game_id}/turns", move, auth)[0] == 200
    status, error = call(command, "POST", f"/games/{game_id}/undo", None, auth)
    assert (status, error["code"]) == (422, "undo_disabled")
    bad = {**body, "ruleset": {"undo": "sometimes"}}
    status, error = call(command, "POST", "/games", bad, api_key(command))
    assert (status, error["code"]) == (422, "invalid_body")


def test_undo_with_the_worker_down_then_up(
    command: str, query: str, env: dict[str, str], redis_client: redis.Redis, store
) -> None:
    """Free undo while no worker runs: the moves wait unscored; once a worker starts, the
    score stream holds the city's FeatureScored and its ScoreReverted, totals right."""
    game = Game(command, redis_client, "free")
    placer = game.up_to_goal()
    assert game.play(game.join.goal)[0] == 200
    status, undone = game.post("/undo", placer)
    assert status == 200
    assert [e["type"] for e in undone["events"]] == ["UndoRequested", "TurnUndone"]
    status, scores = call(query, "GET", f"/games/{game.id}/scores")
    assert scores["unscored_moves"] > 0  # nobody scored yet
    with running(worker(env, "undo2")):
        wait_scored(redis_client, store, [game.id])
    stream = store.read(game.id, SCORES)
    kinds = [e.type for e in stream]
    assert kinds[-2:] == [FEATURE_SCORED, SCORE_REVERTED]
    assert stream[-1].payload["reverted"] == stream[-2].payload["awarded"]
    final = fold(engine_events(store, game.id))
    assert stream[-1].payload["totals"] == final.scores
    status, scores = call(query, "GET", f"/games/{game.id}/scores")
    assert [p["score"] for p in scores["players"]] == final.scores
    assert scores["unscored_moves"] == 0
    check_every_turn(query, game.id, engine_events(store, game.id))


def test_a_game_with_an_undo_survives_export_import_and_scoring(
    command: str, query: str, redis_client: redis.Redis
) -> None:
    """The record of a game with an undo holds `{"undo": true}`; `/v1/score` replays it (the
    timeline says `undone`) to the game's own scores; an import of it is the same game."""
    key = ApiKeys(redis_client).create("undo-tests")[1]
    game = Game(command, redis_client, "free")
    placer = game.up_to_goal()
    assert game.play(game.join.goal)[0] == 200
    assert game.post("/undo", placer)[0] == 200
    first = game.turn()["placements"][-1]
    move = {"x": first["x"], "y": first["y"], "rotation": first["rotation"], "meeple": None}
    assert game.play(move)[0] == 200
    status, record = call(command, "GET", f"/games/{game.id}/record")
    assert status == 200 and record["turns"].count({"undo": True}) == 1
    headers = {"X-Api-Key": key}
    status, scored = call(command, "POST", "/v1/score", record, headers)
    assert status == 200, scored
    assert [t["action"] for t in scored["timeline"]].count("undone") == 1
    status, board = call(query, "GET", f"/games/{game.id}/board")
    assert scored["scores_before_final"] == [p["score"] for p in board["players"]]
    status, imported = call(command, "POST", "/games/import", record, headers)
    assert status == 201, imported
    status, copy = call(query, "GET", f"/games/{imported['game_id']}/board")
    assert status == 200
    assert (copy["tiles"], copy["meeples"]) == (board["tiles"], board["meeples"])
    assert copy["turns"] == board["turns"] and copy["tiles_placed"] == board["tiles_placed"]
