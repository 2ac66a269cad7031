"""Matchmaking tickets over HTTP (every request needs `X-Api-Key`; a key sees only its own
tickets):

- `POST /tickets` `{"player_id", "name", "ruleset", "players"}`: wait for a game; the answer
  holds the seat's token, shown only then;
- `GET /tickets`: the key's waiting tickets, oldest first;
- `GET /tickets/{id}`: poll one: `waiting`, `matched` (its `game_id` and `seat`),
  `cancelled` or `expired` (it waited `expires_seconds`);
- `DELETE /tickets/{id}`: cancel a waiting ticket.

The logic is services/command/matchmaking.py; docs/lobby.md explains it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from flask import Flask, Response, current_app, g
from flask.views import MethodView
from flask_smorest import Api
from marshmallow import fields, validate

from services.common.schemas import Closed
from services.common.webapp import Blueprint

from .client import command_client
from .integration import SECURITY, authenticated
from .lobby_views import PLAYER, RULESET
from .matchmaking import EXPIRES_S, MAX_EXPIRES_S, Matchmaker
from .schemas import Strict
from .service import GameService

blp = Blueprint("tickets", __name__, description="Matchmaking for players who are not online")


def init_app(app: Flask, api: Api, service: GameService) -> None:
    """Build the matchmaker and register the blueprint."""
    app.extensions["matchmaker"] = Matchmaker(
        command_client(app.config), service, window_growth=app.config["MATCH_WINDOW_GROWTH"]
    )
    api.register_blueprint(blp)


def _matchmaker() -> Matchmaker:
    return cast(Matchmaker, current_app.extensions["matchmaker"])


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status, mimetype="application/json")


class TicketIn(Strict):
    player_id = PLAYER
    name = fields.String(
        validate=validate.Length(1, 40),
        metadata={"description": "shown to the other players (default: the player_id)"},
    )
    ruleset = RULESET
    players = fields.Integer(
        strict=True,
        required=True,
        validate=validate.Range(2, 5),
        metadata={"description": "the size of the game to wait for"},
    )
    rating_window = fields.Float(
        validate=validate.Range(0, 1000),
        allow_nan=False,
        metadata={
            "description": "match only with players whose rating ordinal in the ruleset's "
            "pool (docs/ratings.md) is at most this far from this player's; the window widens "
            "by the service's MATCH_WINDOW_GROWTH (1) each minute the ticket waits. Absent: "
            "anyone"
        },
    )
    expires_seconds = fields.Integer(
        strict=True,
        load_default=EXPIRES_S,
        validate=validate.Range(60, MAX_EXPIRES_S),
        metadata={
            "description": "how long the ticket waits at most (default a week); then it is "
            "`expired`, never matched, and its player may take another"
        },
    )


class TicketArgs(Strict):
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 1000))


class TicketView(Closed):
    ticket_id = fields.String(required=True)
    player_id = fields.String(required=True)
    name = fields.String(required=True)
    ruleset = fields.String(required=True)
    players = fields.Integer(required=True)
    state = fields.String(
        required=True, validate=validate.OneOf(["waiting", "matched", "cancelled", "expired"])
    )
    created_ms = fields.Integer(required=True)
    game_id = fields.String(
        required=True, allow_none=True, metadata={"description": "once matched"}
    )
    seat = fields.Integer(
        required=True, allow_none=True, metadata={"description": "the player's seat once matched"}
    )
    rating = fields.Float(
        required=True,
        metadata={"description": "the player's rating ordinal when the ticket was taken"},
    )
    rating_window = fields.Float(
        required=True, allow_none=True, metadata={"description": "as asked (null: anyone)"}
    )
    expires_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "when a ticket still waiting expires (Unix ms)"},
    )


class TakenTicket(TicketView):
    token = fields.String(
        required=True,
        metadata={
            "description": "secret: the seat's Authorization: Bearer token in the game this "
            "ticket is matched into; only in this answer"
        },
    )


class TicketList(Closed):
    tickets = fields.List(fields.Nested(TicketView), required=True)


@blp.route("/tickets")
class Tickets(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(TicketIn())
    @blp.response(201, TakenTicket())
    def post(self, body: dict[str, Any]) -> Response:
        """Wait for a game of `players` with this ruleset: the ticket waits until matched or
        cancelled, oldest first. A player waits on one ticket at a time (409
        already_waiting). The seat's token is in this answer only."""
        taken = _matchmaker().take(
            g.api_key["id"],
            body["player_id"],
            body.get("name"),
            body["ruleset"],
            body["players"],
            body.get("rating_window"),
            body["expires_seconds"],
        )
        return _json(taken, 201)

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(TicketArgs(), location="query")
    @blp.response(200, TicketList())
    def get(self, args: dict[str, Any]) -> Response:
        """This key's waiting tickets, oldest first."""
        return _json({"tickets": _matchmaker().waiting(g.api_key["id"], args["limit"])})


@blp.route("/tickets/<ticket_id>")
class OneTicket(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, TicketView())
    def get(self, ticket_id: str) -> Response:
        """Poll a ticket: `matched` with its `game_id` and the player's `seat`."""
        return _json(_matchmaker().get(g.api_key["id"], ticket_id))

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, TicketView())
    def delete(self, ticket_id: str) -> Response:
        """Cancel a waiting ticket (a matched one: 409 ticket_matched)."""
        return _json(_matchmaker().cancel(g.api_key["id"], ticket_id))
