"""HTTP schemas of the query service: query parameters in, views out (for the OpenAPI document).

Views are encoded straight to JSON (they are cached as bytes); the output schemas describe
them for the OpenAPI document. Unknown query parameters are ignored (webargs' default for
query strings: cache busters and tracking parameters must not break a view).
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from eventstore.score_stream import REVERTIBLE_KINDS
from services.common.schemas import (
    FEATURES,
    Closed,
    Event,
    ExplainedScore,
    Ruleset,
    ScoreEvent,
    UndoRequestView,
    WholeRegexp,
    ints,
    position,
)

MAX_LIMIT = 1_000
CURSOR = validate.Regexp(r"^[0-9]{1,15}-[0-9]{1,15}$", error='a cursor is "<move seq>-<score seq>"')


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


PLAYER_ID = WholeRegexp(
    r"^[!-~]{1,128}$", error="a player_id is 1-128 visible ASCII characters (no spaces)"
)


STATUSES = ["in_progress", "over", "abandoned"]
STATUS = {"description": "abandoned: ended by the server after ABANDON_AFTER without a move"}
OUT = fields.String(
    required=True,
    allow_none=True,
    validate=validate.OneOf(["resigned", "timed_out"]),
    metadata={"description": "null while in the game; else why the seat is out"},
)


class GamesArgs(Schema):
    status = fields.String(validate=validate.OneOf(STATUSES), metadata=STATUS)
    player = fields.String(validate=validate.Length(1, 40))
    player_id = fields.String(
        validate=PLAYER_ID,
        metadata={"description": "games with a seat of this player id (exact match)"},
    )
    cursor = fields.String(validate=validate.Length(1, 200))
    limit = fields.Integer(validate=validate.Range(1, MAX_LIMIT))


TAKEN_OVER = fields.String(
    required=True,
    allow_none=True,
    validate=validate.OneOf(["random", "greedy", "mcts"]),
    metadata={
        "description": "the level of the bot that plays this seat since it went out (ruleset "
        "on_leave, SeatTakenOver: docs/takeover.md); null: not taken over"
    },
)
PLAYER_ID_OUT = {"description": "the app's user id given for this seat at creation, or null"}


class SeatBotView(Closed):
    """A seat the computer plays (docs/bots.md), as its game was created."""

    level = fields.String(required=True, validate=validate.OneOf(["random", "greedy", "mcts"]))
    think_ms = fields.Integer(required=True)


class BoardSeat(Closed):
    seat = fields.Integer(required=True)
    name = fields.String(required=True)
    player_id = fields.String(required=True, allow_none=True, metadata=PLAYER_ID_OUT)
    score = fields.Integer(required=True)
    supply = fields.Integer(required=True, metadata={"description": "meeples in hand"})
    out = OUT
    taken_over = TAKEN_OVER
    timeouts = fields.Integer(
        required=True,
        metadata={
            "description": "this seat's turns timed out so far (`TurnTimedOut`; its "
            "`max_timeouts`-th puts it out: docs/lifecycle.md)"
        },
    )
    bot = fields.Nested(
        SeatBotView,
        required=True,
        allow_none=True,
        metadata={"description": "the computer plays this seat (docs/bots.md); null: a person"},
    )
    bank_ms = fields.Integer(
        metadata={
            "description": "Fischer clock: this seat's time bank (ms) as of its last move; "
            "left out without a bank (docs/clocks.md)"
        }
    )
    away_until_ms = fields.Integer(
        metadata={
            "description": "when this seat's last declared vacation ends (Unix ms; its clock "
            "stands still during it, and one declared to start later runs until its start); "
            "left out if it has none (docs/clocks.md)"
        }
    )


class BoardTurn(Closed):
    player = fields.Integer(required=True)
    name = fields.String(required=True)
    tile = fields.String(
        required=True, allow_none=True, metadata={"description": "null between placement and draw"}
    )
    deadline_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "when the turn times out (Unix ms); null: no turn limit"},
    )


class PlacedTile(Closed):
    tile = fields.String(required=True)
    x = fields.Integer(required=True)
    y = fields.Integer(required=True)
    rotation = fields.Integer(required=True, validate=validate.Range(0, 3))


class PlacedMeeple(Closed):
    player = fields.Integer(required=True)
    x = fields.Integer(required=True)
    y = fields.Integer(required=True)
    feature = fields.String(required=True, validate=validate.OneOf(FEATURES))
    spot = fields.String(
        required=True,
        metadata={"description": "edge N E S W, half-edge NNW…WNW, monastery, garden"},
    )
    abbot = fields.Boolean(metadata={"description": "R9.2: true for an abbot, else left out"})


class OpenFeature(Closed):
    kind = fields.String(
        required=True, validate=validate.OneOf(["road", "city", "monastery", "garden"])
    )
    tiles = fields.List(position(), required=True)
    pennants = fields.Integer(required=True)
    missing = fields.Integer(
        required=True, metadata={"description": "open edges; a monastery: empty squares"}
    )
    meeples = ints(required=True, metadata={"description": "per seat"})
    if_ended = fields.Nested(
        ScoreEvent,
        required=True,
        allow_none=True,
        metadata={"description": "its R7.2 score if the game ended now (null: no meeple)"},
    )


class Board(Closed):
    """GET /games/{id}/board."""

    game_id = fields.String(required=True)
    seq = fields.Integer(required=True, metadata={"description": "the last move it reflects"})
    phase = fields.String(required=True, validate=validate.OneOf(["new", "draw", "place", "over"]))
    over = fields.Boolean(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES), metadata=STATUS)
    ruleset = fields.Nested(Ruleset, required=True)
    players = fields.List(fields.Nested(BoardSeat), required=True)
    turn = fields.Nested(BoardTurn, required=True, allow_none=True)
    tiles_placed = fields.Integer(
        required=True,
        metadata={
            "description": "tiles placed and standing (an undone placement is not; `?turn=` "
            "counts it: docs/undo.md)"
        },
    )
    turns = fields.Integer(
        required=True,
        metadata={
            "description": "placements in the log so far, undone ones too: the last `?turn=` "
            "(equals tiles_placed in a game without undos)"
        },
    )
    undo = fields.Nested(
        UndoRequestView,
        required=True,
        allow_none=True,
        metadata={"description": "the last placement's undo request, if any (docs/undo.md)"},
    )
    undone = fields.Boolean(
        required=True,
        metadata={
            "description": "true at a `?turn=` whose placement was taken back later "
            "(`TurnUndone`, docs/undo.md): the board shows it as it stood before the undo"
        },
    )
    hands = fields.List(
        fields.List(fields.String(allow_none=True)),
        metadata={
            "description": "R10.3 (a hand game only): each seat's hand at this position, "
            "each tile null while secret: all of them before the end, none after it (a "
            "replay of a finished game shows every hand)"
        },
    )
    tiles_left = fields.Integer(required=True)
    discarded = fields.List(fields.String(), required=True)
    tiles = fields.List(
        fields.Nested(PlacedTile), required=True, metadata={"description": "in order"}
    )
    meeples = fields.List(fields.Nested(PlacedMeeple), required=True)
    open_features = fields.List(fields.Nested(OpenFeature), required=True)
    farms_if_ended = fields.List(fields.Nested(ScoreEvent), required=True)
    scores_if_ended = ints(required=True)


class Track(Closed):
    space = fields.Integer(required=True, validate=validate.Range(0, 49))
    laps = fields.Integer(required=True)
    point_tiles = ints(required=True, metadata={"description": "50 or 100 each (R8.1)"})


class MeepleCount(Closed):
    supply = fields.Integer(required=True)
    on_board = fields.Integer(required=True)


class Points(Closed):
    roads = fields.Integer(required=True)
    cities = fields.Integer(required=True)
    monasteries = fields.Integer(required=True)
    farms = fields.Integer(required=True)


class ScoreSeat(Closed):
    seat = fields.Integer(required=True)
    name = fields.String(required=True)
    player_id = fields.String(required=True, allow_none=True, metadata=PLAYER_ID_OUT)
    score = fields.Integer(required=True)
    track = fields.Nested(Track, required=True)
    meeples = fields.Nested(MeepleCount, required=True, metadata={"description": "as of `seq`"})
    points = fields.Nested(Points, required=True)
    rank = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "once over; seats out rank after every seat still in"},
    )
    out = OUT
    taken_over = TAKEN_OVER


class StoredScore(ExplainedScore):
    seq = fields.Integer(required=True, metadata={"description": "in the score stream"})
    move = fields.Integer(required=True, metadata={"description": "the move that scored it"})
    totals = ints(metadata={"description": "each seat's total after it"})


class RevertedScore(Closed):
    """A scoring taken back: the placement that completed the feature was undone
    (docs/undo.md). The FeatureScored it reverts stays in `events`."""

    seq = fields.Integer(required=True, metadata={"description": "in the score stream"})
    move = fields.Integer(required=True, metadata={"description": "the TurnUndone's seq"})
    request = fields.Integer(required=True, metadata={"description": "the undo request"})
    kind = fields.String(required=True, validate=validate.OneOf(REVERTIBLE_KINDS))
    turn = fields.Integer(required=True, metadata={"description": "the scoring's turn"})
    tiles = fields.List(position(), required=True)
    points = fields.Integer(required=True)
    reverted = ints(required=True, metadata={"description": "points taken back per seat"})
    restored = ints(required=True, metadata={"description": "meeples back on the board per seat"})
    totals = ints(required=True, metadata={"description": "each seat's total after it"})


class GameResult(Closed):
    move = fields.Integer(required=True)
    final_scores = ints(required=True)
    scores_before_final = ints(required=True)
    ranks = ints(required=True)
    winners = ints(required=True)


class Scores(Closed):
    """GET /games/{id}/scores."""

    game_id = fields.String(required=True)
    seq = fields.Integer(required=True)
    scored_up_to = fields.Integer(
        required=True, metadata={"description": "the last move the worker scored"}
    )
    unscored_moves = fields.Integer(required=True)
    score_seq = fields.Integer(required=True)
    over = fields.Boolean(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES), metadata=STATUS)
    players = fields.List(fields.Nested(ScoreSeat), required=True)
    events = fields.List(fields.Nested(StoredScore), required=True)
    reverted = fields.List(
        fields.Nested(RevertedScore),
        required=True,
        metadata={"description": "scorings taken back by undone placements (ScoreReverted)"},
    )
    result = fields.Nested(GameResult, required=True, allow_none=True)


class LogItem(Event):
    cursor = fields.String(required=True, metadata={"description": "the cursor after it"})


class EventsPage(Closed):
    """GET /games/{id}/events: the merged log, a page at a time."""

    game_id = fields.String(required=True)
    after = fields.String(required=True)
    next = fields.String(required=True, metadata={"description": "`after` of the next page"})
    more = fields.Boolean(required=True)
    items = fields.List(fields.Nested(LogItem), required=True)


class GameSummary(Closed):
    game_id = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES), metadata=STATUS)
    players = fields.List(fields.String(), required=True, metadata={"description": "names"})
    player_ids = fields.List(
        fields.String(allow_none=True),
        required=True,
        metadata={"description": "per seat; null: not given"},
    )
    seq = fields.Integer(required=True)
    updated_ms = fields.Integer(required=True)
    scores = ints(required=True, allow_none=True)


class GamesPage(Closed):
    """GET /games: newest first."""

    games = fields.List(fields.Nested(GameSummary), required=True)
    next = fields.String(
        required=True, allow_none=True, metadata={"description": "`cursor` of the next page"}
    )
