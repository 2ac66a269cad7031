"""Undo over HTTP (ruleset `undo`, docs/undo.md): ask to take back one's last placement, and
the other players' answers. Thin views: decode, call one `GameService` method, encode.

| request | does |
|---|---|
| `POST /games/{id}/undo` | the token's seat asks to undo its last placement (before the next) |
| `POST /games/{id}/undo/{request}/accept` | another seat accepts (consent) |
| `POST /games/{id}/undo/{request}/refuse` | another seat refuses: the placement stands |

Each answers what a turn answers: the events appended and what comes next. An
`Idempotency-Key` makes a retry safe, as for a turn.
"""

from __future__ import annotations

import flask
from flask import Flask, Response, current_app
from flask.views import MethodView
from flask_smorest import Api

from services.common.webapp import Blueprint, checked_game_id

from . import integration
from .handlers import TurnResult
from .schemas import TurnResult as TurnResultOut
from .service import GameService

blp = Blueprint("undo", __name__, url_prefix="/games", description="Undo the last placement")

IDEMPOTENCY = {
    "in": "header",
    "name": "Idempotency-Key",
    "schema": integration.IDEMPOTENCY_KEY_SCHEMA,
    "description": "makes a retry safe: the same key (per seat) on the same request answers "
    "the original result and appends nothing",
}


def _service() -> GameService:
    service: GameService = current_app.extensions["game_service"]
    return service


def _token() -> str | None:
    auth = flask.request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


def _answer(result: TurnResult) -> Response:
    """A turn's answer shape (services/command/app.py builds the same for a turn)."""
    from .app import _json_response, _next  # the turn's encoder (app imports this module)

    return _json_response(
        {
            "seq": result.seq,
            "replayed": result.replayed,
            "events": [e.to_dict() for e in result.events],
            "next": _next(result),
        }
    )


@blp.route("/<game_id>/undo")
class Undo(MethodView):
    @blp.response(200, TurnResultOut())
    @blp.doc(parameters=[IDEMPOTENCY])
    def post(self, game_id: str) -> Response:
        """Ask to undo your last placement, before the next player places.

        `free`: undone at once (`UndoRequested`, `TurnUndone`): you hold the same tile again.
        `consent`: `UndoRequested` with a deadline; every other player answers. 422
        undo_disabled (ruleset undo off); 409 undo_not_allowed (not your placement, the next
        player placed, or refused/expired), undo_pending, game_over."""
        result = _service().request_undo(
            checked_game_id(game_id), _token(), integration.idempotency_key()
        )
        return _answer(result)


def _answer_view(game_id: str, request: int, accept: bool) -> Response:
    result = _service().answer_undo(
        checked_game_id(game_id), _token(), request, accept, integration.idempotency_key()
    )
    return _answer(result)


@blp.route("/<game_id>/undo/<int:request>/accept")
class AcceptUndo(MethodView):
    @blp.response(200, TurnResultOut())
    @blp.doc(parameters=[IDEMPOTENCY])
    def post(self, game_id: str, request: int) -> Response:
        """Accept undo request `request` (consent); the last acceptance undoes the placement.

        404 no_such_request; 409 undo_closed, undo_expired (past its deadline: refused),
        undo_answered, own_undo_request, game_over."""
        return _answer_view(game_id, request, True)


@blp.route("/<game_id>/undo/<int:request>/refuse")
class RefuseUndo(MethodView):
    @blp.response(200, TurnResultOut())
    @blp.doc(parameters=[IDEMPOTENCY])
    def post(self, game_id: str, request: int) -> Response:
        """Refuse undo request `request` (consent): the placement stands for good.

        404 no_such_request; 409 undo_closed, undo_expired, undo_answered, own_undo_request,
        game_over."""
        return _answer_view(game_id, request, False)


def init_app(app: Flask, api: Api) -> None:
    """Register the undo routes."""
    api.register_blueprint(blp)
