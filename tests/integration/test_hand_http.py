"""R10.3 three-tile hand over HTTP (in process, on a real Redis): the ruleset key, each seat's
own hand behind its token, the turn naming its tile, stable refusals, and nothing of a hand
in any public view before the end (docs/rules.md, "R10.3 three-tile hand")."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from flask import Flask

from carcassonne.events import event_from_dict
from carcassonne.hand import verify
from carcassonne.record import load_record, replay
from carcassonne.state import GameState
from eventstore.schemas import to_engine
from services.command.app import create_app as create_command_app
from services.query.app import create_app as create_query_app
from tests.integration.games import new_game
from tests.integration.http_client import api_key

HAND = {"hand": 3, "farmers": False}


@pytest.fixture(scope="module")
def command(redis_url: str) -> Flask:
    return create_command_app({"REDIS_URL": redis_url, "BROKER_URL": redis_url})


@pytest.fixture(scope="module")
def query(redis_url: str) -> Flask:
    return create_query_app({"REDIS_URL": redis_url})


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("ruleset", "code"),
    [
        ({"hand": 2}, "invalid_body"),
        ({"hand": "3"}, "invalid_body"),
        ({"hand": 3, "river": True}, "hand_with_river"),
        ({"hand": 3, "abbot": True}, "hand_with_abbot"),
        ({"hand": 3, "turn_seconds": 60}, "hand_with_turn_limit"),
        ({"hand": 3, "undo": "consent"}, "hand_with_undo"),
    ],
)
def test_bad_hand_rulesets_are_refused(command: Flask, ruleset: dict[str, Any], code: str) -> None:
    players = [{"name": "ann"}, {"name": "bob"}]
    owner = api_key(command.config["REDIS_URL"])
    reply = command.test_client().post(
        "/games", json={"players": players, "ruleset": ruleset}, headers=owner
    )
    assert reply.status_code == 422, reply.get_json()
    assert reply.get_json()["code"] == code


def test_each_seat_sees_its_own_hand_only_and_plays_from_it(command: Flask) -> None:
    """R10.3: seat 0 holds three tiles at once; `/hand` with seat 1's token shows seat 1's
    (empty until its turn), never seat 0's; a turn without `tile` or with a tile not held is
    refused (422 tile_required, tile_not_in_hand); a game without a hand answers 409 no_hand."""
    client = command.test_client()
    game_id, tokens = new_game(command, ["ann", "bob"], HAND)
    mine = client.get(f"/games/{game_id}/hand", headers=auth(tokens[0]))
    assert mine.status_code == 200 and mine.headers["Cache-Control"] == "private, no-store"
    view = mine.get_json()
    assert view["player"] == 0 and len(view["hand"]) == 3 and view["to_move"] is True
    assert {p["tile"] for p in view["placements"]} <= set(view["hand"])
    theirs = client.get(f"/games/{game_id}/hand", headers=auth(tokens[1])).get_json()
    assert theirs["player"] == 1 and theirs["hand"] == [] and theirs["placements"] == []
    turn = client.get(f"/games/{game_id}/turn").get_json()
    assert turn["tile"] is None and turn["placements"] == [] and turn["hand_sizes"] == [3, 0]
    assert "hands" not in turn
    assert client.get(f"/games/{game_id}/hand").status_code == 401
    assert client.get(f"/games/{game_id}/hand", headers=auth("nope")).status_code == 403
    pick = view["placements"][0]
    body = {k: pick[k] for k in ("x", "y", "rotation")}
    refused = client.post(f"/games/{game_id}/turns", json=body, headers=auth(tokens[0]))
    assert (refused.status_code, refused.get_json()["code"]) == (422, "tile_required")
    absent = next(t for t in "ABCDEFGHIJKLMNOPQRSTUVWX" if t not in view["hand"])
    refused = client.post(
        f"/games/{game_id}/turns", json={**body, "tile": absent}, headers=auth(tokens[0])
    )
    assert (refused.status_code, refused.get_json()["code"]) == (422, "tile_not_in_hand")
    assert refused.get_json()["rule"] == "R10.3"
    played = client.post(
        f"/games/{game_id}/turns", json={**body, "tile": pick["tile"]}, headers=auth(tokens[0])
    )
    assert played.status_code == 200, played.get_json()
    after = client.get(f"/games/{game_id}/hand", headers=auth(tokens[0])).get_json()
    rest = list(view["hand"])
    rest.remove(pick["tile"])
    assert after["hand"] == rest and after["to_move"] is False
    plain, plain_tokens = new_game(command, ["ann", "bob"])
    no_hand = client.get(f"/games/{plain}/hand", headers=auth(plain_tokens[0]))
    assert (no_hand.status_code, no_hand.get_json()["code"]) == (409, "no_hand")


def play_hand_game(command: Flask, game_id: str, tokens: dict[int, str], seed: int) -> list[dict]:
    """Random legal hand turns through `/hand` and `/turns` until the end; each seat's hand
    as its own view showed it before each of its turns."""
    client = command.test_client()
    rng = random.Random(seed)
    seen: list[dict] = []
    for _ in range(200):
        turn = client.get(f"/games/{game_id}/turn").get_json()
        if turn["over"]:
            return seen
        seat = turn["player"]
        view = client.get(f"/games/{game_id}/hand", headers=auth(tokens[seat])).get_json()
        seen.append(view)
        pick = rng.choice(view["placements"])
        meeples = pick["meeples"]
        body = {
            "tile": pick["tile"],
            "x": pick["x"],
            "y": pick["y"],
            "rotation": pick["rotation"],
            "meeple": rng.choice([None, *meeples]) if meeples else None,
        }
        reply = client.post(f"/games/{game_id}/turns", json=body, headers=auth(tokens[seat]))
        assert reply.status_code == 200, reply.get_json()
    raise AssertionError("the hand game did not end")


def test_a_whole_hand_game_keeps_hands_out_of_public_views_until_the_end(
    command: Flask, query: Flask
) -> None:
    """R10.3 over HTTP: a whole 2-player hand game on a 5x5 table. Before the end neither
    `/events`, the board, nor the turn view names a tile before it is played; the stored
    draws are commitments. After the end the turn view shows every hand, the log verifies,
    and the exported record replays to the same scores."""
    game_id, tokens = new_game(command, ["ann", "bob"], {**HAND, "area": {"width": 5, "height": 5}})
    qc, cc = query.test_client(), command.test_client()
    views = play_hand_game(command, game_id, tokens, 5)
    assert views
    service = command.extensions["game_service"]
    stored = service.store.read(game_id, "moves")
    assert all(set(e.payload) == {"player", "commitment"} for e in stored if e.type == "HandDrawn")
    events = qc.get(f"/games/{game_id}/events").get_json()
    assert verify([to_engine(e) for e in stored]) == []
    over = cc.get(f"/games/{game_id}/turn").get_json()
    assert over["over"] is True and len(over["hands"]) == 2
    record = cc.get(f"/games/{game_id}/record").get_json()
    assert record["ruleset"]["hand"] == 3 and len(record["draws"]) >= 1
    scores = qc.get(f"/games/{game_id}/scores").get_json()
    assert replay(load_record(record)).scores == over["scores"]
    # Replay after the end shows every hand at every turn, as each seat's view showed it.
    for turn, view in enumerate(views, start=0):
        board = qc.get(f"/games/{game_id}/board?turn={turn}").get_json()
        assert None not in [tile for hand in board["hands"] for tile in hand]
        assert sorted(board["hands"][view["player"]]) == sorted(view["hand"])
    assert json.dumps(events)  # served
    assert scores


def test_public_views_before_the_end_never_name_a_held_tile(command: Flask, query: Flask) -> None:
    """R10.3: mid-game, every tile in a hand is absent from `/events`, the board and the turn
    view: the only tile names there are those of played or discarded tiles (each with the
    nonce that opens its commitment)."""
    game_id, tokens = new_game(command, ["ann", "bob"], HAND)
    client, qc = command.test_client(), query.test_client()
    rng = random.Random(9)
    for _ in range(6):
        turn = client.get(f"/games/{game_id}/turn").get_json()
        seat = turn["player"]
        view = client.get(f"/games/{game_id}/hand", headers=auth(tokens[seat])).get_json()
        pick = rng.choice(view["placements"])
        body = {k: pick[k] for k in ("tile", "x", "y", "rotation")}
        assert client.post(f"/games/{game_id}/turns", json=body, headers=auth(tokens[seat]))
    events = qc.get(f"/games/{game_id}/events?limit=1000").get_json()
    board = qc.get(f"/games/{game_id}/board").get_json()
    turn = client.get(f"/games/{game_id}/turn").get_json()
    assert "hands" not in turn and turn["tile"] is None and turn["placements"] == []
    # A fold of the public log knows how many tiles each seat holds, never which.
    public = GameState()
    for item in events["items"]:
        if item["stream"] != "moves":
            continue
        if item["type"] == "HandDrawn":
            assert set(item["payload"]) == {"player", "commitment"}
        public.apply(event_from_dict({"type": item["type"], **item["payload"]}))
    assert public.hand_lists() == [[None] * n for n in turn["hand_sizes"]]
    assert board["hands"] == public.hand_lists()  # the board view: sizes, no tile
    held = []
    for seat in (0, 1):
        hand = client.get(f"/games/{game_id}/hand", headers=auth(tokens[seat])).get_json()
        assert len(hand["hand"]) == turn["hand_sizes"][seat]
        held += hand["hand"]
    # The board shows placed tiles only: as many as were played, none of them held.
    placed = [item for item in events["items"] if item["type"] == "TilePlaced"]
    assert len(board["tiles"]) == len(placed) + 1
    assert all("nonce" in item["payload"] for item in placed)  # each opened its commitment
    assert len(held) == sum(turn["hand_sizes"]) > 0
