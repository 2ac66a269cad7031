"""What the command service shows of a game: the turn to play, a seat's hand, undo, status."""

from __future__ import annotations

from typing import Any

from carcassonne.errors import OutOfTurnError
from carcassonne.events import meeple_to_dict
from carcassonne.game import RECALL_ABBOT, actions, hand_actions, hand_of
from carcassonne.state import OVER, PLACE, GameState
from carcassonne.undo import request_view

from .cache import Cached


def status_of(state: GameState) -> str:
    """A game's status as views and `GET /games?status=` name it."""
    if state.phase != OVER:
        return "in_progress"
    return "abandoned" if state.abandoned else "over"


def turn_view(game_id: str, cached: Cached) -> dict[str, Any]:
    """Whose turn, the drawn tile, and every legal placement with its meeple spots."""
    state = cached.state
    view: dict[str, Any] = {
        "game_id": game_id,
        "seq": cached.seq,
        "over": state.phase == OVER,
        "player": None if state.phase == OVER else state.current,
        "player_name": None if state.phase == OVER else cached.secrets["names"][state.current],
        "tile": state.drawn,
        "tiles_left": state.bag_size,
        "scores": list(state.scores),
        "supply": list(state.supply),
        "placements": placements(state),
        "deadline_ms": state.deadline_ms,
        "out": list(state.out),
        "taken_over": list(state.taken_over),
        "status": status_of(state),
    }
    view.update(clock_view(state))
    if state.phase == OVER:
        view["seed"] = cached.secrets["seed"]  # R2.1 Decision: revealed once the game ends
    if state.ruleset.undo != "off":
        view["undo"] = undo_view(state)
    if state.hands:  # R10.3: how many tiles each seat holds; which, only once it is over
        view["hand_sizes"] = [len(hand) for hand in state.hands]
        if state.phase == OVER:
            view["hands"] = state.hand_lists()
    return view


def clock_view(state: GameState) -> dict[str, Any]:
    """The clocks (docs/clocks.md): each seat's Fischer bank as of its last move (only with a
    bank: the running turn's live remainder is `deadline_ms` minus now), and when each seat's
    last declared absence ends, begun or not (only while a seat has one; null: none)."""
    out: dict[str, Any] = {}
    if state.banks_ms:
        out["banks_ms"] = list(state.banks_ms)
    if any(state.away_until_ms):
        out["away_until_ms"] = [at or None for at in state.away_until_ms]
    return out


def placements(state: GameState) -> list[dict[str, Any]]:
    """Every legal placement of the drawn tile with its meeple spots (and R9.2's recall)."""
    options: dict[tuple[int, int, int], list[Any]] = {}
    recalls: set[tuple[int, int, int]] = set()  # R9.2: placements that may take it back
    for x, y, rotation, meeple in actions(state):
        spots = options.setdefault((x, y, rotation), [])
        if meeple == RECALL_ABBOT:
            recalls.add((x, y, rotation))
        elif meeple is not None:
            spots.append(meeple_to_dict(meeple))
    return [
        {"x": x, "y": y, "rotation": r, "meeples": spots}
        | ({"recall_abbot": True} if (x, y, r) in recalls else {})
        for (x, y, r), spots in options.items()
    ]


def hand_view(game_id: str, cached: Cached, seat: int) -> dict[str, Any]:
    """R10.3: the seat's own hand, and when it is that seat's move every legal (tile,
    placement) with its meeple spots. Nobody else's hand: the seat comes from the token.
    Once the game is over every hand is public (the turn view's `hands`)."""
    state = cached.state
    if not state.hands:
        raise OutOfTurnError(
            "no_hand", "this game is played without a hand (ruleset hand 1)", "R10.3"
        )
    to_move = state.phase == PLACE and state.current == seat
    options: dict[tuple[str, int, int, int], list[Any]] = {}
    for tile, (x, y, rotation, meeple) in hand_actions(state) if to_move else ():
        spots = options.setdefault((tile, x, y, rotation), [])
        if meeple is not None:
            spots.append(meeple_to_dict(meeple))
    return {
        "game_id": game_id,
        "seq": cached.seq,
        "player": seat,
        "hand": hand_of(state, seat),
        "to_move": to_move,
        "placements": [
            {"tile": tile, "x": x, "y": y, "rotation": r, "meeples": spots}
            for (tile, x, y, r), spots in options.items()
        ],
    }


def undo_view(state: GameState) -> dict[str, Any]:
    """What a client needs to offer undo: who may ask now (None: nobody) and the last
    placement's request, if any (its deadline is the client's to compare with its clock)."""
    point, pending = state.undo_point, state.undo
    return {
        "mode": state.ruleset.undo,
        "may_request": point.current if point is not None and pending is None else None,
        "request": request_view(state),
    }
