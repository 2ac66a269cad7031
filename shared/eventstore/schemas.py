"""Payload schemas per event type and version, upcasters, and engine-event conversion.

The schemas are checked at the edges, where data comes from outside the engine: an imported
record's events before they are stored (services/command/imports.py), and every append in the
test suite (`eventstore.port.CHECK_PAYLOADS`). The services trust the events the engine makes
— a property test holds every engine event and score event of random games of every ruleset
to these schemas (tests/unit/test_properties.py) — and what was stored is not checked again
when read. A stored event of an old schema version is upgraded on read by the chain of
upcasters (v1 -> v2 -> …); stored data is never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from carcassonne.events import Event, event_from_dict, event_to_dict, seats_to_list
from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.hand import seal

from .envelope import NewEvent, StoredEvent
from .errors import SchemaError

COORD = validate.Range(-10_000, 10_000)


class _Strict(Schema):
    class Meta:
        unknown = RAISE


class AreaSchema(_Strict):
    width = fields.Integer(required=True, strict=True)
    height = fields.Integer(required=True, strict=True)
    border_closes = fields.Boolean(truthy={True}, falsy={False})  # R10.5 variant


class RulesetSchema(_Strict):
    """A ruleset as `Ruleset.to_dict` writes it. The optional rules are optional keys of the
    same version: an event without them is an older game that played without them."""

    tileset = fields.String(required=True, validate=validate.OneOf(["base", "demo"]))
    farmers = fields.Boolean(required=True, truthy={True}, falsy={False})
    farm_scoring = fields.String(required=True, validate=validate.OneOf(["3rd", "2nd", "1st"]))
    incomplete_score = fields.Boolean(required=True, truthy={True}, falsy={False})
    meeples = fields.Integer(strict=True, validate=validate.Range(0, 99))
    unplaceable = fields.String(validate=validate.OneOf(["discard", "return"]))
    area = fields.Nested(AreaSchema)
    hole_extra_turn = fields.Boolean(truthy={True}, falsy={False})  # R10.6
    river = fields.Boolean(truthy={True}, falsy={False})  # R9.1
    turn_seconds = fields.Integer(strict=True, validate=validate.Range(1, 30 * 86_400))
    max_timeouts = fields.Integer(strict=True, validate=validate.Range(1, 99))
    hints = fields.Boolean(truthy={True}, falsy={False})  # written when true (Ruleset.to_dict)
    undo = fields.String(validate=validate.OneOf(["off", "consent", "free"]))  # docs/undo.md
    abbot = fields.Boolean(truthy={True}, falsy={False})  # R9.2
    tile_edition = fields.String(validate=validate.OneOf(["1st", "2nd"]))  # R9.2
    hand = fields.Integer(strict=True, validate=validate.OneOf([1, 3]))  # R10.3
    on_leave = fields.String(validate=validate.Length(1, 40))  # docs/takeover.md
    # Fischer clock (docs/clocks.md): written together, only in a game with a time bank
    initial_seconds = fields.Integer(strict=True, validate=validate.Range(1, 30 * 86_400))
    increment_seconds = fields.Integer(strict=True, validate=validate.Range(0, 30 * 86_400))


class MeepleSchema(_Strict):
    feature = fields.String(
        required=True, validate=validate.OneOf(["road", "city", "field", "monastery", "garden"])
    )
    edge = fields.String(validate=validate.OneOf(EDGES))
    half_edge = fields.String(validate=validate.OneOf(HALF_EDGES))
    abbot = fields.Boolean(truthy={True}, falsy=set())  # R9.2: an optional key, true only


class GameStartedV1(_Strict):
    ruleset = fields.Nested(RulesetSchema, required=True)
    players = fields.Integer(required=True, strict=True, validate=validate.Range(2, 6))


class SeatV2(_Strict):
    """A seat of GameStarted v2: the player's name and the app's player id, each null when
    unknown (every seat of an upcast v1 game; the id of a seat created without one)."""

    name = fields.String(required=True, allow_none=True, validate=validate.Length(1, 40))
    player_id = fields.String(required=True, allow_none=True, validate=validate.Length(1, 128))


class GameStartedV2(_Strict):
    """Version 2 lists the seats (names and player ids, seat order) where v1 had a count:
    a replay viewer holding only the log can say who played."""

    ruleset = fields.Nested(RulesetSchema, required=True)
    players = fields.List(fields.Nested(SeatV2), required=True, validate=validate.Length(2, 6))


class TileDrawnV1(_Strict):
    """`deadline_ms`: when the drawn turn times out (Unix ms), only in a game with a turn limit.
    Optional and added without a new version: every event stored before it is valid as it
    is and means the same (no deadline), so there is nothing to upcast."""

    tile = fields.String(required=True, validate=validate.Length(1, 8))
    deadline_ms = fields.Integer(strict=True, validate=validate.Range(0))


class TilePlacedV1(_Strict):
    """Version 1 called the rotation `rot`."""

    player = fields.Integer(required=True, strict=True, validate=validate.Range(0, 5))
    tile = fields.String(required=True, validate=validate.Length(1, 8))
    x = fields.Integer(required=True, strict=True, validate=COORD)
    y = fields.Integer(required=True, strict=True, validate=COORD)
    rot = fields.Integer(required=True, strict=True, validate=validate.Range(0, 3))
    meeple = fields.Nested(MeepleSchema, allow_none=True, required=True)


# R10.3: a hand tile's nonce, opening its draw's commitment. Optional and added without a new
# version (as `deadline_ms`): events stored before it are valid and mean the same (no hand).
_NONCE = validate.Length(1, 64)


class TilePlacedV2(_Strict):
    player = fields.Integer(required=True, strict=True, validate=validate.Range(0, 5))
    tile = fields.String(required=True, validate=validate.Length(1, 8))
    x = fields.Integer(required=True, strict=True, validate=COORD)
    y = fields.Integer(required=True, strict=True, validate=COORD)
    rotation = fields.Integer(required=True, strict=True, validate=validate.Range(0, 3))
    meeple = fields.Nested(MeepleSchema, allow_none=True, required=True)
    nonce = fields.String(validate=_NONCE)  # R10.3


class TilePlacedV3(TilePlacedV2):
    """Version 3 may carry the placer's Fischer bank after the move (`bank_ms`, docs/clocks.md),
    charged with the placement where v2 games logged a `BankCharged` after it. A new version
    (not an optional key, as `nonce` was) tells a reader of a banked game's log where its
    charges are: after every v2 placement, a `BankCharged`; on a v3 one, its `bank_ms`
    (only one decided without a clock is still charged by a `BankCharged` after it)."""

    bank_ms = fields.Integer(strict=True, validate=validate.Range(0))


class PlayerTileV1(_Strict):
    player = fields.Integer(required=True, strict=True, validate=validate.Range(0, 5))
    tile = fields.String(required=True, validate=validate.Length(1, 8))
    nonce = fields.String(validate=_NONCE)  # R10.3: TileDiscarded/TileReturned of a hand tile


class HandDrawnV1(_Strict):
    """R10.3: a player drew a hand tile. Stored sealed only: the player and the commitment
    (SHA-256 hex of "tile:nonce"). `to_new` seals every draw; where payloads are checked (an
    import, the test suite), one naming the tile or nonce is refused too."""

    player = fields.Integer(required=True, strict=True, validate=validate.Range(0, 5))
    commitment = fields.String(required=True, validate=validate.Length(64, 64))


class HandsRevealedV1(_Strict):
    """R10.3: the hands at the end, per seat a list of [tile, nonce] pairs."""

    hands = fields.List(
        fields.List(fields.List(fields.String(validate=_NONCE), validate=validate.Length(2, 2))),
        required=True,
        validate=validate.Length(2, 6),
    )


class GameEndedV1(_Strict):
    reason = fields.String(required=True, validate=validate.Length(1, 200))


class PlayerV1(_Strict):
    player = fields.Integer(required=True, strict=True, validate=validate.Range(0, 5))


class PlayerTimedOutV1(PlayerV1):
    timeouts = fields.Integer(required=True, strict=True, validate=validate.Range(1, 99))


class SeatTakenOverV1(PlayerV1):
    """A bot of `level` plays the seat that just went out (ruleset on_leave, docs/takeover.md)."""

    level = fields.String(required=True, validate=validate.Length(1, 40))


class GameAbandonedV1(_Strict):
    idle_ms = fields.Integer(required=True, strict=True, validate=validate.Range(0))


_SEAT = validate.Range(0, 5)
_REQUEST = validate.Range(1, 1_000_000)


class UndoRequestedV1(_Strict):
    request = fields.Integer(required=True, strict=True, validate=_REQUEST)
    player = fields.Integer(required=True, strict=True, validate=_SEAT)
    deadline_ms = fields.Integer(required=True, strict=True, allow_none=True)


class UndoAnsweredV1(_Strict):
    """UndoAccepted and UndoRefused: who answered which request."""

    request = fields.Integer(required=True, strict=True, validate=_REQUEST)
    player = fields.Integer(required=True, strict=True, validate=_SEAT)


class TurnUndoneV1(_Strict):
    """The placement taken back (the game is again as it was right before it)."""

    request = fields.Integer(required=True, strict=True, validate=_REQUEST)
    player = fields.Integer(required=True, strict=True, validate=_SEAT)
    tile = fields.String(required=True, validate=validate.Length(1, 8))
    x = fields.Integer(required=True, strict=True, validate=COORD)
    y = fields.Integer(required=True, strict=True, validate=COORD)
    rotation = fields.Integer(required=True, strict=True, validate=validate.Range(0, 3))
    deadline_ms = fields.Integer(required=True, strict=True, allow_none=True)


class AbbotRecalledV1(_Strict):
    """R9.2: the player took their abbot back from (x, y)."""

    player = fields.Integer(required=True, strict=True, validate=validate.Range(0, 5))
    x = fields.Integer(required=True, strict=True, validate=COORD)
    y = fields.Integer(required=True, strict=True, validate=COORD)


class BankChargedV1(_Strict):
    """Fischer clock (docs/clocks.md): the seat's time bank after its placement (ms)."""

    player = fields.Integer(required=True, strict=True, validate=_SEAT)
    bank_ms = fields.Integer(required=True, strict=True, validate=validate.Range(0))


