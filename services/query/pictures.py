"""Pictures of games and tiles: `GET /games/{id}/board.svg` and the tile catalog `/tilesets`.

Thin views over the engine's pure drawing (`carcassonne.svg`) and catalog
(`carcassonne.catalog`). A board picture's ETag names the position it shows (the move
sequence), the drawing's version and the options, so a 304 answers any repeat; the catalog
is versioned data (its ETag is the hash of the data) and may be cached for a day.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Response, current_app, request
from flask.views import MethodView
from flask_smorest import Blueprint

from carcassonne.catalog import catalog_index, tileset_catalog
from carcassonne.errors import GameError
from carcassonne.svg import DRAWING_VERSION, board_svg
from services.common.webapp import checked_game_id

from .picture_schemas import BoardSvgArgs, TilesetIndex, TilesetOut
from .service import QueryService, to_json

SVG = "image/svg+xml"
CATALOG_MAX_AGE = 86_400  # a day: the data changes only with a release, and its ETag says so

boards = Blueprint("pictures", __name__, url_prefix="/games", description="Pictures of games (SVG)")
tilesets = Blueprint("tilesets", __name__, url_prefix="/tilesets", description="The tile catalog")


class TilesetNotFound(GameError):
    """No tile set of that name."""

    status = 404


def _service() -> QueryService:
    service: QueryService = current_app.extensions["query_service"]
    return service


def _conditional(etag: str, body: bytes, mimetype: str, cache_control: str) -> Response:
    """304 when the client holds this ETag, else `body`; the ETag and caching either way."""
    fresh = request.if_none_match.contains_weak(etag)
    resp = Response(status=304) if fresh else Response(body, mimetype=mimetype)
    resp.set_etag(etag)
    resp.headers["Cache-Control"] = cache_control
    return resp


@boards.route("/<game_id>/board.svg")
class BoardPicture(MethodView):
    @boards.arguments(BoardSvgArgs(), location="query")
    @boards.doc(
        responses={
            "200": {
                "description": "the board as SVG (structure: docs/pictures.md)",
                "content": {SVG: {"schema": {"type": "string"}}},
            }
        }
    )
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """The board as an SVG picture: tiles drawn from the tile data, meeples in seat
        colours, the last placed tile marked; `?open=1` outlines the open features; `?at=`
        and `?turn=` as on the board view."""
        started = time.perf_counter()
        pos = _service().position(checked_game_id(game_id), args.get("at"), args.get("turn"))
        outline = bool(args["open"])
        etag = f"svg{DRAWING_VERSION}.m{pos.seq}{'.open' if outline else ''}"
        fresh = request.if_none_match.contains_weak(etag)
        body = b"" if fresh else board_svg(pos.state, outline).encode()
        resp = _conditional(etag, body, SVG, "no-cache")
        # The view's own time (projection + drawing), for benchmarks and browser dev tools.
        resp.headers["Server-Timing"] = f"view;dur={(time.perf_counter() - started) * 1000:.2f}"
        return resp


def _catalog_response(data: dict[str, Any]) -> Response:
    body: bytes = _encoded(data["version"], data)
    return _conditional(
        data["version"], body, "application/json", f"public, max-age={CATALOG_MAX_AGE}"
    )


_ENCODED: dict[str, bytes] = {}  # version -> JSON: the catalog never changes in a process


def _encoded(version: str, data: dict[str, Any]) -> bytes:
    body = _ENCODED.get(version)
    if body is None:
        body = _ENCODED[version] = to_json(data)
    return body


@tilesets.route("")
class Tilesets(MethodView):
    @tilesets.response(200, TilesetIndex())
    def get(self) -> Response:
        """The tile sets in brief (size, tile types, version) and the seat colour palette."""
        return _catalog_response(catalog_index())


@tilesets.route("/<name>")
class Tileset(MethodView):
    @tilesets.response(200, TilesetOut())
    def get(self, name: str) -> Response:
        """Every tile type of a set: count, edges, segments, the meeple spots in tile
        coordinates, and an SVG drawing: enough to draw tiles and highlight spots. Cache it:
        the `version` (its ETag) changes only with the data."""
        data = tileset_catalog(name)
        if data is None:
            raise TilesetNotFound("tileset_not_found", f"no tile set {name[:40]!r}", None)
        return _catalog_response(data)
