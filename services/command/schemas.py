"""HTTP schemas of the command service (marshmallow; the OpenAPI document is built from them)."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.ruleset import MAX_BANK_SECONDS
from services.common.schemas import (
    EDGE,
    HALF_EDGE,
    Closed,
    Event,
    ExplainedScore,
    Meeple,
    Record,
    Ruleset,
    StrictBoolean,
    UndoRequestView,
    WholeRegexp,
    ints,
)

COORD = validate.Range(-10_000, 10_000)
BOT_LEVELS = ["random", "greedy", "mcts"]  # carcassonne.bots.LEVELS
# Per seat, the level of the bot playing it since it went out: the turn view's and the score
# report's (one field: marshmallow copies it into each schema).
TAKEN_OVER = fields.List(
    fields.String(allow_none=True, validate=validate.OneOf(BOT_LEVELS)),
    required=True,
    metadata={
        "description": "per seat: the level of the bot that plays it since it went out "
        "(ruleset on_leave: docs/takeover.md), else null"
    },
)
MAX_THINK_MS, DEFAULT_THINK_MS = 10_000, 1_000


class Strict(Schema):
    class Meta:
        unknown = RAISE


PLAYER_ID = WholeRegexp(
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
    bot = fields.String(
        validate=validate.OneOf(BOT_LEVELS),
        metadata={
            "description": "this seat is played by the computer at this level (docs/bots.md); "
            "it gets no token"
        },
    )
    think_ms = fields.Integer(
        strict=True,
        validate=validate.Range(1, MAX_THINK_MS),
        metadata={
            "description": "with `bot`: how long the bot's move takes, ms (mcts searches "
            f"within it; default {DEFAULT_THINK_MS}; greedy and random take the worker's fixed "
            "floor instead); without `bot`: 422. In a game with no human seat an mcts bot "
            "may think at most the service's BOT_ONLY_MAX_THINK_MS (1000): else 422 "
            "bot_only_think_ms. A key's games in progress may hold BOT_SECONDS_IN_FLIGHT of "
            "bot time (each bot's move times its share of the tiles): else 429 "
            "bot_budget_exceeded"
        },
    )

    @validates_schema
    def think_needs_bot(self, data: dict[str, object], **_: object) -> None:
        if "think_ms" in data and "bot" not in data:
            raise ValidationError("think_ms is for a bot seat: give `bot` too")


class AreaIn(Strict):
    width = fields.Integer(required=True, strict=True, validate=validate.Range(1, 1000))
    height = fields.Integer(required=True, strict=True, validate=validate.Range(1, 1000))
    border_closes = StrictBoolean(
        load_default=False,
        metadata={"description": "R10.5 variant: a road or city edge facing the border is closed"},
    )


class RulesetIn(Strict):
    tileset = fields.String(load_default="base", validate=validate.OneOf(["base", "demo"]))
    farmers = StrictBoolean(load_default=True)
    farm_scoring = fields.String(load_default="3rd", validate=validate.OneOf(["3rd", "2nd", "1st"]))
    incomplete_score = StrictBoolean(load_default=True)
    meeples = fields.Integer(strict=True, validate=validate.Range(0, 99), load_default=None)
    unplaceable = fields.String(
        load_default="discard", validate=validate.OneOf(["discard", "return"])
    )
    area = fields.Nested(AreaIn, load_default=None)
    abbot = StrictBoolean(
        load_default=False,
        metadata={"description": "R9.2 The Abbot: one abbot each, on monasteries and gardens"},
    )
    tile_edition = fields.String(
        load_default="1st",
        validate=validate.OneOf(["1st", "2nd"]),
        metadata={"description": "2nd: the tiles with gardens (R9.2); base set only"},
    )
    river = StrictBoolean(
        load_default=False,
        metadata={
            "description": "R9.1 The River: the spring starts, river tiles first, the lake last"
        },
    )
    hole_extra_turn = StrictBoolean(
        load_default=False,
        metadata={
            "description": "R10.6: filling a hole (tiles on all four sides) grants "
            "another turn, once per turn"
        },
    )
    turn_seconds = fields.Integer(
        strict=True,
        allow_none=True,
        load_default=None,
        validate=validate.Range(1, 30 * 86_400),
        metadata={
            "description": "seconds a player has for a turn (e.g. 60 live, 86400 "
            "asynchronous); a turn not played in time is skipped by the server "
            "(docs/lifecycle.md). Default: no limit"
        },
    )
    # The ranges are in the document (minimum, maximum) and checked by the engine's ruleset,
    # which answers their own codes (422 bad_initial_seconds, bad_increment_seconds).
    initial_seconds = fields.Integer(
        strict=True,
        allow_none=True,
        load_default=None,
        metadata={
            "minimum": 1,
            "maximum": MAX_BANK_SECONDS,
            "description": "a Fischer time bank per seat, in seconds at the start (1-2592000; "
            "e.g. 300 blitz, 259200 = 3 days correspondence): a turn's deadline is the mover's "
            "bank after the draw, a move keeps what was left plus increment_seconds, an "
            "exhausted bank times the turn out (docs/clocks.md). Not with turn_seconds, undo or "
            "a hand: 422 bank_with_turn_limit, bank_with_undo, hand_with_bank; out of range: "
            "422 bad_initial_seconds. Default: no bank",
        },
    )
    increment_seconds = fields.Integer(
        strict=True,
        load_default=0,
        metadata={
            "minimum": 0,
            "maximum": MAX_BANK_SECONDS,
            "description": "seconds each move adds to the mover's bank (0-2592000; e.g. 5 "
            "blitz, 86400 correspondence); only with initial_seconds (422 "
            "increment_without_bank; out of range: bad_increment_seconds)",
        },
    )
    max_timeouts = fields.Integer(
        strict=True,
        load_default=3,
        validate=validate.Range(1, 99),
        metadata={"description": "timed-out turns after which a seat is out of the game"},
    )
    hints = StrictBoolean(
        load_default=False,
        metadata={"description": "allow GET /games/{game_id}/hint (a bot's suggested move)"},
    )
    hand = fields.Integer(
        strict=True,
        load_default=1,
        validate=validate.OneOf([1, 3]),
        metadata={
            "description": "R10.3: tiles each player holds; 3 is the three-tile hand, hidden "
            "from the other players until the end (GET /games/{game_id}/hand)"
        },
    )
    on_leave = fields.String(
        # The document lists the values (generated clients get an enum); the engine's ruleset
        # checks them itself so an unknown bot gets its own code, 422 unknown_on_leave.
        load_default="skip",
        validate=validate.Length(1, 40),
        metadata={
            "enum": ["skip", *(f"bot:{level}" for level in BOT_LEVELS)],
            "description": "what becomes of a seat that is out (resigned, or timed out "
            'max_timeouts times): "skip" (skipped from then on, the default) or '
            '"bot:<level>" (bot:random, bot:greedy, bot:mcts: a bot plays its turns; it still '
            "ranks after the seats still in). Another level: 422 unknown_on_leave "
            "(docs/takeover.md)",
        },
    )
    undo = fields.String(
        load_default="off",
        validate=validate.OneOf(["off", "consent", "free"]),
        metadata={
            "description": "whether the player who placed last may take it back before the "
            "next placement: off, consent (every other player must accept before a deadline) "
            "or free (docs/undo.md)"
        },
    )


class CreateGameIn(Strict):
    players = fields.List(fields.Nested(PlayerIn), required=True, validate=validate.Length(2, 6))
    ruleset = fields.Nested(RulesetIn, load_default=lambda: RulesetIn().load({}))
    seat_order = fields.List(
        fields.Integer(strict=True, validate=validate.Range(0, 5)),
        load_default=None,
        validate=validate.Length(2, 6),
        metadata={
            "description": "indexes into players, each once, first to move first "
            "(default: a random first player, then in request order); else 422 bad_seat_order"
        },
    )
    public = StrictBoolean(
        load_default=False,
        metadata={
            "description": "list the game in the public listing (GET /games without an API "
            "key); by default a game is private: listed only to the API key that created it"
        },
    )


class BotSeat(Closed):
    level = fields.String(required=True, validate=validate.OneOf(BOT_LEVELS))
    think_ms = fields.Integer(required=True)


class Seat(Closed):
    seat = fields.Integer(required=True, metadata={"description": "0 moves first"})
    name = fields.String(required=True)
    player_index = fields.Integer(
        required=True,
        metadata={"description": "the index in the request's `players` of who sits here"},
    )
    player_id = fields.String(metadata={"description": "the request's player_id, if given"})
    token = fields.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "secret: send as Authorization: Bearer <token> (null for a bot seat)"
        },
    )
    bot = fields.Nested(
        BotSeat, metadata={"description": "present when the computer plays this seat"}
    )


class Placement(Closed):
    """A legal placement of the drawn tile and the meeple spots it allows."""

    x = fields.Integer(required=True)
    y = fields.Integer(required=True)
    rotation = fields.Integer(required=True, validate=validate.Range(0, 3))
    meeples = fields.List(fields.Nested(Meeple), required=True)
    recall_abbot = fields.Boolean(
        metadata={
            "description": "R9.2: present (true) when the player may place here and take "
            "the abbot back instead of a meeple"
        }
    )


class UndoState(Closed):
    """Undo in this game (ruleset `undo` not off): who may ask now, and the last placement's
    request."""

    mode = fields.String(required=True, validate=validate.OneOf(["consent", "free"]))
    may_request = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "the seat that may ask to undo its placement now, or null"},
    )
    request = fields.Nested(UndoRequestView, required=True, allow_none=True)


class TurnView(Closed):
    """Whose turn it is, the drawn tile and every legal placement (GET /games/{id}/turn)."""

    game_id = fields.String(required=True)
    seq = fields.Integer(required=True, metadata={"description": "the last move (If-Match)"})
    over = fields.Boolean(required=True)
    player = fields.Integer(required=True, allow_none=True, metadata={"description": "seat"})
    player_name = fields.String(required=True, allow_none=True)
    tile = fields.String(required=True, allow_none=True, metadata={"description": "drawn"})
    tiles_left = fields.Integer(required=True)
    scores = ints(required=True, metadata={"description": "per seat"})
    supply = ints(required=True, metadata={"description": "meeples in hand per seat"})
    placements = fields.List(fields.Nested(Placement), required=True)
    deadline_ms = fields.Integer(
        required=True,
        allow_none=True,
        metadata={
            "description": "when this turn times out (Unix ms; the TileDrawn event's "
            "deadline_ms); null without a turn limit or once the game is over"
        },
    )
    out = fields.List(
        fields.String(allow_none=True, validate=validate.OneOf(["resigned", "timed_out"])),
        required=True,
        metadata={"description": "per seat: null while in the game, else why it is out"},
    )
    taken_over = TAKEN_OVER
    banks_ms = ints(
        metadata={
            "description": "Fischer clock (docs/clocks.md): each seat's time bank (ms) as of "
            "its last move; the running turn's remainder is deadline_ms minus now. Left out "
            "without a bank"
        }
    )
    away_until_ms = fields.List(
        fields.Integer(allow_none=True),
        metadata={
            "description": "per seat: when its last declared vacation ends (Unix ms; its "
            "clock stands still during it, and one declared to start later runs until its "
            "start), null if it has none; left out while no seat has one (docs/clocks.md)"
        },
    )
    status = fields.String(
        required=True,
        validate=validate.OneOf(["in_progress", "over", "abandoned"]),
        metadata={"description": "abandoned: ended by the server after ABANDON_AFTER idle"},
    )
    seed = fields.String(
        allow_none=True,
        metadata={"description": "the draw seed, revealed when the game ends (null: imported)"},
    )
    undo = fields.Nested(UndoState, metadata={"description": "only when the ruleset has undo"})
    hand_sizes = ints(
        metadata={"description": "R10.3 (a hand game only): how many tiles each seat holds"}
    )
    hands = fields.List(
        fields.List(fields.String()),
        metadata={
            "description": "R10.3 (a hand game, once it is over): every seat's hand, revealed"
        },
    )


class HandPlacement(Closed):
    """R10.3: a legal placement of one tile of the hand, with its meeple spots."""

    tile = fields.String(required=True)
    x = fields.Integer(required=True)
    y = fields.Integer(required=True)
    rotation = fields.Integer(required=True, validate=validate.Range(0, 3))
    meeples = fields.List(fields.Nested(Meeple), required=True)


class HandView(Closed):
    """R10.3: the token's seat's own hand (GET /games/{id}/hand); never another seat's."""

    game_id = fields.String(required=True)
    seq = fields.Integer(required=True, metadata={"description": "the last move"})
    player = fields.Integer(required=True, metadata={"description": "the token's seat"})
    hand = fields.List(fields.String(), required=True, metadata={"description": "as drawn"})
    to_move = fields.Boolean(required=True)
    placements = fields.List(
        fields.Nested(HandPlacement),
        required=True,
        metadata={"description": "every legal (tile, placement) when to_move, else empty"},
    )


