"""Marshmallow schemas both services' OpenAPI documents share: the error body, the engine's
JSON forms (ruleset, meeple, event, score explanation) and records.

They describe bodies the services encode themselves (plain dicts, for speed); the contract
tests (tests/integration/openapi_client.py) hold every real response to them. Output schemas
are closed (`unknown = RAISE` becomes `additionalProperties: false`), so a key the code adds
without documenting it fails those tests.
"""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from carcassonne.geometry import EDGES, HALF_EDGES

FEATURES = ["road", "city", "field", "monastery", "garden"]  # garden: R9.2 (the abbot only)
SCORED_KINDS = ["road", "city", "monastery", "garden", "farm"]
RULE = validate.Regexp(r"^R\d+(\.\d+)*$")


class WholeRegexp(validate.Regexp):
    """A `Regexp` the whole value must match: Python's `$` also matches before a final
    newline, so `^[!-~]{1,128}$` took "u-1\\n" (an invisible twin of a player id). The
    pattern stays as written for the OpenAPI document, where `$` means the end."""

    def __call__(self, value: Any) -> Any:
        if self.regex.fullmatch(value) is None:
            raise ValidationError(self._format_error(value))
        return value


class StrictBoolean(fields.Boolean):
    """A JSON boolean and nothing else: marshmallow's `truthy={True}` still takes 1 and 0
    (``1 in {True}``), which the document's `type: boolean` does not allow."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if type(value) is not bool:
            raise ValidationError("Not a valid boolean.")
        return value


class Closed(Schema):
    """An output schema: exactly these keys (`additionalProperties: false` in the document)."""

    class Meta:
        unknown = RAISE


def ints(**kwargs: Any) -> fields.List:
    """A list of integers (scores per seat, supplies, coordinates)."""
    return fields.List(fields.Integer(), **kwargs)


def position(**kwargs: Any) -> fields.List:
    """A board square as ``[x, y]``."""
    return fields.List(fields.Integer(), validate=validate.Length(2, 2), **kwargs)


class Error(Closed):
    """Every error the services answer (4xx and 5xx): RFC 9457 problem details
    (`application/problem+json`) with a stable machine-readable `code` and a `hint`."""

    type = fields.String(
        required=True,
        metadata={
            "description": "the problem type: a section of the service's /errors page",
            "example": "/errors#not_your_turn",
        },
    )
    title = fields.String(
        required=True, metadata={"description": "the problem type in words (same every time)"}
    )
    status = fields.Integer(required=True, metadata={"description": "the HTTP status"})
    detail = fields.String(required=True, metadata={"description": "this occurrence, for people"})
    hint = fields.String(
        required=True,
        metadata={
            "description": "what to do: the request that helps (e.g. GET /games/{id}/turn, "
            "which lists the legal moves)"
        },
    )
    code = fields.String(
        required=True, metadata={"description": "stable, machine-readable", "example": "not_found"}
    )
    message = fields.String(
        required=True, metadata={"description": "the same as `detail` (kept for older clients)"}
    )
    rule = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "the rule broken (RULES.md, R1…R11), or null", "example": "R4.2"},
    )
    details = fields.Dict(
        required=True,
        metadata={"description": "more about this error (e.g. `fields` of an invalid body)"},
    )


class Area(Closed):
    width = fields.Integer(required=True, validate=validate.Range(1, 1000))
    height = fields.Integer(required=True, validate=validate.Range(1, 1000))
    border_closes = fields.Boolean(metadata={"description": "R10.5 variant; left out when off"})


class Ruleset(Closed):
    """A game's ruleset as recorded (the optional house rules only when not the default)."""

    tileset = fields.String(required=True, validate=validate.OneOf(["base", "demo"]))
    farmers = fields.Boolean(required=True)
    farm_scoring = fields.String(required=True, validate=validate.OneOf(["3rd", "2nd", "1st"]))
    incomplete_score = fields.Boolean(required=True)
    meeples = fields.Integer(validate=validate.Range(0, 99))
    unplaceable = fields.String(validate=validate.OneOf(["discard", "return"]))
    area = fields.Nested(Area)
    hole_extra_turn = fields.Boolean(metadata={"description": "R10.6; left out when off"})
    river = fields.Boolean(metadata={"description": "R9.1 The River; left out when off"})
    turn_seconds = fields.Integer(
        validate=validate.Range(1, 30 * 86_400),
        metadata={"description": "seconds a player has for a turn (docs/lifecycle.md)"},
    )
    max_timeouts = fields.Integer(
        validate=validate.Range(1, 99),
        metadata={"description": "timed-out turns that put a seat out (default 3)"},
    )
    hints = fields.Boolean(metadata={"description": "present (true) when hints are allowed"})
    undo = fields.String(
        validate=validate.OneOf(["consent", "free"]),
        metadata={"description": "undo of the last placement (docs/undo.md); left out when off"},
    )
    abbot = fields.Boolean(metadata={"description": "R9.2 The Abbot; left out when off"})
    tile_edition = fields.String(
        validate=validate.OneOf(["1st", "2nd"]),
        metadata={"description": "R9.2: 2nd = the tiles with gardens; left out when 1st"},
    )
    hand = fields.Integer(
        validate=validate.OneOf([1, 3]),
        metadata={"description": "R10.3: 3 = the three-tile hand; left out when 1"},
    )
    on_leave = fields.String(
        validate=validate.OneOf(["bot:random", "bot:greedy", "bot:mcts"]),
        metadata={
            "description": "a bot of this level plays a seat that is out (docs/takeover.md); "
            'left out when "skip"'
        },
    )
    initial_seconds = fields.Integer(
        validate=validate.Range(1, 30 * 86_400),
        metadata={
            "description": "each seat's Fischer time bank at the start (docs/clocks.md); "
            "left out without a bank"
        },
    )
    increment_seconds = fields.Integer(
        validate=validate.Range(0, 30 * 86_400),
        metadata={
            "description": "seconds each move adds to the mover's bank; with initial_seconds"
        },
    )


