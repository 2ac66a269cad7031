"""Builds the one OpenAPI document for the whole public API (`make openapi`), which both
services serve at /openapi.json from the checked-in file (services/common/api_doc.py).

Each service's operations come from its blueprints (flask-smorest, from the marshmallow
schemas); `document()` registers both services' blueprints on bare apps (no Redis, no
settings), merges the two specs and adds what the decorators do not say: operationIds for
generated clients, every error status an operation can answer (all in the one error shape,
`services.common.schemas.Error`), response headers, the non-JSON media types and the
security schemes (`bearerAuth`: a seat's token; `apiKey`: `X-Api-Key`).

`services/common/openapi.json` (linked as `docs/openapi.json`) is this document, checked in
(`make openapi` writes it; a test fails when the two drift). Only `make openapi` and that test
import this module: a service never loads the other service to serve its document. The
integration tests validate responses against it (tests/integration/openapi_client.py).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import flask
import flask_smorest

from services.common.api_doc import DOC_FILE, OPENAPI_VERSION, SpecApi
from services.common.problems import MEDIA_TYPE, problem
from services.common.schemas import MEEPLE_RULE
from tools import openapi_examples as ex

TITLE = "Carcassonne Cloud"
DESCRIPTION = """\
The whole public API of Carcassonne Cloud: the command service (create and play games,
score, import and export records, webhooks) and the query service (boards, scores, event log,
live streams, game lists). Both serve this same document at `/openapi.json`.

