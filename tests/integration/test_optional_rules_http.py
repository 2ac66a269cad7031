"""The optional rules over HTTP (issue 18): the command service takes the new ruleset keys,
refuses bad combinations with stable codes, and plays the abbot (placed, and taken back)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from flask import Flask

from carcassonne.events import meeple_to_dict
from carcassonne.game import RECALL_ABBOT, actions
from services.command.app import create_app as create_command_app
from tests.integration.games import new_game
from tests.integration.http_client import api_key


@pytest.fixture(scope="module")
def command(redis_url: str) -> Flask:
    return create_command_app({"REDIS_URL": redis_url, "BROKER_URL": redis_url})


PLAYERS = [{"name": "ann"}, {"name": "bob"}]


@pytest.mark.parametrize(
    ("ruleset", "code"),
    [
        ({"tileset": "demo", "tile_edition": "2nd"}, "edition_not_in_tileset"),  # R1.2
        ({"area": {"width": 2, "height": 9, "border_closes": True}}, "border_area_too_small"),
        ({"tile_edition": "3rd"}, "invalid_body"),
        ({"abbot": 1}, "invalid_body"),
        ({"river": "yes"}, "invalid_body"),
        ({"hand": 2}, "invalid_body"),  # R10.3: a hand holds 1 or 3 tiles
    ],
)
def test_bad_rulesets_are_refused(command: Flask, ruleset: dict[str, Any], code: str) -> None:
    owner = api_key(command.config["REDIS_URL"])
    reply = command.test_client().post(
        "/games", json={"players": PLAYERS, "ruleset": ruleset}, headers=owner
    )
    assert reply.status_code == 422, reply.get_json()
    assert reply.get_json()["code"] == code


def post_turn(command: Flask, game_id: str, token: str, body: dict[str, Any]) -> Any:
    return command.test_client().post(
        f"/games/{game_id}/turns", json=body, headers={"Authorization": f"Bearer {token}"}
    )


def test_the_abbot_is_placed_and_taken_back_over_http(command: Flask) -> None:
    """R9.2: the turn view offers the abbot, then (with it out) taking it back; a turn with both
    a meeple and recall_abbot is refused; the recall appends AbbotRecalled and scores."""
    game_id, tokens = new_game(command, ["ann", "bob"], {"abbot": True, "tile_edition": "2nd"})
    service = command.extensions["game_service"]
    client = command.test_client()
    rng = random.Random(3)
    recalled = False
    for _ in range(80):
        state = service.load(game_id).state
        if state.over:
            break
        choices = actions(state)
        player = state.current
        token = tokens[player]
        abbots = [a for a in choices if a[3] is not None and a[3] != RECALL_ABBOT and a[3].abbot]
        recalls = [a for a in choices if a[3] == RECALL_ABBOT]
        if recalls:
            view = client.get(f"/games/{game_id}/turn").get_json()
            marked = {
                (p["x"], p["y"], p["rotation"]) for p in view["placements"] if "recall_abbot" in p
            }
            assert marked == {(x, y, r) for x, y, r, _ in recalls}
            x, y, rotation, _ = recalls[0]
            place = {"x": x, "y": y, "rotation": rotation}
            road = {"feature": "road", "edge": "N"}
            bad = post_turn(
                command, game_id, token, {**place, "meeple": road, "recall_abbot": True}
            )
            assert (bad.status_code, bad.get_json()["code"]) == (422, "recall_with_meeple")
            before = state.scores[player]
            reply = post_turn(command, game_id, token, {**place, "recall_abbot": True})
            assert reply.status_code == 200, reply.get_json()
            after = service.load(game_id).state
            assert after.abbots[player] and after.scores[player] > before  # R9.2: scored at once
            recalled = True
            break
        x, y, rotation, meeple = abbots[0] if abbots else rng.choice(choices)
        if abbots:
            view = client.get(f"/games/{game_id}/turn").get_json()
            offered = [m for p in view["placements"] for m in p["meeples"] if m.get("abbot")]
            assert offered, "the turn view offers the abbot"
        body = {"x": x, "y": y, "rotation": rotation, "meeple": meeple_to_dict(meeple)}
        reply = post_turn(command, game_id, token, body)
        assert reply.status_code == 200, reply.get_json()
    assert recalled, "the game never offered taking the abbot back"
    record = client.get(f"/games/{game_id}/record").get_json()
    assert record["ruleset"]["abbot"] is True and record["ruleset"]["tile_edition"] == "2nd"
    assert [t for t in record["turns"] if t.get("recall_abbot")] == [
        {"tile": record["turns"][-1]["tile"], "x": x, "y": y, "rotation": rotation,
         "meeple": None, "recall_abbot": True}
    ]  # fmt: skip
