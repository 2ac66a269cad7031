"""What every HTTP service's app starts with: OpenAPI settings, its own settings, a probe."""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import flask
import flask_smorest
import redis
from flask import Flask, Request
from flask_cors import CORS
from marshmallow import Schema
from webargs.flaskparser import FlaskParser

from carcassonne.errors import GameError
from services.redis_store.acl import user_of
from services.redis_store.connect import connect, is_cluster_url

from .api_doc import OPENAPI_VERSION
from .body import read_json, unproxied
from .observability import instrument
from .settings import from_env

GAME_ID = re.compile(r"[0-9a-f]{32}")  # what the command service's uuid4().hex ids look like

# Swagger UI's files, vendored from a pinned package (static/swagger-ui/SOURCE.md): `/docs`
# renders with no network and always with the same version.
SWAGGER_UI_DIR = Path(__file__).parent / "static" / "swagger-ui"
SWAGGER_UI_URL = "/docs/swagger-ui/"

COMMON_DEFAULTS: dict[str, Any] = {
    # Browser origins allowed to call the API (CORS), comma-separated, or "*" for any;
    # "" sends no CORS headers (browsers then refuse cross-origin calls).
    "CORS_ORIGINS": "",
    # The proxies whose X-Forwarded-For is believed (addresses or networks, comma-separated;
    # "" = none: the TCP peer is the client). services/common/access.py.
    "TRUSTED_PROXIES": "",
}
# What a browser app may send and read across origins (docs/http.md).
ORIGIN = re.compile(r"https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")
CORS_ALLOW_HEADERS = [
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "If-Match",
    "If-None-Match",
    "X-Api-Key",
    "X-Request-Id",
]
CORS_EXPOSE_HEADERS = [
    "ETag",
    "Retry-After",
    "Idempotent-Replayed",
    "X-Carcassonne-Game-Over",
    "X-Request-Id",
    "Allow",
]


class GameNotFound(GameError):
    """No such game: 404 ``game_not_found`` (also for ids that cannot be one)."""

    status = 404


def checked_game_id(game_id: str) -> str:
    """A game id from a URL, refused as not found before it reaches Redis if malformed."""
    if not GAME_ID.fullmatch(game_id):
        raise GameNotFound("game_not_found", f"no game {game_id[:64]}")
    return game_id


class StrictParser(FlaskParser):
    """webargs' Flask parser with JSON bodies read by `services.common.body.read_json`.

    webargs' own `load_json` lets a RecursionError (deep nesting) or a ValueError (an integer
    of more than 4300 digits) through as a 500, parses NaN, takes the last of duplicate keys,
    reads a body of another Content-Type as "missing" (so its fields are reported missing),
    and trusts a body shorter than its Content-Length.
    """

    def load_json(self, req: Request, schema: Schema) -> Any:
        """See `webargs.core.Parser.load_json`: the body, or a 4xx `GameError`."""
        return read_json(req)


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint whose `arguments` parse JSON bodies with `StrictParser`."""

    ARGUMENTS_PARSER = StrictParser()


def new_app(
    import_name: str,
    service: str,
    settings: Mapping[str, Any],
    test_config: Mapping[str, Any] | None = None,
) -> Flask:
    """A Flask app with OpenAPI at /openapi.json and /docs, `settings` then `test_config`
    applied, and health, readiness (Redis reachable), metrics, request ids, CORS
    (`CORS_ORIGINS`) and an ``Allow`` header on every 405."""
    app = Flask(import_name)
    # A path is what it says: `/v1/subscriptions//ping` (an empty id) is no path of ours
    # (404), not `/v1/subscriptions/ping` with "ping" taken for an id (405).
    app.url_map.merge_slashes = False
    app.config.update(
        API_TITLE=f"Carcassonne Cloud — {service} service",
        API_VERSION="1",
        OPENAPI_VERSION=OPENAPI_VERSION,  # the one document's (served in place of the app's)
        OPENAPI_URL_PREFIX="/",
        OPENAPI_JSON_PATH="openapi.json",
        OPENAPI_SWAGGER_UI_PATH="/docs",
        OPENAPI_SWAGGER_UI_URL=SWAGGER_UI_URL,
        # No badge from Swagger's online validator: the page makes no request elsewhere.
        OPENAPI_SWAGGER_UI_CONFIG={"validatorUrl": None},
    )
    app.config.update(from_env(COMMON_DEFAULTS))
    app.config.update(settings)
    if test_config:
        app.config.update(test_config)
    instrument(app, service, {"redis": _redis_probe(app.config["REDIS_URL"], service)})
    app.register_blueprint(
        flask.Blueprint(
            "swagger_ui",
            __name__,
            static_folder=SWAGGER_UI_DIR,
            static_url_path=SWAGGER_UI_URL.rstrip("/"),
        )
    )
    _cors(app)
    app.after_request(_hardened)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _hardened(response: flask.Response) -> flask.Response:
    """Headers every answer carries (a view that sets its own keeps it):

    - ``X-Content-Type-Options: nosniff``: JSON errors and SVG pictures echo what a client
      sent, and a browser must never take them for HTML;
    - ``Cache-Control: no-store`` on the answer to a write: it may carry a seat's token, a
      webhook or subscription secret, or an API key's first sight of a game;
    - on the API pages (/docs), a Content-Security-Policy (`docs_policy`): scripts, styles,
      images and requests from this origin only, and no other site frames them."""
    headers = response.headers
    # The names the view set, read once: werkzeug's `setdefault` (and `in`) raises and catches
    # a KeyError for a header that is absent, ~2.5 µs each on every answer.
    present = {name.lower() for name, _ in headers.items()}
    if "x-content-type-options" not in present:
        headers.add("X-Content-Type-Options", "nosniff")
    request = unproxied(flask.request)  # read once
    if request.method not in ("GET", "HEAD", "OPTIONS") and "cache-control" not in present:
        headers.add("Cache-Control", "no-store")
    if request.path.startswith("/docs"):
        page = response.mimetype == "text/html" and not response.direct_passthrough
        headers.setdefault(
            "Content-Security-Policy", docs_policy(response.get_data() if page else b"")
        )
        headers.setdefault("X-Frame-Options", "DENY")  # browsers without CSP level 2
    return response


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


@functools.lru_cache(maxsize=8)
def docs_policy(page: bytes) -> str:
    """The Content-Security-Policy of the API pages (issue 32, finding 10). Everything comes
    from this origin (Swagger UI is vendored: static/swagger-ui); the page's one inline script
    (flask-smorest's, which starts Swagger UI) is allowed by its hash and no other; Swagger
    UI sets style attributes and draws data: images itself, so those two are allowed; its
    "Try it out" calls this origin. No plugin, no base URL, no framing by another site."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(page)
    )
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src 'self' {hashes}".rstrip(),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