Every error, 4xx or 5xx, is RFC 9457 problem details (`application/problem+json`, schema
`Error`): `type` (a section of the service's `/errors` page), `title`, `status`, `detail`,
plus a stable `code`, `rule`, `details` and a `hint` naming the request that helps. A method
a path does not take answers 405 with an `Allow` header. A seat plays with its token
(`Authorization: Bearer <token>`, from the created game); third parties send their API key
as `X-Api-Key`. Views carry an ETag and answer 304 to a matching If-None-Match.

One base URL (`servers`: `baseUrl`, default http://localhost:8000, what `make run` serves): the
proxy in front sends each request to the service that serves its path and method. Two
services stand behind it, and each operation says which serves it (`x-service`: `command` or
`query`); an app needs to know only the one URL. One path may be served by both: `POST /games`
(create) is the command service's, `GET /games` (list) the query service's; a method a path
does not take answers 405 with its `Allow`.
"""

JSON = "application/json"
PROBLEM = MEDIA_TYPE  # every error: RFC 9457 problem details
NDJSON = "application/x-ndjson"
TEXT = "text/plain"
SSE = "text/event-stream"

# The API's one base URL (the document's `servers`): the proxy's public port, which `make run`
# serves on http://localhost:8000, overridable.
SERVERS: list[dict[str, Any]] = [
    {
        "url": "{baseUrl}",
        "description": "the API: every path, each sent by the proxy to the service that serves it",
        "variables": {"baseUrl": {"default": "http://localhost:8000"}},
    }
]


def _header(description: str, example: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if example is not None:
        schema["example"] = example
    return {"description": description, "schema": schema}


# Sent every time on the responses that declare them (`required`), but Idempotent-Replayed.
HEADERS: dict[str, dict[str, Any]] = {
    "ETag": _header(
        "the version of this view: send it as If-None-Match (304 when current); a move "
        'sequence ETag ("m6") is also a turn\'s If-Match',
        '"m6"',
    ),
    "Cache-Control": _header(
        "no-cache: always revalidate (views move with the game); the tile catalog: "
        "public, max-age=86400 (versioned data)"
    ),
    "Retry-After": {
        "description": "seconds to wait before retrying",
        "schema": {"type": "string", "pattern": "^[0-9]+$", "example": "2"},
    },
    "X-Carcassonne-Game-Over": {
        "description": "whether the exported game has ended (played out or abandoned)",
        "schema": {"type": "string", "enum": ["true", "false"]},
    },
    "Idempotent-Replayed": {
        "description": "present when this answer repeats the first request's with the same "
        "Idempotency-Key (nothing new was stored)",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "Vary": _header("Accept: the representation depends on it"),
    "Location": _header(
        "where to ask again for what is pending (a hint: this same URL)",
        "/games/5f0c2d1e/hint?level=mcts",
    ),
    "Server-Timing": _header("the view's own time in the server, in milliseconds", "view;dur=1.52"),
}

# Error responses, by status: every one has the `Error` body; the codes are the ones the
# services send (stable, machine-readable).
ERRORS: dict[int, tuple[str, str, tuple[str, ...]]] = {
    400: (
        "BadRequest",
        "the body cannot be read: invalid_json, json_too_deep, incomplete_body, invalid_notation",
        (),
    ),
    401: (
        "Unauthorized",
        "missing credentials: missing_token (no Bearer token), missing_api_key (an API "
        "key is needed: creating or importing a game, listing games by player, scoring, "
        "webhooks, subscriptions)",
        (),
    ),
    403: (
        "Forbidden",
        "bad_token (not a seat of this game, or not the seat to move), "
        "bad_api_key (unknown or revoked), not_playable, hints_disabled (the game's ruleset "
        "does not allow hints), not_game_owner (webhooks: only the API key that created or "
        "imported the game registers them); lobbies: bad_invite_code, not_lobby_host",
        (),
    ),
    404: (
        "NotFound",
        "game_not_found, hook_not_found, subscription_not_found, tileset_not_found, "
        "no_such_request, lobby_not_found, ticket_not_found, vacation_not_found (also "
        "another API key's)",
        (),
    ),
    406: ("NotAcceptable", "no representation matches the Accept header", ()),
    409: (
        "Conflict",
        "the game moved on: stale_sequence (If-Match), game_over, "
        "not_your_turn, player_out (the seat is out; a bot may play it: docs/takeover.md), "
        "undo_not_allowed, undo_pending, undo_expired, no_hand (R10.3: the "
        "game has no hand), game_not_over (a rematch) and other refusals of the game's "
        "state; lobbies: already_joined, name_taken, lobby_full, lobby_started, "
        "lobby_expired, lobby_closed, not_in_lobby, lobby_too_small; tickets: "
        "already_waiting (a second ticket of a waiting player), ticket_matched; vacations "
        "(docs/clocks.md): vacation_allowance_exceeded (details.allowance_days, used_days, "
        "asked_days, year), vacation_overlaps (details.from_ms, until_ms: the vacation it "
        "overlaps), too_many_vacations (details.max_vacations: running or to come; "
        "details.max_called_off: call-offs within a day), "
        "vacation_over (ended already: details.until_ms)",
        (),
    ),
    413: ("PayloadTooLarge", "body_too_large", ()),
    415: (
        "UnsupportedMediaType",
        "unsupported_media_type: no Content-Type or another one (details.expected, details.got)",
        (),
    ),
    422: (
        "UnprocessableContent",
        "the body or query does not match the schema "
        "(invalid_body, invalid_query: details.fields), or breaks a rule (the code, the "
        "rule, and for records details.index: the first bad turn); bad_if_match and "
        "bad_idempotency_key for those headers, idempotency_key_reused; for webhooks and "
        "subscriptions bad_webhook_url, webhook_url_not_public, webhook_url_not_https, "
        "bad_webhook_secret, too_many_webhooks, bad_event_kinds, unknown_event_kind, "
        "too_many_subscriptions; unknown_ruleset (lobbies: details.known); unknown_on_leave "
        "(a ruleset's on_leave naming no bot level: details.choices, docs/takeover.md); "
        "no_takeover_to_refuse (a record's takeover_refused on a turn whose replay has no "
        "takeover to refuse: details.index, details.player; docs/takeover.md); clocks "
        "(docs/clocks.md): bad_initial_seconds, bad_increment_seconds, "
        "increment_without_bank, bank_with_turn_limit, bank_with_undo, hand_with_bank, "
        "and for vacations bad_vacation (days out of range), bad_vacation_start (from_ms "
        "in the past or more than 366 days ahead: details.now_ms), bad_player_id",
        (),
    ),
    429: (
        "TooManyRequests",
        "rate_limited: this API key's rate limit, or this client address's limit on "
        "writes (every POST, PUT, PATCH or DELETE, refused ones too), is used up; retry "
        "after Retry-After seconds. Bot time (docs/bots.md): bot_budget_exceeded (the API "
        "key's bot seconds in flight, or its hints at once: details.budget), "
        "bot_day_budget_exceeded (its bot seconds today, UTC), hint_budget_exceeded (the "
        "seat's hint seconds in this game)",
        ("Retry-After",),
    ),
    503: (
        "ServiceUnavailable",
        "store_unavailable, not_replicated (retry with the same Idempotency-Key), "
        "too_many_streams, worker_unreachable (a ping not handed to the worker), "
        "hint_unavailable (the bot worker did not answer a hint in time)",
        ("Retry-After",),
    ),
}
NOT_MODIFIED = "NotModified"


@dataclass(frozen=True)
class Op:
    """What the document says of one operation beyond its decorators."""

    operation_id: str
    errors: tuple[int, ...]
    security: str | None = None  # "bearerAuth" or "apiKey"
    optional_security: bool = False  # the credential may be left out
    headers: dict[int, tuple[str, ...]] = field(default_factory=dict)  # success headers
    media: dict[int, dict[str, Any]] = field(default_factory=dict)  # more media types
    not_modified: bool = False
    parameters: tuple[dict[str, Any], ...] = ()  # beside the ones the decorators document
    request: dict[str, Any] = field(default_factory=dict)  # request body example by media type
    examples: dict[int, Any] = field(default_factory=dict)  # JSON success body example by status


BODY = (400, 413, 415, 422)  # every JSON body: unreadable, too large, wrong type, invalid
OPERATIONS: dict[tuple[str, str], Op] = {
    # The command service.
    ("post", "/games"): Op(
        "createGame",
        (*BODY, 401, 403, 429, 503),
        security="apiKey",  # the key that creates a game owns it (subscriptions, lists)
        request={JSON: ex.CREATE_GAME},
        examples={201: ex.CREATED_GAME},
    ),
    ("post", "/games/{game_id}/turns"): Op(
        "playTurn",
        (*BODY, 401, 403, 404, 409, 429, 503),
        security="bearerAuth",
        request={JSON: ex.TURN},
        examples={200: ex.TURN_RESULT},
    ),
    ("post", "/games/{game_id}/players/{seat}/token"): Op(
        "reissueToken",
        (401, 403, 404, 409, 429, 503),
        security="apiKey",
        examples={200: ex.REISSUED_TOKEN},
    ),
    ("post", "/games/{game_id}/rematch"): Op(
        "rematchGame",
        (401, 403, 404, 409, 429, 503),
        security="apiKey",
        examples={201: ex.REMATCH},
    ),
    ("post", "/games/{game_id}/resign"): Op(
        "resign",
        (401, 403, 404, 409, 429, 503),
        security="bearerAuth",
        examples={200: ex.RESIGN_RESULT},
    ),
    ("get", "/games/{game_id}/turn"): Op(
        "getTurn",
        (404, 409, 503),  # 409 game_over: an archived game (deploy/README.md, "The archive")
        headers={200: ("ETag", "Cache-Control")},
        not_modified=True,
        examples={200: ex.TURN_VIEW},
    ),
    ("get", "/games/{game_id}/hand"): Op(
        "getHand",
        (401, 403, 404, 409, 503),
        security="bearerAuth",
        headers={200: ("Cache-Control",)},
        examples={200: ex.HAND},
    ),
    ("get", "/games/{game_id}/hint"): Op(
        "getHint",
        (401, 403, 404, 409, 422, 429, 503),
        security="bearerAuth",
        headers={200: ("Cache-Control",), 202: ("Cache-Control", "Location", "Retry-After")},
        examples={200: ex.HINT, 202: ex.HINT_PENDING},
    ),
    ("post", "/games/{game_id}/undo"): Op(
        "requestUndo",
        (401, 403, 404, 409, 422, 429, 503),
        security="bearerAuth",
        examples={200: ex.UNDO_RESULT},
    ),
    ("post", "/games/{game_id}/undo/{request}/accept"): Op(
        "acceptUndo",
        (401, 403, 404, 409, 422, 429, 503),
        security="bearerAuth",
    ),
    ("post", "/games/{game_id}/undo/{request}/refuse"): Op(
        "refuseUndo",
        (401, 403, 404, 409, 422, 429, 503),
        security="bearerAuth",
    ),
    ("post", "/v1/score"): Op(
        "scoreRecord",
        (*BODY, 401, 403, 429, 503),
        security="apiKey",
        request={JSON: ex.RECORD, TEXT: ex.RECORD_NOTATION},
        examples={200: ex.SCORE_RESULT},
    ),
    ("post", "/games/import"): Op(
        "importGame",
        (*BODY, 401, 403, 429, 503),
        security="apiKey",
        headers={201: ("Idempotent-Replayed",)},
        request={JSON: ex.RECORD, TEXT: ex.RECORD_NOTATION},
        examples={201: ex.IMPORTED_GAME},
    ),
    ("get", "/games/{game_id}/record"): Op(
        "exportRecord",
        (404, 422, 503),
        headers={200: ("ETag", "X-Carcassonne-Game-Over", "Vary")},
        media={200: {TEXT: {"schema": {"type": "string", "description": "the notation"}}}},
        not_modified=True,
        examples={200: ex.RECORD},
    ),
    ("post", "/games/{game_id}/webhooks"): Op(
        "registerWebhook",
        (*BODY, 401, 403, 404, 409, 429, 503),  # 409 game_over: an archived game
        security="apiKey",
        request={JSON: ex.WEBHOOK_IN},
        examples={201: ex.WEBHOOK},
    ),
    ("get", "/games/{game_id}/webhooks/{hook_id}/deliveries"): Op(
        "listDeliveries", (401, 403, 404, 422, 429, 503), security="apiKey"
    ),
    ("get", "/games/{game_id}/webhooks"): Op(
        "listWebhooks", (401, 403, 404, 429, 503), security="apiKey"
    ),
    ("delete", "/games/{game_id}/webhooks/{hook_id}"): Op(
        "deleteWebhook", (401, 403, 404, 429, 503), security="apiKey"
    ),
    ("post", "/games/{game_id}/webhooks/{hook_id}/rotate"): Op(
        "rotateWebhookSecret",
        (*BODY, 401, 403, 404, 429, 503),
        security="apiKey",
        request={JSON: {"secret": "a-new-secret-of-16-or-more", "overlap_seconds": 3600}},
    ),
    ("post", "/v1/subscriptions"): Op(
        "createSubscription",
        (*BODY, 401, 403, 429, 503),
        security="apiKey",
        request={JSON: ex.SUBSCRIPTION_IN},
        examples={201: ex.SUBSCRIPTION_CREATED},
    ),
    ("get", "/v1/subscriptions"): Op("listSubscriptions", (401, 403, 429, 503), security="apiKey"),
    ("get", "/v1/subscriptions/{sub_id}"): Op(
        "getSubscription", (401, 403, 404, 429, 503), security="apiKey"
    ),
    ("delete", "/v1/subscriptions/{sub_id}"): Op(
        "deleteSubscription", (401, 403, 404, 429, 503), security="apiKey"
    ),
    ("post", "/v1/subscriptions/{sub_id}/rotate"): Op(
        "rotateSubscriptionSecret",
        (*BODY, 401, 403, 404, 429, 503),
        security="apiKey",
        request={JSON: {"overlap_seconds": 3600}},
    ),
    ("post", "/v1/subscriptions/{sub_id}/ping"): Op(
        "pingSubscription", (401, 403, 404, 429, 503), security="apiKey"
    ),
    ("get", "/v1/subscriptions/{sub_id}/deliveries"): Op(
        "listSubscriptionDeliveries",
        (401, 403, 404, 422, 429, 503),
        security="apiKey",
        examples={200: ex.SUBSCRIPTION_DELIVERIES},
    ),
    ("post", "/lobbies"): Op(
        "openLobby",
        (*BODY, 401, 403, 429, 503),
        security="apiKey",
        request={JSON: ex.LOBBY_IN},
        examples={201: ex.LOBBY_OPENED},
    ),
    ("get", "/lobbies"): Op("listLobbies", (401, 403, 422, 429, 503), security="apiKey"),
    ("get", "/lobbies/{lobby_id}"): Op(
        "getLobby", (401, 403, 404, 429, 503), security="apiKey", examples={200: ex.LOBBY}
    ),
    ("post", "/lobbies/{lobby_id}/join"): Op(
        "joinLobby",
        (*BODY, 401, 403, 404, 409, 429, 503),
        security="apiKey",
        request={JSON: ex.JOIN_IN},
        examples={200: ex.JOINED},
    ),
    ("post", "/lobbies/{lobby_id}/leave"): Op(
        "leaveLobby",
        (*BODY, 401, 403, 404, 409, 429, 503),
        security="apiKey",
        request={JSON: {"player_id": "u-2"}},
    ),
    ("post", "/lobbies/{lobby_id}/start"): Op(
        "startLobby",
        (*BODY, 401, 403, 404, 409, 429, 503),
        security="apiKey",
        request={JSON: {"player_id": "u-1"}},
    ),
    ("post", "/v1/players/{player_id}/vacations"): Op(
        "declareVacation",
        (*BODY, 401, 403, 409, 429, 503),
        security="apiKey",
        request={JSON: {"days": 7}},
        examples={201: ex.VACATION_DECLARED},
    ),
    ("get", "/v1/players/{player_id}/vacations"): Op(
        "listVacations",
        (401, 403, 422, 429, 503),
        security="apiKey",
        examples={200: ex.VACATIONS},
    ),
    ("delete", "/v1/players/{player_id}/vacations/{vacation_id}"): Op(
        "endVacation",
        (401, 403, 404, 409, 422, 429, 503),
        security="apiKey",
        examples={200: ex.VACATION_ENDED},
    ),
    ("post", "/tickets"): Op(
        "takeTicket",
        (*BODY, 401, 403, 409, 429, 503),
        security="apiKey",
        request={JSON: ex.TICKET_IN},
        examples={201: ex.TICKET_TAKEN},
    ),
    ("get", "/tickets"): Op("listTickets", (401, 403, 422, 429, 503), security="apiKey"),
    ("get", "/tickets/{ticket_id}"): Op(
        "getTicket", (401, 403, 404, 429, 503), security="apiKey", examples={200: ex.TICKET}
    ),
    ("delete", "/tickets/{ticket_id}"): Op(
        "cancelTicket", (401, 403, 404, 409, 429, 503), security="apiKey"
    ),
    # The query service.
    ("get", "/games"): Op(
        "listGames",
        (401, 403, 422, 503),
        security="apiKey",  # optional: without a key the public games, with one its own
        optional_security=True,
        headers={200: ("ETag", "Cache-Control")},
        not_modified=True,
    ),
    ("get", "/games/{game_id}/board"): Op(
        "getBoard",
        (404, 422, 503),
        headers={200: ("ETag", "Cache-Control")},
        not_modified=True,
        examples={200: ex.BOARD},
    ),
    ("get", "/games/{game_id}/board.svg"): Op(
        "getBoardSvg",
        (404, 422, 503),
        headers={200: ("ETag", "Cache-Control", "Server-Timing")},
        not_modified=True,
    ),
    ("get", "/tilesets"): Op(
        "listTilesets",
        (),
        headers={200: ("ETag", "Cache-Control")},
        not_modified=True,
        examples={200: ex.TILESETS},
    ),
    ("get", "/tilesets/{name}"): Op(
        "getTileset",
        (404,),
        headers={200: ("ETag", "Cache-Control")},
        not_modified=True,
        examples={200: ex.TILESET},
    ),
    ("get", "/games/{game_id}/scores"): Op(
        "getScores",
        (404, 422, 503),
        headers={200: ("ETag", "Cache-Control")},
        not_modified=True,
        examples={200: ex.SCORES},
    ),
    ("get", "/games/{game_id}/events"): Op(
        "getEvents",
        (404, 422, 503),
        media={
            200: {
                NDJSON: {
                    "schema": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/LogItem"},
                        "description": "JSON Lines: one LogItem per line, in log order "
                        "(the whole log unless `limit` is given)",
                    }
                }
            }
        },
        not_modified=True,
    ),
    ("get", "/v1/ratings/{pool}"): Op(
        "getLeaderboard", (401, 403, 404, 422, 503), security="apiKey"
    ),
    ("get", "/v1/ratings"): Op("getPlayerRatings", (401, 403, 404, 422, 503), security="apiKey"),
    ("get", "/"): Op("viewGames", ()),  # a static page: its script reads /games
    ("get", "/games/{game_id}/view"): Op("viewGame", (404, 503)),
    ("get", "/games/{game_id}/live"): Op(
        "streamLive",
        (404, 422, 503),
        parameters=(
            {
                "in": "header",
                "name": "Last-Event-ID",
                "schema": {"type": "string", "pattern": r"^([0-9]{1,15}-[0-9]{1,15})?$"},
                "description": "resume after this event id (a cursor; wins over `after`; "
                "empty: none)",
            },
        ),
    ),
}


def _service_spec(service: str, blueprints: list[flask_smorest.Blueprint]) -> dict[str, Any]:
    """One service's spec, each operation naming the service that serves it and saying so."""
    spec = _blueprints_spec(service, blueprints)
    for item in spec.get("paths", {}).values():
        for method, operation in item.items():
            if method == "parameters":
                continue
            operation["x-service"] = service
            served = f"Served by the {service} service (`x-service`), through the one base URL."
            description = operation.get("description")
            operation["description"] = f"{description}\n\n{served}" if description else served
    return spec


def _blueprints_spec(title: str, blueprints: list[flask_smorest.Blueprint]) -> dict[str, Any]:
    app = flask.Flask(f"openapi-{title}")
    app.config.update(
        API_TITLE=title,
        API_VERSION="1",
        OPENAPI_VERSION=OPENAPI_VERSION,
        OPENAPI_URL_PREFIX=None,  # nothing served: the spec is all we want of this app
    )
    api = SpecApi(app)
    for blp in blueprints:
        api.register_blueprint(blp)
    return dict(api.spec.to_dict())


def service_specs() -> list[dict[str, Any]]:
    """Each service's own spec, as its decorators make it."""
    from services.command import app as command_app
    from services.command import (
        integration,
        lobby_views,
        subscription_views,
        ticket_views,
        undo_api,
        vacation_views,
    )
    from services.query import app as query_app
    from services.query import pages, pictures, ratings

    return [
        _service_spec(
            "command",
            [
                command_app.blp,
                integration.blp,
                subscription_views.blp,
                undo_api.blp,
                lobby_views.blp,
                ticket_views.blp,
                vacation_views.blp,
            ],
        ),
        _service_spec(
            "query",
            [query_app.blp, pictures.boards, pictures.tilesets, ratings.blp, pages.blp],
        ),
    ]


def merge(specs: list[dict[str, Any]]) -> dict[str, Any]:
    """One spec of several: paths joined by method, components by name (a name that means
    two different things is an error, not a silent overwrite)."""
    out: dict[str, Any] = {"paths": {}, "components": {}}
    for spec in specs:
        for path, item in spec.get("paths", {}).items():
            target = out["paths"].setdefault(path, {})
            for key, value in item.items():
                if key in target and target[key] != value:
                    raise ValueError(f"{key} {path} is defined twice")
                target[key] = value
        for section, named in spec.get("components", {}).items():
            target = out["components"].setdefault(section, {})
            for name, value in named.items():
                if name in target and target[name] != value:
                    raise ValueError(f"components/{section}/{name} differs between services")
                target[name] = value
    return out


def _error_response(status: int) -> dict[str, Any]:
    _, description, headers = ERRORS[status]
    shown = ex.ERRORS[status]
    example = problem(shown["code"], shown["message"], status, shown["rule"], shown["details"])
    response: dict[str, Any] = {
        "description": description,
        "content": {
            PROBLEM: {"schema": {"$ref": "#/components/schemas/Error"}, "example": example}
        },
    }
    if headers:
        response["headers"] = {h: {"$ref": f"#/components/headers/{h}"} for h in headers}
    return response


def annotate(spec: dict[str, Any]) -> dict[str, Any]:
    """The merged spec with `OPERATIONS` applied; every operation must have an entry."""
    doc = copy.deepcopy(spec)
    components = doc["components"]
    components["schemas"]["RecordTurn"] = _record_turn(components["schemas"]["RecordTurn"])
    for meeple in ("Meeple", "MeepleIn"):  # one flat shape; its rule in words (MEEPLE_RULE)
        components["schemas"][meeple]["description"] = MEEPLE_RULE
    components["responses"] = {name: _error_response(s) for s, (name, _, _) in ERRORS.items()}
    components["responses"][NOT_MODIFIED] = {
        "description": "Not Modified: the If-None-Match ETag is current",
        "headers": {"ETag": {"$ref": "#/components/headers/ETag"}},
    }
    components["headers"] = {
        name: {**header, "required": name != "Idempotent-Replayed"}
        for name, header in HEADERS.items()
    }
    components["securitySchemes"] = {
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": "a seat's secret token, from the players of the created game",
        },
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
    }
    seen = set()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            op = OPERATIONS.get((method, path))
            if op is None:
                raise ValueError(f"{method.upper()} {path} is not described in OPERATIONS")
            seen.add((method, path))
            _describe(operation, op)
    missing = set(OPERATIONS) - seen
    if missing:
        raise ValueError(f"OPERATIONS names operations that do not exist: {sorted(missing)}")
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": TITLE, "version": "1", "description": DESCRIPTION},
        "servers": SERVERS,
        "paths": doc["paths"],
        "components": components,
    }