# Which spot key a meeple's feature takes. One flat object with optional keys, not a oneOf
# of three shapes: generated clients then have one Meeple type to build and read rather than
# a union per meeple; the rule is stated in the document (openapi.py sets it as Meeple's and
# MeepleIn's description: a Meta.description would make apispec drop additionalProperties),
# and the services refuse a body that breaks it (MeepleIn.one_spot).
MEEPLE_RULE = (
    "Where a meeple stands, in board directions after rotation. Its `feature` says which "
    "spot key it takes: a road or city meeple names one `edge` (N, E, S, W) and no "
    "`half_edge`; a farmer (`field`) names one `half_edge` (NNW … WNW) and no `edge`; a monk "
    "(`monastery`) names neither. A request that breaks this is refused: 422 invalid_body, "
    "the object's error under `_schema` in details.fields."
)
EDGE = {"description": "road or city only: the edge of the tile (N, E, S, W)"}
HALF_EDGE = {"description": "field (farmer) only: the half-edge (NNW … WNW)"}


class Meeple(Closed):
    """A meeple in the record's vocabulary: a road or city names an `edge`, a farmer a
    `half_edge`, a monk neither."""

    feature = fields.String(required=True, validate=validate.OneOf(FEATURES))
    edge = fields.String(validate=validate.OneOf(EDGES), metadata=EDGE)
    half_edge = fields.String(validate=validate.OneOf(HALF_EDGES), metadata=HALF_EDGE)
    abbot = fields.Boolean(
        metadata={"description": "R9.2: true for the abbot (monastery or garden); else left out"}
    )


