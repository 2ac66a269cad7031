"""Events (what happened, past tense) and commands (what a player asks, imperative).

Events are small frozen values; `to_dict`/`event_from_dict` give their JSON form
(``{"type": "TilePlaced", ...}``). A game is the fold of its events (see `game.py`).
Score explanations are not events of the move stream: `evolve` derives them (`scoring.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import MalformedError
from .geometry import EDGES, HALF_EDGES
from .ruleset import MAX_PLAYERS, MIN_PLAYERS, Ruleset
from .tiles import CITY, FIELD, GARDEN, MONASTERY, ROAD, Meeple

# ---------------------------------------------------------------------------- events


@dataclass(frozen=True)
class GameStarted:
    """A game began with this ruleset and player count; the start tile is on (0,0) (R2.1).

    Optionally the seats' names and the apps' player ids, in seat order, so that the log
    alone says who played. `names` is all or nothing: a name per seat, or None (unknown: a
    game stored before names were logged). `player_ids` is None when no seat has one (a tuple
    of Nones is made None). Both are labels outside the rules: `decide` never writes them (the
    service adds them, `with_seats`), and they take no part in comparing events, so a game's
    stored events equal the engine's decisions; compare `names` itself where it matters.
    """

    ruleset: Ruleset
    players: int
    names: tuple[str, ...] | None = field(default=None, compare=False)
    player_ids: tuple[str | None, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.player_ids is not None and all(i is None for i in self.player_ids):
            object.__setattr__(self, "player_ids", None)


@dataclass(frozen=True)
class TileDrawn:
    """The player to move drew `tile` from the bag.

    `deadline_ms` (Unix time in milliseconds) is when this turn times out, in a game with a
    turn limit (ruleset `turn_seconds`); None without one. The deadline is a fact of the log,
    so a replay knows every deadline without a clock.
    """

    tile: str
    deadline_ms: int | None = None


@dataclass(frozen=True)
class TilePlaced:
    """`player` placed the drawn tile, optionally with a meeple on it (R3, R4, R5)."""

    player: int
    tile: str
    x: int
    y: int
    rotation: int
    meeple: Meeple | None = None
    # R10.3: the played hand tile's nonce, opening its `HandDrawn` commitment (None: no hand)
    nonce: str | None = None
    # Fischer clock (docs/clocks.md): the placer's bank after this move, pressed with it as a
    # chess clock is: what was left of it at the placement's time, plus the increment. None
    # without a bank, for a placement decided without a clock, and for the game's last one
    # (older logs charged the bank with a `BankCharged` after the placement instead).
    bank_ms: int | None = None


@dataclass(frozen=True)
class TileDiscarded:
    """The drawn tile fitted nowhere and left the game; the same player draws again (R4.4).
    With a hand (R10.3) `nonce` opens the discarded hand tile's commitment."""

    player: int
    tile: str
    nonce: str | None = None


@dataclass(frozen=True)
class TileReturned:
    """The drawn tile fitted nowhere and went back into the bag (house rule R10.4).
    With a hand (R10.3) `nonce` opens the returned hand tile's commitment."""

    player: int
    tile: str
    nonce: str | None = None


@dataclass(frozen=True)
class HandDrawn:
    """R10.3: `player` drew a tile into their hand (docs/rules.md, "R10.3 three-tile hand").

    `commitment` is SHA-256 of ``"<tile>:<nonce>"`` (`hand.commit`). The public log keeps only
    the player and the commitment (`hand.seal`): nobody learns the tile until the event that
    plays, discards or returns it names it with its nonce, or `HandsRevealed` at the end. The
    engine's own form (from `decide`, and unsealed by whoever knows the nonces) has both.
    """

    player: int
    commitment: str
    tile: str | None = None
    nonce: str | None = None


@dataclass(frozen=True)
class HandsRevealed:
    """R10.3: the game is ending; every tile still in a hand, with its nonce, per seat (in the
    order drawn), so that every commitment of the log is opened and the game replays whole."""

    hands: tuple[tuple[tuple[str, str], ...], ...]


@dataclass(frozen=True)
class AbbotRecalled:
    """Instead of placing a meeple, `player` took back their abbot from (x, y); its monastery
    or garden scored at once as at game end (R9.2). Follows the turn's `TilePlaced`."""

    player: int
    x: int
    y: int


@dataclass(frozen=True)
class GameEnded:
    """No more turns: final scoring follows (R7)."""

    reason: str


