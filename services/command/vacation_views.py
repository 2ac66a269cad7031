"""Vacations over HTTP (docs/clocks.md; every request needs `X-Api-Key`, and a key sees only
its own players):

- `POST /v1/players/{player_id}/vacations` `{"days", "from_ms"?}`: declare days away from now
  or from a later start; the player's clocks in the key's games in progress pause for them;
- `GET /v1/players/{player_id}/vacations`: the player's vacations and this year's allowance;
- `DELETE /v1/players/{player_id}/vacations/{vacation_id}`: back early: the running vacation
  ends now, its days not begun go back to the allowance, and the player's clocks run again;
  one not begun yet is called off (every day back).

The logic is services/command/vacations.py.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from flask import Flask, Response, current_app, g
from flask.views import MethodView
from flask_smorest import Api
from marshmallow import fields

from carcassonne.errors import MalformedError
from services.common.schemas import Closed
from services.common.webapp import Blueprint

from .client import command_client
from .errors import NotFound
from .integration import SECURITY, authenticated
from .schemas import Strict
from .service import GameService
from .vacations import MAX_DAYS, Vacations

blp = Blueprint("vacations", __name__, description="Vacations: a player's clocks pause")
_PLAYER_ID = re.compile(r"^[!-~]{1,128}$")
_VACATION_ID = re.compile(r"^[0-9a-f]{32}$")


def init_app(app: Flask, api: Api, service: GameService) -> None:
    """Build the vacations' parts and register the blueprint."""
    app.extensions["vacations"] = Vacations(
        command_client(app.config), service, int(app.config["VACATION_DAYS_PER_YEAR"])
    )
    api.register_blueprint(blp)


def _vacations() -> Vacations:
    return cast(Vacations, current_app.extensions["vacations"])


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status, mimetype="application/json")


def _player(player_id: str) -> str:
    if not _PLAYER_ID.fullmatch(player_id):  # `$` alone lets a final newline by
        raise MalformedError(
            "bad_player_id", "a player_id is 1-128 visible ASCII characters (no spaces)"
        )
    return player_id


class VacationIn(Strict):
    # The range is in the document and checked by the service (422 bad_vacation).
    days = fields.Integer(
        strict=True,
        required=True,
        metadata={
            "minimum": 1,
            "maximum": MAX_DAYS,
            "description": f"days away (1-{MAX_DAYS}; 422 bad_vacation otherwise), counted "
            "in the allowance of the calendar year (UTC) the vacation starts in",
        },
    )
    from_ms = fields.Integer(
        strict=True,
        allow_none=True,
        load_default=None,
        metadata={
            "description": "when it starts (Unix ms), now to a year ahead (422 bad_vacation_start "
            "otherwise: in the past, or more than 366 days ahead); left out or null: now. "
            "The player's clocks run as usual until then"
        },
    )


class Vacation(Closed):
    vacation_id = fields.String(required=True)
    from_ms = fields.Integer(
        required=True, metadata={"description": "Unix ms it begins (now, or later)"}
    )
    until_ms = fields.Integer(
        required=True,
        metadata={"description": "Unix ms it ends (called off before its start: from_ms)"},
    )
    days = fields.Integer(
        required=True,
        metadata={"description": "the days it counts (ended early: those begun; called off: 0)"},
    )
    year = fields.Integer(
        required=True, metadata={"description": "the allowance's year (UTC): the one it starts in"}
    )
    ended_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={
            "description": "Unix ms it was ended early or called off (DELETE); null: neither"
        },
    )


class PausedSeat(Closed):
    game_id = fields.String(required=True)
    seat = fields.Integer(required=True)
    seq = fields.Integer(required=True, metadata={"description": "its ClockPaused event"})
    deadline_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "the seat's running turn's moved deadline; null: not its turn"},
    )


class ResumedSeat(PausedSeat):
    seq = fields.Integer(required=True, metadata={"description": "its ClockResumed event"})
    deadline_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "the seat's running turn's new deadline; null: not its turn"},
    )


