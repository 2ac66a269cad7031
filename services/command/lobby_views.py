"""Lobbies over HTTP (every request needs `X-Api-Key`; a key sees only its own lobbies):

- `POST /lobbies` `{"ruleset", "seats", "visibility", "host", "expires_seconds"}`: open one;
- `GET /lobbies?ruleset=&seats=`: the key's listed open lobbies of that ruleset and size;
- `GET /lobbies/{id}`: one lobby (its `game_id` once started);
- `POST /lobbies/{id}/join` `{"player_id", "name", "invite_code"}`: take a seat; the answer
  holds the seat's token, shown only then;
- `POST /lobbies/{id}/leave` `{"player_id"}`: give the seat back before the start;
- `POST /lobbies/{id}/start` `{"player_id"}`: the host starts with the players seated.

The logic is services/command/lobby.py; docs/lobby.md explains it.
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
from .lobby import Lobbies
from .rulesets import NAMES
from .schemas import PLAYER_ID, Strict
from .service import GameService

blp = Blueprint("lobbies", __name__, description="Lobbies: open games players join")
STATES = ["open", "starting", "started", "expired", "closed"]
RULESET = fields.String(
    required=True,
    # The document lists the names; the service checks them itself (422 unknown_ruleset).
    validate=validate.Length(1, 40),
    metadata={"enum": list(NAMES), "description": "a named ruleset (docs/lobby.md)"},
)
SEATS = fields.Integer(strict=True, required=True, validate=validate.Range(2, 5))
PLAYER = fields.String(
    required=True,
    validate=PLAYER_ID,
    metadata={"description": "the app's own user id (1-128 visible ASCII characters)"},
)


def init_app(app: Flask, api: Api, service: GameService) -> None:
    """Build the lobbies' parts and register the blueprint."""
    app.extensions["lobbies"] = Lobbies(command_client(app.config), service)
    api.register_blueprint(blp)


def _lobbies() -> Lobbies:
    return cast(Lobbies, current_app.extensions["lobbies"])


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status, mimetype="application/json")


class HostIn(Strict):
    player_id = PLAYER
    name = fields.String(
        validate=validate.Length(1, 40), metadata={"description": "default: the player_id"}
    )


class LobbyIn(Strict):
    ruleset = RULESET
    seats = SEATS
    visibility = fields.String(
        load_default="listed",
        validate=validate.OneOf(["listed", "invite"]),
        metadata={
            "description": "listed: in GET /lobbies; invite: joined only with the invite "
            "code this answer holds"
        },
    )
    host = fields.Nested(
        HostIn,
        load_default=None,
        metadata={"description": "seated at once; may start the game before it is full"},
    )
    expires_seconds = fields.Integer(
        strict=True,
        load_default=86_400,
        validate=validate.Range(60, 7 * 86_400),
        metadata={"description": "a lobby not full by then expires (default: a day)"},
    )


class LobbyArgs(Strict):
    ruleset = RULESET
    seats = fields.Integer(required=True, validate=validate.Range(2, 5))  # a query: "3"
    limit = fields.Integer(load_default=50, validate=validate.Range(1, 200))


class JoinIn(Strict):
    player_id = PLAYER
    name = fields.String(
        validate=validate.Length(1, 40),
        metadata={"description": "shown to the other players (default: the player_id)"},
    )
    invite_code = fields.String(
        validate=validate.Length(1, 64),
        metadata={"description": "needed for an invite lobby (else 403 bad_invite_code)"},
    )


class LobbyPlayerIn(Strict):
    player_id = PLAYER


class LobbyPlayer(Closed):
    player_id = fields.String(required=True)
    name = fields.String(required=True)
    seat = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "the player's seat once the game started (0 moves first)"},
    )


class LobbyView(Closed):
    lobby_id = fields.String(required=True)
    ruleset = fields.String(required=True)
    seats = fields.Integer(required=True)
    visibility = fields.String(required=True, validate=validate.OneOf(["listed", "invite"]))
    state = fields.String(required=True, validate=validate.OneOf(STATES))
    host = fields.String(required=True, allow_none=True)
    players = fields.List(fields.Nested(LobbyPlayer), required=True)
    created_ms = fields.Integer(required=True)
    expires_ms = fields.Integer(required=True)
    game_id = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "the game, once started (the lobby's own id)"},
    )


class OpenedLobby(LobbyView):
    invite_code = fields.String(metadata={"description": "an invite lobby's code: only here"})
    token = fields.String(metadata={"description": "the host's seat token: only here"})


class LobbyList(Closed):
    lobbies = fields.List(fields.Nested(LobbyView), required=True)


class Joined(Closed):
    lobby_id = fields.String(required=True)
    player_id = fields.String(required=True)
    token = fields.String(
        required=True,
        metadata={
            "description": "secret: the seat's Authorization: Bearer token once the game "
            "starts; only in this answer"
        },
    )
    lobby = fields.Nested(LobbyView, required=True)


@blp.route("/lobbies")
class LobbiesView(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(LobbyIn())
    @blp.response(201, OpenedLobby())
    def post(self, body: dict[str, Any]) -> Response:
        """Open a lobby of this key: a named ruleset, 2-5 seats, listed or by invitation.
        With a `host` the host is seated at once (its token is in this answer only)."""
        opened = _lobbies().open(
            g.api_key["id"],
            body["ruleset"],
            body["seats"],
            body["visibility"] == "listed",
            body["expires_seconds"],
            body["host"],
        )
        return _json(opened, 201)

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(LobbyArgs(), location="query")
    @blp.response(200, LobbyList())
    def get(self, args: dict[str, Any]) -> Response:
        """This key's listed open lobbies of a ruleset and size, expiring soonest first."""
        found = _lobbies().listed(g.api_key["id"], args["ruleset"], args["seats"], args["limit"])
        return _json({"lobbies": found})


@blp.route("/lobbies/<lobby_id>")
class OneLobby(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, LobbyView())
    def get(self, lobby_id: str) -> Response:
        """One lobby of this key: its players and state, and its `game_id` once started."""
        return _json(_lobbies().get(g.api_key["id"], lobby_id))


@blp.route("/lobbies/<lobby_id>/join")
class Join(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(JoinIn())
    @blp.response(200, Joined())
    def post(self, body: dict[str, Any], lobby_id: str) -> Response:
        """Seat a player: the seat's token is in this answer only. The join that takes the
        last seat starts the game (the lobby's `game_id`)."""
        joined = _lobbies().join(
            g.api_key["id"],
            lobby_id,
            body["player_id"],
            body.get("name"),
            body.get("invite_code"),
        )
        return _json(joined)


@blp.route("/lobbies/<lobby_id>/leave")
class Leave(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(LobbyPlayerIn())
    @blp.response(200, LobbyView())
    def post(self, body: dict[str, Any], lobby_id: str) -> Response:
        """Give a seat back before the start (its token with it); a host that leaves passes
        the host to the longest seated player; the last player out closes the lobby."""
        return _json(_lobbies().leave(g.api_key["id"], lobby_id, body["player_id"]))


@blp.route("/lobbies/<lobby_id>/start")
class Start(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(LobbyPlayerIn())
    @blp.response(200, LobbyView())
    def post(self, body: dict[str, Any], lobby_id: str) -> Response:
        """The host (`player_id`) starts the game with the players seated (2 or more)."""
        return _json(_lobbies().start(g.api_key["id"], lobby_id, body["player_id"]))
