"""Request bodies are read strictly (services/common/body.py) by every route, flask-smorest's
arguments included; a command process has one Celery producer."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from typing import Any

import pytest
from flask import Flask
from flask import request as flask_request
from flask.testing import EnvironBuilder
from flask_smorest import Api
from marshmallow import Schema, fields

from carcassonne.errors import GameError
from services.common.body import (
    MAX_DEPTH,
    BodyError,
    TooLarge,
    UnsupportedMediaType,
    canonical,
    check_depth,
    fingerprint,
    parse_json,
    read_body,
    read_json,
)
from services.common.webapp import Blueprint

DEEP_ARRAYS = [b"[" * n + b"]" * n for n in (17, 1_000, 100_000)]
HOSTILE_JSON = [
    *[(body, "json_too_deep") for body in DEEP_ARRAYS],
    (b'{"a":' * 1_000 + b"1" + b"}" * 1_000, "json_too_deep"),
    (b'{"x":0,"meeple":' + DEEP_ARRAYS[1] + b"}", "json_too_deep"),
    (b'{"x":' + b"7" * 4_301 + b"}", "invalid_json"),  # int() refuses more than 4300 digits
    (b"-" + b"1" * 10_000, "invalid_json"),
    (b'{"x":NaN}', "invalid_json"),
    (b"[Infinity]", "invalid_json"),
    (b"-Infinity", "invalid_json"),
    (b'{"x":1,"x":2}', "invalid_json"),
    (b'{"a":{"b":1,"b":1}}', "invalid_json"),
    (b'{"name":"\\ud800"}', "invalid_json"),  # a lone surrogate: cannot be UTF-8 again
    (b'{"\\udfff":1}', "invalid_json"),
    (b"\xff\xfe{}", "invalid_json"),
    (b'{"a":"\xc3"}', "invalid_json"),  # a truncated UTF-8 sequence
    (b"", "invalid_json"),
    (b"  \n", "invalid_json"),
    (b'{"x": 0,', "invalid_json"),
    (b"{'x': 0}", "invalid_json"),
]


@pytest.mark.parametrize(
    ("raw", "code"), HOSTILE_JSON, ids=[f"{i}" for i in range(len(HOSTILE_JSON))]
)
def test_hostile_json_is_a_400_with_a_stable_code(raw: bytes, code: str) -> None:
    with pytest.raises(BodyError) as info:
        parse_json(raw)
    assert (info.value.status, info.value.code) == (400, code)


def test_plain_json_parses_scalars_included() -> None:
    assert parse_json(b'{"x":0,"y":-1,"meeple":null}') == {"x": 0, "y": -1, "meeple": None}
    for raw, value in ((b"null", None), (b"1", 1), (b"true", True), (b'"x"', "x")):
        assert parse_json(raw) == value  # a scalar is JSON; the route's schema refuses it
    assert parse_json(b"7" * 4_300) == int("7" * 4_300)
    assert parse_json('"\\ud83d\\ude00 é"'.encode()) == "\U0001f600 é"  # a surrogate pair
    nested: Any = 1
    for _ in range(MAX_DEPTH):
        nested = [nested]
    check_depth(nested)
    assert parse_json(json.dumps(nested).encode()) == nested
    with pytest.raises(BodyError):
        check_depth([nested])


def test_integral_numbers_with_a_fraction_or_exponent_are_integers() -> None:
    # Found by schemathesis (issue 15): `"width": 302.0` is an integer to JSON Schema and so
    # to the document, but was refused as "Not a valid integer" by the strict schemas.
    parsed = parse_json(b'{"a": 302.0, "b": -2e0, "c": 1E2, "d": 2.5, "e": 1e300, "f": -0.0}')
    assert parsed == {"a": 302, "b": -2, "c": 100, "d": 2.5, "e": 1e300, "f": 0}
    assert [type(parsed[k]) for k in "abcdef"] == [int, int, int, float, float, int]


def test_canonical_json_and_fingerprints() -> None:
    assert canonical({"b": 1, "a": [1, "é"]}) == b'{"a":[1,"\\u00e9"],"b":1}'
    assert fingerprint("post", "/p", {"a": 1, "b": 2}) == fingerprint(
        "POST", "/p", {"b": 2, "a": 1}
    )
    assert fingerprint("POST", "/p", {"a": 1}) != fingerprint("POST", "/q", {"a": 1})
    assert fingerprint("POST", "/p", {"a": 1}) != fingerprint("PUT", "/p", {"a": 1})


def _request(app: Flask, body: bytes | io.RawIOBase, **environ: Any) -> Any:
    """A request context whose WSGI input is `body` (bytes, or a stream) and environ `environ`."""
    built = EnvironBuilder(app, "/", method="POST").get_environ()
    built.pop("CONTENT_LENGTH", None)
    built.pop("CONTENT_TYPE", None)
    built.update(environ, **{"wsgi.input": io.BytesIO(body) if isinstance(body, bytes) else body})
    return app.request_context(built)


class Broken(io.RawIOBase):
    """A server's input that fails, as gunicorn's chunked reader does when the stream breaks
    off (NoMoreData, an OSError)."""

    def readable(self) -> bool:
        return True

    def readinto(self, _: Any) -> int:
        raise OSError("No more data after: b'1a\\r\\n'")


class Unread(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, _: Any) -> int:
        raise AssertionError("read a body its Content-Length already refused")


JSON_ENV = {"CONTENT_TYPE": "application/json"}
TERMINATED = {"wsgi.input_terminated": True, **JSON_ENV}  # as gunicorn marks its input


def test_a_body_shorter_than_its_content_length_is_refused() -> None:
    """As gunicorn's input is when the client closes early: it ends without an error, and is
    marked terminated, so werkzeug reads it to its end instead of checking the length."""
    app = Flask(__name__)
    body = b'{"x":0,"y":-1,"rotation":0}'
    short = str(len(body) + 40)
    with _request(app, body, CONTENT_LENGTH=short, **TERMINATED), pytest.raises(BodyError) as info:
        read_json(flask_request)
    assert info.value.code == "incomplete_body"
    assert info.value.details == {"content_length": len(body) + 40, "received": len(body)}
    # werkzeug's own check (a server that does not mark its input terminated) gives the same
    with _request(app, body, CONTENT_LENGTH=short, **JSON_ENV), pytest.raises(BodyError) as info:
        read_json(flask_request)
    assert info.value.code == "incomplete_body"
    with _request(app, body, CONTENT_LENGTH=str(len(body)), **TERMINATED):
        assert read_json(flask_request) == {"x": 0, "y": -1, "rotation": 0}


def test_a_broken_chunked_stream_is_an_incomplete_body() -> None:
    app = Flask(__name__)
    with _request(app, Broken(), **TERMINATED), pytest.raises(BodyError) as info:
        read_json(flask_request)
    assert info.value.code == "incomplete_body"


def test_size_limits_are_413_and_checked_before_reading() -> None:
    app = Flask(__name__)
    with (
        _request(app, Unread(), CONTENT_LENGTH="1000", **TERMINATED),
        pytest.raises(TooLarge) as info,
    ):
        read_body(flask_request, limit=999)
    assert (info.value.status, info.value.code, info.value.details) == (
        413, "body_too_large", {"limit": 999}
    )  # fmt: skip
    # No Content-Length (chunked): read up to the limit, then refused.
    with _request(app, b" " * 1_001, **TERMINATED), pytest.raises(TooLarge):
        read_body(flask_request, limit=1_000)
    with _request(app, b" " * 1_000, **TERMINATED):
        assert len(read_body(flask_request, limit=1_000)) == 1_000


@pytest.mark.parametrize(
    ("content_type", "ok"),
    [(None, False), ("text/plain", False), ("application/x-www-form-urlencoded", False),
     ("multipart/form-data; boundary=x", False), ("application/jsonx", False),
     ("application/json", True), ("application/json; charset=utf-8", True),
     ("APPLICATION/JSON", True), ("application/vnd.carcassonne+json", True)],
)  # fmt: skip
def test_only_a_json_content_type_is_read_as_json(content_type: str | None, ok: bool) -> None:
    app = Flask(__name__)
    environ = {"CONTENT_TYPE": content_type} if content_type else {}
    with _request(app, b"{}", CONTENT_LENGTH="2", **environ):
        if ok:
            assert read_json(flask_request) == {}
            return
        with pytest.raises(UnsupportedMediaType) as info:
            read_json(flask_request)
    assert (info.value.status, info.value.code) == (415, "unsupported_media_type")
    assert "application/json" in info.value.message
    assert ("no Content-Type" in info.value.message) == (content_type is None)


def test_the_strict_blueprint_parses_arguments_with_the_strict_reader() -> None:
    """flask-smorest's `arguments` go through webargs; this Blueprint's parser reads bodies
    with `read_json`, so a deep body is a 400 (webargs' own: a RecursionError, a 500) and a
    body without Content-Type a 415 (webargs' own: "Missing data for required field")."""

    class In(Schema):
        x = fields.Integer(required=True)

    app = Flask(__name__)
    app.config.update(API_TITLE="t", API_VERSION="1", OPENAPI_VERSION="3.0.3")
    blp = Blueprint("t", __name__)

    @blp.route("/t", methods=["POST"])
    @blp.arguments(In())
    def view(body: dict[str, Any]) -> dict[str, Any]:
        return body

    @app.errorhandler(GameError)
    def error(exc: GameError) -> tuple[dict[str, Any], int]:
        return exc.to_dict(), exc.status

    api = Api(app)
    api.register_blueprint(blp)
    client = app.test_client()
    assert client.post("/t", json={"x": 1}).get_json() == {"x": 1}
    deep = client.post("/t", data=DEEP_ARRAYS[1], content_type="application/json")
    assert (deep.status_code, deep.get_json()["code"]) == (400, "json_too_deep")
    untyped = client.post("/t", data=b'{"x": 1}')
    assert (untyped.status_code, untyped.get_json()["code"]) == (415, "unsupported_media_type")
    huge = client.post("/t", data=b'{"x":' + b"1" * 4_301 + b"}", content_type="application/json")
    assert (huge.status_code, huge.get_json()["code"]) == (400, "invalid_json")


def test_a_command_process_has_one_celery_producer_for_every_task_it_sends() -> None:
    """Webhook dispatch and subscription pings go through the app's one TaskSender (one
    Celery app, one broker pool per process); scoring and bot turns need no task from it:
    their workers follow the change feed (the service has no bot hand-off any more)."""
    from services.command.app import create_app

    app = create_app({"REDIS_URL": "redis://127.0.0.1:1/0", "NOTIFY_MS": 100})
    tasks = app.extensions["tasks"]
    service = app.extensions["game_service"]
    assert not hasattr(service, "bots")
    sent: list[tuple[str, str, tuple[object, ...]]] = []

    def record(task: str, queue: str, args: Any = (), kwargs: Any = None, countdown: Any = None):
        sent.append((task, queue, tuple(args)))
        return True

    tasks.send = record
    integration = app.extensions["integration"]
    integration.hooks.dispatch("g1")
    app.extensions["subscriptions"].ping_sender("k1", "s1", "d1")
    queue = app.config["WEBHOOK_QUEUE"]
    assert sent == [
        ("subscriptions.dispatch", queue, ("g1",)),
        ("subscriptions.ping", queue, ("k1", "s1", "d1")),
    ]


@pytest.mark.parametrize(
    ("messages", "main", "code", "fields"),
    [
        ({"query": {"turn": ["bad"]}}, "invalid_body", "invalid_query", {"turn": ["bad"]}),
        ({"json": {"x": ["bad"]}}, "invalid_query", "invalid_body", {"x": ["bad"]}),
        (
            {"headers": {"h": ["bad"]}},
            "invalid_query",
            "invalid_query",
            {"headers": {"h": ["bad"]}},
        ),
        ({"headers": {"h": ["bad"]}}, "invalid_body", "invalid_body", {"headers": {"h": ["bad"]}}),
    ],
)
def test_a_422_names_the_input_that_failed_or_the_services_main_one(
    messages: dict[str, Any], main: str, code: str, fields: dict[str, Any]
) -> None:
    from werkzeug.exceptions import UnprocessableEntity

    from services.common import http_errors

    app = Flask(__name__)
    http_errors.register(app, retry_after=1, unprocessable=main)

    @app.get("/x")
    def x() -> Any:
        failed = UnprocessableEntity()
        failed.data = {"messages": messages}  # type: ignore[attr-defined]  # as webargs does
        raise failed

    reply = app.test_client().get("/x")
    assert reply.status_code == 422
    assert reply.get_json()["code"] == code and reply.get_json()["details"] == {"fields": fields}


def test_every_answer_is_nosniff_writes_are_no_store_and_docs_cannot_be_framed() -> None:
    from services.common.webapp import new_app

    app = new_app(__name__, "test", {"REDIS_URL": "redis://127.0.0.1:1/0"})

    @app.post("/secret")
    def secret() -> dict[str, str]:
        return {"token": "s3cret"}

    @app.get("/view")
    def view() -> Any:
        return {"ok": True}, 200, {"Cache-Control": "no-cache"}  # a view's own choice stays

    client = app.test_client()
    written = client.post("/secret")
    assert written.headers["Cache-Control"] == "no-store"
    assert written.headers["X-Content-Type-Options"] == "nosniff"
    read = client.get("/view")
    assert read.headers["Cache-Control"] == "no-cache"
    assert read.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors" not in read.headers.get("Content-Security-Policy", "")
    from services.command.app import create_app

    docs = create_app({"REDIS_URL": "redis://127.0.0.1:1/0"}).test_client().get("/docs")
    assert docs.status_code == 200
    policy = dict(
        d.strip().split(" ", 1) for d in docs.headers["Content-Security-Policy"].split(";")
    )
    assert policy["frame-ancestors"] == "'none'" and policy["default-src"] == "'none'"
    # The page's one inline script by its hash, nothing inline else, nothing from elsewhere
    # (tests/integration/test_docs_offline.py renders the page in Chromium under it).
    (inline,) = re.findall(rb"<script>(.*?)</script>", docs.get_data(), re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(inline).digest()).decode()
    assert policy["script-src"] == f"'self' 'sha256-{digest}'"
    assert policy["connect-src"] == "'self'" and policy["base-uri"] == "'none'"
    assert docs.headers["X-Frame-Options"] == "DENY"
    missing = client.get("/nowhere")  # an error echoing the path: never sniffed as HTML
    assert missing.headers["X-Content-Type-Options"] == "nosniff"


def test_an_empty_path_segment_is_no_path_not_another_routes_id() -> None:
    from services.command.app import create_app

    client = create_app({"REDIS_URL": "redis://127.0.0.1:1/0"}).test_client()
    reply = client.post("/v1/subscriptions//ping")  # no subscription id: not "ping" as one
    assert (reply.status_code, reply.get_json()["code"]) == (404, "not_found")
    wrong = client.put("/games")
    assert (wrong.status_code, wrong.get_json()["code"]) == (405, "method_not_allowed")
    assert "Allow" in wrong.get_json()["hint"] and wrong.headers["Allow"]
