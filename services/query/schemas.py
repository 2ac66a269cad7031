"""HTTP schemas of the query service: query parameters in, views out (for the OpenAPI document).

Views are encoded straight to JSON (they are cached as bytes); the output schemas describe
them for the OpenAPI document. Unknown query parameters are ignored (webargs' default for
query strings: cache busters and tracking parameters must not break a view).
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

MAX_LIMIT = 1_000
CURSOR = validate.Regexp(r"^\d{1,15}-\d{1,15}$", error='a cursor is "<move seq>-<score seq>"')


class AtArgs(Schema):
    at = fields.Integer(
        validate=validate.Range(1, 10**12),
        metadata={
            "description": "show the view as it stood right after this move (its seq in the "
            "move stream; at=1 is GameStarted, at=2 the first draw). Not with `turn` (422 "
            "at_and_turn)"
        },
    )
    turn = fields.Integer(
        validate=validate.Range(0, 10**6),
        metadata={
            "description": "show the view after this many placements (turn=0: the game as "
            "created); it includes the draws that followed, so `turn` names the next player "
            "and their tile. A discarded or returned tile is no turn. Not with `at`"
        },
    )


class EventsArgs(Schema):
    after = fields.String(
        load_default="0-0",
        validate=CURSOR,
        metadata={"description": "cursor: the events after it (an item's `cursor`, or `next`)"},
    )
    limit = fields.Integer(validate=validate.Range(1, MAX_LIMIT))
    format = fields.String(
        validate=validate.OneOf(["json", "ndjson"]),
        metadata={"description": "ndjson: one event per line (also Accept: application/x-ndjson)"},
    )


class LiveArgs(Schema):
    after = fields.String(
        validate=CURSOR,
        metadata={"description": "start after this cursor (Last-Event-ID wins); default: now"},
    )


PLAYER_ID = validate.Regexp(
    r"^[!-~]{1,128}$", error="a player_id is 1-128 visible ASCII characters (no spaces)"
)


class GamesArgs(Schema):
    status = fields.String(validate=validate.OneOf(["in_progress", "over"]))
    player = fields.String(validate=validate.Length(1, 40))
    player_id = fields.String(
        validate=PLAYER_ID,
        metadata={"description": "games with a seat of this player id (exact match)"},
    )
    cursor = fields.String(validate=validate.Length(1, 200))
    limit = fields.Integer(validate=validate.Range(1, MAX_LIMIT))


PLAYER_ID_OUT = {"description": "the app's user id given for this seat at creation, or null"}


class SeatOut(Schema):
    seat = fields.Integer()
    name = fields.String()
    player_id = fields.String(allow_none=True, metadata=PLAYER_ID_OUT)
    score = fields.Integer()
    supply = fields.Integer()


class TurnOut(Schema):
    player = fields.Integer()
    name = fields.String()
    tile = fields.String(allow_none=True)


class TileOut(Schema):
    tile = fields.String()
    x = fields.Integer()
    y = fields.Integer()
    rotation = fields.Integer()


class MeepleOut(Schema):
    player = fields.Integer()
    x = fields.Integer()
    y = fields.Integer()
    feature = fields.String()
    spot = fields.String(metadata={"description": "edge N E S W, half-edge NNW…WNW, monastery"})


class OpenFeatureOut(Schema):
    kind = fields.String()
    tiles = fields.List(fields.List(fields.Integer()))
    pennants = fields.Integer()
    missing = fields.Integer(metadata={"description": "open edges; a monastery: empty squares"})
    meeples = fields.List(fields.Integer())
    if_ended = fields.Dict(
        allow_none=True, metadata={"description": "its R7.2 score explanation if it ended now"}
    )


class BoardOut(Schema):
    game_id = fields.String()
    seq = fields.Integer(metadata={"description": "the last move this view reflects"})
    phase = fields.String()
    over = fields.Boolean()
    ruleset = fields.Dict()
    players = fields.List(fields.Nested(SeatOut))
    turn = fields.Nested(TurnOut, allow_none=True)
    tiles_placed = fields.Integer(metadata={"description": "placements so far (`?turn=`)"})
    tiles_left = fields.Integer()
    discarded = fields.List(fields.String())
    tiles = fields.List(fields.Nested(TileOut))
    meeples = fields.List(fields.Nested(MeepleOut))
    open_features = fields.List(fields.Nested(OpenFeatureOut))
    farms_if_ended = fields.List(fields.Dict())
    scores_if_ended = fields.List(fields.Integer())


class TrackOut(Schema):
    space = fields.Integer()
    laps = fields.Integer()
    point_tiles = fields.List(fields.Integer())


class ScorePlayerOut(Schema):
    seat = fields.Integer()
    name = fields.String()
    player_id = fields.String(allow_none=True, metadata=PLAYER_ID_OUT)
    score = fields.Integer()
    track = fields.Nested(TrackOut)
    meeples = fields.Dict(metadata={"description": "supply and on_board, as of move `seq`"})
    points = fields.Dict(metadata={"description": "roads, cities, monasteries, farms"})
    rank = fields.Integer(allow_none=True)


class ScoresOut(Schema):
    game_id = fields.String()
    seq = fields.Integer()
    scored_up_to = fields.Integer(metadata={"description": "the last move the worker scored"})
    unscored_moves = fields.Integer()
    score_seq = fields.Integer()
    over = fields.Boolean()
    players = fields.List(fields.Nested(ScorePlayerOut))
    events = fields.List(fields.Dict())
    result = fields.Dict(allow_none=True)


class EventsOut(Schema):
    game_id = fields.String()
    after = fields.String()
    next = fields.String()
    more = fields.Boolean()
    items = fields.List(fields.Dict())


class GameSummaryOut(Schema):
    game_id = fields.String()
    status = fields.String()
    players = fields.List(fields.String())
    player_ids = fields.List(
        fields.String(allow_none=True), metadata={"description": "per seat; null: not given"}
    )
    seq = fields.Integer()
    updated_ms = fields.Integer()
    scores = fields.List(fields.Integer(), allow_none=True)


class GamesOut(Schema):
    games = fields.List(fields.Nested(GameSummaryOut))
    next = fields.String(allow_none=True)


class ErrorOut(Schema):
    code = fields.String()
    message = fields.String()
    rule = fields.String(allow_none=True)
    details = fields.Dict()