class ReissuedToken(Closed):
    """A seat's new token (POST /games/{id}/players/{seat}/token); the old one is dead."""

    game_id = fields.String(required=True)
    seat = fields.Integer(required=True)
    token = fields.String(
        required=True, metadata={"description": "secret: send as Authorization: Bearer <token>"}
    )
    seq = fields.Integer(required=True, metadata={"description": "its TokenReissued event"})


class RematchSeat(Closed):
    seat = fields.Integer(required=True, metadata={"description": "0 moves first"})
    previous_seat = fields.Integer(
        required=True, metadata={"description": "this player's seat in the game before"}
    )
    name = fields.String(required=True)
    player_id = fields.String(required=True, allow_none=True)
    token = fields.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "secret: the seat's new token, only in the answer that made the "
            "game (null in a repeated request's answer, and for a bot seat)"
        },
    )
    bot = fields.Nested(BotSeat, metadata={"description": "present when a bot plays it"})


class Rematch(Closed):
    """The next game of the same players (POST /games/{id}/rematch)."""

    game_id = fields.String(required=True)
    rematch_of = fields.String(required=True)
    created = fields.Boolean(
        required=True,
        metadata={"description": "false: an earlier request made it (the same game, no tokens)"},
    )
    players = fields.List(fields.Nested(RematchSeat), required=True)


