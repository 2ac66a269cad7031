"""Examples for the OpenAPI document (tools/openapi.py): real requests and answers,
captured from a 2-player game played on the services (3 turns; lists shortened), so each is
what a client sees. tests/integration/test_openapi.py validates every example against its
schema, and schemathesis sends the request examples to the services (tests/contract).
"""

from __future__ import annotations

from typing import Any

from carcassonne.catalog import catalog_index, tileset_catalog

_base_catalog: dict[str, Any] = tileset_catalog("base") or {}

CREATE_GAME: dict[str, Any] = {
    "players": [{"name": "Ann", "player_id": "user-1042"}, {"name": "Bob"}],
    "seat_order": [0, 1],
    "ruleset": {"tileset": "base", "farmers": True},
}

CREATED_GAME: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "players": [
        {
            "name": "Ann",
            "player_id": "user-1042",
            "player_index": 0,
            "seat": 0,
            "token": "tAs-MnB8Q8geqOhqIE4CY-yxzrHxBG_S",
        },
        {"name": "Bob", "player_index": 1, "seat": 1, "token": "N-x_BS0wiXxvUiUjkwqY4jeAskIOJO_c"},
    ],
    "turn": {
        "game_id": "ef0ab9789b8f034882fd9142e91879d5",
        "over": False,
        "placements": [
            {
                "meeples": [
                    {"edge": "E", "feature": "road"},
                    {"feature": "field", "half_edge": "NNW"},
                    {"feature": "field", "half_edge": "ESE"},
                ],
                "rotation": 0,
                "x": 1,
                "y": 0,
            },
            {
                "meeples": [
                    {"edge": "E", "feature": "road"},
                    {"feature": "field", "half_edge": "ESE"},
                    {"feature": "field", "half_edge": "NNW"},
                ],
                "rotation": 2,
                "x": 1,
                "y": 0,
            },
        ],
        "player": 0,
        "player_name": "Ann",
        "scores": [0, 0],
        "seq": 2,
        "supply": [7, 7],
        "tile": "U",
        "tiles_left": 70,
        "deadline_ms": 1_795_000_060_000,
        "out": [None, None],
        "taken_over": [None, None],
        "status": "in_progress",
    },
}

HINT: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seq": 8,
    "player": 1,
    "tile": "E",
    "level": "greedy",
    "x": 1,
    "y": 0,
    "rotation": 1,
    "meeple": {"feature": "city", "edge": "E"},
    "value": 4.25,
    "playouts": 0,
    "think_ms": 150,
}

HINT_PENDING: dict[str, Any] = {
    "status": "pending",
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seq": 8,
    "player": 1,
    "level": "mcts",
    "think_ms": 500,
    "retry_after_ms": 480,
}

HAND: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seq": 9,
    "player": 0,
    "hand": ["E", "V", "U"],
    "to_move": True,
    "placements": [
        {"tile": "E", "x": 0, "y": -1, "rotation": 2, "meeples": [{"feature": "city", "edge": "S"}]}
    ],
}

TURN_VIEW: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seq": 8,
    "over": False,
    "player": 1,
    "player_name": "Bob",
    "tile": "E",
    "tiles_left": 67,
    "scores": [0, 0],
    "supply": [5, 6],
    "deadline_ms": 1_795_000_060_000,
    "out": [None, None],
    "taken_over": [None, None],
    "status": "in_progress",
    "placements": [
        {
            "x": 1,
            "y": -1,
            "rotation": 0,
            "meeples": [{"feature": "city", "edge": "N"}, {"feature": "field", "half_edge": "ENE"}],
        },
        {
            "x": 1,
            "y": -1,
            "rotation": 1,
            "meeples": [{"feature": "city", "edge": "E"}, {"feature": "field", "half_edge": "NNW"}],
        },
        {
            "x": 1,
            "y": 1,
            "rotation": 1,
            "meeples": [{"feature": "city", "edge": "E"}, {"feature": "field", "half_edge": "NNW"}],
        },
    ],
}

TURN: dict[str, Any] = {"x": 0, "y": 1, "rotation": 0, "meeple": {"feature": "road", "edge": "S"}}

