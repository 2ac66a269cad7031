"""Third-party integration: official scoring of records, import, export and webhooks.

| request | key | does |
|---|---|---|
| `POST /v1/score` | yes | scores a `carcassonne-record/1` record (stores nothing) |
| `POST /games/import` | yes | stores a record as a game (not playable), scored by the worker |
| `GET /games/{id}/record` | no | any game as a record (JSON, or the notation) |
| `POST /games/{id}/webhooks` | the game's | delivers every score event of the game, signed |
| `GET /games/{id}/webhooks/{hook}/deliveries` | the hook's | its delivery log |

A key is sent as ``X-Api-Key`` (401 `missing_api_key`, 403 `bad_api_key`) and is rate
limited per key (429 `rate_limited` with ``Retry-After``); every write of the command service
is rate limited per client address before anything else (``ADDRESS_WRITE_RATE``; the client
address behind a proxy: services/common/access.py). Record bodies may be up to
``RECORD_MAX_BYTES`` (413 `body_too_large`); JSON nested deeper than a record ever is gets
400 `json_too_deep`, a body of another type 415 `unsupported_media_type` (every body rule:
services/common/body.py). An illegal record gets 422 with the first bad turn's index in
``details.index``, a stable code and the rule. `POST /games/import` with an
``Idempotency-Key`` creates one game per (API key, Idempotency-Key). See docs/integration.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar, cast

from flask import Flask, Response, current_app, g, request
from flask.views import MethodView
from flask_smorest import Api
from marshmallow import RAISE, Schema, fields, validate
from werkzeug.datastructures import Headers

from carcassonne.errors import GameError
from carcassonne.notation import format_record
from carcassonne.record import record_from_events
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.common.access import (
    check_address,
    checked_key,
    client_address,
    missing_key,
    request_key,
    trusted_proxies,
)
from services.common.body import read_body, unproxied
from services.common.notifications import DEFAULT_OVERLAP_SECONDS, MAX_OVERLAP_SECONDS
from services.common.schemas import Record
from services.common.task_sender import TaskSender
from services.common.webapp import Blueprint, checked_game_id
from services.redis_store.ratelimit import AddressLimiter, RateLimiter

from .client import command_client
from .errors import NotFound
from .hooks import DISPATCH_TASK, SIGNATURES, Webhooks
from .imports import import_game
from .records import (
    check_record_type,
    player_names,
    read_record,
    replay_record,
    score_body,
)
from .schemas import Deliveries as DeliveriesOut
from .schemas import HookList, HookView, ImportedGame, ImportIn, ScoreResult, Webhook
from .service import GameService

NOT_PLAYABLE = (
    "imported games have no player tokens: they can be viewed, exported and scored, not played"
)
F = TypeVar("F", bound=Callable[..., Any])

blp = Blueprint(
    "integration",
    __name__,
    description="Third parties: official scoring of records, import, export and webhooks",
)


@dataclass
class Integration:
    """What the views of this blueprint use (built once per app by `init_app`)."""

    service: GameService
    limiter: RateLimiter
    addresses: AddressLimiter
    hooks: Webhooks
    max_bytes: int


def init_app(app: Flask, api: Api, service: GameService) -> None:
    """Build the integration's parts from the app's settings and register the blueprint."""
    client = command_client(app.config)
    # NOTIFY_MS=0 means "send the worker nothing, its sweeps find the work": hooks likewise.
    tasks: TaskSender = app.extensions["tasks"]
    sender = (
        tasks.to(DISPATCH_TASK, app.config["WEBHOOK_QUEUE"])
        if app.config["NOTIFY_MS"] > 0
        else None
    )
    app.extensions["integration"] = Integration(
        service=service,
        limiter=RateLimiter(client, app.config["API_KEY_RATE"], app.config["API_KEY_BURST"]),
        addresses=AddressLimiter(
            client, app.config["ADDRESS_WRITE_RATE"], app.config["ADDRESS_WRITE_BURST"]
        ),
        hooks=Webhooks(
            client,
            service.store,
            sender,
            app.config["WEBHOOK_ALLOW_PRIVATE"],
            records=service.secrets.get,  # hooks only on the key's own games (owner check)
        ),
        max_bytes=app.config["RECORD_MAX_BYTES"],
    )
    api.register_blueprint(blp)
    proxies = trusted_proxies(app.config["TRUSTED_PROXIES"])

    @app.before_request
    def _address_limit() -> None:
        # Every write, whatever its path, key or outcome (an unknown path, a missing key):
        # counted against its client's address first (nothing is written when refused).
        req = unproxied(request)  # read once
        if req.method not in ("GET", "HEAD", "OPTIONS"):
            check_address(_parts().addresses, client_address(req, proxies))


def _parts() -> Integration:
    return cast(Integration, unproxied(current_app).extensions["integration"])


def authenticated(view: F) -> F:
    """Require a live API key within its rate limit (checked before the body is read)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if request_key(request) is None:
            raise missing_key("this request")
        g.api_key = checked_api_key()
        return view(*args, **kwargs)

    return cast(F, wrapper)