@dataclass(frozen=True)
class TurnTimedOut:
    """`player` did not play `tile` before the turn's deadline: the turn is skipped, the tile
    goes back into the bag, and the next player still in draws (lifecycle decision, see
    docs/lifecycle.md)."""

    player: int
    tile: str


@dataclass(frozen=True)
class PlayerTimedOut:
    """`player`'s turn timed out `timeouts` times (the ruleset's `max_timeouts`): the seat is
    out, skipped from then on; its meeples stay and score for it."""

    player: int
    timeouts: int


@dataclass(frozen=True)
class PlayerResigned:
    """`player` resigned: the seat is out, as after `PlayerTimedOut`. On its own turn the drawn
    tile goes back into the bag and the next player still in draws."""

    player: int


@dataclass(frozen=True)
class SeatTakenOver:
    """A bot of `level` plays `player`'s seat from here on (ruleset `on_leave: "bot:<level>"`):
    logged in the same append as the `PlayerResigned` or `PlayerTimedOut` that put the seat
    out. The seat stays out (it ranks after the seats still in, docs/lifecycle.md) but keeps
    its turns: the bot places tiles and meeples for it and they score for it (R6, R7)."""

    player: int
    level: str


@dataclass(frozen=True)
class TakeoverRefused:
    """The bot of `level` the ruleset names (`on_leave`) does not take `player`'s seat over:
    the API key that owns the game could not pay for its moves (its bot budgets, docs/
    takeover.md). Logged in place of `SeatTakenOver`, in the same append as the event that put
    the seat out; the seat is then skipped as under `on_leave: "skip"`."""

    player: int
    level: str


@dataclass(frozen=True)
class GameAbandoned:
    """Nobody moved for `idle_ms`: the server ended the game. No final scoring (R7 is for a
    game played out): the scores stay as completed features made them, and nobody wins."""

    idle_ms: int


@dataclass(frozen=True)
class TokenReissued:
    """`player`'s secret token was replaced (a lost phone; the token itself is never logged).
    Nothing in the game changes: the event tells every process serving the game that the
    seat's old token stopped working (docs/lifecycle.md)."""

    player: int


@dataclass(frozen=True)
class UndoRequested:
    """`player` asked to take back their last placement (ruleset `undo`, docs/undo.md).

    `request` numbers the game's undo requests from 1. `deadline_ms` (Unix ms, consent only)
    is when an unanswered request counts as refused: data, not a clock of the engine's.
    """

    request: int
    player: int
    deadline_ms: int | None = None


@dataclass(frozen=True)
class UndoAccepted:
    """`player` agreed to undo request `request` (consent)."""

    request: int
    player: int


@dataclass(frozen=True)
class UndoRefused:
    """`player` refused undo request `request`: the placement stands for good (consent)."""

    request: int
    player: int


@dataclass(frozen=True)
class TurnUndone:
    """The placement `player` made last (this tile at x, y, rotation) is taken back: the game
    is again as it was right before it, with the same tile in `player`'s hand. The draws
    made since are put back in the bag, and the next ones are fresh (docs/undo.md: the tile
    the undo showed is not the next by rule); the placement made again stands.
    `deadline_ms`: the renewed turn's deadline with a turn limit (None: none)."""

    request: int
    player: int
    tile: str
    x: int
    y: int
    rotation: int
    deadline_ms: int | None = None


UNDO_EVENTS = (UndoRequested, UndoAccepted, UndoRefused, TurnUndone)


@dataclass(frozen=True)
class BankCharged:
    """Fischer clock (ruleset `initial_seconds`, docs/clocks.md): `player`'s turn ended with a
    placement, and their time bank is now `bank_ms` (what was left at the placement, plus the
    ruleset's increment), charged by the draw that follows the placement, on the draw's clock
    (the same append). What games logged before the placement carried its bank
    (`TilePlaced.bank_ms`): read forever; the engine emits it only for a placement decided
    without a clock that a clocked draw follows."""

    player: int
    bank_ms: int


@dataclass(frozen=True)
class ClockPaused:
    """`player` is away (a declared vacation, docs/clocks.md) from `from_ms` until `until_ms`
    (Unix ms; `from_ms` may be later than the event): their clock stands still meanwhile.
    Every deadline of theirs decided after it skips the absence; `deadline_ms` is their
    running turn's deadline moved by it (None: not their turn, or no clock), as the log's
    new deadline. `vacation` is the vacation's id (the command service's book), which its
    end names (None: a pause logged before pauses carried it, merged with any it overlaps)."""

    player: int
    from_ms: int
    until_ms: int
    deadline_ms: int | None = None
    vacation: str | None = None