TURN_RESULT: dict[str, Any] = {
    "seq": 8,
    "replayed": False,
    "events": [
        {
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "stream": "moves",
            "seq": 7,
            "type": "TilePlaced",
            "version": 3,
            "time_ms": 1795459614940,
            "command_id": "f81bc8d683304b4b8ff26432b616ad8a",
            "payload": {
                "player": 0,
                "tile": "V",
                "x": 0,
                "y": 1,
                "rotation": 0,
                "meeple": {"feature": "road", "edge": "S"},
            },
        },
        {
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "stream": "moves",
            "seq": 8,
            "type": "TileDrawn",
            "version": 1,
            "time_ms": 1795459614940,
            "command_id": "f81bc8d683304b4b8ff26432b616ad8a",
            "payload": {"tile": "E"},
        },
    ],
    "next": {"over": False, "player": 1, "tile": "E", "tiles_left": 67},
}

REISSUED_TOKEN: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seat": 1,
    "token": "q3RJ2b1xW0v9kLx8m6cY1n0pZa7TtE4u",
    "seq": 12,
}

RESIGN_RESULT: dict[str, Any] = {
    "seq": 9,
    "replayed": False,
    "events": [
        {
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "stream": "moves",
            "seq": 9,
            "type": "PlayerResigned",
            "version": 1,
            "time_ms": 1795459620112,
            "command_id": "resign:1",
            "payload": {"player": 1},
        },
        {
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "stream": "moves",
            "seq": 10,
            "type": "GameEnded",
            "version": 1,
            "time_ms": 1795459620112,
            "command_id": "resign:1",
            "payload": {"reason": "fewer than two players left"},
        },
    ],
    "next": {"over": True, "player": None, "tile": None, "scores": [9, 4]},
}

# A free undo (ruleset undo: free) of the placement in TURN_RESULT: the same player holds the
# same tile again; the draw made after it is put back and will come out again.
UNDO_RESULT: dict[str, Any] = {
    "seq": 10,
    "replayed": False,
    "events": [
        {
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "stream": "moves",
            "seq": 9,
            "type": "UndoRequested",
            "version": 1,
            "time_ms": 1795459615902,
            "command_id": "5d1c0e9a2b7f4c44a0e3c8f1d2b6a913",
            "payload": {"request": 1, "player": 0, "deadline_ms": None},
        },
        {
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "stream": "moves",
            "seq": 10,
            "type": "TurnUndone",
            "version": 1,
            "time_ms": 1795459615902,
            "command_id": "5d1c0e9a2b7f4c44a0e3c8f1d2b6a913",
            "payload": {
                "request": 1,
                "player": 0,
                "tile": "V",
                "x": 0,
                "y": 1,
                "rotation": 0,
                "deadline_ms": None,
            },
        },
    ],
    "next": {"over": False, "player": 0, "tile": "V", "tiles_left": 68},
}

BOARD: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seq": 8,
    "phase": "place",
    "over": False,
    "status": "in_progress",
    "ruleset": {
        "tileset": "base",
        "farmers": True,
        "farm_scoring": "3rd",
        "incomplete_score": True,
    },
    "players": [
        {
            "seat": 0,
            "name": "Ann",
            "player_id": "user-1042",
            "score": 0,
            "supply": 5,
            "out": None,
            "taken_over": None,
            "timeouts": 0,
            "bot": None,
        },
        {
            "seat": 1,
            "name": "Bob",
            "player_id": None,
            "score": 0,
            "supply": 6,
            "out": None,
            "taken_over": None,
            "timeouts": 1,
            "bot": {"level": "greedy", "think_ms": 1000},
        },
    ],
    "turn": {"player": 1, "name": "Bob", "tile": "E", "deadline_ms": 1_795_000_060_000},
    "tiles_placed": 3,
    "turns": 3,
    "undo": None,
    "undone": False,
    "tiles_left": 67,
    "discarded": [],
    "tiles": [
        {"tile": "D", "x": 0, "y": 0, "rotation": 0},
        {"tile": "U", "x": 1, "y": 0, "rotation": 0},
        {"tile": "H", "x": 0, "y": -1, "rotation": 0},
        {"tile": "V", "x": 0, "y": 1, "rotation": 0},
    ],
    "meeples": [
        {"player": 0, "x": 1, "y": 0, "feature": "road", "spot": "E"},
        {"player": 1, "x": 0, "y": -1, "feature": "city", "spot": "N"},
        {"player": 0, "x": 0, "y": 1, "feature": "road", "spot": "S"},
    ],
    "open_features": [
        {
            "kind": "road",
            "tiles": [[0, 0], [1, 0]],
            "pennants": 0,
            "missing": 2,
            "meeples": [1, 0],
            "if_ended": {
                "kind": "road",
                "rule": "R7.2",
                "final": True,
                "turn": 3,
                "complete": False,
                "tiles": [[0, 0], [1, 0]],
                "pennants": 0,
                "meeples": [1, 0],
                "winners": [0],
                "points": 2,
                "awarded": [2, 0],
            },
        },
        {
            "kind": "city",
            "tiles": [[0, -1]],
            "pennants": 0,
            "missing": 1,
            "meeples": [0, 1],
            "if_ended": {
                "kind": "city",
                "rule": "R7.2",
                "final": True,
                "turn": 3,
                "complete": False,
                "tiles": [[0, -1]],
                "pennants": 0,
                "meeples": [0, 1],
                "winners": [1],
                "points": 1,
                "awarded": [0, 1],
            },
        },
        {
            "kind": "road",
            "tiles": [[0, 1]],
            "pennants": 0,
            "missing": 2,
            "meeples": [1, 0],
            "if_ended": {
                "kind": "road",
                "rule": "R7.2",
                "final": True,
                "turn": 3,
                "complete": False,
                "tiles": [[0, 1]],
                "pennants": 0,
                "meeples": [1, 0],
                "winners": [0],
                "points": 1,
                "awarded": [1, 0],
            },
        },
    ],
    "farms_if_ended": [],
    "scores_if_ended": [3, 1],
}

