"""A client generated from the published document plays a whole game (issue 15, "Proof that
it is true"): openapi-python-client (pinned) generates it at test time from the document the
command service serves, and a 3-player game is created, played from GET /turn's legal
placements with each seat's token until it is over, and read back (board, scores) — every
answer a typed model of the generated package, none a dict. One client, on the document's one
base URL: real nginx from deploy/nginx/ in front of both services (issue 33), as `make run`
serves it; installed when missing and running as root, skipped with the reason otherwise.

Generated at test time rather than checked in: the document is what must work for a new
user, and tests/integration/test_openapi.py already fails when the served document and
docs/openapi.json drift, so a checked-in client would only add a second copy to keep current.
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests import nginx as private_nginx
from tests.integration.http_client import api_key, call
from tests.stack import Stack

PACKAGE = "carcassonne_cloud_client"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def generated(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The generated client package, imported from a temporary directory."""
    root = tmp_path_factory.mktemp("client")
    status, doc = call(stack.command, "GET", "/openapi.json")
    assert status == 200
    spec = root / "openapi.json"
    spec.write_bytes(__import__("json").dumps(doc).encode())
    out = root / PACKAGE
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec),
         "--output-path", str(out), "--meta", "none"],
        check=True, capture_output=True, timeout=120, env=env,
    )  # fmt: skip
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def public(stack: Stack) -> Iterator[str]:
    """The API's one base URL: nginx in front of the suite's command and query services."""
    binary, why = private_nginx.find_nginx()
    if binary is None:
        pytest.skip(why)
    upstreams = {"command": stack.command, "query": stack.query}
    with private_nginx.nginx({k: v.removeprefix("http://") for k, v in upstreams.items()}) as ng:
        yield ng["public"]


def _module(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{name}")


def test_a_generated_client_plays_a_three_player_game(
    generated: ModuleType, public: str, stack: Stack
) -> None:
    models = _module("models")
    games = {
        op: _module(f"api.games.{op}")
        for op in ("create_game", "get_turn", "play_turn", "get_board", "get_scores")
    }
    # Any status the document does not list raises (errors.UnexpectedStatus). The platform's
    # server creates the game with its API key.
    client = generated.Client(
        base_url=public, raise_on_unexpected_status=True, headers=api_key(stack.command)
    )

    names = ["ann", "bob", "cy"]
    body = models.CreateGameIn(
        players=[models.PlayerIn(name=n, player_id=f"u-{n}") for n in names],
        seat_order=[2, 0, 1],
    )
    created = games["create_game"].sync(client=client, body=body)
    assert isinstance(created, models.CreatedGame), created
    game_id = created.game_id
    assert [(s.seat, s.name, s.player_index) for s in created.players] == [
        (0, "cy", 2),
        (1, "ann", 0),
        (2, "bob", 1),
    ]
    seats = {
        s.seat: generated.AuthenticatedClient(
            base_url=public, token=s.token, raise_on_unexpected_status=True
        )
        for s in created.players
    }

    rng = random.Random(3)
    placed = 0
    for _ in range(200):  # bounded: 72 tiles
        view = games["get_turn"].sync(game_id, client=client)
        assert isinstance(view, models.TurnView), view
        if view.over:
            break
        assert view.player_name == created.players[view.player].name
        place = rng.choice(view.placements)
        assert isinstance(place, models.Placement)
        spot = rng.choice([None, *place.meeples])
        turn = models.TurnIn(
            x=place.x,
            y=place.y,
            rotation=place.rotation,
            meeple=None if spot is None else models.MeepleIn.from_dict(spot.to_dict()),
        )
        result = games["play_turn"].sync(
            game_id, client=seats[view.player], body=turn, if_match=f'"m{view.seq}"'
        )
        assert isinstance(result, models.TurnResult), result
        assert result.seq > view.seq and isinstance(result.next_, models.Next)
        placed += 1
    else:
        raise AssertionError("the game did not end")
    assert placed > 20 and view.player is None and view.placements == []

    # A seat that is not to move is refused, in the error model, with its stable code.
    late = games["play_turn"].sync(game_id, client=seats[0], body=turn)
    assert isinstance(late, models.Error) and late.code == "game_over"

    board = games["get_board"].sync(game_id, client=client)
    assert isinstance(board, models.Board), board
    assert board.over and board.game_id == game_id
    assert len(board.tiles) == placed + 1  # and the start tile
    assert all(isinstance(t, models.PlacedTile) for t in board.tiles)
    assert [(p.seat, p.name, p.player_id) for p in board.players] == [
        (0, "cy", "u-cy"),
        (1, "ann", "u-ann"),
        (2, "bob", "u-bob"),
    ]

    deadline = time.monotonic() + 60
    while True:  # the scoring worker scores the end of the game shortly after it
        scores = games["get_scores"].sync(game_id, client=client)
        assert isinstance(scores, models.Scores), scores
        if scores.over and scores.unscored_moves == 0 and scores.result is not None:
            break
        assert time.monotonic() < deadline, "the game was not scored"
        time.sleep(0.05)
    assert isinstance(scores.result, models.GameResult)
    assert all(isinstance(p, models.ScoreSeat) for p in scores.players)
    final = scores.result.final_scores
    assert final == [p.score for p in scores.players] == [p.score for p in board.players]
    assert final == view.scores  # the command service's last turn view agrees
    assert sum(final) > 0 and all(isinstance(e, models.StoredScore) for e in scores.events)
    assert [p.name for p in scores.players] == ["cy", "ann", "bob"]
