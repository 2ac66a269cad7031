"""Ratings and leaderboards (docs/ratings.md), private to the API key whose games made them:
`GET /v1/ratings/{pool}` (a pool's leaderboard, a page at a time) and
`GET /v1/ratings?player_id=` (one player's rating, rank and recent games in each pool). The
ratings consumer of the scoring worker writes them (services/scoring/ratings.py)."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from flask import Response, current_app, request
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow import Schema, ValidationError, fields, validate

from services.common.access import known_key, missing_key, request_key
from services.common.schemas import Closed
from services.redis_store.apikeys import ApiKeys
from services.redis_store.ratings import POOLS, Ratings

from .projector import BadParameter, NotFound
from .schemas import PLAYER_ID

blp = Blueprint(
    "ratings", __name__, url_prefix="/v1/ratings", description="Ratings and leaderboards"
)
MAX_PAGE = 100
MAX_CURSOR = 512  # a cursor's length: ~60 characters; ~380 for 128 quotes, escaped, as a player id
POOL = {"description": "classic, hand (a hand of three, R10.3) or demo: docs/ratings.md"}
PLAYER = {"description": "a player_id, or bot:<level> for a bot seat"}


class RatingFields(Closed):
    mu = fields.Float(required=True, metadata={"description": "estimated skill"})
    sigma = fields.Float(required=True, metadata={"description": "its uncertainty"})
    ordinal = fields.Float(
        required=True, metadata={"description": "mu - 3 sigma: what leaderboards order by"}
    )
    games = fields.Integer(required=True, metadata={"description": "rated games in the pool"})


class LeaderboardRow(RatingFields):
    rank = fields.Integer(
        required=True,
        metadata={"description": "1 + the players with a higher ordinal: equal ordinals share it"},
    )
    player = fields.String(required=True, metadata=PLAYER)


class Leaderboard(Closed):
    pool = fields.String(required=True, metadata=POOL)
    players = fields.Integer(required=True, metadata={"description": "rated in the pool"})
    items = fields.List(fields.Nested(LeaderboardRow), required=True)
    next_offset = fields.Integer(
        required=True, allow_none=True, metadata={"description": "`offset` of the next page"}
    )
    next_cursor = fields.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "`cursor` of the next page (null on the last): it starts right "
            "after this page's last row, however ratings change meanwhile"
        },
    )


def encode_cursor(ordinal: float, player: str) -> str:
    """The cursor of the row after (ordinal, player): opaque, URL-safe."""
    raw = json.dumps([ordinal, player], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(ordinal, player) of a cursor `encode_cursor` made; ValueError for anything else."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        ordinal, player = json.loads(raw)
    except (binascii.Error, ValueError, TypeError) as e:  # not base64, JSON, or a pair
        raise ValueError("not a cursor this service made") from e
    if isinstance(ordinal, bool) or not isinstance(ordinal, int | float):
        raise ValueError("not a cursor this service made")
    if not math.isfinite(ordinal) or not isinstance(player, str):
        raise ValueError("not a cursor this service made")
    PLAYER_ID(player)  # a ValidationError too
    return float(ordinal), player


class BoardArgs(Schema):
    offset = fields.Integer(load_default=0, validate=validate.Range(0, 10_000_000))
    limit = fields.Integer(load_default=50, validate=validate.Range(1, MAX_PAGE))
    # Opaque: its form is the service's own, so the document gives its length alone and a
    # string this service did not make is a 422 `bad_cursor` (`after`), as the directory's.
    cursor = fields.String(
        validate=validate.Length(1, MAX_CURSOR),
        metadata={
            "description": "a page's `next_cursor`: the next page starts right after that "
            "page's last row (no row shown twice or skipped when ratings change between "
            "pages, but for the players whose rating changed); not with `offset` (422 "
            "cursor_and_offset); a string no page gave: 422 bad_cursor"
        },
    )


def after(args: dict[str, Any]) -> tuple[float, str] | None:
    """The (ordinal, player) a page starts after: its `cursor` decoded, if given."""
    cursor = args.get("cursor")
    if cursor is None:
        return None
    if args["offset"]:
        raise BadParameter(
            "cursor_and_offset", "a page starts at an offset or after a cursor, not both", None
        )
    try:
        return decode_cursor(cursor)
    except (ValueError, ValidationError):
        raise BadParameter(
            "bad_cursor", "not a cursor: send a next_cursor as it was given", None
        ) from None


class RatingShown(Closed):
    mu = fields.Float(required=True)
    sigma = fields.Float(required=True)
    ordinal = fields.Float(required=True)
    games = fields.Integer(required=True)


class RatedGame(Closed):
    """One rated game of the player: its place and its rating before and after."""

    game_id = fields.String(required=True)
    time_ms = fields.Integer(required=True, metadata={"description": "when it was scored"})
    seat = fields.Integer(required=True)
    rank = fields.Integer(required=True, metadata={"description": "among the rated seats"})
    of = fields.Integer(required=True, metadata={"description": "rated seats in the game"})
    before = fields.Nested(RatingShown, required=True, allow_none=True)
    after = fields.Nested(RatingShown, required=True)


class PoolRating(RatingFields):
    pool = fields.String(required=True, metadata=POOL)
    rank = fields.Integer(required=True, allow_none=True)
    players = fields.Integer(required=True, metadata={"description": "rated in the pool"})
    history = fields.List(
        fields.Nested(RatedGame), required=True, metadata={"description": "newest first"}
    )


class PlayerRatings(Closed):
    player = fields.String(required=True, metadata=PLAYER)
    pools = fields.List(fields.Nested(PoolRating), required=True)


class PlayerArgs(Schema):
    player_id = fields.String(
        required=True,
        validate=PLAYER_ID,  # bot:<level> is one too
        metadata=PLAYER,
    )
    history = fields.Integer(load_default=20, validate=validate.Range(0, 200))


@blp.after_request
def _private(response: Response) -> Response:
    """A key's ratings are its own: never stored by a shared cache, nor served from one for
    another key (the games list varies with the key the same way)."""
    response.vary.add("X-Api-Key")
    response.headers["Cache-Control"] = "private, no-cache"
    return response


def _key_id(what: str) -> str:
    """The id of the live API key the request sends: ratings are its own."""
    key = request_key(request)
    if key is None:
        raise missing_key(what)
    keys: ApiKeys = current_app.extensions["api_keys"]
    return str(known_key(keys, key)["id"])


def _ratings() -> Ratings:
    ratings: Ratings = current_app.extensions["ratings"]
    return ratings


@blp.route("/<pool>")
class PoolBoard(MethodView):
    @blp.arguments(BoardArgs(), location="query")
    @blp.response(200, Leaderboard())
    def get(self, args: dict[str, Any], pool: str) -> dict[str, Any]:
        """A pool's leaderboard for the API key's players, best first, a page at a time
        (`limit`; from `offset`, or after the row of the `cursor` a page gave: ratings that
        change between pages shift offsets, not cursors). Needs the key (401
        missing_api_key, 403 bad_api_key): a platform's ratings are its own. An unknown
        pool: 404 pool_not_found; a cursor no page gave, 422 bad_cursor; a cursor with an
        offset, 422 cursor_and_offset."""
        key_id = _key_id("a leaderboard")
        if pool not in POOLS:
            raise NotFound("pool_not_found", f"the pools are {', '.join(POOLS)}")
        offset, limit = args["offset"], args["limit"]
        # One snapshot: its rows, their ranks and the size.
        page = _ratings().board(key_id, pool, offset, limit, after(args))
        more = page.start + limit < page.total and page.last is not None
        return {
            "pool": pool,
            "players": page.total,
            "items": page.rows,
            "next_offset": page.start + limit if more else None,
            "next_cursor": encode_cursor(*page.last) if more and page.last else None,
        }


@blp.route("")
class PlayerRating(MethodView):
    @blp.arguments(PlayerArgs(), location="query")
    @blp.response(200, PlayerRatings())
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """One player's rating, rank and last rated games (`history`, default 20) in each pool
        it has played in, for the API key's games. 404 player_not_rated before its first
        rated game."""
        key_id = _key_id("a player's ratings")
        player = args["player_id"]
        pools = _ratings().player(key_id, player, args["history"])
        if not pools:
            raise NotFound(
                "player_not_rated",
                f"no rated game of {player[:128]!r} among this API key's games yet",
            )
        return {"player": player, "pools": pools}