class VacationBooks(Closed):
    player_id = fields.String(required=True)
    year = fields.Integer(required=True, metadata={"description": "this calendar year (UTC)"})
    allowance_days = fields.Integer(
        required=True,
        metadata={
            "description": "the key's own yearly days if its operator set them (the keys "
            "CLI's `set --vacation-days`), else the service's VACATION_DAYS_PER_YEAR"
        },
    )
    used_days = fields.Integer(required=True)
    left_days = fields.Integer(required=True)


class VacationList(VacationBooks):
    vacations = fields.List(fields.Nested(Vacation), required=True)


class VacationBooksOfItsYear(VacationBooks):
    """The books of the year one vacation counts in (its declaration's, its end's)."""

    year = fields.Integer(
        required=True,
        metadata={"description": "the calendar year (UTC) the vacation starts in: its books"},
    )


class VacationDeclared(VacationBooksOfItsYear):
    vacation = fields.Nested(
        Vacation,
        required=True,
        metadata={
            "description": "as the book has it once the games are paused: one ended or "
            "called off meanwhile has its ended_ms, days and until_ms (the books follow)"
        },
    )
    paused = fields.List(
        fields.Nested(PausedSeat),
        required=True,
        metadata={"description": "each seat of the player whose clock this pauses"},
    )


class VacationEnded(VacationBooksOfItsYear):
    vacation = fields.Nested(Vacation, required=True)
    resumed = fields.List(
        fields.Nested(ResumedSeat),
        required=True,
        metadata={"description": "each seat of the player whose clock runs again"},
    )


PLAYER_PARAM = {
    "in": "path",
    "name": "player_id",
    "description": "the app's user id its games' seats were created with",
    "schema": {"type": "string", "pattern": _PLAYER_ID.pattern},
}


@blp.route("/v1/players/<player_id>/vacations", parameters=[PLAYER_PARAM])
class PlayerVacations(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(VacationIn())
    @blp.response(201, VacationDeclared())
    def post(self, body: dict[str, Any], player_id: str) -> Response:
        """Declare days away, from now or from a later `from_ms`: the player's clocks in this
        key's games in progress pause for them (each game's log gets `ClockPaused` at once,
        with the start, and its players `player_away`). 409 `stale_sequence`: recorded,
        but a game's own moves won its pause's append at every attempt; the retry (refused
        as `vacation_overlaps`) pauses it."""
        player = _player(player_id)
        declared = _vacations().declare(g.api_key, player, body["days"], body["from_ms"])
        return _json(declared, 201)

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, VacationList())
    def get(self, player_id: str) -> Response:
        """The player's vacations under this key and this year's allowance."""
        return _json(_vacations().listed(g.api_key, _player(player_id)))


VACATION_PARAM = {
    "in": "path",
    "name": "vacation_id",
    "description": "the vacation's id, as its declaration answered it",
    "schema": {"type": "string", "pattern": _VACATION_ID.pattern},
}


@blp.route(
    "/v1/players/<player_id>/vacations/<vacation_id>", parameters=[PLAYER_PARAM, VACATION_PARAM]
)
class PlayerVacation(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, VacationEnded())
    def delete(self, player_id: str, vacation_id: str) -> Response:
        """Back early: the running vacation ends now; its days not begun go back to its
        year's allowance (the books answered), and the player's clocks run again (each
        game's log gets `ClockResumed`, its players `player_back`). One not begun yet is
        called off: every day goes back. Retried: 200 again, nothing appended twice. 409
        `stale_sequence`: ended, but a game's own moves won its end's append at every
        attempt; the retry resumes it."""
        player = _player(player_id)
        if not _VACATION_ID.fullmatch(vacation_id):
            raise NotFound("vacation_not_found", f"this player has no vacation {vacation_id}")
        return _json(_vacations().end(g.api_key, player, vacation_id))
