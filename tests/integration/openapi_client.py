"""Contract checks: the HTTP responses the integration tests get are validated against the
published document (docs/openapi.json) with openapi-core — status, media type, body schema and
required headers. A mismatch fails the test that made the request.

Each response shape — (method, path template, status, media type) — is validated the first
time a test meets it in a run, not on every response: openapi-core's full validation of
thousands of game responses cost minutes of CPU, while conformance in depth is the contract
fuzzer's job (tests/contract). `CONTRACT_CHECK_EVERY=1` validates every response again.

`ValidatingClient` is Flask's test client with the check; tests/integration/conftest.py makes
it every app's test client and turns it on for `http_client.call` (real gunicorn servers).
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from openapi_core import Config, OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from openapi_core.templating.paths.exceptions import (
    OperationNotFound,
    PathNotFound,
    ServerNotFound,
)
from werkzeug import Request, Response
from werkzeug.test import EnvironBuilder, TestResponse

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
# Served by both services but not part of the API the document describes.
OPERATIONAL = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs")
ASSETS = ("/viewer/",)  # the web pages' scripts and styles (services/query/pages.py): files
STREAMS = ("text/event-stream",)
SERVICE_APPS = {"game_service", "query_service"}  # what the services' apps carry


CHECK_EVERY = os.environ.get("CONTRACT_CHECK_EVERY") == "1"
Shape = tuple[str, str, int, str]  # method, path template, status, media type
_checked: set[Shape] = set()  # the shapes validated (and passed) so far


class ContractError(AssertionError):
    """A response the document does not allow."""


def _ndjson(raw: bytes, **_: Any) -> list[Any]:
    """JSON Lines, read as the list of its values (the document's schema for it)."""
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def _text(raw: bytes, **_: Any) -> str:
    """An SVG picture (image/svg+xml): text, checked as the document's string."""
    return raw.decode("utf-8")


def _problem(raw: bytes, **_: Any) -> Any:
    """An error's problem details: JSON."""
    return json.loads(raw)


@cache
def contract() -> OpenAPI:
    config = Config(
        extra_media_type_deserializers={
            "application/x-ndjson": _ndjson,
            "image/svg+xml": _text,
            "application/problem+json": _problem,  # every error (RFC 9457)
        }
    )
    return OpenAPI.from_dict(json.loads(DOC.read_text(encoding="utf-8")), config=config)


@cache
def _error_validator() -> Draft202012Validator:
    doc = json.loads(DOC.read_text(encoding="utf-8"))
    return Draft202012Validator({**doc["components"]["schemas"]["Error"], "$defs": {}})


class _StreamResponse(WerkzeugOpenAPIResponse):
    """A live stream's response: its status, type and headers are checked, not its body (it
    is read by the test itself, and may never end)."""

    @property
    def data(self) -> bytes:
        return b""


class _SentRequest(WerkzeugOpenAPIRequest):
    """The request of a response already answered: its body was read by the app (and only
    responses are checked here), so it is not read again."""

    @property
    def body(self) -> bytes | None:
        return None


@cache
def _templates() -> list[tuple[re.Pattern[str], str]]:
    """The document's paths as patterns, literal ones first (`/games/recent` before
    `/games/{game_id}`)."""
    paths = json.loads(DOC.read_text(encoding="utf-8"))["paths"]
    ordered = sorted(paths, key=lambda t: (t.count("{"), t))
    return [(re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(t)) + "$"), t)
            for t in ordered]  # fmt: skip


def shape(method: str, path: str, status: int, mimetype: str) -> Shape:
    """What makes two responses the same to the document: the operation (method and path
    template; the path itself where the document has none), the status and the media type."""
    template = next((t for pattern, t in _templates() if pattern.match(path)), path)
    return method, template, status, mimetype


