"""The services' one error shape, RFC 9457 problem details with our stable `code`
(services/common/problems.py; schema `Error`), and the handlers that answer every error in
it, registered once per app by `register` with the `/errors` page its types point to: an
engine `GameError` (its own status and stable code; a 429 with its Retry-After), an event
store that is down (503 with Retry-After), and werkzeug's HTTP errors — a body or query
string that fails its schema (422 with the fields), unreadable JSON (400), a 405 with its
Allow header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flask
import redis
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from carcassonne.errors import GameError

from .problems import MEDIA_TYPE, PAGE, page, problem

# Stable codes of werkzeug's errors (a 422 without field messages is the app's own: `register`).
HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "body_too_large",
    415: "unsupported_media_type",
}

UNPROCESSABLE = {
    "invalid_query": "the query string does not match the schema",
    "invalid_body": "the request body does not match the schema",
}


def error_response(
    code: str,
    message: str,
    status: int,
    rule: str | None = None,
    details: dict[str, Any] | None = None,
) -> flask.Response:
    """An error as `application/problem+json`."""
    body = flask.current_app.json.dumps(problem(code, message, status, rule, details))
    return flask.Response(body + "\n", status=status, mimetype=MEDIA_TYPE)


def game_error_response(exc: GameError) -> flask.Response:
    """An engine or service error (its own code, status, rule and details) as a problem."""
    return error_response(exc.code, exc.message, exc.status, exc.rule, exc.details)


def with_allow(exc: HTTPException, response: flask.Response) -> flask.Response:
    """`response` with the ``Allow`` header a 405 must carry (RFC 9110 15.5.6): an error
    handler that builds its own JSON body drops the one werkzeug's exception has."""
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        response.headers["Allow"] = ", ".join(exc.valid_methods)
    return response


def register(
    app: flask.Flask,
    *,
    retry_after: int,
    unprocessable: str,
    store_error: Callable[[redis.RedisError], flask.Response | None] | None = None,
) -> None:
    """Answer every error of `app` in the one shape. `retry_after`: seconds a client should
    wait when the store is down; `unprocessable`: the code of a 422 that names neither the
    query string nor a JSON body (the service's main input: `invalid_body` or
    `invalid_query`); `store_error`: the app's own answer to some
    store errors (None: the generic 503)."""

    def unavailable(response: flask.Response) -> flask.Response:
        response.headers["Retry-After"] = str(retry_after)
        return response

    @app.get(PAGE)
    def errors_page() -> flask.Response:  # what every problem's `type` points to
        return flask.Response(page(), mimetype="text/html")

    @app.errorhandler(GameError)
    def game_error(exc: GameError) -> flask.Response:
        response = game_error_response(exc)
        if exc.status == 429:  # a rate limit (services/common/access.py) says when to retry
            response.headers["Retry-After"] = str(exc.details.get("retry_after", retry_after))
            return response
        return unavailable(response) if exc.status == 503 else response

    @app.errorhandler(redis.RedisError)
    def redis_error(exc: redis.RedisError) -> flask.Response:
        own = store_error(exc) if store_error is not None else None
        if own is not None:
            return own
        app.logger.warning("event store unavailable: %s", exc)
        return unavailable(
            error_response("store_unavailable", "the event store is unavailable", 503)
        )

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> flask.Response:
        status = exc.code or 500
        messages = (getattr(exc, "data", None) or {}).get("messages")
        if messages == {"json": ["Invalid JSON body."]}:
            return error_response("invalid_json", "the request body is not valid JSON", 400)
        if messages:  # webargs/marshmallow: the query string or the body failed its schema
            if "query" in messages:
                code, fields = "invalid_query", messages["query"]
            elif "json" in messages:
                code, fields = "invalid_body", messages["json"]
            else:  # arguments found elsewhere: counted as the service's main input
                code, fields = unprocessable, messages
            return error_response(code, UNPROCESSABLE[code], 422, None, {"fields": fields})
        code = HTTP_CODES.get(status, unprocessable if status == 422 else f"http_{status}")
        return with_allow(exc, error_response(code, exc.description or exc.name, status))