SCORES: dict[str, Any] = {
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seq": 8,
    "scored_up_to": 8,
    "unscored_moves": 0,
    "score_seq": 1,
    "over": False,
    "status": "in_progress",
    "players": [
        {
            "seat": 0,
            "name": "Ann",
            "player_id": "user-1042",
            "score": 0,
            "track": {"space": 0, "laps": 0, "point_tiles": []},
            "meeples": {"supply": 5, "on_board": 2},
            "points": {"roads": 0, "cities": 0, "monasteries": 0, "farms": 0},
            "rank": None,
            "out": None,
            "taken_over": None,
        },
        {
            "seat": 1,
            "name": "Bob",
            "player_id": None,
            "score": 0,
            "track": {"space": 0, "laps": 0, "point_tiles": []},
            "meeples": {"supply": 6, "on_board": 1},
            "points": {"roads": 0, "cities": 0, "monasteries": 0, "farms": 0},
            "rank": None,
            "out": None,
            "taken_over": None,
        },
    ],
    "events": [
        {
            "seq": 1,
            "move": 5,
            "kind": "city",
            "rule": "R6.2",
            "final": False,
            "turn": 2,
            "complete": True,
            "tiles": [[0, -1], [0, 0]],
            "pennants": 0,
            "meeples": [0, 0],
            "winners": [],
            "points": 4,
            "awarded": [0, 0],
            "returned": [0, 0],
            "totals": [0, 0],
            "explanation": "city of 2 tiles, completed (R6.2): nobody stood in it: no points",
        }
    ],
    "reverted": [],
    "result": None,
}

RECORD: dict[str, Any] = {
    "format": "carcassonne-record/1",
    "ruleset": {
        "tileset": "base",
        "farmers": True,
        "farm_scoring": "3rd",
        "incomplete_score": True,
    },
    "players": 2,
    "start": {"tile": "D", "x": 0, "y": 0, "rotation": 0},
    "turns": [
        {"tile": "U", "x": 1, "y": 0, "rotation": 0, "meeple": {"feature": "road", "edge": "E"}},
        {"tile": "H", "x": 0, "y": -1, "rotation": 0, "meeple": {"feature": "city", "edge": "N"}},
        {"tile": "V", "x": 0, "y": 1, "rotation": 0, "meeple": {"feature": "road", "edge": "S"}},
    ],
    "names": ["Ann", "Bob"],
    "player_ids": ["user-1042", None],
}