class CreatedGame(Closed):
    game_id = fields.String(required=True)
    players = fields.List(fields.Nested(Seat), required=True, metadata={"description": "seats"})
    turn = fields.Nested(TurnView, required=True)


class MeepleIn(Strict):
    """A turn's meeple: which of `edge`/`half_edge` it takes is
    services.common.schemas.MEEPLE_RULE (checked by `one_spot`)."""

    feature = fields.String(
        required=True,
        validate=validate.OneOf(["road", "city", "field", "monastery", "garden"]),
    )
    edge = fields.String(validate=validate.OneOf(EDGES), metadata=EDGE)
    half_edge = fields.String(validate=validate.OneOf(HALF_EDGES), metadata=HALF_EDGE)
    abbot = StrictBoolean(
        metadata={"description": "R9.2: true to place the abbot (on a monastery or garden)"}
    )

    @validates_schema
    def one_spot(self, data: dict[str, object], **_: object) -> None:
        feature = data.get("feature")
        if feature in ("road", "city") and ("edge" not in data or "half_edge" in data):
            raise ValidationError("a road or city meeple names one edge: N, E, S or W")
        if feature == "field" and ("half_edge" not in data or "edge" in data):
            raise ValidationError("a farmer names one half_edge: NNW … WNW")
        if feature in ("monastery", "garden") and ("edge" in data or "half_edge" in data):
            raise ValidationError("a monk or abbot names no edge")