def _unchecked(method: str, path: str, status: int, mimetype: str) -> Shape | None:
    """The response's shape if it is one to validate now: in the API (not an operational
    path, OPTIONS or HEAD), and not yet passed in this run (or CONTRACT_CHECK_EVERY)."""
    if path.startswith(OPERATIONAL + ASSETS) or method in ("OPTIONS", "HEAD"):
        return None
    kind = shape(method, path, status, mimetype)
    return kind if CHECK_EVERY or kind not in _checked else None


def check(request: Request, response: Response) -> None:
    """Raise `ContractError` unless `response` is what the document allows for `request`
    (once per shape and run: see the module's docstring)."""
    kind = _unchecked(request.method, request.path, response.status_code, response.mimetype or "")
    if kind is not None:
        _validate(request, response)
        _checked.add(kind)  # only once it passed: a failing shape is checked again next time


def _validate(request: Request, response: Response) -> None:
    wrapped_response = (
        _StreamResponse(response)
        if response.mimetype in STREAMS
        else WerkzeugOpenAPIResponse(response)
    )
    try:
        contract().validate_response(_SentRequest(request), wrapped_response)
    except (PathNotFound, OperationNotFound, ServerNotFound):
        # A path or method outside the API: only the error shape applies (404 or 405).
        # (ServerNotFound: openapi-core matches the page `/` to the end of any URL ending in
        # a slash, `/tilesets/base/`, then finds no server for what comes before it.)
        _check_undocumented(request, response)
    except Exception as exc:
        body = response.get_data(as_text=True)[:600] if response.mimetype not in STREAMS else ""
        raise ContractError(
            f"{request.method} {request.full_path.rstrip('?')} -> {response.status_code} "
            f"{response.mimetype}: {type(exc).__name__}: {_causes(exc) or exc}\n{body}"
        ) from exc


def _causes(exc: BaseException) -> str:
    parts = []
    for err in getattr(exc, "schema_errors", None) or []:
        parts.append(f"{list(err.absolute_path)}: {err.message}")
    cause = exc.__cause__
    if cause is not None and cause is not exc:
        parts.append(_causes(cause) or repr(cause)[:300])
    return "; ".join(parts)


def _check_undocumented(request: Request, response: Response) -> None:
    where = f"{request.method} {request.path} -> {response.status_code}"
    if response.status_code not in (404, 405):
        raise ContractError(f"{where}: not in the document")
    if response.status_code == 405 and "Allow" not in response.headers:
        raise ContractError(f"{where}: a 405 without Allow")
    if response.mimetype != "application/problem+json":
        raise ContractError(f"{where}: error as {response.mimetype}")
    errors = [e.message for e in _error_validator().iter_errors(response.get_json())]
    if errors:
        raise ContractError(f"{where}: not the error shape: {errors}")


class ValidatingClient(FlaskClient):
    """Flask's test client; every response of a service's app is checked against the
    document (`check`)."""

    def open(self, *args: Any, **kwargs: Any) -> TestResponse:
        response = super().open(*args, **kwargs)
        if SERVICE_APPS & set(self.application.extensions):  # not a test double
            check(response.request, response)
        return response


def check_raw(
    base: str,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    status: int,
    response_headers: list[tuple[str, str]],
    payload: bytes,
) -> None:
    """`check` for a request made over a socket (tests/integration/http_client.py): the
    request is rebuilt only for a shape still to validate."""
    mimetype = next((v for k, v in response_headers if k.lower() == "content-type"), "")
    media = mimetype.split(";", 1)[0].strip()
    kind = _unchecked(method, path.split("?", 1)[0], status, media)
    if kind is None:
        return
    environ = EnvironBuilder(
        path=path, base_url=base, method=method, headers=list(headers.items()), data=body
    ).get_environ()
    _validate(Request(environ), Response(payload, status=status, headers=response_headers))
    _checked.add(kind)


# Every error body: RFC 9457's members and ours (written out here, not taken from the code
# under test, so a change to the shape fails the tests that check it).
PROBLEM_KEYS = frozenset(
    {"type", "title", "status", "detail", "hint", "code", "message", "rule", "details"}
)