SCORE_RESULT: dict[str, Any] = {
    "format": "carcassonne-record/1",
    "players": 2,
    "ruleset": {
        "tileset": "base",
        "farmers": True,
        "farm_scoring": "3rd",
        "incomplete_score": True,
    },
    "turns": 3,
    "tiles_placed": 3,
    "ended": "record ended",
    "out": [None, None],
    "taken_over": [None, None],
    "timeline": [
        {"index": 0, "player": 0, "tile": "U", "action": "placed", "scores": [0, 0]},
        {"index": 1, "player": 1, "tile": "H", "action": "placed", "scores": [0, 0]},
        {"index": 2, "player": 0, "tile": "V", "action": "placed", "scores": [0, 0]},
    ],
    "events": [
        {
            "kind": "city",
            "rule": "R6.2",
            "final": False,
            "turn": 2,
            "complete": True,
            "tiles": [[0, -1], [0, 0]],
            "pennants": 0,
            "meeples": [0, 0],
            "winners": [],
            "points": 4,
            "awarded": [0, 0],
            "returned": [0, 0],
            "index": 1,
            "totals": [0, 0],
            "explanation": "city of 2 tiles, completed (R6.2): nobody stood in it: no points",
        }
    ],
    "final_scoring": [
        {
            "kind": "road",
            "rule": "R7.2",
            "final": True,
            "turn": 3,
            "complete": False,
            "tiles": [[0, 0], [1, 0]],
            "pennants": 0,
            "meeples": [1, 0],
            "winners": [0],
            "points": 2,
            "awarded": [2, 0],
            "index": None,
            "totals": [2, 0],
            "explanation": "road of 2 tiles, incomplete at the end of the game "
            "(R7.2): 2 points to player 0",
        },
        {
            "kind": "city",
            "rule": "R7.2",
            "final": True,
            "turn": 3,
            "complete": False,
            "tiles": [[0, -1]],
            "pennants": 0,
            "meeples": [0, 1],
            "winners": [1],
            "points": 1,
            "awarded": [0, 1],
            "index": None,
            "totals": [2, 1],
            "explanation": "city of 1 tile, incomplete at the end of the game (R7.2): "
            "1 point to player 1",
        },
        {
            "kind": "road",
            "rule": "R7.2",
            "final": True,
            "turn": 3,
            "complete": False,
            "tiles": [[0, 1]],
            "pennants": 0,
            "meeples": [1, 0],
            "winners": [0],
            "points": 1,
            "awarded": [1, 0],
            "index": None,
            "totals": [3, 1],
            "explanation": "road of 1 tile, incomplete at the end of the game (R7.2): "
            "1 point to player 0",
        },
    ],
    "scores_before_final": [0, 0],
    "final_scores": [3, 1],
    "ranks": [1, 2],
    "winners": [0],
}

IMPORTED_GAME: dict[str, Any] = {
    "game_id": "fb477e38dec8c54cb82c6a61b9a75786",
    "imported": True,
    "playable": False,
    "note": "imported games have no player tokens: they can be viewed, exported and scored, not "
    "played",
    "seq": 8,
    "players": [{"seat": 0, "name": "Ann", "player_id": "user-1042"}, {"seat": 1, "name": "Bob"}],
    "final_scores": [3, 1],
    "links": {
        "record": "/games/fb477e38dec8c54cb82c6a61b9a75786/record",
        "webhooks": "/games/fb477e38dec8c54cb82c6a61b9a75786/webhooks",
    },
}

WEBHOOK_IN: dict[str, Any] = {
    "url": "https://hooks.example.com/carcassonne",
    "secret": "5f2b9c0e8a7d4e61b3c2",
}

WEBHOOK: dict[str, Any] = {
    "hook_id": "h_b19a5c6325dd2129",
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "url": "https://hooks.example.com/carcassonne",
    "events": ["FeatureScored", "ScoreReverted", "GameScored"],
    "backlog": 1,
    "created_ms": 1795459617994,
    "deliveries": "/games/ef0ab9789b8f034882fd9142e91879d5/webhooks/h_b19a5c6325dd2129/deliveries",
    "signature": "Carcassonne-Signature: t=<unix seconds>,v1=<HMAC-SHA256(secret, t.body)>",
}

REMATCH: dict[str, Any] = {
    "game_id": "5d3c1e0b7a9f42c68e1d2b3a4c5f6e70",
    "rematch_of": "ef0ab9789b8f034882fd9142e91879d5",
    "created": True,
    "players": [
        {"seat": 0, "previous_seat": 1, "name": "Bob", "player_id": "u-2",
         "token": "Zp4Lq8Wm2Xr6Tn0Vb3Kc7Yh1Gd5Sf9Ja"},
        {"seat": 1, "previous_seat": 0, "name": "Ann", "player_id": "u-1",
         "token": "3Jx9Qm1ZcV7pL0sK4yT8wR2nB6fH5dGa"},
    ],
}  # fmt: skip

