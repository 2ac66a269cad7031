"""R10.3 three-tile hand on the real stack: the command and query services under gunicorn, a
real Redis and a real Celery scoring worker. Each seat's `/hand` (its token) shows exactly
its own hand; the opponents' views, the board, `/events` and `/live` never name a held tile
before the end; after the end everything is public and the log replays every hand."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.events import TilePlaced, event_from_dict
from carcassonne.game import hand_of
from carcassonne.hand import verify
from carcassonne.record import load_record, record_events
from carcassonne.state import GameState
from services.redis_store import RedisEventStore

from .http_client import api_key, call, gunicorn
from .test_query_live import collect, ends, env  # env: a real Celery scoring worker
from .workers import wait_scored

__all__ = ["env"]  # the fixture, imported to be used here


@pytest.fixture(scope="module")
def command(env: dict[str, str]) -> Iterator[str]:
    settings = {"REDIS_URL": env["REDIS_URL"], "BROKER_URL": env["BROKER_URL"]}
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", settings, 2) as base:
        yield base


@pytest.fixture(scope="module")
def query(env: dict[str, str]) -> Iterator[str]:
    settings = {
        "REDIS_URL": env["REDIS_URL"],
        "SSE_MAX_SECONDS": "2",
        "SSE_HEARTBEAT_SECONDS": "0.3",
    }
    with gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", settings, 1) as base:
        yield base


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def public_fold(items: list[dict[str, Any]]) -> GameState:
    """The state a stranger folds from the public move events (a hand's tiles unknown)."""
    state = GameState()
    for item in items:
        if item.get("stream", "moves") == "moves":
            state.apply(event_from_dict({"type": item["type"], **item["payload"]}))
    return state


def test_a_hand_game_on_the_real_stack_hides_each_hand_until_the_end(
    env: dict[str, str], command: str, query: str
) -> None:
    body = {
        "players": [{"name": "ann"}, {"name": "bob"}],
        "seat_order": [0, 1],
        "ruleset": {"hand": 3, "area": {"width": 5, "height": 5}},
    }
    status, created = call(command, "POST", "/games", body, api_key(command))
    assert status == 201, created
    game_id = created["game_id"]
    tokens = {p["seat"]: p["token"] for p in created["players"]}
    rng = random.Random(18)
    seen: list[tuple[list[str], list[str]]] = []  # per turn: (mover's hand, other's hand)
    store = RedisEventStore(redis.Redis.from_url(env["REDIS_URL"]))
    checked_live = False
    for _ in range(100):
        status, turn = call(command, "GET", f"/games/{game_id}/turn")
        assert status == 200
        if turn["over"]:
            break
        seat = turn["player"]
        assert turn["tile"] is None and turn["placements"] == [] and "hands" not in turn
        _, mine = call(command, "GET", f"/games/{game_id}/hand", headers=auth(tokens[seat]))
        _, other = call(command, "GET", f"/games/{game_id}/hand", headers=auth(tokens[1 - seat]))
        assert mine["player"] == seat and other["player"] == 1 - seat
        assert other["to_move"] is False and other["placements"] == []
        assert len(mine["hand"]) == turn["hand_sizes"][seat]
        assert len(other["hand"]) == turn["hand_sizes"][1 - seat]
        seen.append((mine["hand"], other["hand"]))
        if len(seen) == 4 and not checked_live:
            # Mid-game: /live, /events and the board say how many tiles each seat holds,
            # never which (a fold of the public moves knows no held tile).
            wait_scored(redis.Redis.from_url(env["REDIS_URL"]), store, [game_id])
            live, _ = collect(query, game_id, "0-0", ends(store, game_id))
            _, page = call(query, "GET", f"/games/{game_id}/events?limit=1000")
            _, board = call(query, "GET", f"/games/{game_id}/board")
            for items in (live, page["items"]):
                for item in items:
                    if item["type"] == "HandDrawn":
                        assert set(item["payload"]) == {"player", "commitment"}
                folded = public_fold(items)
                assert folded.hand_lists() == [[None] * n for n in turn["hand_sizes"]]
            placed = [i for i in page["items"] if i["type"] == "TilePlaced"]
            assert len(board["tiles"]) == len(placed) + 1
            checked_live = True
        pick = rng.choice(mine["placements"])
        move = {k: pick[k] for k in ("tile", "x", "y", "rotation")}
        move["meeple"] = rng.choice([None, *pick["meeples"]]) if pick["meeples"] else None
        status, result = call(
            command, "POST", f"/games/{game_id}/turns", move, headers=auth(tokens[seat])
        )
        assert status == 200, result
    assert turn["over"] and checked_live
    # After the end: every hand is public, the log verifies and replays every hand as shown.
    assert len(turn["hands"]) == 2 and turn["seed"]
    wait_scored(redis.Redis.from_url(env["REDIS_URL"]), store, [game_id])
    _, page = call(query, "GET", f"/games/{game_id}/events?limit=1000")
    moves = [event_from_dict({"type": i["type"], **i["payload"]}) for i in page["items"]
             if i["stream"] == "moves"]  # fmt: skip
    assert verify(moves) == []
    assert public_fold(page["items"]).hand_lists() == turn["hands"]
    live, _ = collect(query, game_id, "0-0", ends(store, game_id))
    assert [i["type"] for i in live if i["type"] == "HandsRevealed"] == ["HandsRevealed"]
    _, record = call(command, "GET", f"/games/{game_id}/record")
    # Replayed from the record (its draws), each turn's hands are the ones the seats' own
    # views showed just before it: the mover's and the other seat's, both exactly.
    state = GameState()
    replayed: list[tuple[list[str], list[str]]] = []
    for event in record_events(load_record(record)):
        if isinstance(event, TilePlaced):
            replayed.append((hand_of(state, event.player), hand_of(state, 1 - event.player)))
        state.apply(event)
    assert replayed == seen
    assert state.scores == turn["scores"] and state.hand_lists() == turn["hands"]
