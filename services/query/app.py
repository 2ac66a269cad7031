"""The query service's Flask app: `create_app(test_config=None)`.

Read-only views of games projected from their move and score streams. Views decode the
request, call one `QueryService` method and encode the result; every view carries an ETag
(the stream positions it reflects) and answers 304 to a matching If-None-Match. Errors
leave in the command service's shape: ``{"code", "message", "rule", "details"}``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, current_app, request
from flask.views import MethodView
from flask_smorest import Blueprint

from carcassonne.errors import GameError
from services.archive import open_archive
from services.archive.fallthrough import FallThroughStore
from services.common import http_errors
from services.common.access import known_key, missing_key, request_key
from services.common.api_doc import ContractApi
from services.common.webapp import checked_game_id, new_app
from services.redis_store import RedisEventStore
from services.redis_store.apikeys import ApiKeys
from services.redis_store.connect import (
    blocking_read_timeout,
    connect,
    is_cluster_url,
    shared_client,
)
from services.redis_store.keys import archive_used_key, archived_key
from services.redis_store.ratings import Ratings

from . import pages, pictures, ratings
from .config import from_env
from .directory import RedisDirectory
from .live import LiveHub
from .log import parse_cursor
from .schemas import AtArgs, EventsArgs, EventsPage, GamesArgs, GamesPage, LiveArgs
from .schemas import Board as BoardOut
from .schemas import Scores as ScoresOut
from .service import QueryService, to_json

NDJSON = "application/x-ndjson"
LIVE_CLUSTER_READERS = 96  # per node: the 64 shard slots and some older games' slots
blp = Blueprint("games", __name__, url_prefix="/games", description="Views of games (read only)")
NOT_MODIFIED = {"description": "Not Modified: the If-None-Match ETag is current"}
# One event of a live stream as an EventSource reads it (services/query/log.py writes them).
SSE_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["move", "score", "end"]},
        "id": {
            "type": "string",
            "pattern": r"^[0-9]{1,15}-[0-9]{1,15}$",
            "description": "the cursor after it: a reconnect sends it as Last-Event-ID",
        },
        "data": {
            "type": "string",
            "description": "JSON: a LogItem (`move`, `score`), or why the stream ends (`end`)",
            "contentMediaType": "application/json",
            "contentSchema": {
                "oneOf": [
                    {"$ref": "#/components/schemas/LogItem"},
                    {
                        "type": "object",
                        "properties": {
                            "game_id": {"type": "string"},
                            "cursor": {"type": "string"},
                            "reason": {"type": "string", "enum": ["game_scored"]},
                        },
                        "required": ["game_id", "cursor", "reason"],
                        "additionalProperties": False,
                    },
                ]
            },
        },
        "retry": {"type": "integer", "minimum": 0, "description": "reconnect delay (ms)"},
    },
    "additionalProperties": False,
}


class TooBusy(GameError):
    """Every live-stream slot of this process is taken."""

    status = 503


def _service() -> QueryService:
    service: QueryService = current_app.extensions["query_service"]
    return service


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status=status, mimetype="application/json")


def _conditional(etag: str, render: Callable[[], bytes]) -> Response:
    """304 when the client holds this ETag already, else the rendered body with it."""
    fresh = request.if_none_match.contains_weak(etag)
    resp = Response(status=304) if fresh else _json(render())
    resp.set_etag(etag)
    resp.headers["Cache-Control"] = "no-cache"  # always revalidate: views move with the game
    return resp


@blp.route("")
class Games(MethodView):
    @blp.arguments(GamesArgs(), location="query")
    @blp.response(200, GamesPage())
    @blp.alt_response(304, description=NOT_MODIFIED["description"])
    def get(self, args: dict[str, Any]) -> Response:
        """The games, a page at a time, newest first. Without an API key the public games
        (created with `public: true`); with `X-Api-Key` only the games that key created or
        imported, which `player` (a name) and `player_id` (the app's user id given at
        creation) filter — those two need the key (401 missing_api_key; 403 bad_api_key
        for an unknown or revoked one). `status` filters either list."""
        key = request_key(request)
        key_id = None
        if key is not None:
            keys: ApiKeys = current_app.extensions["api_keys"]
            key_id = str(known_key(keys, key)["id"])
        elif args.get("player") is not None or args.get("player_id") is not None:
            raise missing_key("listing games by player")
        limit = args.get("limit", current_app.config["PAGE_LIMIT"])
        body = to_json(
            _service().games(
                args.get("status"),
                args.get("player"),
                args.get("cursor"),
                limit,
                args.get("player_id"),
                key_id,
            )
        )
        etag = "g" + hashlib.sha1(body).hexdigest()[:16]  # no positions: a list spans games
        response = _conditional(etag, lambda: body)
        response.vary.add("X-Api-Key")  # a key's list is its own: never cached for another
        return response


@blp.route("/<game_id>/board")
class Board(MethodView):
    @blp.arguments(AtArgs(), location="query")
    @blp.response(200, BoardOut())
    @blp.alt_response(304, description=NOT_MODIFIED["description"])
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """Placed tiles, meeples, the turn, tiles left, and open features with what they would
        score if the game ended now; `?at=<move seq>` for the board right after that move,
        `?turn=<placements>` for the board after that many turns (not both)."""
        return _conditional(
            *_service().board(checked_game_id(game_id), args.get("at"), args.get("turn"))
        )


@blp.route("/<game_id>/scores")
class Scores(MethodView):
    @blp.arguments(AtArgs(), location="query")
    @blp.response(200, ScoresOut())
    @blp.alt_response(304, description=NOT_MODIFIED["description"])
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """The score track (R8.1) from the score stream, up to the last move the worker scored
        (`scored_up_to`); points by category, meeples and every score event, explained;
        `?at=` and `?turn=` as on the board."""
        return _conditional(
            *_service().scores(checked_game_id(game_id), args.get("at"), args.get("turn"))
        )


@blp.route("/<game_id>/events")
class Events(MethodView):
    @blp.arguments(EventsArgs(), location="query")
    @blp.response(200, EventsPage())
    @blp.alt_response(304, description=NOT_MODIFIED["description"])
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """The merged log of moves and score events after a cursor, a page at a time; NDJSON
        (one event per line, the whole log unless `limit` is given) with `format=ndjson` or
        `Accept: application/x-ndjson`. A cursor past the log's end: 422
        `cursor_beyond_log`."""
        game_id = checked_game_id(game_id)
        after = parse_cursor(args["after"])
        wanted = args.get("format")
        if wanted is None:
            best = request.accept_mimetypes.best_match(["application/json", NDJSON])
            wanted = "ndjson" if best == NDJSON else "json"
        if wanted == "ndjson":
            lines = _service().export(game_id, after, args.get("limit"))
            return Response(lines, mimetype=NDJSON)
        limit = args.get("limit", current_app.config["PAGE_LIMIT"])
        etag, body = _service().events(game_id, after, limit)
        return _conditional(etag, lambda: to_json(body))


@blp.route("/<game_id>/live")
class Live(MethodView):
    @blp.arguments(LiveArgs(), location="query")
    @blp.doc(
        # Last-Event-ID is added by tools/openapi.py: a `parameters` list here
        # would replace the query parameters @blp.arguments documents.
        responses={
            "200": {
                "description": "text/event-stream: `move` and `score` events, id = cursor",
                "content": {"text/event-stream": {"schema": SSE_EVENT}},
            },
            "422": {
                "description": "`bad_cursor`, or `cursor_beyond_log`: the cursor is "
                "past the end of this game's log"
            },
            "503": {"description": "too many live streams on this server: retry later"},
        },
    )
    def get(self, args: dict[str, Any], game_id: str) -> Response:
        """Server-Sent Events of new moves and scores; each event's id is the cursor after it,
        so a reconnect with Last-Event-ID resumes exactly. After the game's `GameScored` an
        `end` event, and the stream closes; otherwise it ends after a while (reconnect)."""
        game_id = checked_game_id(game_id)
        resume = request.headers.get("Last-Event-ID") or args.get("after")
        after = None if resume is None else parse_cursor(resume)
        config = current_app.config
        slots: threading.BoundedSemaphore = current_app.extensions["live_slots"]
        if not slots.acquire(blocking=False):
            raise TooBusy("too_many_streams", "this server holds its maximum of live streams", None)
        try:
            stream = _service().live(
                game_id,
                after,
                config["SSE_MAX_SECONDS"],
                config["SSE_HEARTBEAT_SECONDS"],
                # The connection (gunicorn's): watched so a client that leaves frees its slot.
                request.environ.get("gunicorn.socket"),
            )
        except BaseException:
            slots.release()
            raise
        resp = Response(stream, mimetype="text/event-stream")
        resp.headers["Cache-Control"] = "no-cache"
        resp.headers["X-Accel-Buffering"] = "no"  # proxies must pass each event on at once
        resp.call_on_close(slots.release)  # also when the client goes away mid-stream
        return resp


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app; `test_config` overrides settings (and may inject `QUERY_SERVICE`)."""
    app = new_app(__name__, "query", from_env(), test_config)
    service = app.config.get("QUERY_SERVICE")
    if service is None:
        config = app.config
        # Views and the streams' catch-up reads: a bounded pool (see config.REDIS_POOL_SIZE).
        views = shared_client(
            config["REDIS_URL"], role="query", max_connections=config["REDIS_POOL_SIZE"]
        )
        # The live reader's XREAD BLOCK: its own connection, with a socket timeout longer
        # than the block (a quiet stream is not a dead server).
        block = config["LIVE_BLOCK_SECONDS"]
        live_client = connect(
            config["REDIS_URL"],
            role="query-live",
            # One reader (one `reader_group`) per process; on a cluster one per watched slot,
            # at most 64 on the index shards' slots (games from before them add one each).
            max_connections=LIVE_CLUSTER_READERS if is_cluster_url(config["REDIS_URL"]) else 1,
            socket_timeout=blocking_read_timeout(block),
        )
        store = RedisEventStore(views)
        url = config["ARCHIVE_URL"]
        service = QueryService(
            # Archived games (only their tombstone left in Redis) read from the archive.
            FallThroughStore(
                store,
                lambda game_id: bool(views.exists(archived_key(game_id))),
                lambda: open_archive(url),
                logs=config["ARCHIVE_CACHE_SIZE"],
                used=lambda: bool(views.exists(archive_used_key())),
            ),
            RedisDirectory(views),
            hub=LiveHub(
                store,
                live_client,
                views,
                block_seconds=block,
                keep=config["LIVE_KEEP_EVENTS"],
                watch_interval=config["LIVE_WATCH_SECONDS"],
            ),
            cache_size=config["STATE_CACHE_SIZE"],
            snapshot_every=config["SNAPSHOT_EVERY"],
            replay_games=config["REPLAY_CACHE_SIZE"],
        )
    app.extensions["query_service"] = service
    # GET /games looks API keys up (the command service's keys: services/redis_store/apikeys.py).
    keys_client = app.config.get("API_KEYS_CLIENT") or shared_client(
        app.config["REDIS_URL"], role="query", max_connections=app.config["REDIS_POOL_SIZE"]
    )
    app.extensions["api_keys"] = ApiKeys(keys_client)
    app.extensions["live_slots"] = threading.BoundedSemaphore(app.config["SSE_MAX_STREAMS"])
    api = ContractApi(app)  # /openapi.json: the whole API's one document
    api.register_blueprint(blp)
    api.register_blueprint(pictures.boards)
    api.register_blueprint(pictures.tilesets)
    api.register_blueprint(ratings.blp)  # /v1/ratings: the key's leaderboards
    app.extensions["ratings"] = Ratings(keys_client)
    pages.register(app, api)  # the web pages: /, /games/{id}/view, /viewer/…

    http_errors.register(app, retry_after=5, unprocessable="invalid_query")
    return app