class TurnIn(Strict):
    """A turn's body. `load` takes the shapes a client sends (`x`, `y`, `rotation` and maybe
    a meeple, a tile, `recall_abbot`) through `plain_turn`, and anything else through the
    fields below, which also word every error and build the OpenAPI document."""

    x = fields.Integer(required=True, strict=True, validate=COORD)
    y = fields.Integer(required=True, strict=True, validate=COORD)
    rotation = fields.Integer(required=True, strict=True, validate=validate.Range(0, 3))
    meeple = fields.Nested(MeepleIn, allow_none=True, load_default=None)
    tile = fields.String(
        load_default=None,
        validate=validate.Length(1, 8),
        metadata={
            "description": "R10.3: in a hand game, which tile of the hand to play (required "
            "there: 422 tile_required; not held: 422 tile_not_in_hand)"
        },
    )
    recall_abbot = StrictBoolean(
        load_default=False,
        metadata={
            "description": "R9.2: instead of placing a meeple, take the abbot back (its "
            "monastery or garden scores at once); with a meeple: 422 recall_with_meeple"
        },
    )

    def load(self, data: Any, *, many: Any = None, partial: Any = None, unknown: Any = None) -> Any:
        """See `Schema.load`. Every turn is validated here, and marshmallow's field by field
        walk was ~4 % of a turn's CPU (tests/bench/bench_schemas.py): a body `plain_turn`
        vouches for is returned as the fields would return it (a property test holds the two
        to one answer), and only the rest pays for the walk."""
        if many is None and partial is None:
            plain = plain_turn(data)
            if plain is not None:
                return plain
        return super().load(data, many=many, partial=partial, unknown=unknown)