def _record_turn(flat: dict[str, Any]) -> dict[str, Any]:
    """A record's turn as the shapes `carcassonne.record.turn_from_dict` reads: a placement
    (x, y and rotation required), a discard (only `tile` and `"discard": true`), a timed-out
    turn (only `tile` and `"timeout": true`), a resignation (only `resign`; either of these two
    may have `"takeover_refused": true`, docs/takeover.md) or an undo of the
    placement before (only `"undo": true`, docs/undo.md). marshmallow describes one flat
    object with every key optional."""
    props = dict(flat["properties"])
    props.pop("undo", None)
    refused = {"takeover_refused": {**props.pop("takeover_refused"), "enum": [True]}}
    placed = {k: v for k, v in props.items() if k not in ("timeout", "resign")}
    placement = {
        "type": "object",
        "properties": {
            **placed,
            "discard": {"type": "boolean", "enum": [False]},
            "recall_abbot": {"type": "boolean", "enum": [True]},
        },
        "required": ["tile", "x", "y", "rotation"],
        "additionalProperties": False,
    }
    discard = {
        "type": "object",
        "properties": {"tile": props["tile"], "discard": {"type": "boolean", "enum": [True]}},
        "required": ["tile", "discard"],
        "additionalProperties": False,
    }
    timeout = {
        "type": "object",
        "properties": {
            "tile": props["tile"],
            "timeout": {"type": "boolean", "enum": [True]},
            **refused,
        },
        "required": ["tile", "timeout"],
        "additionalProperties": False,
    }
    resign = {
        "type": "object",
        "properties": {"resign": props["resign"], **refused},
        "required": ["resign"],
        "additionalProperties": False,
    }
    undo = {
        "type": "object",
        "properties": {"undo": {"type": "boolean", "enum": [True]}},
        "required": ["undo"],
        "additionalProperties": False,
    }
    return {
        "description": flat.get("description", ""),
        "oneOf": [placement, discard, timeout, resign, undo],
    }