class ClockPausedV1(_Strict):
    """A seat away from `from_ms` until `until_ms` (Unix ms; a vacation, docs/clocks.md), and
    its running turn's moved deadline (null: not its turn, or no clock)."""

    player = fields.Integer(required=True, strict=True, validate=_SEAT)
    from_ms = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    until_ms = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    deadline_ms = fields.Integer(required=True, strict=True, allow_none=True)


class ClockResumedV1(_Strict):
    """A seat back at `at_ms` from a vacation ended early (docs/clocks.md), and its running
    turn's deadline brought forward (null: not its turn, no clock, or its clock ran)."""

    player = fields.Integer(required=True, strict=True, validate=_SEAT)
    at_ms = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    deadline_ms = fields.Integer(required=True, strict=True, allow_none=True)


_VACATION = validate.Length(1, 64)


class ClockPausedV2(ClockPausedV1):
    """Version 2 names the vacation the pause is of (`vacation`, the command service's id;
    null: an absence of no vacation), so that its end cuts its window alone (docs/clocks.md).
    A v1 pause reads as v2 with a null (`_no_vacation`): merged and cut as it was then."""

    vacation = fields.String(required=True, allow_none=True, validate=_VACATION)


class ClockResumedV2(ClockResumedV1):
    """Version 2 names the vacation ended (`vacation`; null: whatever absence `at_ms` falls
    in ends, as a v1 end does, upcast by `_no_vacation`)."""

    vacation = fields.String(required=True, allow_none=True, validate=_VACATION)