@dataclass(frozen=True)
class ClockResumed:
    """`player`, away until later, is back at `at_ms` (a vacation ended early, docs/
    clocks.md): vacation `vacation`'s window ends then (one that starts at `at_ms` or later
    is called off), and so does a pause of it logged later (its end may reach a game
    first); `deadline_ms` is their running turn's deadline after it (None: not their turn,
    no clock, or their absences unchanged), as the log's new deadline. Without `vacation`
    (logged before ends carried it) the absence `at_ms` falls in ends then."""

    player: int
    at_ms: int
    deadline_ms: int | None = None
    vacation: str | None = None


CLOCK_EVENTS = (BankCharged, ClockPaused, ClockResumed)

Event = (
    GameStarted
    | TileDrawn
    | TilePlaced
    | TileDiscarded
    | TileReturned
    | AbbotRecalled
    | GameEnded
    | TurnTimedOut
    | PlayerTimedOut
    | PlayerResigned
    | SeatTakenOver
    | TakeoverRefused
    | GameAbandoned
    | TokenReissued
    | UndoRequested
    | UndoAccepted
    | UndoRefused
    | TurnUndone
    | HandDrawn
    | HandsRevealed
    | BankCharged
    | ClockPaused
    | ClockResumed
)


def with_seats(
    events: list[Event],
    names: Sequence[str] | None,
    player_ids: Sequence[str | None] | None = None,
) -> list[Event]:
    """`events` with their `GameStarted` (if any) naming the seats: the log then says who
    played. `decide` never names seats (the rules do not need names): the caller adds them."""
    return [
        replace(
            e,
            names=None if names is None else tuple(names),
            player_ids=None if player_ids is None else tuple(player_ids),
        )
        if isinstance(e, GameStarted)
        else e
        for e in events
    ]


# -------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class StartGame:
    """Begin a game."""

    ruleset: Ruleset
    players: int


@dataclass(frozen=True)
class DrawTile:
    """Draw `tile` for the player to move (the caller chose it: the engine has no dice).

    `now_ms` is the caller's clock (the engine has none): with a turn limit the drawn tile's
    deadline is `now_ms` + `turn_seconds`; without `now_ms` there is no deadline."""

    tile: str
    now_ms: int | None = None
    nonce: str | None = None  # R10.3: the secret salt of this draw's commitment (a hand game)


@dataclass(frozen=True)
class PlayTurn:
    """Place the drawn tile (with a hand, R10.3: `tile`, one of the hand) at (x, y) with
    `rotation`, and optionally a meeple."""

    player: int
    x: int
    y: int
    rotation: int
    meeple: Meeple | None = None
    tile: str | None = None
    # The caller's clock (Unix ms; the engine has none), the time the move is made: with a
    # Fischer bank the placement carries the placer's bank as of then. None: no charge here.
    now_ms: int | None = None


@dataclass(frozen=True)
class RecallAbbot:
    """Place the drawn tile at (x, y) with `rotation` and, instead of placing a meeple, take
    the abbot back (R9.2). `now_ms` as `PlayTurn`'s."""

    player: int
    x: int
    y: int
    rotation: int
    now_ms: int | None = None


@dataclass(frozen=True)
class DiscardTile:
    """Declare the drawn tile (with a hand, R10.3: `tile` of the hand) unplaceable (R4.4;
    refused if it fits somewhere)."""

    player: int
    tile: str | None = None


@dataclass(frozen=True)
class EndGame:
    """End the game now (a record whose turns ran out)."""

    reason: str = "record ended"


@dataclass(frozen=True)
class TimeOutTurn:
    """Skip `player`'s turn: its deadline has passed at `now_ms` (the caller's clock).
    `takeover`: whether the ruleset's bot may take the seat over if this puts it out (False:
    its owner's bot budget refused it, docs/takeover.md)."""

    player: int
    now_ms: int
    takeover: bool = True


@dataclass(frozen=True)
class Resign:
    """`player` leaves the game (at any time, on its turn or not). `takeover`: whether the
    ruleset's bot may take the seat over (False: its owner's bot budget refused it,
    docs/takeover.md)."""

    player: int
    takeover: bool = True