TICKET_IN: dict[str, Any] = {
    "player_id": "u-1",
    "name": "Ann",
    "ruleset": "classic",
    "players": 2,
    "rating_window": 5.0,
    "expires_seconds": 604800,
}

TICKET: dict[str, Any] = {
    "ticket_id": "t_5e0c2f7a9b1d3c4e6f8a0b2c",
    "player_id": "u-1",
    "name": "Ann",
    "ruleset": "classic",
    "players": 2,
    "state": "matched",
    "created_ms": 1795459617994,
    "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    "seat": 1,
    "rating": 12.4,
    "rating_window": 5.0,
    "expires_ms": 1796064417994,
}

TICKET_TAKEN: dict[str, Any] = {
    **TICKET,
    "state": "waiting",
    "game_id": None,
    "seat": None,
    "token": "3Jx9Qm1ZcV7pL0sK4yT8wR2nB6fH5dGa",
}

LOBBY_IN: dict[str, Any] = {
    "ruleset": "classic",
    "seats": 3,
    "visibility": "listed",
    "host": {"player_id": "u-1", "name": "Ann"},
}

LOBBY: dict[str, Any] = {
    "lobby_id": "ef0ab9789b8f034882fd9142e91879d5",
    "ruleset": "classic",
    "seats": 3,
    "visibility": "listed",
    "state": "open",
    "host": "u-1",
    "players": [
        {"player_id": "u-1", "name": "Ann", "seat": None},
        {"player_id": "u-2", "name": "Bob", "seat": None},
    ],
    "created_ms": 1795459617994,
    "expires_ms": 1795546017994,
    "game_id": None,
}

LOBBY_OPENED: dict[str, Any] = {
    **LOBBY,
    "players": [{"player_id": "u-1", "name": "Ann", "seat": None}],
    "token": "3Jx9Qm1ZcV7pL0sK4yT8wR2nB6fH5dGa",
}

JOIN_IN: dict[str, Any] = {"player_id": "u-3", "name": "Cy"}

JOINED: dict[str, Any] = {
    "lobby_id": "ef0ab9789b8f034882fd9142e91879d5",
    "player_id": "u-3",
    "token": "Zp4Lq8Wm2Xr6Tn0Vb3Kc7Yh1Gd5Sf9Ja",
    "lobby": {
        **LOBBY,
        "state": "started",
        "players": [
            {"player_id": "u-1", "name": "Ann", "seat": 2},
            {"player_id": "u-2", "name": "Bob", "seat": 0},
            {"player_id": "u-3", "name": "Cy", "seat": 1},
        ],
        "game_id": "ef0ab9789b8f034882fd9142e91879d5",
    },
}

SUBSCRIPTION_IN: dict[str, Any] = {
    "url": "https://hooks.example.com/carcassonne/events",
    "kinds": ["turn_started", "move_made", "game_over"],
}

SUBSCRIPTION_CREATED: dict[str, Any] = {
    "subscription_id": "s_4f1c2a9be07d5c31",
    "url": "https://hooks.example.com/carcassonne/events",
    "kinds": ["turn_started", "move_made", "game_over"],
    "created_ms": 1795459617994,
    "secrets_live": 1,
    "overlap_until_ms": None,
    "secret": "whsec_3q2-7bV0xY1nQm8RkJ4dW9sT6uP5aZcE0fGhIjKlMnO",
    "signature": "Carcassonne-Signature: t=<unix seconds>,"
    "v1=<hex HMAC-SHA256(secret, t + '.' + body)>",
}

SUBSCRIPTION_DELIVERIES: dict[str, Any] = {
    "subscription_id": "s_4f1c2a9be07d5c31",
    "kept": 200,
    "attempts": [
        {
            "delivery": "s_4f1c2a9be07d5c31.ef0ab9789b8f034882fd9142e91879d5.7",
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "kind": "turn_started",
            "seq": 6,
            "attempt": 2,
            "at_ms": 1795459619012,
            "ms": 14,
            "status": 200,
            "outcome": "delivered",
        },
        {
            "delivery": "s_4f1c2a9be07d5c31.ef0ab9789b8f034882fd9142e91879d5.7",
            "game_id": "ef0ab9789b8f034882fd9142e91879d5",
            "kind": "turn_started",
            "seq": 6,
            "attempt": 1,
            "at_ms": 1795459618100,
            "ms": 3,
            "status": None,
            "outcome": "retrying",
            "error": "ConnectionRefusedError: [Errno 111] Connection refused",
        },
    ],
}