def current_key_id() -> str:
    """The id of the API key an `authenticated` view was called with."""
    return str(g.api_key["id"])


def checked_api_key() -> dict[str, Any] | None:
    """The record of the request's `X-Api-Key` (None when it sends none), within its rate
    limit: 403 `bad_api_key` for an unknown or revoked key, 429 `rate_limited`."""
    key = request_key(request)
    return None if key is None else checked_key(_parts().limiter, key)


def _record_body() -> bytes:
    """The raw body of a record request: its type checked and its size refused beyond the
    limit before it is read, then read whole (a body shorter than its Content-Length is
    refused: services/common/body.py)."""
    check_record_type(request.mimetype)
    return read_body(request, _parts().max_bytes)


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status, mimetype="application/json")


RECORD_BODY = {
    "required": True,
    "description": "a `carcassonne-record/1` record (JSON), or its notation as text/plain",
    "content": {
        "application/json": {"schema": Record},
        "text/plain": {"schema": {"type": "string"}},
    },
}
SECURITY: list[dict[str, list[str]]] = [{"apiKey": []}]


@blp.route("/v1/score")
class Score(MethodView):
    @authenticated  # outermost: the key is checked before the body is read
    @blp.doc(security=SECURITY, requestBody=RECORD_BODY)
    @blp.response(200, ScoreResult())
    def post(self) -> Response:
        """Score a record: timeline, every score explained, final scoring, totals, winners."""
        record, _ = read_record(_record_body(), request.mimetype)
        return _json(score_body(replay_record(record)))


def idempotency_key(headers: Headers | None = None) -> str | None:
    """The request's Idempotency-Key header (from `headers`, else the request's), if any:
    1-128 visible ASCII characters."""
    key = (request.headers if headers is None else headers).get("Idempotency-Key")
    if key is not None and not (1 <= len(key) <= 128 and key.isascii() and key.isprintable()):
        raise GameError(
            "bad_idempotency_key", "Idempotency-Key must be 1-128 visible ASCII characters"
        )
    return key


# What `idempotency_key` accepts: 1-128 visible ASCII characters (spaces inside only: HTTP
# strips them at the ends), for the document and the clients generated from it.
IDEMPOTENCY_KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": "^[!-~]([ -~]*[!-~])?$",
}
IDEMPOTENCY_KEY = {
    "in": "header",
    "name": "Idempotency-Key",
    "schema": IDEMPOTENCY_KEY_SCHEMA,
    "description": "makes a retry safe: the same key (per API key) with the same record "
    "answers the game the first request made; with another record 422 "
    "idempotency_key_reused",
}


def _imported_seat(seat: int, name: str, ids: Sequence[str | None] | None) -> dict[str, Any]:
    """A seat of an import's answer: its `player_id` only when the record gave one (as the
    seats of a created game)."""
    out: dict[str, Any] = {"seat": seat, "name": name}
    if ids is not None and ids[seat] is not None:
        out["player_id"] = ids[seat]
    return out


@blp.route("/games/import")
class Import(MethodView):
    @authenticated
    @blp.doc(
        security=SECURITY,
        requestBody={
            **RECORD_BODY,
            "description": "a record, optionally with a top-level `names` list (seat order) "
            "and, in JSON, `public: true` (listed to everyone; by default only to the key) and "
            "`rated: true` (its players' ratings count it; by default an import is unrated)",
            "content": {
                "application/json": {"schema": ImportIn},
                "text/plain": {"schema": {"type": "string"}},
            },
        },
        parameters=[IDEMPOTENCY_KEY],
    )
    @blp.response(201, ImportedGame())
    def post(self) -> Response:
        """Store a record as a game: scored by the worker, viewable, exportable; not playable."""
        record, extra = read_record(
            _record_body(), request.mimetype, extra=("names", "public", "rated")
        )
        public, rated = extra.get("public", False), extra.get("rated", False)
        for name, flag in (("public", public), ("rated", rated)):
            if not isinstance(flag, bool):
                raise GameError("bad_record", f"`{name}` is true or false")
        given = extra.get("names")  # JSON: a top-level key
        if given is None and record.names is not None:
            given = list(record.names)  # the notation: its header
        names = player_names(given, record.players)
        ids = record.player_ids
        replayed = replay_record(record)
        key = idempotency_key()
        done = import_game(
            _parts().service, replayed, names, g.api_key["id"], key, ids, public, rated
        )
        game_id, state = done.game_id, replayed.state
        response = _json(
            {
                "game_id": game_id,
                "imported": True,
                "playable": False,
                "note": NOT_PLAYABLE,
                "seq": done.seq,
                "players": [_imported_seat(i, n, ids) for i, n in enumerate(names)],
                "final_scores": list(state.scores),
                "links": {
                    "record": f"/games/{game_id}/record",
                    "webhooks": f"/games/{game_id}/webhooks",
                },
            },
            201,
        )
        if done.replayed:  # the same body as the first answer; this header says it is a replay
            response.headers["Idempotent-Replayed"] = "true"
        return response