@dataclass(frozen=True)
class AbandonGame:
    """End a game nobody moved in for `idle_ms` (the server's `ABANDON_AFTER` decides when)."""

    idle_ms: int


@dataclass(frozen=True)
class RequestUndo:
    """Ask to take back one's last placement; `now_ms` is the caller's clock (an expired
    earlier request is told apart from a pending one), `deadline_ms` the answer's deadline
    (consent; None: no deadline, as in a record's replay)."""

    player: int
    now_ms: int | None = None
    deadline_ms: int | None = None


@dataclass(frozen=True)
class PauseClock:
    """`player` is away from `from_ms` (None: `now_ms`, the caller's clock) until `until_ms`:
    pause their clock then (a declared vacation, docs/clocks.md; it may start later).
    `vacation`: its id, which its end names (None: an absence of no vacation)."""

    player: int
    now_ms: int
    until_ms: int
    from_ms: int | None = None
    vacation: str | None = None


@dataclass(frozen=True)
class ResumeClock:
    """`player`, away, is back at `now_ms` (the caller's clock): their clock runs again (a
    vacation ended early, docs/clocks.md). With `from_ms`, the absence that starts then is
    the one ended: called off before it begins when `now_ms` is earlier. `vacation`: the
    id of the vacation ended (None: whatever absence it falls in ends)."""

    player: int
    now_ms: int
    from_ms: int | None = None
    vacation: str | None = None


@dataclass(frozen=True)
class AnswerUndo:
    """Accept or refuse undo request `request` (consent), at `now_ms` on the caller's clock
    (None: no clock, as in a record's replay: no deadline is checked or set)."""

    player: int
    request: int
    accept: bool
    now_ms: int | None = None


Command = (
    StartGame
    | DrawTile
    | PlayTurn
    | RecallAbbot
    | DiscardTile
    | EndGame
    | TimeOutTurn
    | Resign
    | AbandonGame
    | RequestUndo
    | AnswerUndo
    | PauseClock
    | ResumeClock
)

# ---------------------------------------------------------------------- JSON forms


def meeple_to_dict(meeple: Meeple | None) -> dict[str, Any] | None:
    """A meeple in the game record's vocabulary."""
    if meeple is None:
        return None
    if meeple.feature in (MONASTERY, GARDEN):
        # R9.2: the abbot is marked; a plain meeple's form is unchanged
        return (
            {"feature": meeple.feature, "abbot": True}
            if meeple.abbot
            else {"feature": meeple.feature}
        )
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
    abbot = data.get("abbot", False)
    if feature in (MONASTERY, GARDEN):
        expected: set[str] = {"feature", "abbot"} if "abbot" in data else {"feature"}
        spot = feature
        if abbot is not True and "abbot" in data:
            raise MalformedError("bad_meeple", "abbot must be true or left out", "R9.2")
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
            "bad_meeple", "meeple feature must be road, city, field, monastery or garden", "R5.2"
        )
    if set(data) != expected:
        raise MalformedError("bad_meeple", f"meeple keys must be {sorted(expected)}", "R5")
    return Meeple(feature, spot, abbot is True)


def event_to_dict(event: Event) -> dict[str, Any]:
    """An event as a JSON object with its `type`."""
    body: dict[str, Any]
    match event:
        case GameStarted(ruleset, players, names, ids):
            # Without names or ids the engine's form is unchanged: `players` is the count.
            body = {"ruleset": ruleset.to_dict(), "players": players}
            if names is not None or ids is not None:
                body["players"] = seats_to_list(players, names, ids)
        case TilePlaced(player, tile, x, y, rotation, meeple, nonce, bank_ms):
            body = {
                "player": player,
                "tile": tile,
                "x": x,
                "y": y,
                "rotation": rotation,
                "meeple": meeple_to_dict(meeple),
            }
            if nonce is not None:
                body["nonce"] = nonce
            if bank_ms is not None:
                body["bank_ms"] = bank_ms
        case TileDrawn(tile, deadline):
            body = {"tile": tile} if deadline is None else {"tile": tile, "deadline_ms": deadline}
        case HandDrawn(player, commitment, tile, nonce):
            # sealed (the public form) when the tile is not known: no tile, no nonce
            body = {"player": player, "commitment": commitment}
            if tile is not None:
                body |= {"tile": tile, "nonce": nonce}
        case HandsRevealed(hands):
            body = {"hands": [[[tile, nonce] for tile, nonce in hand] for hand in hands]}
        case _:
            body = dict(event.__dict__)
            if "nonce" in body and body["nonce"] is None:
                del body["nonce"]  # a game without a hand logs what it always did
    return {"type": type(event).__name__, **body}


