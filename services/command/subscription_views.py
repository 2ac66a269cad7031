"""Subscriptions per API key over HTTP (every request needs `X-Api-Key`; a key sees only its
own subscriptions):

- `POST /v1/subscriptions` `{"url", "kinds"}`: subscribe to every game the key created or
  imported; the answer holds the secret, shown only then;
- `GET /v1/subscriptions`: the key's subscriptions (never a secret);
- `GET` / `DELETE /v1/subscriptions/{id}`: one subscription; stop it;
- `POST /v1/subscriptions/{id}/rotate` `{"overlap_seconds"}`: a new secret, the old one keeps
  signing beside it for the overlap;
- `POST /v1/subscriptions/{id}/ping`: the worker POSTs a signed `ping`, once;
- `GET /v1/subscriptions/{id}/deliveries?limit=`: the most recent attempts, newest first.

The logic is services/command/subscriptions.py; the deliveries are the worker's
(services/scoring/subscriptions.py). docs/subscriptions.md says how to verify a signature.
"""

from __future__ import annotations

import json
from typing import Any, cast

from flask import Flask, Response, current_app, g
from flask.views import MethodView
from flask_smorest import Api
from marshmallow import RAISE, Schema, fields, validate

from services.common.http_errors import game_error_response
from services.common.notifications import (
    DEFAULT_OVERLAP_SECONDS,
    KINDS,
    MAX_OVERLAP_SECONDS,
    RECENT_KEPT,
)
from services.common.schemas import Closed
from services.common.signing import SIGNATURE_HEADER
from services.common.task_sender import TaskSender
from services.common.webapp import Blueprint

from .client import command_client
from .integration import SECURITY, authenticated
from .subscriptions import PING_TASK, Subscriptions, UnavailableWorker

blp = Blueprint(
    "subscriptions",
    __name__,
    description="Notifications per API key: every game the key created or imported",
)
SIGNATURE = f"{SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + '.' + body)>"


def init_app(app: Flask, api: Api) -> None:
    """Build the subscriptions' parts from the app's settings and register the blueprint."""
    tasks: TaskSender = app.extensions["tasks"]
    # NOTIFY_MS=0: no broker to send to (the sweeps do the work)
    ping = tasks.to(PING_TASK, app.config["WEBHOOK_QUEUE"]) if app.config["NOTIFY_MS"] > 0 else None
    development = bool(app.config["WEBHOOK_ALLOW_PRIVATE"])
    if development:
        app.logger.warning(
            "WEBHOOK_ALLOW_PRIVATE is on (development): webhook and subscription URLs may be "
            "http:// and point at loopback or private addresses. Never in production."
        )
    app.extensions["subscriptions"] = Subscriptions(command_client(app.config), ping, development)
    api.register_blueprint(blp)


@blp.errorhandler(UnavailableWorker)
def _unavailable(exc: UnavailableWorker) -> tuple[Response, int]:
    response = game_error_response(exc)
    response.headers["Retry-After"] = "5"
    return response, exc.status


def _subs() -> Subscriptions:
    return cast(Subscriptions, current_app.extensions["subscriptions"])


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status, mimetype="application/json")


class SubscriptionIn(Schema):
    class Meta:
        unknown = RAISE

    url = fields.String(
        required=True,
        metadata={"description": "https URL (http and loopback only in development), ≤ 2048"},
    )
    kinds = fields.List(
        # The document lists the kinds (generated clients get an enum); the service checks
        # them itself so an unknown one gets its own code, 422 unknown_event_kind.
        fields.String(validate=validate.Length(1, 40), metadata={"enum": list(KINDS)}),
        required=True,
        validate=validate.Length(1, 20),
        metadata={"description": f"event kinds to receive: any of {', '.join(KINDS)}"},
    )


class RotateIn(Schema):
    class Meta:
        unknown = RAISE

    overlap_seconds = fields.Integer(
        strict=True,  # 2.5 or 1e-42 is not a number of seconds (it was truncated to 2, 0)
        load_default=DEFAULT_OVERLAP_SECONDS,
        validate=validate.Range(0, MAX_OVERLAP_SECONDS),
        metadata={"description": "how long the replaced secret keeps signing (default 1 day)"},
    )


class DeliveriesArgs(Schema):
    class Meta:
        unknown = RAISE

    limit = fields.Integer(load_default=50, validate=validate.Range(1, RECENT_KEPT))


