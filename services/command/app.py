"""The command service's Flask app: `create_app(test_config=None)`.

Views decode the request, call one `GameService` method and encode the result. Every error
leaves in one JSON shape: ``{"code", "message", "rule", "details"}`` with a stable `code`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import redis
from flask import Flask, Response, current_app, request
from flask.views import MethodView
from prometheus_client import Counter

from carcassonne.errors import GameError, MalformedError
from carcassonne.events import meeple_from_dict
from services.archive import open_archive
from services.archive.fallthrough import FallThroughStore
from services.common import http_errors
from services.common.access import missing_key
from services.common.api_doc import ContractApi
from services.common.body import unproxied
from services.common.http_errors import error_response
from services.common.task_sender import TaskSender
from services.common.webapp import Blueprint, checked_game_id, new_app
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import BotBudget
from services.redis_store.connect import broker_url
from services.redis_store.hint_store import QUEUE as HINT_QUEUE
from services.redis_store.hint_store import TASK as HINT_TASK
from services.redis_store.hint_store import HintStore, Limits
from services.redis_store.replication import NotReplicated
from services.redis_store.vacations import VacationBook

from . import (
    hints,
    integration,
    lobby_views,
    subscription_views,
    ticket_views,
    undo_api,
    vacation_views,
)
from .client import command_client
from .config import from_env
from .handlers import TurnResult
from .rulesets import to_ruleset
from .schemas import (
    DEFAULT_THINK_MS,
    CreatedGame,
    CreateGameIn,
    HandView,
    HintOut,
    HintPending,
    HintQuery,
    ReissuedToken,
    Rematch,
    TurnIn,
    TurnView,
)
from .schemas import TurnResult as TurnResultOut
from .secrets_store import RedisSecrets
from .service import GameService

blp = Blueprint("games", __name__, url_prefix="/games", description="Create and play games")
EVENTS_APPENDED = Counter(
    "carcassonne_events_appended_total", "Events appended by the command service", ["stream"]
)
MOVES_APPENDED = EVENTS_APPENDED.labels("moves")  # looked up once: every turn counts here


def _service() -> GameService:
    service: GameService = unproxied(current_app).extensions["game_service"]
    return service


def _next(result: TurnResult) -> dict[str, Any]:
    state = result.state
    if state.over:
        return {"over": True, "player": None, "tile": None, "scores": list(state.scores)}
    return {
        "over": False,
        "player": state.current,
        "tile": state.drawn,
        "tiles_left": state.bag_size,
    }


@blp.route("")
class Games(MethodView):
    @blp.arguments(CreateGameIn())
    @blp.response(201, CreatedGame())
    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a game: returns its id and one secret token per player.

        Needs an `X-Api-Key` (401 missing_api_key; a development server started with
        ANONYMOUS_GAMES=1 also takes none): the key owns the game, its subscriptions
        (`/v1/subscriptions`) cover it and only it lists the game by player (GET /games).
        `public: true` lists the game to everyone as well. Rate limited per key and per
        client address (429 rate_limited with Retry-After).

        Not idempotent (an Idempotency-Key is ignored): a retry after a lost reply makes a
        second game, and the first is never played. Answering a retry with the first game's
        tokens would need them stored in the clear, for anyone who sends the same key."""
        ruleset = to_ruleset(body["ruleset"])
        names = [p["name"] for p in body["players"]]
        ids = [p.get("player_id") for p in body["players"]]
        bots = [
            {"level": p["bot"], "think_ms": p.get("think_ms", DEFAULT_THINK_MS)}
            if "bot" in p
            else None
            for p in body["players"]
        ]
        # The app's API key owns the game: its subscriptions cover it, it lists it.
        key = integration.checked_api_key()
        if key is None and not current_app.config["ANONYMOUS_GAMES"]:
            raise missing_key("creating a game")
        game_id, players = _service().create_game(
            names,
            ruleset,
            body["seat_order"],
            ids,
            key_id=key["id"] if key else None,
            bots=bots,
            public=body["public"],
            bot_only_max_think_ms=current_app.config["BOT_ONLY_MAX_THINK_MS"],
        )
        return {"game_id": game_id, "players": players, "turn": _service().turn_view(game_id)}