def seats_to_list(
    players: int, names: tuple[str, ...] | None, ids: tuple[str | None, ...] | None
) -> list[dict[str, str | None]]:
    """The seats as `GameStarted`'s list form: ``[{"name", "player_id"}…]`` in seat order,
    null where unknown (the stored event's schema version 2, shared/eventstore/schemas.py)."""
    return [
        {
            "name": names[seat] if names is not None and seat < len(names) else None,
            "player_id": ids[seat] if ids is not None and seat < len(ids) else None,
        }
        for seat in range(players)
    ]


def _seats_from(value: Any) -> tuple[int, tuple[str, ...] | None, tuple[str | None, ...] | None]:
    """`GameStarted`'s players: a count, or one ``{"name", "player_id"}`` per seat (either
    may be null or left out). Names count only if every seat has one (all or nothing)."""
    if type(value) is int:
        if not MIN_PLAYERS <= value <= MAX_PLAYERS:
            raise MalformedError("bad_players", "players must be 2-6", "R1.3")
        return value, None, None
    if not isinstance(value, list) or not MIN_PLAYERS <= len(value) <= MAX_PLAYERS:
        raise MalformedError("bad_players", "players must be 2-6 (a count or seats)", "R1.3")
    names: list[Any] = []
    ids: list[Any] = []
    for seat in value:
        if not isinstance(seat, dict) or not set(seat) <= {"name", "player_id"}:
            raise MalformedError("bad_players", "a seat is an object with name and player_id")
        name, pid = seat.get("name"), seat.get("player_id")
        if not (name is None or isinstance(name, str)) or not (pid is None or isinstance(pid, str)):
            raise MalformedError("bad_players", "a seat's name and player_id are strings or null")
        names.append(name)
        ids.append(pid)
    known = tuple(names) if all(n is not None for n in names) else None
    return len(value), known, tuple(ids)


_SIMPLE: dict[str, type] = {
    "TileDrawn": TileDrawn, "TileDiscarded": TileDiscarded, "TileReturned": TileReturned,
    "AbbotRecalled": AbbotRecalled, "GameEnded": GameEnded, "TurnTimedOut": TurnTimedOut,
    "PlayerTimedOut": PlayerTimedOut, "PlayerResigned": PlayerResigned,
    "SeatTakenOver": SeatTakenOver, "TakeoverRefused": TakeoverRefused,
    "GameAbandoned": GameAbandoned,
    "TokenReissued": TokenReissued,
    "UndoRequested": UndoRequested, "UndoAccepted": UndoAccepted, "UndoRefused": UndoRefused,
    "TurnUndone": TurnUndone, "HandDrawn": HandDrawn,
    "BankCharged": BankCharged, "ClockPaused": ClockPaused, "ClockResumed": ClockResumed,
}  # fmt: skip


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from `event_to_dict` output."""
    data = dict(data)
    kind = data.pop("type", None)
    try:
        if kind == "GameStarted":
            players, names, ids = _seats_from(data["players"])
            return GameStarted(Ruleset.from_dict(data["ruleset"]), players, names, ids)
        if kind == "HandsRevealed":
            return HandsRevealed(_hands_from(data.pop("hands")))
        if kind == "TilePlaced":
            meeple = meeple_from_dict(data.pop("meeple", None))
            return TilePlaced(meeple=meeple, **data)
        if kind in _SIMPLE:
            event: Event = _SIMPLE[kind](**data)
            return event
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedError("bad_event", f"malformed {kind} event: {exc}") from exc
    raise MalformedError("bad_event", f"unknown event type {kind!r}")


def _hands_from(value: Any) -> tuple[tuple[tuple[str, str], ...], ...]:
    """`HandsRevealed`'s hands: per seat a list of ``[tile, nonce]`` pairs of strings."""
    if not isinstance(value, list):
        raise TypeError("hands must be a list")
    out = []
    for hand in value:
        pairs = []
        for pair in hand:
            tile, nonce = pair
            if not (isinstance(tile, str) and isinstance(nonce, str)):
                raise TypeError("a revealed tile is [tile, nonce], both strings")
            pairs.append((tile, nonce))
        out.append(tuple(pairs))
    return tuple(out)