def _cors(app: Flask) -> None:
    """CORS headers for the origins in `CORS_ORIGINS` (none when it is empty).

    No credentials mode: a seat's token and an API key travel in headers the app sets, never
    in cookies, so browsers need no `Access-Control-Allow-Credentials`.
    """
    origins = cors_origins(str(app.config.get("CORS_ORIGINS") or ""))
    if not origins:
        return
    CORS(
        app,
        origins=origins,
        allow_headers=CORS_ALLOW_HEADERS,
        expose_headers=CORS_EXPOSE_HEADERS,
        max_age=600,  # seconds a browser may reuse a preflight answer
        send_wildcard=origins == "*",  # "*" itself, not the echoed origin: one cached answer
        vary_header=True,
    )


def cors_origins(raw: str) -> str | list[str]:
    """`CORS_ORIGINS` read: "*", exact origins (``scheme://host[:port]``), or "" for none.

    Patterns are refused at start-up: flask-cors would take ``https://*.example.com`` as a
    regular expression that means something else.
    """
    raw = raw.strip()
    if raw in ("", "*"):
        return raw
    origins = [o.strip().rstrip("/") for o in raw.split(",") if o.strip()]
    for origin in origins:
        if not ORIGIN.fullmatch(origin):
            raise SystemExit(
                f"CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port]) or '*'"
            )
    return origins


def _probe_client(url: str, service: str) -> redis.Redis:
    """The probe's own client: one connection, 1 s timeouts."""
    if is_cluster_url(url):
        return connect(url, role=f"{service}:probe", max_connections=1, socket_timeout=1,
                       connect_timeout=1)  # fmt: skip
    return redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)


class RedisRefused(RuntimeError):
    """Redis refused REDIS_URL's credentials: the reason `/readyz` gives."""


def _redis_probe(url: str, service: str) -> Callable[[], bool]:
    """PING for the readiness probe, with a short timeout (an unreachable Redis must not hang
    it). A cluster's client is made on the first probe (making it asks a node for the slot
    map, which must not stop the app from starting) and PINGs every node. Credentials that
    Redis refuses (a wrong password, a disabled user, none where the default user is off) are
    said as such: the app starts and stays unready, saying why, rather than failing each
    request with a 503 nobody can explain."""
    made: list[redis.Redis] = []

    def ping() -> bool:
        try:
            if not made:
                made.append(_probe_client(url, service))
            return bool(made[0].ping())
        except redis.AuthenticationError as exc:
            user = user_of(url) or "default"
            raise RedisRefused(
                f"Redis refused REDIS_URL's user {user!r} ({exc}): check the user and "
                "password in REDIS_URL (deploy/README.md, Redis users)"
            ) from None

    return ping
