"""Undo: deciding `RequestUndo` and `AnswerUndo` (ruleset `undo`: off, consent, free).

The player who placed last may ask to take that placement back until the next placement
(`state.undo_point` is kept that long). With `free` the request is granted at once
(`UndoRequested`, `TurnUndone`); with `consent` every other player must accept before the
request's deadline (`UndoAccepted` each, the last one with `TurnUndone`); one refusal
(`UndoRefused`) or the deadline passing closes it and the placement stands. One request per
placement. The deadline is data (the caller's clock is passed in as `now_ms`): an expired
request is refused by implication, without an event, so nothing has to run at the deadline.
See docs/undo.md for the decisions (draw order, turn numbering).
"""

from __future__ import annotations

from .errors import IllegalMoveError, MalformedError, OutOfTurnError, UnknownRequestError
from .events import (
    AnswerUndo,
    Event,
    RequestUndo,
    TurnUndone,
    UndoAccepted,
    UndoRefused,
    UndoRequested,
)
from .pauses import advanced
from .state import NEW, OVER, GameState, UndoRequest


def undo_voters(state: GameState, player: int) -> list[int]:
    """The seats whose consent an undo by `player` needs: every other player still in."""
    return [p for p in state.still_in if p != player]


def _expect_playing(state: GameState) -> None:
    if state.phase == NEW:
        raise OutOfTurnError("game_not_started", "the game has not started", "R2")
    if state.phase == OVER:
        raise OutOfTurnError("game_over", "the game is over: its last placement stands", "R7.1")
    if state.ruleset.undo == "off":
        raise IllegalMoveError(
            "undo_disabled", "this game is played without undo (its ruleset has undo: off)"
        )


def _seat(state: GameState, player: object) -> int:
    if type(player) is not int or not 0 <= player < state.players:
        raise MalformedError("bad_player", f"player must be 0-{state.players - 1}")
    return player


def _expired(request: UndoRequest, now_ms: int | None) -> bool:
    return request.deadline_ms is not None and now_ms is not None and now_ms > request.deadline_ms


def _undone(state: GameState, request: int, player: int, now_ms: int | None) -> TurnUndone:
    """The `TurnUndone` of the last placement: the last tile on the board (draws and discards
    since do not place tiles), with a fresh deadline for the turn given back to `player`
    (turn limit), on their clock: it stands still in their absences (docs/clocks.md)."""
    (x, y), placed = next(reversed(state.board.tiles.items()))
    seconds = state.ruleset.turn_seconds
    deadline = None
    if seconds is not None and now_ms is not None:
        deadline = advanced(now_ms, seconds * 1000, state.pauses_ms[player])
    return TurnUndone(request, player, placed.tile.name, x, y, placed.rotation, deadline)


def _closed(state: GameState, pending: UndoRequest) -> bool:
    """Whether the last placement's request is closed: refused, or the placement stands for
    good (a resignation, a timeout or the game's end since: no undo point is kept)."""
    return pending.refused_by is not None or state.undo_point is None


def request_view(state: GameState) -> dict[str, object] | None:
    """The last placement's undo request as the views show it (None: none), with `closed`
    (`_closed`). An answer to a closed request is 409 `undo_closed`; one past `deadline_ms`
    is 409 `undo_expired` (the client's clock decides that one: the engine has none)."""
    pending = state.undo
    if pending is None:
        return None
    return {**pending.to_dict(), "closed": _closed(state, pending)}


def request_undo(state: GameState, cmd: RequestUndo) -> list[Event]:
    """The events of `cmd`: the request, and the undo itself when nobody has to consent."""
    _expect_playing(state)
    player = _seat(state, cmd.player)
    pending = state.undo
    if pending is not None and not _closed(state, pending):
        if _expired(pending, cmd.now_ms):
            raise OutOfTurnError(
                "undo_not_allowed",
                f"undo request {pending.request} expired unanswered: the placement stands",
                None,
                request=pending.request,
            )
        raise OutOfTurnError(
            "undo_pending",
            f"undo request {pending.request} is waiting for the other players' answers",
            None,
            request=pending.request,
        )
    point = state.undo_point
    if point is None or point.current != player:
        if pending is not None and pending.refused_by is not None:
            reason = "the other players refused it"
        elif point is None and state.undone_turn == state.turn - 1 and state.ruleset.undo != "off":
            reason = "a placement made again after an undo stands (one undo a turn)"
        else:
            reason = (
                "only the player who placed last may undo that placement, before the next "
                "player places"
            )
        raise OutOfTurnError("undo_not_allowed", f"no placement of yours to undo: {reason}")
    request = state.undo_requests + 1
    voters = undo_voters(state, player)
    if state.ruleset.undo == "free" or not voters:
        return [UndoRequested(request, player), _undone(state, request, player, cmd.now_ms)]
    return [UndoRequested(request, player, cmd.deadline_ms)]


def answer_undo(state: GameState, cmd: AnswerUndo) -> list[Event]:
    """The events of an answer: an acceptance (with the undo when it is the last one
    needed) or a refusal."""
    _expect_playing(state)
    player = _seat(state, cmd.player)
    pending = state.undo
    number = cmd.request
    if type(number) is not int or not 1 <= number <= state.undo_requests:
        raise UnknownRequestError(
            "no_such_request", f"this game has no undo request {number!r}", None, request=number
        )
    if pending is None or pending.request != number or _closed(state, pending):
        raise OutOfTurnError(
            "undo_closed",
            f"undo request {number} is closed (undone, refused, played on, or a "
            "resignation or timeout since)",
            None,
            request=number,
        )
    if player == pending.player:
        raise OutOfTurnError("own_undo_request", "the other players answer an undo request")
    voters = undo_voters(state, pending.player)
    if player not in voters:
        raise OutOfTurnError("not_a_voter", f"player {player} has no say in this request")
    if player in pending.accepted:
        raise OutOfTurnError("undo_answered", f"player {player} has accepted already")
    if _expired(pending, cmd.now_ms):
        raise OutOfTurnError(
            "undo_expired",
            f"undo request {number} expired unanswered: the placement stands",
            None,
            request=number,
            deadline_ms=pending.deadline_ms,
        )
    if not cmd.accept:
        return [UndoRefused(number, player)]
    events: list[Event] = [UndoAccepted(number, player)]
    if set(voters) <= {*pending.accepted, player}:
        events.append(_undone(state, number, pending.player, cmd.now_ms))
    return events
