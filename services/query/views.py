"""The board and score views of a game position, as plain JSON-ready data (pure functions)."""

from __future__ import annotations

from typing import Any

from carcassonne.explain import explain, seat_name
from carcassonne.projection import farms_if_ended, open_features, projected_scores
from carcassonne.state import NEW, OVER, GameState
from carcassonne.track import track_position
from carcassonne.undo import request_view
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED, SCORE_REVERTED

from .projector import Position

# A garden scores as a monastery does (R9.2) and is counted with them.
CATEGORIES = {
    "road": "roads",
    "city": "cities",
    "monastery": "monasteries",
    "garden": "monasteries",
    "farm": "farms",
}


def player_name(names: tuple[str, ...] | None, seat: int) -> str:
    """A seat's name, or "player N" when the game's names are unknown."""
    return seat_name(names, seat)


def player_id(pos: Position, seat: int) -> str | None:
    """The app's user id of a seat, if it was given at creation."""
    ids = pos.player_ids
    return ids[seat] if ids is not None and seat < len(ids) else None


def bot(pos: Position, seat: int) -> dict[str, Any] | None:
    """A bot seat's level and think time (docs/bots.md), None for a human's seat."""
    bots = pos.bots
    found = bots[seat] if bots is not None and seat < len(bots) else None
    return None if not found else {"level": found["level"], "think_ms": found["think_ms"]}


def status(pos: Position) -> str:
    """in_progress, over, or abandoned (ended by the server: docs/lifecycle.md)."""
    state = pos.state
    if state.phase != OVER:
        return "in_progress"
    return "abandoned" if state.abandoned else "over"


def board_etag(pos: Position) -> str:
    """The board view depends on the moves only (and, at the same move, on whether it is an
    undone placement's `?turn=`, and on whether a hand game's hands are open: R10.3, a past
    position shows its secret tiles once the game is over)."""
    return f"m{pos.seq}{'u' if pos.undone else ''}{'h' if pos.opened else ''}"


def scores_etag(pos: Position) -> str:
    """The score view depends on the moves (meeples), the score events and the progress."""
    return f"m{pos.seq}.s{pos.score_seq}.p{pos.progress}"


def clock_of(state: GameState, seat: int) -> dict[str, Any]:
    """A seat's clock (docs/clocks.md): its Fischer bank as of its last move (only with a
    bank), and when its last declared vacation ends, begun or not (only while it has one)."""
    out: dict[str, Any] = {}
    if state.banks_ms:
        out["bank_ms"] = state.banks_ms[seat]
    if state.away_until_ms and state.away_until_ms[seat]:
        out["away_until_ms"] = state.away_until_ms[seat]
    return out


def board_view(pos: Position) -> dict[str, Any]:
    """Tiles, meeples, the turn, tiles left, and every open feature with its score if the
    game ended now (R7.2; farms R7.3/R7.4), as computed by the engine."""
    state = pos.state
    features = open_features(state)
    farms = farms_if_ended(state)
    turn = None
    if state.phase not in (NEW, OVER):
        turn = {
            "player": state.current,
            "name": player_name(pos.names, state.current),
            "tile": state.drawn,  # None between a placement and the next draw
            "deadline_ms": state.deadline_ms,
        }
    return {
        "game_id": pos.game_id,
        "seq": pos.seq,
        "phase": state.phase,
        "over": state.over,
        "status": status(pos),
        "ruleset": state.ruleset.to_dict(),
        "players": [
            {
                "seat": p,
                "name": player_name(pos.names, p),
                "player_id": player_id(pos, p),
                "score": state.scores[p],
                "supply": state.supply[p],
                "out": state.out[p],
                "taken_over": state.taken_over[p],
                "timeouts": state.timeouts[p],
                "bot": bot(pos, p),
                **clock_of(state, p),
            }
            for p in range(state.players)
        ],
        "turn": turn,
        "tiles_placed": state.turn,  # tiles standing (`?turn=` counts undone placements too)
        "turns": pos.turns,  # placements in the log so far: the last `?turn=`
        "undo": request_view(state),
        "undone": pos.undone,
        "tiles_left": state.bag_size,
        "discarded": list(state.discarded),
        "tiles": [
            {"tile": placed.tile.name, "x": x, "y": y, "rotation": placed.rotation}
            for (x, y), placed in state.board.tiles.items()  # in the order they were placed
        ],
        "meeples": [
            {
                "player": m.player,
                "x": m.pos[0],
                "y": m.pos[1],
                "feature": m.meeple.feature,
                "spot": m.meeple.spot,
                **({"abbot": True} if m.meeple.abbot else {}),
            }
            for m in state.meeples.values()
        ],
        "open_features": [f.to_dict() for f in features],
        "farms_if_ended": [f.to_dict() for f in farms],
        "scores_if_ended": list(projected_scores(state, features, farms)),
        # R10.3: each seat's hand, a tile null while it is secret (before the end: all)
        **({"hands": state.hand_lists()} if state.hands else {}),
    }


def scores_view(pos: Position) -> dict[str, Any]:
    """The score track from the score stream (R8.1), points by category, meeples, events."""
    state = pos.state
    players = state.players
    totals = [0] * players
    points = [dict.fromkeys(CATEGORIES.values(), 0) for _ in range(players)]
    events: list[dict[str, Any]] = []
    reverted: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for stored in pos.scores:
        payload = stored.payload
        if stored.type == FEATURE_SCORED:
            for p, gained in enumerate(payload["awarded"]):
                totals[p] += gained
                points[p][CATEGORIES[payload["kind"]]] += gained
            events.append(
                {"seq": stored.seq, **payload, "explanation": explain(payload, pos.names)}
            )
        elif stored.type == SCORE_REVERTED:  # an undone placement's scoring taken back
            for p, lost in enumerate(payload["reverted"]):
                totals[p] -= lost
                points[p][CATEGORIES[payload["kind"]]] -= lost
            reverted.append({"seq": stored.seq, **payload})
        elif stored.type == GAME_SCORED:
            result = dict(payload)
    on_board = [0] * players
    for m in state.meeples.values():
        on_board[m.player] += 1
    return {
        "game_id": pos.game_id,
        "seq": pos.seq,
        "scored_up_to": pos.progress,
        "unscored_moves": pos.seq - pos.progress,
        "score_seq": pos.score_seq,
        "over": result is not None,
        "status": status(pos),
        "players": [
            {
                "seat": p,
                "name": player_name(pos.names, p),
                "player_id": player_id(pos, p),
                "score": totals[p],
                "track": _track(totals[p]),
                "meeples": {"supply": state.supply[p], "on_board": on_board[p]},
                "points": points[p],
                "rank": None if result is None else result["ranks"][p],
                "out": state.out[p],
                "taken_over": state.taken_over[p],
            }
            for p in range(players)
        ],
        "events": events,
        "reverted": reverted,
        "result": result,
    }


def _track(score: int) -> dict[str, Any]:
    where = track_position(score).to_dict()
    del where["score"]  # already beside it
    return where