SCHEMAS: dict[tuple[str, int], Schema] = {
    ("GameStarted", 1): GameStartedV1(),
    ("GameStarted", 2): GameStartedV2(),
    ("TileDrawn", 1): TileDrawnV1(),
    ("TilePlaced", 1): TilePlacedV1(),
    ("TilePlaced", 2): TilePlacedV2(),
    ("TilePlaced", 3): TilePlacedV3(),
    ("TileDiscarded", 1): PlayerTileV1(),
    ("TileReturned", 1): PlayerTileV1(),
    ("AbbotRecalled", 1): AbbotRecalledV1(),
    ("GameEnded", 1): GameEndedV1(),
    ("TurnTimedOut", 1): PlayerTileV1(),
    ("PlayerTimedOut", 1): PlayerTimedOutV1(),
    ("PlayerResigned", 1): PlayerV1(),
    ("SeatTakenOver", 1): SeatTakenOverV1(),
    ("TakeoverRefused", 1): SeatTakenOverV1(),  # the same fields: the seat and the level
    ("GameAbandoned", 1): GameAbandonedV1(),
    ("TokenReissued", 1): PlayerV1(),
    ("UndoRequested", 1): UndoRequestedV1(),
    ("UndoAccepted", 1): UndoAnsweredV1(),
    ("UndoRefused", 1): UndoAnsweredV1(),
    ("TurnUndone", 1): TurnUndoneV1(),
    ("HandDrawn", 1): HandDrawnV1(),
    ("HandsRevealed", 1): HandsRevealedV1(),
    ("BankCharged", 1): BankChargedV1(),
    ("ClockPaused", 1): ClockPausedV1(),
    ("ClockPaused", 2): ClockPausedV2(),
    ("ClockResumed", 1): ClockResumedV1(),
    ("ClockResumed", 2): ClockResumedV2(),
}

