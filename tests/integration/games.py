"""Games played through the command service's app (in process, on a real Redis)."""

from __future__ import annotations

import random
from typing import Any

from flask import Flask

from carcassonne.events import meeple_to_dict
from carcassonne.game import RECALL_ABBOT, actions
from tests.integration.http_client import api_key


def new_game(
    command: Flask,
    names: list[str],
    ruleset: dict[str, Any] | None = None,
    key: str | None = None,
) -> tuple[str, dict[int, str]]:
    """Create a game (seats in the order of `names`; owned by API key `key`, by default the
    tests' key on the app's Redis); its id and each seat's token."""
    body: dict[str, Any] = {
        "players": [{"name": n} for n in names],
        "seat_order": list(range(len(names))),
    }
    if ruleset:
        body["ruleset"] = ruleset
    headers = {"X-Api-Key": key} if key else api_key(command.config["REDIS_URL"])
    created = command.test_client().post("/games", json=body, headers=headers)
    assert created.status_code == 201, created.get_json()
    data = created.get_json()
    return data["game_id"], {p["seat"]: p["token"] for p in data["players"]}


def play(
    command: Flask,
    game_id: str,
    tokens: dict[int, str],
    rng: random.Random,
    turns: int | None = None,
) -> None:
    """Random legal turns through the command service (all of them by default)."""
    client, service = command.test_client(), command.extensions["game_service"]
    played = 0
    while not (state := service.load(game_id).state).over and (turns is None or played < turns):
        x, y, rotation, meeple = rng.choice(actions(state))
        body: dict[str, Any] = {"x": x, "y": y, "rotation": rotation}
        if meeple == RECALL_ABBOT:  # R9.2: the abbot taken back instead of a meeple
            body |= {"meeple": None, "recall_abbot": True}
        else:
            body["meeple"] = meeple_to_dict(meeple)
        reply = client.post(
            f"/games/{game_id}/turns",
            json=body,
            headers={"Authorization": f"Bearer {tokens[state.current]}"},
        )
        assert reply.status_code == 200, reply.get_json()
        played += 1
