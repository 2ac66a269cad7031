"""Third-party integration: official scoring of records, import, export and webhooks.

| request | key | does |
|---|---|---|
| `POST /v1/score` | yes | scores a `carcassonne-record/1` record (stores nothing) |
| `POST /games/import` | yes | stores a record as a game (not playable), scored by the worker |
| `GET /games/{id}/record` | no | any game as a record (JSON, or the notation) |
| `POST /games/{id}/webhooks` | yes | delivers every score event of the game, signed |
| `GET /games/{id}/webhooks/{hook}/deliveries` | the hook's | its delivery log |

A key is sent as ``X-Api-Key`` (401 `missing_api_key`, 403 `bad_api_key`) and is rate
limited per key (429 `rate_limited` with ``Retry-After``). Record bodies may be up to
``RECORD_MAX_BYTES`` (413 `body_too_large`); JSON nested deeper than a record ever is gets
400 `json_too_deep`. An illegal record gets 422 with the first bad turn's index in
``details.index``, a stable code and the rule. See docs/integration.md.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar, cast

from flask import Flask, Response, current_app, g, jsonify, request
from flask.views import MethodView
from flask_smorest import Api, Blueprint
from marshmallow import RAISE, Schema, fields, validate

from carcassonne.errors import GameError
from carcassonne.notation import format_record
from carcassonne.record import record_from_events
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine, to_new
from services.common.webapp import checked_game_id

from .client import command_client
from .hooks import DispatchSender, Webhooks
from .ratelimit import RateLimiter
from .records import Replayed, player_names, read_record, replay_record, score_body
from .service import AuthError, Forbidden, GameService, NotFound

API_KEY = "X-Api-Key"
NOT_PLAYABLE = (
    "imported games have no player tokens: they can be viewed, exported and scored, not played"
)
F = TypeVar("F", bound=Callable[..., Any])

blp = Blueprint(
    "integration",
    __name__,
    description="Third parties: official scoring of records, import, export and webhooks",
)


class TooLarge(GameError):
    """A body beyond the configured size."""

    status = 413


class RateLimited(GameError):
    """A key that used up its bucket; `Retry-After` says when the next call may pass."""

    status = 429


@dataclass
class Integration:
    """What the views of this blueprint use (built once per app by `init_app`)."""

    service: GameService
    limiter: RateLimiter
    hooks: Webhooks
    max_bytes: int


def init_app(app: Flask, api: Api, service: GameService) -> None:
    """Build the integration's parts from the app's settings and register the blueprint."""
    client = command_client(app.config)
    broker = app.config["BROKER_URL"] or app.config["REDIS_URL"]
    # NOTIFY_MS=0 means "send the worker nothing, its sweeps find the work": hooks likewise.
    sender = DispatchSender(broker, app.config["WEBHOOK_QUEUE"]) if service.notify else None
    app.extensions["integration"] = Integration(
        service=service,
        limiter=RateLimiter(client, app.config["API_KEY_RATE"], app.config["API_KEY_BURST"]),
        hooks=Webhooks(client, service.store, sender, app.config["WEBHOOK_ALLOW_PRIVATE"]),
        max_bytes=app.config["RECORD_MAX_BYTES"],
    )
    api.spec.components.security_scheme(
        "ApiKey", {"type": "apiKey", "in": "header", "name": API_KEY}
    )
    api.register_blueprint(blp)


def _parts() -> Integration:
    return cast(Integration, current_app.extensions["integration"])


def authenticated(view: F) -> F:
    """Require a live API key within its rate limit (checked before the body is read)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = request.headers.get(API_KEY, "").strip()
        if not key:
            raise AuthError("missing_api_key", f"send your API key as {API_KEY}")
        decision = _parts().limiter.check(key) if len(key) <= 200 else None
        if decision is None or decision.record is None:
            raise Forbidden("bad_api_key", "this API key is unknown or revoked")
        if not decision.allowed:
            seconds = max(1, math.ceil(decision.retry_after_ms / 1000))
            raise RateLimited(
                "rate_limited",
                f"this API key's rate limit is used up; retry in {seconds} s",
                None,
                retry_after=seconds,
            )
        g.api_key = decision.record
        return view(*args, **kwargs)

    return cast(F, wrapper)


@blp.errorhandler(RateLimited)
def _rate_limited(exc: RateLimited) -> tuple[Response, int]:
    response = jsonify(exc.to_dict())
    response.headers["Retry-After"] = str(exc.details["retry_after"])
    return response, exc.status


def _body() -> bytes:
    """The raw body of a record request, refused whole beyond the size limit (before reading)."""
    limit = _parts().max_bytes
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge(
            "body_too_large", f"a record body is at most {limit} bytes", None, limit=limit
        )
    request.max_content_length = limit  # a body without Content-Length is cut off there
    return request.get_data(cache=False)


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status, mimetype="application/json")


