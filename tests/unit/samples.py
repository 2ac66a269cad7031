"""Fixtures shared by the unit tests: the README's example record and a state fingerprint."""

from __future__ import annotations

import json
from typing import Any

from carcassonne.state import GameState

# The README's example game (scores 0 / 1), as JSON and in notation.
README_RECORD: dict[str, Any] = {
    "format": "carcassonne-record/1",
    "ruleset": {
        "tileset": "base", "farmers": True, "farm_scoring": "3rd", "incomplete_score": True,
    },
    "players": 2,
    "start": {"tile": "D", "x": 0, "y": 0, "rotation": 0},
    "turns": [
        {"tile": "Q", "x": 0, "y": -1, "rotation": 1, "meeple": None},
        {"tile": "I", "x": 0, "y": 1, "rotation": 2, "meeple": {"feature": "city", "edge": "E"}},
        {
            "tile": "E", "x": -1, "y": -1, "rotation": 2,
            "meeple": {"feature": "field", "half_edge": "NNW"},
        },
    ],
}  # fmt: skip
README_NOTATION = (
    "carcassonne-record/1 base players=2 farmers=on farm=3rd incomplete=on\n"
    "Q1@0,-1 I2@0,1:E E2@-1,-1:NNW\n"
)


def fingerprint(state: GameState) -> tuple[Any, ...]:
    """Snapshot plus the board internals it leaves out (open edges, done flags, frontier)."""
    board = state.board
    feats = sorted(
        (f.kind, tuple(sorted(f.tiles)), f.open, f.pennants, tuple(sorted(f.meeples)), f.done)
        for f in board.feats
        if f is not None
    )
    return (
        json.dumps(state.snapshot(), sort_keys=True, default=list),
        feats,
        sorted(board.frontier.items()),
        sorted(board.monasteries.items()),
        state.next_meeple,
        state.drawn_count,
        state.bag_size,
        state.phase,
    )
