"""Events (what happened, past tense) and commands (what a player asks, imperative).

Events are small frozen values; `to_dict`/`event_from_dict` give their JSON form
(``{"type": "TilePlaced", ...}``). A game is the fold of its events (see `game.py`).
Score explanations are not events of the move stream: `evolve` derives them (`scoring.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import MalformedError
from .geometry import EDGES, HALF_EDGES
from .ruleset import MAX_PLAYERS, MIN_PLAYERS, Ruleset
from .tiles import CITY, FIELD, MONASTERY, ROAD, Meeple

# ---------------------------------------------------------------------------- events


@dataclass(frozen=True)
class GameStarted:
    """A game began with this ruleset and player count; the start tile is on (0,0) (R2.1)."""

    ruleset: Ruleset
    players: int


@dataclass(frozen=True)
class TileDrawn:
    """The player to move drew `tile` from the bag."""

    tile: str


@dataclass(frozen=True)
class TilePlaced:
    """`player` placed the drawn tile, optionally with a meeple on it (R3, R4, R5)."""

    player: int
    tile: str
    x: int
    y: int
    rotation: int
    meeple: Meeple | None = None


@dataclass(frozen=True)
class TileDiscarded:
    """The drawn tile fitted nowhere and left the game; the same player draws again (R4.4)."""

    player: int
    tile: str


@dataclass(frozen=True)
class TileReturned:
    """The drawn tile fitted nowhere and went back into the bag (house rule R10.4)."""

    player: int
    tile: str


@dataclass(frozen=True)
class GameEnded:
    """No more turns: final scoring follows (R7)."""

    reason: str


Event = GameStarted | TileDrawn | TilePlaced | TileDiscarded | TileReturned | GameEnded

# -------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class StartGame:
    """Begin a game."""

    ruleset: Ruleset
    players: int


@dataclass(frozen=True)
class DrawTile:
    """Draw `tile` for the player to move (the caller chose it: the engine has no dice)."""

    tile: str


@dataclass(frozen=True)
class PlayTurn:
    """Place the drawn tile at (x, y) with `rotation`, and optionally a meeple."""

    player: int
    x: int
    y: int
    rotation: int
    meeple: Meeple | None = None


@dataclass(frozen=True)
class DiscardTile:
    """Declare the drawn tile unplaceable (R4.4; refused if it fits somewhere)."""

    player: int


@dataclass(frozen=True)
class EndGame:
    """End the game now (a record whose turns ran out)."""

    reason: str = "record ended"


Command = StartGame | DrawTile | PlayTurn | DiscardTile | EndGame

# ---------------------------------------------------------------------- JSON forms


def meeple_to_dict(meeple: Meeple | None) -> dict[str, str] | None:
    """A meeple in the game record's vocabulary."""
    if meeple is None:
        return None
    if meeple.feature == MONASTERY:
        return {"feature": MONASTERY}
    if meeple.feature == FIELD:
        return {"feature": FIELD, "half_edge": meeple.spot}
    return {"feature": meeple.feature, "edge": meeple.spot}


def meeple_from_dict(data: Any) -> Meeple | None:
    """Read a meeple of the game record's vocabulary (checked for shape, not legality)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise MalformedError("bad_meeple", "meeple must be null or an object", "R5")
    feature = data.get("feature")
    spot: Any
    if feature == MONASTERY:
        expected: set[str] = {"feature"}
        spot = MONASTERY
    elif feature == FIELD:
        expected = {"feature", "half_edge"}
        spot = data.get("half_edge")
        if spot not in HALF_EDGES:
            raise MalformedError(
                "bad_meeple", "a farmer needs half_edge, one of " + " ".join(HALF_EDGES), "R5.2"
            )
    elif feature in (ROAD, CITY):
        expected = {"feature", "edge"}
        spot = data.get("edge")
        if spot not in EDGES:
            raise MalformedError("bad_meeple", f"a {feature} meeple needs an edge: N E S W", "R5.2")
    else:
        raise MalformedError(
            "bad_meeple", "meeple feature must be road, city, field or monastery", "R5.2"
        )
    if set(data) != expected:
        raise MalformedError("bad_meeple", f"meeple keys must be {sorted(expected)}", "R5")
    return Meeple(feature, spot)


def event_to_dict(event: Event) -> dict[str, Any]:
    """An event as a JSON object with its `type`."""
    body: dict[str, Any]
    match event:
        case GameStarted(ruleset, players):
            body = {"ruleset": ruleset.to_dict(), "players": players}
        case TilePlaced(player, tile, x, y, rotation, meeple):
            body = {
                "player": player,
                "tile": tile,
                "x": x,
                "y": y,
                "rotation": rotation,
                "meeple": meeple_to_dict(meeple),
            }
        case _:
            body = dict(event.__dict__)
    return {"type": type(event).__name__, **body}


_SIMPLE: dict[str, type] = {
    "TileDrawn": TileDrawn, "TileDiscarded": TileDiscarded, "TileReturned": TileReturned,
    "GameEnded": GameEnded,
}  # fmt: skip


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from `event_to_dict` output."""
    data = dict(data)
    kind = data.pop("type", None)
    try:
        if kind == "GameStarted":
            players = data["players"]
            if type(players) is not int or not MIN_PLAYERS <= players <= MAX_PLAYERS:
                raise MalformedError("bad_players", "players must be 2-6", "R1.3")
            return GameStarted(Ruleset.from_dict(data["ruleset"]), players)
        if kind == "TilePlaced":
            meeple = meeple_from_dict(data.pop("meeple", None))
            return TilePlaced(meeple=meeple, **data)
        if kind in _SIMPLE:
            event: Event = _SIMPLE[kind](**data)
            return event
    except (KeyError, TypeError) as exc:
        raise MalformedError("bad_event", f"malformed {kind} event: {exc}") from exc
    raise MalformedError("bad_event", f"unknown event type {kind!r}")