RECORD_BODY = {
    "required": True,
    "description": "a `carcassonne-record/1` record (JSON), or its notation as text/plain",
    "content": {
        "application/json": {"schema": {"type": "object"}},
        "text/plain": {"schema": {"type": "string"}},
    },
}
SECURITY: list[dict[str, list[str]]] = [{"ApiKey": []}]


@blp.route("/v1/score")
class Score(MethodView):
    @authenticated  # outermost: the key is checked before the body is read
    @blp.doc(security=SECURITY, requestBody=RECORD_BODY)
    @blp.response(200)
    def post(self) -> Response:
        """Score a record: timeline, every score explained, final scoring, totals, winners."""
        record, _ = read_record(_body(), request.mimetype)
        return _json(score_body(replay_record(record)))


def import_game(
    service: GameService, replayed: Replayed, names: list[str], key_id: str
) -> tuple[str, int]:
    """Store a checked record as a new game in one conditional append; (game id, last seq)."""
    game_id = uuid.uuid4().hex
    # Written first: once the move stream exists the game is listed, names and all. If the
    # append fails, this record alone names no game (every reader starts from the stream).
    service.secrets.put(
        game_id,
        {
            "names": names,
            "seed": None,  # the record came with its draws: there is no seed to reveal
            "tokens": {},  # no seat can play
            "imported": {"key_id": key_id, "time_ms": int(time.time() * 1000)},
        },
    )
    result = service.store.append(
        game_id,
        MOVES,
        [to_new(e) for e in replayed.events],
        expected=0,
        command_id="import",
        marker="$seq",  # moves up to here wait to be scored: the worker's sweep sees it too
        notify_ms=service.notify_ms,
    )
    if result.notify and service.notify is not None:
        service.notify(game_id)
    return game_id, result.last_seq


@blp.route("/games/import")
class Import(MethodView):
    @authenticated
    @blp.doc(
        security=SECURITY,
        requestBody={
            **RECORD_BODY,
            "description": "a record, optionally with a top-level `names` list (seat order)",
        },
    )
    @blp.response(201)
    def post(self) -> Response:
        """Store a record as a game: scored by the worker, viewable, exportable; not playable."""
        record, extra = read_record(_body(), request.mimetype, extra=("names",))
        names = player_names(extra.get("names"), record.players)
        replayed = replay_record(record)
        game_id, seq = import_game(_parts().service, replayed, names, g.api_key["id"])
        state = replayed.state
        return _json(
            {
                "game_id": game_id,
                "imported": True,
                "playable": False,
                "note": NOT_PLAYABLE,
                "seq": seq,
                "players": [{"seat": i, "name": n} for i, n in enumerate(names)],
                "final_scores": list(state.scores),
                "links": {
                    "record": f"/games/{game_id}/record",
                    "webhooks": f"/games/{game_id}/webhooks",
                },
            },
            201,
        )


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
    @blp.response(200)
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """Any stored game as a record (a game in progress: the turns played so far)."""
        events = _parts().service.store.read(checked_game_id(game_id), MOVES)
        if not events:
            raise NotFound("game_not_found", f"no game {game_id}")
        etag = f"m{events[-1].seq}"
        wanted = args.get("format")
        if wanted is None:
            best = request.accept_mimetypes.best_match(["application/json", "text/plain"])
            wanted = "notation" if best == "text/plain" else "json"
        if request.if_none_match.contains(etag + wanted[0]):
            return Response(status=304)
        record = record_from_events(to_engine(e) for e in events)
        if wanted == "notation":
            response = Response(format_record(record), mimetype="text/plain")
        else:
            response = _json(record.to_dict())
        response.set_etag(etag + wanted[0])
        response.headers["X-Carcassonne-Game-Over"] = (
            "true" if events[-1].type == "GameEnded" else "false"
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
    @blp.response(201)
    def post(self, body: dict[str, Any], game_id: str) -> Response:
        """Deliver every score event of this game (from the first) and its result to a URL."""
        hooks = _parts().hooks
        created = hooks.register(
            checked_game_id(game_id), body["url"], body["secret"], g.api_key["id"]
        )
        hook = created["hook_id"]
        created["deliveries"] = f"/games/{game_id}/webhooks/{hook}/deliveries"
        created["signature"] = "X-Carcassonne-Signature: sha256=<HMAC-SHA256(secret, raw body)>"
        return _json(created, 201)


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
    @blp.response(200)
    def get(self, args: dict[str, Any], game_id: str, hook_id: str) -> Response:
        """A hook's deliveries in score-event order: attempts, status codes, times, outcome."""
        page = _parts().hooks.deliveries(
            checked_game_id(game_id), hook_id, g.api_key["id"], args["after"], args["limit"]
        )
        return _json(page)