class Event(Closed):
    """A stored event: its envelope and payload (the payload's keys depend on `type`)."""

    game_id = fields.String(required=True)
    stream = fields.String(required=True, validate=validate.OneOf(["moves", "scores"]))
    seq = fields.Integer(required=True, metadata={"description": "1-based, in its stream"})
    type = fields.String(
        required=True,
        validate=validate.OneOf(
            [
                "GameStarted",
                "TileDrawn",
                "TilePlaced",
                "TileDiscarded",
                "TileReturned",
                "AbbotRecalled",
                "GameEnded",
                "TurnTimedOut",
                "PlayerTimedOut",
                "PlayerResigned",
                "SeatTakenOver",
                "TakeoverRefused",
                "GameAbandoned",
                "TokenReissued",
                "UndoRequested",
                "UndoAccepted",
                "UndoRefused",
                "TurnUndone",
                "HandDrawn",
                "HandsRevealed",
                "BankCharged",
                "ClockPaused",
                "ClockResumed",
                "FeatureScored",
                "GameScored",
                "ScoreReverted",
            ]
        ),
    )
    version = fields.Integer(required=True, metadata={"description": "the payload's schema"})
    time_ms = fields.Integer(required=True)
    command_id = fields.String(required=True)
    payload = fields.Dict(
        required=True,
        metadata={
            "description": "GameStarted: ruleset, players, names?, player_ids?; TileDrawn: "
            "tile, deadline_ms? (Unix ms when the turn times out; only with a turn limit); "
            "TilePlaced: player, tile, x, y, rotation, meeple; TileDiscarded and "
            "TileReturned: player, tile; AbbotRecalled: player, x, y; GameEnded: reason; "
            "TurnTimedOut: player, tile; "
            "PlayerTimedOut: player, timeouts; PlayerResigned: player; SeatTakenOver: player, "
            "level (a bot plays the seat from here on: docs/takeover.md); TakeoverRefused: "
            "player, level (the owner's bot budget could not pay for that bot: the seat is "
            "skipped instead, docs/takeover.md); GameAbandoned: "
            "idle_ms; TokenReissued: player; FeatureScored: a ScoreEvent "
            "and `move`; GameScored: move, final_scores, scores_before_final, ranks, winners; "
            "UndoRequested: request, player, deadline_ms; UndoAccepted and UndoRefused: "
            "request, player; TurnUndone: request, player, tile, x, y, rotation, deadline_ms; "
            "ScoreReverted: move, request, kind, turn, tiles, points, reverted, restored, "
            "totals (docs/undo.md); R10.3 hand games: HandDrawn: player, commitment (SHA-256 "
            'hex of "tile:nonce"; the tile stays secret), HandsRevealed: hands (per seat '
            "[tile, nonce] pairs, at the end), and TilePlaced, TileDiscarded, TileReturned "
            "carry the played tile's nonce; clocks (docs/clocks.md): TilePlaced (version 3) "
            "carries bank_ms? (the placer's Fischer time bank after the move; only with a "
            "bank), BankCharged: player, bank_ms (the same, logged after the placement by "
            "games played before version 3), ClockPaused: player, "
            "from_ms, until_ms, deadline_ms, vacation (a vacation and its id, null in games "
            "played before version 2; the running turn's moved deadline), ClockResumed: "
            "player, at_ms, deadline_ms, vacation (that vacation ended early or called off; "
            "the running turn's deadline brought forward)"
        },
    )


class ScoreEvent(Closed):
    """A score explanation (R6 during play, R7 at the end): what scored, for whom, by which
    rule. A farm lists the completed `cities` it supplies."""

    kind = fields.String(required=True, validate=validate.OneOf(SCORED_KINDS))
    rule = fields.String(required=True, metadata={"example": "R6.2"})
    final = fields.Boolean(required=True, metadata={"description": "scored at the end (R7)"})
    turn = fields.Integer(required=True, metadata={"description": "placements done when scored"})
    complete = fields.Boolean(required=True)
    tiles = fields.List(position(), required=True)
    pennants = fields.Integer(required=True)
    meeples = ints(required=True, metadata={"description": "per seat"})
    winners = ints(required=True, metadata={"description": "seats with the majority"})
    points = fields.Integer(required=True)
    awarded = ints(required=True, metadata={"description": "points per seat"})
    returned = ints(metadata={"description": "meeples returned per seat"})
    cities = fields.List(fields.List(position()), metadata={"description": "farms only"})


class ExplainedScore(ScoreEvent):
    """A score event with its sentence (one explanation function: carcassonne.explain)."""

    explanation = fields.String(required=True)