_TURN_KEYS = frozenset(("x", "y", "rotation", "meeple", "tile", "recall_abbot"))
_MEEPLE_KEYS = frozenset(("feature", "edge", "half_edge", "abbot"))
_EDGE_SET, _HALF_EDGE_SET = frozenset(EDGES), frozenset(HALF_EDGES)


def plain_turn(data: Any) -> dict[str, Any] | None:
    """What `TurnIn`'s fields load from `data` when it is a valid turn made of plain JSON
    values; None when unsure (anything else: then the fields decide, and word the error)."""
    if type(data) is not dict or not data.keys() <= _TURN_KEYS:
        return None
    x, y, rotation = data.get("x"), data.get("y"), data.get("rotation")
    if type(x) is not int or type(y) is not int or type(rotation) is not int:
        return None
    if not (-10_000 <= x <= 10_000 and -10_000 <= y <= 10_000 and 0 <= rotation <= 3):
        return None
    meeple, tile = data.get("meeple"), data.get("tile")
    recall = data.get("recall_abbot", False)
    if type(recall) is not bool:
        return None
    if tile is not None and not (type(tile) is str and 1 <= len(tile) <= 8):
        return None
    if meeple is not None and not _plain_meeple(meeple):
        return None
    return {"x": x, "y": y, "rotation": rotation, "meeple": meeple and dict(meeple),
            "tile": tile, "recall_abbot": recall}  # fmt: skip


def _plain_meeple(meeple: Any) -> bool:
    """`MeepleIn`'s rules, for a meeple `plain_turn` may vouch for."""
    if type(meeple) is not dict or not meeple.keys() <= _MEEPLE_KEYS:
        return False
    feature, edge, half = meeple.get("feature"), meeple.get("edge"), meeple.get("half_edge")
    if "abbot" in meeple and type(meeple["abbot"]) is not bool:
        return False
    if feature in ("road", "city"):
        return type(edge) is str and edge in _EDGE_SET and "half_edge" not in meeple
    if feature == "field":
        return type(half) is str and half in _HALF_EDGE_SET and "edge" not in meeple
    return feature in ("monastery", "garden") and "edge" not in meeple and "half_edge" not in meeple


class Next(Closed):
    """Who moves next and the tile they drew; when the game is over, the final scores."""

    over = fields.Boolean(required=True)
    player = fields.Integer(required=True, allow_none=True)
    tile = fields.String(required=True, allow_none=True)
    tiles_left = fields.Integer(metadata={"description": "while the game goes on"})
    scores = ints(metadata={"description": "final scores, when over"})


