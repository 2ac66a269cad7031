"""Ratings and leaderboards (docs/ratings.md), private to the API key whose games made them:
`GET /v1/ratings/{pool}` (a pool's leaderboard, a page at a time) and
`GET /v1/ratings?player_id=` (one player's rating, rank and recent games in each pool). The
ratings consumer of the scoring worker writes them (services/scoring/ratings.py)."""

from __future__ import annotations

from typing import Any

from flask import current_app, request
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow import Schema, fields, validate

from services.common.access import known_key, missing_key, request_key
from services.common.schemas import Closed
from services.redis_store.apikeys import ApiKeys
from services.redis_store.ratings import POOLS, Ratings

from .projector import NotFound
from .schemas import PLAYER_ID

blp = Blueprint(
    "ratings", __name__, url_prefix="/v1/ratings", description="Ratings and leaderboards"
)
MAX_PAGE = 100
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


class BoardArgs(Schema):
    offset = fields.Integer(load_default=0, validate=validate.Range(0, 10_000_000))
    limit = fields.Integer(load_default=50, validate=validate.Range(1, MAX_PAGE))


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
        (`offset`, `limit`). Needs the key (401 missing_api_key, 403 bad_api_key): a
        platform's ratings are its own. An unknown pool: 404 pool_not_found."""
        key_id = _key_id("a leaderboard")
        if pool not in POOLS:
            raise NotFound("pool_not_found", f"the pools are {', '.join(POOLS)}")
        offset, limit = args["offset"], args["limit"]
        page = _ratings().board(key_id, pool, offset, limit)  # one snapshot: rows and size
        more = offset + limit < page.total
        return {
            "pool": pool,
            "players": page.total,
            "items": page.rows,
            "next_offset": offset + limit if more else None,
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