class RecordArgs(Schema):
    class Meta:
        unknown = RAISE

    format = fields.String(
        validate=validate.OneOf(["json", "notation"]),
        metadata={"description": "json (default) or notation; else by the Accept header"},
    )


@blp.route("/games/<game_id>/record")
class GameRecord(MethodView):
    @blp.arguments(RecordArgs(), location="query")
    @blp.response(200, Record())
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """Any stored game as a record (a game in progress: the turns played so far)."""
        service = _parts().service
        store = service.archive_reads or service.store  # an archived game: from the archive
        events = store.read(checked_game_id(game_id), MOVES)
        if not events:
            raise NotFound("game_not_found", f"no game {game_id}")
        etag = f"m{events[-1].seq}"
        wanted = args.get("format")
        if wanted is None:
            best = request.accept_mimetypes.best_match(["application/json", "text/plain"])
            wanted = "notation" if best == "text/plain" else "json"
        if request.if_none_match.contains_weak(etag + wanted[0]):
            not_modified = Response(status=304)
            not_modified.set_etag(etag + wanted[0])  # a 304 carries its ETag (RFC 9110 15.4.5)
            return not_modified
        # names, player ids: seat order (an archived game's record is kept in its copy)
        seats = (
            service.secrets.get(game_id)
            or (service.archive_reads.record(game_id) if service.archive_reads else None)
            or {}
        )
        record = record_from_events(
            (to_engine(e) for e in events), seats.get("names"), seats.get("player_ids")
        )
        if wanted == "notation":
            response = Response(format_record(record), mimetype="text/plain")
        else:
            response = _json(record.to_dict())
        response.set_etag(etag + wanted[0])
        response.headers["X-Carcassonne-Game-Over"] = (
            "true" if events[-1].type in ("GameEnded", "GameAbandoned") else "false"
        )
        response.vary.add("Accept")
        return response


class WebhookIn(Schema):
    class Meta:
        unknown = RAISE

    url = fields.String(required=True, metadata={"description": "http(s) URL, at most 2048"})
    secret = fields.String(
        required=True, metadata={"description": "16-256 characters; keys HMAC-SHA256"}
    )


@blp.route("/games/<game_id>/webhooks")
class Hooks(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(WebhookIn())
    @blp.response(201, Webhook())
    def post(self, body: dict[str, Any], game_id: str) -> Response:
        """Deliver every score event of this game (from the first) and its result to a URL."""
        hooks = _parts().hooks
        created = hooks.register(
            checked_game_id(game_id), body["url"], body["secret"], g.api_key["id"]
        )
        hook = created["hook_id"]
        created["deliveries"] = f"/games/{game_id}/webhooks/{hook}/deliveries"
        created["signature"] = SIGNATURES[True]
        return _json(created, 201)

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, HookList())
    def get(self, game_id: str) -> Response:
        """This API key's webhooks on the game, oldest first (never their secrets)."""
        return _json({"hooks": _parts().hooks.list(checked_game_id(game_id), g.api_key["id"])})


class RotateHookIn(Schema):
    class Meta:
        unknown = RAISE

    secret = fields.String(
        required=True,
        validate=validate.Length(16, 256),
        metadata={"description": "the new secret: 16-256 characters"},
    )
    overlap_seconds = fields.Integer(
        load_default=DEFAULT_OVERLAP_SECONDS,
        validate=validate.Range(0, MAX_OVERLAP_SECONDS),
        metadata={"description": "how long the secrets it replaces keep signing too"},
    )


@blp.route("/games/<game_id>/webhooks/<hook_id>")
class OneHook(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(204)
    def delete(self, game_id: str, hook_id: str) -> Response:
        """Stop a webhook at once (deliveries not yet made are dropped, its log too)."""
        _parts().hooks.delete(checked_game_id(game_id), hook_id, g.api_key["id"])
        return Response(status=204)


@blp.route("/games/<game_id>/webhooks/<hook_id>/rotate")
class RotateHook(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(RotateHookIn())
    @blp.response(200, HookView())
    def post(self, body: dict[str, Any], game_id: str, hook_id: str) -> Response:
        """Sign with a new secret; the old ones keep signing beside it for the overlap."""
        rotated = _parts().hooks.rotate(
            checked_game_id(game_id), hook_id, g.api_key["id"], body["secret"],
            body["overlap_seconds"],
        )  # fmt: skip
        return _json(rotated)


class DeliveriesArgs(Schema):
    class Meta:
        unknown = RAISE

    after = fields.Integer(load_default=0, validate=validate.Range(0, 10**9))
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 500))


@blp.route("/games/<game_id>/webhooks/<hook_id>/deliveries")
class Deliveries(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(DeliveriesArgs(), location="query")
    @blp.response(200, DeliveriesOut())
    def get(self, args: dict[str, Any], game_id: str, hook_id: str) -> Response:
        """A hook's deliveries in score-event order: attempts, status codes, times, outcome."""
        page = _parts().hooks.deliveries(
            checked_game_id(game_id), hook_id, g.api_key["id"], args["after"], args["limit"]
        )
        return _json(page)
