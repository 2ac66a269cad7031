"""HTTP schemas of the command service (marshmallow; the OpenAPI document is built from them)."""

from __future__ import annotations

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from carcassonne.geometry import EDGES, HALF_EDGES
from eventstore.fastload import FastLoadSchema

COORD = validate.Range(-10_000, 10_000)


class Strict(FastLoadSchema):
    class Meta:
        unknown = RAISE


PLAYER_ID = validate.Regexp(
    r"^[!-~]{1,128}$", error="a player_id is 1-128 visible ASCII characters (no spaces)"
)


class PlayerIn(Strict):
    name = fields.String(
        required=True,
        validate=validate.Length(1, 40),
        metadata={"description": "unique in the game, ignoring case and surrounding spaces"},
    )
    player_id = fields.String(
        validate=PLAYER_ID,
        metadata={
            "description": "optional, opaque: the app's own user id for this player (1-128 "
            "visible ASCII characters); shown in views and records, `GET /games?player_id=`"
        },
    )


class AreaIn(Strict):
    width = fields.Integer(required=True, strict=True, validate=validate.Range(1, 1000))
    height = fields.Integer(required=True, strict=True, validate=validate.Range(1, 1000))


class RulesetIn(Strict):
    tileset = fields.String(load_default="base", validate=validate.OneOf(["base", "demo"]))
    farmers = fields.Boolean(load_default=True, truthy={True}, falsy={False})
    farm_scoring = fields.String(load_default="3rd", validate=validate.OneOf(["3rd", "2nd", "1st"]))
    incomplete_score = fields.Boolean(load_default=True, truthy={True}, falsy={False})
    meeples = fields.Integer(strict=True, validate=validate.Range(0, 99), load_default=None)
    unplaceable = fields.String(
        load_default="discard", validate=validate.OneOf(["discard", "return"])
    )
    area = fields.Nested(AreaIn, load_default=None)


class CreateGameIn(Strict):
    players = fields.List(fields.Nested(PlayerIn), required=True, validate=validate.Length(2, 6))
    ruleset = fields.Nested(RulesetIn, load_default=lambda: RulesetIn().load({}))
    seat_order = fields.List(
        fields.Integer(strict=True),
        load_default=None,
        metadata={"description": "indexes into players, first to move first"},
    )


class SeatOut(Schema):
    seat = fields.Integer()
    name = fields.String()
    player_index = fields.Integer(
        metadata={"description": "the index in the request's `players` of who sits here"}
    )
    player_id = fields.String(metadata={"description": "the request's player_id, if given"})
    token = fields.String(metadata={"description": "secret: send as Authorization: Bearer"})


class CreatedGameOut(Schema):
    game_id = fields.String()
    players = fields.List(fields.Nested(SeatOut))
    turn = fields.Dict()


class MeepleIn(Strict):
    feature = fields.String(
        required=True, validate=validate.OneOf(["road", "city", "field", "monastery"])
    )
    edge = fields.String(validate=validate.OneOf(EDGES))
    half_edge = fields.String(validate=validate.OneOf(HALF_EDGES))

    @validates_schema
    def one_spot(self, data: dict[str, object], **_: object) -> None:
        feature = data.get("feature")
        if feature in ("road", "city") and ("edge" not in data or "half_edge" in data):
            raise ValidationError("a road or city meeple names one edge: N, E, S or W")
        if feature == "field" and ("half_edge" not in data or "edge" in data):
            raise ValidationError("a farmer names one half_edge: NNW … WNW")
        if feature == "monastery" and ("edge" in data or "half_edge" in data):
            raise ValidationError("a monk names no edge")


class TurnIn(Strict):
    x = fields.Integer(required=True, strict=True, validate=COORD)
    y = fields.Integer(required=True, strict=True, validate=COORD)
    rotation = fields.Integer(required=True, strict=True, validate=validate.Range(0, 3))
    meeple = fields.Nested(MeepleIn, allow_none=True, load_default=None)


class TurnOut(Schema):
    seq = fields.Integer()
    replayed = fields.Boolean()
    events = fields.List(fields.Dict())
    next = fields.Dict(metadata={"description": "next player and their drawn tile"})


class ErrorOut(Schema):
    code = fields.String()
    message = fields.String()
    rule = fields.String(allow_none=True)
    details = fields.Dict()