class Subscription(Closed):
    subscription_id = fields.String(required=True)
    url = fields.String(required=True, metadata={"description": "as stored (normalised)"})
    kinds = fields.List(fields.String(validate=validate.OneOf(KINDS)), required=True)
    created_ms = fields.Integer(required=True)
    secrets_live = fields.Integer(
        required=True, metadata={"description": "secrets signing now (2 during an overlap)"}
    )
    overlap_until_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "when the last rotated-out secret stops signing"},
    )


class SubscriptionWithSecret(Subscription):
    secret = fields.String(
        required=True, metadata={"description": "shown only in this answer: keep it"}
    )
    signature = fields.String(required=True, metadata={"description": "the header's form"})


class SubscriptionList(Closed):
    subscriptions = fields.List(fields.Nested(Subscription), required=True)


class PingSent(Closed):
    subscription_id = fields.String(required=True)
    delivery = fields.String(required=True, metadata={"description": "the ping's delivery id"})
    deliveries = fields.String(required=True, metadata={"description": "where it shows"})


class RecentAttempt(Closed):
    delivery = fields.String(required=True)
    game_id = fields.String(required=True, allow_none=True)
    kind = fields.String(required=True, validate=validate.OneOf([*KINDS, "ping"]))
    seq = fields.Integer(required=True, allow_none=True, metadata={"description": "move seq"})
    attempt = fields.Integer(required=True)
    at_ms = fields.Integer(required=True)
    ms = fields.Integer(required=True)
    status = fields.Integer(required=True, allow_none=True)
    outcome = fields.String(
        required=True, validate=validate.OneOf(["delivered", "retrying", "failed"])
    )
    error = fields.String()


class RecentDeliveries(Closed):
    subscription_id = fields.String(required=True)
    kept = fields.Integer(required=True, metadata={"description": "attempts the log keeps"})
    attempts = fields.List(fields.Nested(RecentAttempt), required=True)


def _with_secret(view: dict[str, Any]) -> dict[str, Any]:
    return {**view, "signature": SIGNATURE}


@blp.route("/v1/subscriptions")
class SubscriptionsView(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(SubscriptionIn())
    @blp.response(201, SubscriptionWithSecret())
    def post(self, body: dict[str, Any]) -> Response:
        """Subscribe to every game this key created or imported: each event of the kinds
        asked for, signed, in order per game. The secret is in this answer only."""
        created = _subs().create(g.api_key["id"], body["url"], body["kinds"])
        return _json(_with_secret(created), 201)

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, SubscriptionList())
    def get(self) -> Response:
        """This key's subscriptions (never their secrets)."""
        return _json({"subscriptions": _subs().list(g.api_key["id"])})


@blp.route("/v1/subscriptions/<sub_id>")
class OneSubscription(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(200, Subscription())
    def get(self, sub_id: str) -> Response:
        """One subscription of this key."""
        return _json(_subs().get(g.api_key["id"], sub_id))

    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(204)
    def delete(self, sub_id: str) -> Response:
        """Stop a subscription now: deliveries not yet made are dropped."""
        _subs().delete(g.api_key["id"], sub_id)
        return Response(status=204)


@blp.route("/v1/subscriptions/<sub_id>/rotate")
class Rotate(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(RotateIn())
    @blp.response(200, SubscriptionWithSecret())
    def post(self, body: dict[str, Any], sub_id: str) -> Response:
        """A new secret (in this answer only); the replaced one keeps signing beside it for
        `overlap_seconds`, so receivers can switch without losing a delivery."""
        rotated = _subs().rotate(g.api_key["id"], sub_id, body["overlap_seconds"])
        return _json(_with_secret(rotated))


@blp.route("/v1/subscriptions/<sub_id>/ping")
class Ping(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.response(202, PingSent())
    def post(self, sub_id: str) -> Response:
        """Have the worker POST a signed `ping` to the URL, once; its attempt shows in the
        delivery log."""
        return _json(_subs().ping(g.api_key["id"], sub_id), 202)


@blp.route("/v1/subscriptions/<sub_id>/deliveries")
class Deliveries(MethodView):
    @authenticated
    @blp.doc(security=SECURITY)
    @blp.arguments(DeliveriesArgs(), location="query")
    @blp.response(200, RecentDeliveries())
    def get(self, args: dict[str, Any], sub_id: str) -> Response:
        """The most recent delivery attempts (every game, and pings), newest first, with
        their status codes."""
        return _json(_subs().deliveries(g.api_key["id"], sub_id, args["limit"]))