class TurnResult(Closed):
    """What a turn appended (the move stream's events) and what comes next."""

    seq = fields.Integer(required=True, metadata={"description": "the game's last move now"})
    replayed = fields.Boolean(
        required=True, metadata={"description": "true: an Idempotency-Key retry, nothing new"}
    )
    events = fields.List(fields.Nested(Event), required=True)
    next = fields.Nested(Next, required=True)


class TimelineTurn(Closed):
    index = fields.Integer(required=True, metadata={"description": "the record's turn"})
    player = fields.Integer(required=True)
    tile = fields.String(required=True, allow_none=True, metadata={"description": "null: resigned"})
    action = fields.String(
        required=True,
        validate=validate.OneOf(
            ["placed", "discarded", "returned", "timed_out", "resigned", "undone"]
        ),
        metadata={
            "description": "timed_out and resigned: docs/lifecycle.md; undone: the placement "
            "before was taken back (its tile, docs/undo.md)"
        },
    )
    scores = ints(required=True, metadata={"description": "totals after this turn"})


class ScoredItem(ExplainedScore):
    index = fields.Integer(
        required=True, allow_none=True, metadata={"description": "the turn that scored it"}
    )
    totals = ints(required=True)


class ScoreResult(Closed):
    """POST /v1/score: every turn's scores, every score explained, final scoring, result."""

    format = fields.String(required=True)
    players = fields.Integer(required=True)
    ruleset = fields.Nested(Ruleset, required=True)
    turns = fields.Integer(required=True)
    tiles_placed = fields.Integer(required=True)
    ended = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "why the game ended (GameEnded's reason, or abandoned)"},
    )
    out = fields.List(
        fields.String(allow_none=True, validate=validate.OneOf(["resigned", "timed_out"])),
        required=True,
        metadata={"description": "per seat: null while in, else why it is out (ranks after)"},
    )
    taken_over = TAKEN_OVER
    timeline = fields.List(fields.Nested(TimelineTurn), required=True)
    events = fields.List(fields.Nested(ScoredItem), required=True)
    final_scoring = fields.List(fields.Nested(ScoredItem), required=True)
    scores_before_final = ints(required=True)
    final_scores = ints(required=True)
    ranks = ints(required=True)
    winners = ints(required=True)


class ImportedSeat(Closed):
    seat = fields.Integer(required=True)
    name = fields.String(required=True)
    player_id = fields.String(metadata={"description": "the record's player_id, if given"})


class ImportLinks(Closed):
    record = fields.String(required=True)
    webhooks = fields.String(required=True)


class ImportIn(Record):
    """POST /games/import's JSON body: a record, and whether the game is public."""

    public = StrictBoolean(
        metadata={
            "description": "list the game to everyone (GET /games without an API key); "
            "default false: listed only to the key that imports it"
        }
    )
    rated = StrictBoolean(
        metadata={
            "description": "rate the game for its players (docs/ratings.md); default false: "
            "an imported game's results were made elsewhere"
        }
    )


class ImportedGame(Closed):
    game_id = fields.String(required=True)
    imported = fields.Boolean(required=True)
    playable = fields.Boolean(required=True)
    note = fields.String(required=True)
    seq = fields.Integer(required=True)
    players = fields.List(fields.Nested(ImportedSeat), required=True)
    final_scores = ints(required=True)
    links = fields.Nested(ImportLinks, required=True)


class Webhook(Closed):
    hook_id = fields.String(required=True)
    game_id = fields.String(required=True)
    url = fields.String(required=True, metadata={"description": "as stored (normalised)"})
    events = fields.List(fields.String(), required=True)
    backlog = fields.Integer(required=True, metadata={"description": "score events so far"})
    created_ms = fields.Integer(required=True)
    deliveries = fields.String(required=True, metadata={"description": "the delivery log"})
    signature = fields.String(required=True)