@blp.route("/<game_id>/turns")
class Turns(MethodView):
    @blp.arguments(TurnIn())
    @blp.response(200, TurnResultOut())
    @blp.doc(
        parameters=[
            {
                "in": "header",
                "name": "Idempotency-Key",
                "schema": integration.IDEMPOTENCY_KEY_SCHEMA,
                "description": "makes a retry safe: the same key (per seat) with the same "
                "body answers the original result and appends nothing; with another body "
                "422 idempotency_key_reused",
            },
            {
                "in": "header",
                "name": "If-Match",
                # What `_if_match` takes: `*`, the ETag (weak too) or the number, quoted or not.
                "schema": {"type": "string", "pattern": r'^\s*(\*|(W/)?"*m?[0-9]{1,12}"*)\s*$'},
                "description": "the sequence the client expects the game to be at: the "
                'ETag of GET /games/{game_id}/turn or of the board (`"m6"`, `W/"m6"`) or '
                "the bare number (`6`); otherwise 409 stale_sequence",
            },
        ]
    )
    def post(self, body: dict[str, Any], game_id: str) -> Response:
        """Play the drawn tile (and maybe a meeple) for the token's player."""
        # The objects behind flask's proxies, read once (every turn's path: `unproxied`).
        headers = unproxied(request).headers
        auth = headers.get("Authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        key = integration.idempotency_key(headers)
        expected = _if_match(headers.get("If-Match"))
        if body["recall_abbot"] and body["meeple"] is not None:
            raise MalformedError(
                "recall_with_meeple", "take the abbot back or place a meeple, not both", "R9.2"
            )
        result = _service().play_turn(
            checked_game_id(game_id),
            token,
            body["x"],
            body["y"],
            body["rotation"],
            meeple_from_dict(body["meeple"]),
            idempotency_key=key,
            expected_seq=expected,
            trust_cache=unproxied(current_app).config["TRUST_CACHE"],
            recall=body["recall_abbot"],
            tile=body["tile"],
        )
        return _turn_response(result)


def _turn_response(result: TurnResult) -> Response:
    """A command's answer: the events it appended (counted) and who moves next.

    Encoded here rather than dumped through `TurnResult` (which documents it): the body is
    built from plain values already, and the schema dump cost ~15% of a turn's CPU."""
    if not result.replayed:
        MOVES_APPENDED.inc(len(result.events))
    return _json_response(
        {
            "seq": result.seq,
            "replayed": result.replayed,
            "events": [e.to_dict() for e in result.events],
            "next": _next(result),
        }
    )


def _bearer() -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


@blp.route("/<game_id>/players/<int:seat>/token")
class SeatToken(MethodView):
    @integration.authenticated
    @blp.response(200, ReissuedToken())
    def post(self, game_id: str, seat: int) -> Response:
        """A new secret token for a seat (a lost phone), for the API key that created the game
        (`X-Api-Key` on `POST /games`). The seat's old token stops working at once."""
        key = integration.current_key_id()
        return _json_response(_service().reissue_token(checked_game_id(game_id), seat, key))


@blp.route("/<game_id>/rematch")
class RematchView(MethodView):
    @integration.authenticated
    @blp.response(201, Rematch())
    @blp.alt_response(
        200, schema=Rematch, description="made by an earlier request: the same game, no tokens"
    )
    def post(self, game_id: str) -> Response:
        """The next game for the same players, once this one is over, for the API key that
        created it: the same ruleset, names and player ids, seats rotated by one (the old
        seat 1 moves first). Safe to repeat: every request names one game, and only the one
        that made it (201) holds the new tokens; a repeat answers 200 with tokens null. The
        key's subscriptions hear `game_started` with every seat (docs/lobby.md)."""
        key = integration.current_key_id()
        made = _service().rematch(checked_game_id(game_id), key)
        response = _json_response(made)
        response.status_code = 201 if made["created"] else 200
        return response


@blp.route("/<game_id>/resign")
class Resign(MethodView):
    @blp.response(200, TurnResultOut())
    def post(self, game_id: str) -> Response:
        """Leave the game for the token's seat (docs/lifecycle.md): the seat is out, skipped
        from then on, its meeples stay and score for it; with fewer than two players left
        the game ends with final scoring. Under `on_leave: "bot:<level>"` a bot plays on for
        it (`SeatTakenOver` in `events`), its time reserved against the game's API key's bot
        budgets; when they cannot pay, `events` has `TakeoverRefused` instead and the seat is
        skipped (docs/takeover.md). Safe to retry: a seat resigns once (and is charged once)."""
        return _turn_response(_service().resign(checked_game_id(game_id), _bearer()))


# One encoder for every answer: `json.dumps` with `separators` builds a new `JSONEncoder` per
# call (only its default form is cached). The same bytes either way.
_compact_json = json.JSONEncoder(separators=(",", ":")).encode


def _json_response(body: dict[str, Any]) -> Response:
    return Response(_compact_json(body), mimetype="application/json")


def _if_match(value: str | None) -> int | None:
    """The move sequence an If-Match names, or None for no condition (absent, or ``*``:
    "any current game", which a game that exists always is).

    Takes the ETag form the views send (``"m6"``; ``W/"m6"`` too, since a proxy that
    compresses the body weakens the ETag it passes on) and the bare number (``6``, ``"6"``).
    """
    if value is None:
        return None
    text = value.strip()
    if text == "*":
        return None
    text = text.removeprefix("W/").strip('"')
    digits = text[1:] if text.startswith("m") else text
    if not digits.isdigit() or not digits.isascii() or len(digits) > 12:
        raise GameError(
            "bad_if_match",
            'If-Match must name the expected sequence: an ETag like "m6" or the number 6',
        )
    return int(digits)


def turn_etag(seq: int) -> str:
    """The turn view depends on the move stream only: the board's ETag form, ``m<seq>``."""
    return f"m{seq}"


@blp.route("/<game_id>/turn")
class Turn(MethodView):
    @blp.response(200, TurnView())
    @blp.alt_response(304, description="Not Modified: the If-None-Match ETag is current")
    def get(self, game_id: str) -> Response:
        """Whose turn it is, the drawn tile, and every legal placement with its meeple spots.

        Carries an ETag (`"m<seq>"`, also valid as the next turn's If-Match) and answers 304
        to a matching If-None-Match."""
        view = _service().turn_view(checked_game_id(game_id))
        etag = turn_etag(view["seq"])
        # Weak comparison (RFC 9110 13.1.2): a gzipping proxy hands clients W/"m6".
        fresh = request.if_none_match.contains_weak(etag)
        response = Response(status=304) if fresh else _json_response(view)
        response.set_etag(etag)
        response.headers["Cache-Control"] = "no-cache"  # always revalidate: turns move on
        return response


@blp.route("/<game_id>/hand")
class Hand(MethodView):
    @blp.response(200, HandView())
    def get(self, game_id: str) -> Response:
        """R10.3: your own hand (the seat of the bearer token) and, on your move, every legal
        (tile, placement). Never another seat's hand: their tiles show only once played, or
        in the turn view's `hands` when the game is over. A game without a hand: 409 no_hand."""
        view = _service().hand_view(checked_game_id(game_id), _bearer())
        response = _json_response(view)
        response.headers["Cache-Control"] = "private, no-store"  # a secret of one seat
        return response


@blp.route("/<game_id>/hint")
class Hint(MethodView):
    @blp.arguments(HintQuery(), location="query")
    @blp.response(200, HintOut())
    @blp.alt_response(202, schema=HintPending(), description="Accepted: the hint is pending")
    def get(self, query: dict[str, Any], game_id: str) -> Response:
        """The move a bot would play now for the token's seat, with its estimated value,
        worked out by the bot worker: 202 (`Location`: this URL, `Retry-After`) until it is
        ready, then 200 with the hint. Ask again at `Location` after Retry-After seconds (or
        `retry_after_ms`).

        Only in a game created with `ruleset.hints: true` (else 403 hints_disabled), only for
        the seat to move (else 409 not_your_turn). `level` picks the bot (default greedy).
        A hint takes a fixed time from when the worker starts it, whatever the seat's hand:
        mcts the service's HINT_THINK_MS (500 ms), greedy and random HINT_FLOOR_MS (150 ms);
        one asked for again is answered at once and costs nothing. Each searched hint counts
        against the seat's hint seconds in the game and its API key's bot seconds (in flight,
        per day, hints at once): 429 `hint_budget_exceeded`, `bot_budget_exceeded` or
        `bot_day_budget_exceeded` beyond them. 503 `hint_unavailable` when the bot worker
        did not answer in time (HINT_WAIT_MS past the hint's duration): ask again later."""
        reply = _service().hint(checked_game_id(game_id), _bearer(), query["level"])
        response = _json_response(reply.body)
        response.headers["Cache-Control"] = "private, no-store"  # one seat's, and it moves on
        if reply.status == 202:
            response.status_code = 202
            response.headers["Location"] = f"/games/{game_id}/hint?level={query['level']}"
            response.headers["Retry-After"] = hints.retry_after(reply)
        return response


def hint_desk(config: dict[str, Any], client: redis.Redis, tasks: TaskSender) -> hints.HintDesk:
    """Where this service asks the bot worker for hints, with the budgets they count against."""
    limits = Limits(
        in_flight=config["BOT_SECONDS_IN_FLIGHT"],
        day=config["BOT_SECONDS_PER_DAY"],
        seat=config["HINT_SECONDS_PER_SEAT"],
        at_once=config["HINTS_IN_FLIGHT"],
    )
    return hints.HintDesk(
        HintStore(client, int(config["HINT_KEEP_SECONDS"] * 1000)),
        lambda args: tasks.send(HINT_TASK, HINT_QUEUE, args),
        limits,
        config["HINT_THINK_MS"],
        config["HINT_FLOOR_MS"],
        config["HINT_WAIT_MS"],
    )


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app; `test_config` overrides settings (and may inject `GAME_SERVICE`)."""
    app = new_app(__name__, "command", from_env(), test_config)
    service = app.config.get("GAME_SERVICE")
    # The one Celery producer of this process: bot turns, webhook dispatch,
    # subscription pings (services/common/task_sender.py).
    tasks = TaskSender(broker_url(app.config["BROKER_URL"], app.config["REDIS_URL"]), "command")
    app.extensions["tasks"] = tasks
    if service is None:
        client = command_client(app.config)
        store = RedisEventStore(
            client,
            wait_replicas=app.config["REDIS_WAIT_REPLICAS"],
            wait_ms=app.config["REDIS_WAIT_MS"],
        )
        secrets_store = RedisSecrets(client)
        book = VacationBook(client)
        url = app.config["ARCHIVE_URL"]
        service = GameService(
            store,
            secrets_store,
            cache_size=app.config["STATE_CACHE_SIZE"],
            # Turns change cached states in place only when one thread serves the process.
            in_place=int(os.environ.get("GUNICORN_THREADS", "1")) <= 1,
            undo_seconds=app.config["UNDO_SECONDS"],
            bot_budget=BotBudget(
                client, app.config["BOT_SECONDS_IN_FLIGHT"], app.config["BOT_SECONDS_PER_DAY"]
            ),
            hint_desk=hint_desk(app.config, client, tasks),
            # Players on vacation as a game starts (docs/clocks.md).
            away=book.away_until,
            ends=book.ends,
            move_floor_ms=app.config["BOT_MOVE_FLOOR_MS"],
            # Archived games' whole logs (GET /games/{id}/record, imports), read only.
            archive_reads=FallThroughStore(
                store, secrets_store.archived, lambda: open_archive(url), logs=64
            ),
        )
    app.extensions["game_service"] = service
    api = ContractApi(app)  # /openapi.json: the whole API's one document
    api.register_blueprint(blp)
    integration.init_app(app, api, service)  # /v1/score, import, export, webhooks
    subscription_views.init_app(app, api)  # /v1/subscriptions
    undo_api.init_app(app, api)  # /games/{id}/undo…
    lobby_views.init_app(app, api, service)  # /lobbies…
    ticket_views.init_app(app, api, service)  # /tickets…
    vacation_views.init_app(app, api, service)  # /v1/players/{id}/vacations

    def not_replicated(exc: redis.RedisError) -> Response | None:
        # An append is one script: it happened whole or not at all (the reply may be what
        # was lost). Retrying with the same Idempotency-Key is safe either way.
        if not isinstance(exc, NotReplicated):
            return None  # the generic 503: the store is unavailable
        app.logger.warning("append not replicated: %s", exc)  # appended, not yet on a replica
        response = error_response(
            "not_replicated",
            "the move was stored but not confirmed by a replica in time; "
            "retry with the same Idempotency-Key",
            503,
            details={"replicas": exc.acked, "wanted": exc.wanted},
        )
        response.headers["Retry-After"] = "1"
        return response

    http_errors.register(
        app, retry_after=2, unprocessable="invalid_body", store_error=not_replicated
    )
    return app