class StartTile(Closed):
    tile = fields.String(required=True)
    x = fields.Integer(required=True, validate=validate.OneOf([0]))
    y = fields.Integer(required=True, validate=validate.OneOf([0]))
    rotation = fields.Integer(required=True, validate=validate.OneOf([0]))


class RecordTurn(Closed):
    """A record's turn: a placement (x, y, rotation, meeple), `{"tile", "discard": true}`,
    a turn not played in time `{"tile", "timeout": true}`, a seat resigning
    `{"resign": seat}` (docs/lifecycle.md), or `{"undo": true}` (the placement before it was
    taken back, docs/undo.md). A resign or timeout turn has `"takeover_refused": true` when
    the ruleset's bot did not take the seat over (docs/takeover.md)."""

    tile = fields.String(validate=validate.Length(1, 8))
    x = fields.Integer(validate=validate.Range(-10_000, 10_000))
    y = fields.Integer(validate=validate.Range(-10_000, 10_000))
    rotation = fields.Integer(validate=validate.Range(0, 3))
    meeple = fields.Nested(Meeple, allow_none=True)
    discard = fields.Boolean()
    timeout = fields.Boolean()
    resign = fields.Integer(validate=validate.Range(0, 5))
    takeover_refused = fields.Boolean(
        metadata={
            "description": "on a resign or timeout turn: the ruleset's on_leave bot did not "
            "take the seat over (its API key's bot budget, docs/takeover.md); it was skipped. "
            "Only where the replay has a takeover to refuse (an on_leave bot, the seat put "
            "out, another seat still in): else 422 no_takeover_to_refuse"
        }
    )
    undo = fields.Boolean()
    recall_abbot = fields.Boolean(
        metadata={"description": "R9.2: true when the turn took the abbot back (meeple null)"}
    )


class RecordDraw(Closed):
    """R10.3: one draw of a hand game: the tile and the nonce its commitment was made with."""

    tile = fields.String(required=True, validate=validate.Length(1, 8))
    nonce = fields.String(required=True, validate=validate.Length(1, 64))


class Record(Closed):
    """A `carcassonne-record/1` game record (README "Game records")."""

    format = fields.String(required=True, validate=validate.OneOf(["carcassonne-record/1"]))
    ruleset = fields.Nested(Ruleset, metadata={"description": "default: the base game"})
    players = fields.Integer(required=True, validate=validate.Range(2, 6))
    start = fields.Nested(StartTile, metadata={"description": "always the start tile at 0,0"})
    turns = fields.List(fields.Nested(RecordTurn), required=True)
    names = fields.List(
        fields.String(validate=validate.Length(1, 40)),
        allow_none=True,
        metadata={"description": "in seat order"},
    )
    player_ids = fields.List(
        fields.String(allow_none=True),
        allow_none=True,
        metadata={"description": "the apps' user ids in seat order (null: not given)"},
    )
    abandoned = fields.Boolean(
        metadata={"description": "the server ended the game as abandoned (no final scoring)"}
    )
    draws = fields.List(
        fields.Nested(RecordDraw),
        metadata={
            "description": "R10.3 (a hand game only, and there required): every draw in "
            "order with the nonce of its commitment (docs/rules.md)"
        },
    )


class UndoRequestView(Closed):
    """An undo request: its number, who asked, the deadline (Unix ms; null: none), who
    accepted, who refused (null: nobody), and whether it is closed. Past its deadline
    unanswered it counts as refused. Both services show it (`carcassonne.undo.request_view`)."""

    request = fields.Integer(required=True)
    player = fields.Integer(required=True)
    deadline_ms = fields.Integer(required=True, allow_none=True)
    accepted = ints(required=True)
    refused_by = fields.Integer(required=True, allow_none=True)
    closed = fields.Boolean(
        required=True,
        metadata={
            "description": "refused, or the placement stands for good (a resignation, a "
            "timeout or the game's end since): an answer is 409 undo_closed. Unanswered past "
            "deadline_ms it is refused too (compare with your clock): an answer is 409 "
            "undo_expired"
        },
    )