class HookView(Closed):
    """A registered webhook as listed and after a rotation (never a secret)."""

    hook_id = fields.String(required=True)
    game_id = fields.String(required=True)
    url = fields.String(required=True, metadata={"description": "as stored (normalised)"})
    events = fields.List(fields.String(), required=True)
    created_ms = fields.Integer(required=True)
    secrets_live = fields.Integer(
        required=True, metadata={"description": "secrets that sign its deliveries now"}
    )
    signature = fields.String(required=True, metadata={"description": "how they are signed"})


class HookList(Closed):
    hooks = fields.List(fields.Nested(HookView), required=True)


class Attempt(Closed):
    attempt = fields.Integer(required=True)
    at_ms = fields.Integer(required=True)
    ms = fields.Integer(required=True)
    status = fields.Integer(required=True, allow_none=True)
    error = fields.String()


class Delivery(Closed):
    delivery = fields.String(required=True)
    seq = fields.Integer(required=True)
    event = fields.String(required=True)
    created_ms = fields.Integer(required=True)
    deadline_ms = fields.Integer(required=True)
    outcome = fields.String(
        required=True, validate=validate.OneOf(["pending", "retrying", "delivered", "failed"])
    )
    tries = fields.Integer(required=True)
    attempts = fields.List(fields.Nested(Attempt), required=True)
    next_ms = fields.Integer(required=True, allow_none=True)
    status = fields.Integer(required=True, allow_none=True)
    delivered_ms = fields.Integer()


class Deliveries(Closed):
    game_id = fields.String(required=True)
    hook_id = fields.String(required=True)
    url = fields.String(required=True)
    dispatched_up_to = fields.Integer(required=True)
    score_seq = fields.Integer(required=True)
    deliveries = fields.List(fields.Nested(Delivery), required=True)
    next = fields.Integer(
        required=True, allow_none=True, metadata={"description": "`after` of the next page"}
    )


class HintQuery(Strict):
    level = fields.String(
        load_default="greedy",
        validate=validate.OneOf(BOT_LEVELS),
        metadata={"description": "the bot asked: random, greedy (default) or mcts"},
    )


class HintOut(Closed):
    """GET /games/{game_id}/hint: the move a bot would play now, as a turn's body."""

    game_id = fields.String(required=True)
    seq = fields.Integer(required=True, metadata={"description": "the position it is for"})
    player = fields.Integer(required=True, metadata={"description": "your seat (to move)"})
    tile = fields.String(required=True, metadata={"description": "the drawn tile"})
    level = fields.String(required=True, validate=validate.OneOf(BOT_LEVELS))
    x = fields.Integer(required=True)
    y = fields.Integer(required=True)
    rotation = fields.Integer(required=True, validate=validate.Range(0, 3))
    meeple = fields.Nested(Meeple, required=True, allow_none=True)
    value = fields.Float(
        required=True,
        metadata={
            "description": "the bot's estimate of your lead over the best other player "
            "after this move, in points (docs/bots.md)"
        },
    )
    playouts = fields.Integer(required=True, metadata={"description": "mcts: playouts run"})
    think_ms = fields.Integer(
        required=True,
        metadata={
            "description": "how long the hint takes to work out, from when the bot worker "
            "starts it: a fixed time whatever the seat's hand (the service's HINT_THINK_MS "
            "for mcts, HINT_FLOOR_MS for greedy and random; docs/bots.md)"
        },
    )


class HintPending(Closed):
    """GET /games/{game_id}/hint, 202: the hint is being worked out; ask again at `Location`."""

    status = fields.String(required=True, validate=validate.OneOf(["pending"]))
    game_id = fields.String(required=True)
    seq = fields.Integer(required=True, metadata={"description": "the position it is for"})
    player = fields.Integer(required=True, metadata={"description": "your seat (to move)"})
    level = fields.String(required=True, validate=validate.OneOf(BOT_LEVELS))
    think_ms = fields.Integer(
        required=True, metadata={"description": "the hint's fixed duration (as in the 200)"}
    )
    retry_after_ms = fields.Integer(
        required=True,
        metadata={
            "description": "when to ask again, in ms (at least 200): when the hint's duration "
            "from its asking has passed; Retry-After says it in whole seconds"
        },
    )