def _describe(operation: dict[str, Any], op: Op) -> None:
    operation["operationId"] = op.operation_id
    responses = operation["responses"]
    responses.pop("default", None)  # every status the operation answers is listed instead
    for status in op.errors:
        responses[str(status)] = {"$ref": f"#/components/responses/{ERRORS[status][0]}"}
    if op.not_modified:
        responses["304"] = {"$ref": f"#/components/responses/{NOT_MODIFIED}"}
    for status, names in op.headers.items():
        responses[str(status)]["headers"] = {
            h: {"$ref": f"#/components/headers/{h}"} for h in names
        }
    for status, media in op.media.items():
        responses[str(status)].setdefault("content", {}).update(media)
    for status, example in op.examples.items():
        responses[str(status)]["content"][JSON]["example"] = example
    for media_type, example in op.request.items():
        operation["requestBody"]["content"][media_type]["example"] = example
    if op.security is not None:
        operation["security"] = [{op.security: []}]
        if op.optional_security:
            operation["security"].insert(0, {})
    # Credentials are security schemes, not header parameters.
    operation["parameters"] = [
        p
        for p in operation.get("parameters", [])
        if not (p.get("in") == "header" and p.get("name") in ("Authorization", "X-Api-Key"))
    ] + list(op.parameters)
    if not operation["parameters"]:
        del operation["parameters"]


@cache
def document() -> dict[str, Any]:
    """The whole public API's OpenAPI document (built once per process)."""
    return annotate(merge(service_specs()))


@cache
def document_json() -> str:
    """`document()` as served and as checked in (`docs/openapi.json`)."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """`python -m tools.openapi`: write the checked-in document (`make openapi`)."""
    DOC_FILE.write_text(document_json(), encoding="utf-8")
    print(f"wrote {DOC_FILE}")


if __name__ == "__main__":
    main()
