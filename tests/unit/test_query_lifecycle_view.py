"""The board view's lifecycle facts, which the viewer shows (docs/viewer.md): each seat's
timed-out turns, why it is out, whether the computer plays it, and whether a `?turn=`
shows a placement that was taken back later (docs/lifecycle.md, docs/undo.md)."""

from __future__ import annotations

import json

from eventstore.port import InMemoryEventStore
from services.query.directory import _bots
from services.query.projector import Projector
from services.query.views import board_etag, board_view
from tests.lifecycle_games import RESIGNED_SEAT, TIMED_OUT_SEAT, UNDONE_TURN, lifecycle_game

from .test_query_games import store_game

GREEDY = {"level": "greedy", "think_ms": 1000}


def projector(bots: list[dict[str, object] | None] | None = None) -> Projector:
    store = InMemoryEventStore()
    store_game(store, "g", lifecycle_game()[1])
    return Projector(store, bots=None if bots is None else (lambda _: bots))


def test_the_board_view_says_who_is_out_why_and_each_seats_timed_out_turns() -> None:
    view = board_view(projector().current("g"))
    assert view["status"] == "abandoned" and view["over"]
    assert [p["out"] for p in view["players"]] == [None, "resigned", "timed_out", None]
    assert [p["timeouts"] for p in view["players"]] == [0, 0, 2, 0]
    assert view["players"][RESIGNED_SEAT]["out"] == "resigned"
    # Before the first timeout (turn 1) nobody had timed out; turn 2 shows it (every move up
    # to the next placement's draw), still in; turn 5 the second, out, and the resignation.
    game = projector()
    before = board_view(game.position("g", turn=1))
    assert [p["timeouts"] for p in before["players"]] == [0, 0, 0, 0]
    first = board_view(game.position("g", turn=2))
    assert [p["timeouts"] for p in first["players"]] == [0, 0, 1, 0]
    assert [p["out"] for p in first["players"]] == [None] * 4
    second = board_view(game.position("g", turn=5))
    assert second["players"][TIMED_OUT_SEAT]["timeouts"] == 2
    assert [p["out"] for p in second["players"]] == [None, "resigned", "timed_out", None]


def test_a_turn_whose_placement_was_undone_says_so() -> None:
    game = projector()
    undone = game.position("g", turn=UNDONE_TURN)
    view = board_view(undone)
    assert view["undone"] is True
    assert view["undo"] is not None and view["undo"]["player"] == 0
    assert view["tiles_placed"] == UNDONE_TURN  # the undone tile stands in its own turn
    assert view["turns"] == UNDONE_TURN
    again = board_view(game.position("g", turn=UNDONE_TURN + 1))
    assert again["undone"] is False and again["tiles_placed"] == UNDONE_TURN
    assert not any(board_view(game.position("g", turn=t))["undone"] for t in (0, 1, 2, 3, 5, 7))
    assert board_view(game.current("g"))["undone"] is False
    # The same move read by `?at=` is no undone turn: the two never share an ETag.
    by_move = game.position("g", at=undone.seq)
    assert board_view(by_move)["undone"] is False
    assert board_etag(by_move) != board_etag(undone)


def test_bot_seats_come_from_the_directory() -> None:
    bots = [None, GREEDY, None, None]
    view = board_view(projector(bots).current("g"))
    assert [p["bot"] for p in view["players"]] == bots
    past = board_view(projector(bots).position("g", turn=2))
    assert [p["bot"] for p in past["players"]] == bots
    assert [p["bot"] for p in board_view(projector().current("g"))["players"]] == [None] * 4


def test_the_directory_reads_only_the_bots_of_a_secrets_record() -> None:
    record = {
        "seed": "s",
        "names": ["Ann", "Robo"],
        "tokens": {"h": 0},
        "bots": [None, {"level": "mcts", "think_ms": 500}],
    }
    assert _bots(json.dumps(record)) == [None, {"level": "mcts", "think_ms": 500}]
    assert _bots(json.dumps({"names": ["Ann", "Bob"]})) == [None, None]  # no bot seat
    assert _bots(None) is None and _bots(b"not json") is None