# The same record in notation (text/plain bodies of /v1/score and /games/import).
RECORD_NOTATION = (
    "carcassonne-record/1 base players=2 farmers=on farm=3rd incomplete=on "
    'names=["Ann","Bob"] player_ids=["user-1042",null]\nU0@1,0:E H0@0,-1:N V0@0,1:S\n'
)

# One error per status, as the services send them.
ERRORS: dict[int, dict[str, Any]] = {
    400: {
        "code": "invalid_json",
        "message": "the request body is empty: a JSON value was expected",
        "rule": None,
        "details": {},
    },
    401: {
        "code": "missing_token",
        "message": "send Authorization: Bearer <player token>",
        "rule": None,
        "details": {},
    },
    403: {
        "code": "bad_token",
        "message": "this token belongs to no player of this game",
        "rule": None,
        "details": {},
    },
    404: {
        "code": "game_not_found",
        "message": "no game 00000000000000000000000000000000",
        "rule": None,
        "details": {},
    },
    406: {
        "code": "not_acceptable",
        "message": "this view is application/json or application/x-ndjson",
        "rule": None,
        "details": {},
    },
    409: {
        "code": "stale_sequence",
        "message": "the game is at sequence 8",
        "rule": None,
        "details": {"expected": 6, "actual": 8},
    },
    413: {
        "code": "body_too_large",
        "message": "the request body is at most 65536 bytes",
        "rule": None,
        "details": {"limit": 65536},
    },
    415: {
        "code": "unsupported_media_type",
        "message": "the request body must be sent as application/json (got no Content-Type)",
        "rule": None,
        "details": {"expected": "application/json", "got": None},
    },
    422: {
        "code": "square_taken",
        "message": "a tile already lies on 0,0",
        "rule": "R4.1",
        "details": {},
    },
    429: {
        "code": "rate_limited",
        "message": "this API key's rate limit is used up; retry in 2 s",
        "rule": None,
        "details": {"retry_after": 2},
    },
    503: {
        "code": "store_unavailable",
        "message": "the event store is unavailable",
        "rule": None,
        "details": {},
    },
}


# GET /tilesets and /tilesets/{name}: the real data (one tile type of the set's 24 shown), so
# the examples stay true when the tiles or their drawing change (`make openapi` then).
TILESETS: dict[str, Any] = catalog_index()
TILESET: dict[str, Any] = {
    **_base_catalog,
    "tiles": [t for t in _base_catalog["tiles"] if t["name"] == "D"],
}


# Vacations (docs/clocks.md): a week away, declared while it was the player's turn in one game.
VACATION: dict[str, Any] = {
    "vacation_id": "5d1c0b6f2a8e4f0c9b7a6d5e4c3b2a19",
    "from_ms": 1795813911245,
    "until_ms": 1796418711245,
    "days": 7,
    "year": 2026,
    "ended_ms": None,
}
VACATION_DECLARED: dict[str, Any] = {
    "player_id": "u-1",
    "year": 2026,
    "allowance_days": 30,
    "used_days": 7,
    "left_days": 23,
    "vacation": VACATION,
    "paused": [
        {"game_id": "9f3c2a7b1e4d4c0a8b6f5e2d1c3b4a59", "seat": 0, "seq": 12,
         "deadline_ms": 1796418771245},
        {"game_id": "1a2b3c4d5e6f40718293a4b5c6d7e8f9", "seat": 1, "seq": 30,
         "deadline_ms": None},
    ],
}  # fmt: skip
# Back after two days of the week: 5 days go back to the allowance; the player's turn in one
# game runs again with what was left of it.
VACATION_ENDED: dict[str, Any] = {
    "player_id": "u-1",
    "year": 2026,
    "allowance_days": 30,
    "used_days": 2,
    "left_days": 28,
    "vacation": {**VACATION, "until_ms": 1795986711245, "days": 2, "ended_ms": 1795986711245},
    "resumed": [
        {"game_id": "9f3c2a7b1e4d4c0a8b6f5e2d1c3b4a59", "seat": 0, "seq": 14,
         "deadline_ms": 1795986771245},
    ],
}  # fmt: skip
VACATIONS: dict[str, Any] = {
    "player_id": "u-1",
    "year": 2026,
    "allowance_days": 30,
    "used_days": 7,
    "left_days": 23,
    "vacations": [VACATION],
}