CURRENT: dict[str, int] = {}
for _type, _version in SCHEMAS:
    CURRENT[_type] = max(CURRENT.get(_type, 0), _version)


def _rot_to_rotation(payload: dict[str, Any]) -> dict[str, Any]:
    out = dict(payload)
    out["rotation"] = out.pop("rot")
    return out


def _without_bank(payload: dict[str, Any]) -> dict[str, Any]:
    """TilePlaced v2 -> v3: a v2 placement carries no bank (`bank_ms` left out): in a banked
    game its charge is the `BankCharged` that follows it, which the fold still applies."""
    return dict(payload)


def _count_to_seats(payload: dict[str, Any]) -> dict[str, Any]:
    """GameStarted v1 -> v2: a v1 game logged no names (the secrets record has them, outside
    the log), so each seat's name and player id are null: readers fall back to the secrets
    record for such a game (the query service, `GET /games/{id}/record`)."""
    out = dict(payload)
    out["players"] = seats_to_list(out["players"], None, None)
    return out


def _no_vacation(payload: dict[str, Any]) -> dict[str, Any]:
    """ClockPaused / ClockResumed v1 -> v2: logged before they named their vacation, so
    anonymous (`vacation` null): such windows merge and are cut as they were then."""
    return {**payload, "vacation": None}


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("TilePlaced", 1): _rot_to_rotation,
    ("TilePlaced", 2): _without_bank,
    ("GameStarted", 1): _count_to_seats,
    ("ClockPaused", 1): _no_vacation,
    ("ClockResumed", 1): _no_vacation,
}


def register(event_type: str, version: int, schema: Schema) -> None:
    """Add a payload schema (the scoring worker registers its score events)."""
    SCHEMAS[(event_type, version)] = schema
    CURRENT[event_type] = max(CURRENT.get(event_type, 0), version)


def known_schema(event_type: str, version: int, payload: Any) -> Schema:
    """The payload's schema, without running it: `SchemaError` for an event type and version
    no schema describes (no reader could read it) or a payload that is not an object."""
    schema = SCHEMAS.get((event_type, version))
    if schema is None:
        raise SchemaError(f"no schema for {event_type} v{version}")
    if not isinstance(payload, dict):
        raise SchemaError(f"{event_type} payload must be an object")
    return schema


def validate_payload(event_type: str, version: int, payload: Any) -> dict[str, Any]:
    """Check a payload against its schema; `SchemaError` names what is wrong."""
    schema = known_schema(event_type, version, payload)
    try:
        schema.load(payload)
    except ValidationError as exc:
        raise SchemaError(f"{event_type} v{version}: {exc.messages}") from exc
    return payload


def upcast(event: StoredEvent) -> StoredEvent:
    """The event at its type's current schema version. Not validated: it was checked, or
    made by the engine, when it was written (module docstring)."""
    payload, version = event.payload, event.version
    while version < CURRENT.get(event.type, version):
        step = UPCASTERS.get((event.type, version))
        if step is None:
            raise SchemaError(f"no upcaster from {event.type} v{version}")
        payload, version = step(payload), version + 1
    if version == event.version:
        return event
    return StoredEvent(
        event.game_id,
        event.stream,
        event.seq,
        event.type,
        version,
        event.time_ms,
        event.command_id,
        payload,
    )


def to_new(event: Event) -> NewEvent:
    """An engine event as a new stored event at the current schema version.

    Not validated: the engine's events fit the schemas (module docstring).
    A hand draw (R10.3) is stored sealed: the log never names a tile in a hand.
    """
    data = event_to_dict(seal(event))
    event_type = data.pop("type")
    if event_type == "GameStarted" and type(data["players"]) is int:
        data["players"] = seats_to_list(data["players"], None, None)  # v2 lists the seats
    return NewEvent(event_type, CURRENT[event_type], data)


def to_engine(event: StoredEvent) -> Event:
    """A stored move event as an engine event.

    Stores upcast what they read (`EventStore.read`); an event at its type's current
    version is taken as it is.
    """
    if event.version != CURRENT.get(event.type):
        event = upcast(event)
    return event_from_dict({"type": event.type, **event.payload})
