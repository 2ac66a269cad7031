"""Game records (`carcassonne-record/1`): the public interchange format.

A record holds the ruleset, the player count, the start tile and the turns, each a placed
tile (with an optional meeple), a discard, or an undo of the placement before it
(``{"undo": true}``: granted, whatever the ruleset's undo mode asked; docs/undo.md).
Reading a record checks its shape; replaying it checks every turn against the rules and
reports the first illegal one by index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from .errors import GameError, IllegalMoveError, MalformedError, RecordError
from .events import (
    AbandonGame,
    AbbotRecalled,
    AnswerUndo,
    DiscardTile,
    DrawTile,
    EndGame,
    Event,
    GameAbandoned,
    GameStarted,
    HandDrawn,
    HandsRevealed,
    PlayerResigned,
    PlayTurn,
    RecallAbbot,
    RequestUndo,
    Resign,
    StartGame,
    TakeoverRefused,
    TileDiscarded,
    TilePlaced,
    TileReturned,
    TimeOutTurn,
    TurnTimedOut,
    TurnUndone,
    meeple_from_dict,
    meeple_to_dict,
    with_seats,
)
from .explain import explain
from .game import decide
from .hand import commit
from .ruleset import Ruleset
from .scoring import ranks
from .state import DRAW, OVER, PLACE, GameState
from .tiles import Meeple
from .undo import undo_voters

FORMAT = "carcassonne-record/1"
MAX_TURNS = 1_000  # far more than any tile set holds; bounds the work a record can ask for


@dataclass(frozen=True)
class Turn:
    """One turn of a record: a tile placed (with an optional meeple), or discarded (R4.4);
    or, in a game with a turn limit, a drawn tile not played in time (`timeout`); or a seat
    resigning (`resign`: the seat; no tile) — docs/lifecycle.md; or the undo of the
    placement before it (`undo`, no tile: the same player then places the same tile again,
    docs/undo.md); or a placement that took the abbot back instead of a meeple (`recall`,
    R9.2)."""

    tile: str
    x: int = 0
    y: int = 0
    rotation: int = 0
    meeple: Meeple | None = None
    discard: bool = False
    timeout: bool = False
    resign: int | None = None
    undo: bool = False
    recall: bool = False  # R9.2: the player took their abbot back instead of placing a meeple
    # A resign or timeout turn that put the seat out when the ruleset's bot could not take it
    # over (its owner's bot budget, docs/takeover.md: `TakeoverRefused`): the seat is skipped.
    takeover_refused: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The turn as JSON."""
        if self.undo:
            return {"undo": True}
        refused = {"takeover_refused": True} if self.takeover_refused else {}
        if self.resign is not None:
            return {"resign": self.resign, **refused}
        if self.timeout:
            return {"tile": self.tile, "timeout": True, **refused}
        if self.discard:
            return {"tile": self.tile, "discard": True}
        out = {
            "tile": self.tile,
            "x": self.x,
            "y": self.y,
            "rotation": self.rotation,
            "meeple": meeple_to_dict(self.meeple),
        }
        if self.recall:
            out["recall_abbot"] = True
        return out


@dataclass(frozen=True)
class Record:
    """A whole game: ruleset, players and turns (the start tile is fixed by R2.1); optionally
    the players' names and the apps' player ids, in seat order (a record without them is as
    valid as before: both keys are optional in `carcassonne-record/1`)."""

    ruleset: Ruleset
    players: int
    turns: tuple[Turn, ...]
    names: tuple[str, ...] | None = None
    player_ids: tuple[str | None, ...] | None = None
    abandoned: bool = False  # the server ended the game as abandoned (no final scoring)
    # R10.3: a hand game's draws in order, each (tile, nonce): replayed, they give the very
    # commitments the game published (docs/rules.md, "R10.3 three-tile hand").
    draws: tuple[tuple[str, str], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as `carcassonne-record/1` JSON."""
        out: dict[str, Any] = {
            "format": FORMAT,
            "ruleset": self.ruleset.to_dict(),
            "players": self.players,
            "start": {"tile": self.ruleset.tiles.start, "x": 0, "y": 0, "rotation": 0},
            "turns": [t.to_dict() for t in self.turns],
        }
        if self.names is not None:
            out["names"] = list(self.names)
        if self.player_ids is not None:
            out["player_ids"] = list(self.player_ids)
        if self.abandoned:
            out["abandoned"] = True
        if self.draws is not None:
            out["draws"] = [{"tile": tile, "nonce": nonce} for tile, nonce in self.draws]
        return out


MAX_NAME = 40  # R1.3's players, as the command service takes them
MAX_PLAYER_ID = 128


def valid_player_id(value: Any) -> bool:
    """An app's opaque user id: 1-128 visible ASCII characters (no spaces or controls)."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= MAX_PLAYER_ID
        and all("!" <= c <= "~" for c in value)
    )


def seat_names(value: Any, players: int) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or len(value) != players
        or not all(isinstance(n, str) and 1 <= len(n.strip()) <= MAX_NAME for n in value)
    ):
        raise MalformedError(
            "bad_names", f"names must list {players} names of 1-{MAX_NAME} characters", "R1.3"
        )
    return tuple(n.strip() for n in value)


def seat_ids(value: Any, players: int) -> tuple[str | None, ...]:
    if (
        not isinstance(value, list)
        or len(value) != players
        or not all(v is None or valid_player_id(v) for v in value)
    ):
        raise MalformedError(
            "bad_player_ids",
            f"player_ids must list {players} ids (1-{MAX_PLAYER_ID} visible ASCII characters) "
            "or nulls, in seat order",
        )
    return tuple(value)


def _int(data: dict[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if type(value) is not int or not low <= value <= high:
        raise MalformedError("bad_turn", f"{key} must be an integer from {low} to {high}")
    return value


UNDO = Turn("", undo=True)


def _takeover_refused(data: dict[str, Any]) -> bool:
    """A resign or timeout turn's `takeover_refused` (only `true`, only on those turns)."""
    if "takeover_refused" not in data:
        return False
    if data["takeover_refused"] is not True or not {"resign", "timeout"} & set(data):
        raise MalformedError(
            "bad_turn", "takeover_refused is true, on a resign or timed-out turn only"
        )
    return True


def turn_from_dict(data: Any) -> Turn:
    """Read one turn (shape only; legality is checked on replay)."""
    if not isinstance(data, dict):
        raise MalformedError("bad_turn", "a turn must be an object")
    if "undo" in data:
        if data != {"undo": True}:
            raise MalformedError("bad_turn", 'an undo turn is {"undo": true} and nothing else')
        return UNDO
    refused = _takeover_refused(data)
    if "resign" in data:
        if set(data) - {"takeover_refused"} != {"resign"}:
            raise MalformedError("bad_turn", "a resign turn has only resign (the seat)")
        return Turn("", resign=_int(data, "resign", 0, 5), takeover_refused=refused)
    if "timeout" in data:
        if set(data) - {"takeover_refused"} != {"tile", "timeout"} or data["timeout"] is not True:
            raise MalformedError("bad_turn", 'a timed-out turn is {"tile": T, "timeout": true}')
        if not isinstance(data["tile"], str):
            raise MalformedError("bad_turn", "a turn needs a tile name")
        return Turn(data["tile"], timeout=True, takeover_refused=refused)
    tile = data.get("tile")
    if not isinstance(tile, str):
        raise MalformedError("bad_turn", "a turn needs a tile name")
    if data.get("discard", False) is True:
        if set(data) != {"tile", "discard"}:
            raise MalformedError("bad_turn", "a discard turn has only tile and discard")
        return Turn(tile, discard=True)
    extra = set(data) - {"tile", "x", "y", "rotation", "meeple", "discard", "recall_abbot"}
    if extra or data.get("discard", False) is not False:
        raise MalformedError("bad_turn", f"unexpected keys in a turn: {sorted(extra)}")
    recall = data.get("recall_abbot", False)
    if recall not in (True, False) or type(recall) is not bool:
        raise MalformedError("bad_turn", "recall_abbot must be true or left out", "R9.2")
    meeple = meeple_from_dict(data.get("meeple"))
    if recall and meeple is not None:
        raise MalformedError(
            "bad_turn", "a turn takes the abbot back instead of placing a meeple", "R9.2"
        )
    return Turn(
        tile,
        _int(data, "x", -10_000, 10_000),
        _int(data, "y", -10_000, 10_000),
        _int(data, "rotation", 0, 3),
        meeple,
        recall=recall,
    )


def load_record(data: Any) -> Record:
    """Read a record from its JSON value; a bad field raises `RecordError` (index of the turn)."""
    try:
        if not isinstance(data, dict):
            raise MalformedError("bad_record", "a record must be a JSON object")
        if data.get("format") != FORMAT:
            raise MalformedError("bad_format", f"format must be {FORMAT!r}")
        extra = set(data) - {"format", "ruleset", "players", "start", "turns", "names"}
        extra -= {"player_ids", "abandoned", "draws"}
        if extra:
            raise MalformedError("bad_record", f"unknown record keys: {sorted(extra)}")
        ruleset = Ruleset.from_dict(data.get("ruleset", {}))
        players = data.get("players")
        if type(players) is not int or not 2 <= players <= 6:
            raise MalformedError("bad_players", "players must be an integer from 2 to 6", "R1.3")
        start = data.get("start", {"tile": ruleset.tiles.start, "x": 0, "y": 0, "rotation": 0})
        # Integers, not merely equal to 0: false and 0.0 compare equal to it in Python.
        if start != {"tile": ruleset.tiles.start, "x": 0, "y": 0, "rotation": 0} or any(
            type(start[key]) is not int for key in ("x", "y", "rotation")
        ):
            raise MalformedError(
                "bad_start", f"the start tile is {ruleset.tiles.start} at 0,0 unrotated", "R2.1"
            )
        turns = data.get("turns")
        if not isinstance(turns, list):
            raise MalformedError("bad_record", "turns must be a list")
        if len(turns) > MAX_TURNS:
            raise MalformedError("too_many_turns", f"a record holds at most {MAX_TURNS} turns")
        names = None if data.get("names") is None else seat_names(data["names"], players)
        ids = data.get("player_ids")
        player_ids = None if ids is None else seat_ids(ids, players)
        abandoned = data.get("abandoned", False)
        if type(abandoned) is not bool:
            raise MalformedError("bad_record", "abandoned must be true or false")
        if "draws" in data and data["draws"] is None:
            # Absent and null are not the same: the document has no null here, so a
            # record that says `"draws": null` is refused, not read as one without draws.
            raise MalformedError("bad_draws", "draws is a list of {tile, nonce}, not null", "R10.3")
        draws = draws_from(data.get("draws"), ruleset)
    except GameError as exc:
        raise RecordError(None, exc) from exc
    parsed = []
    for index, turn in enumerate(turns):
        try:
            parsed.append(turn_from_dict(turn))
        except GameError as exc:
            # The first bad turn is the one reported: an earlier illegal turn wins.
            record_events(Record(ruleset, players, tuple(parsed), draws=draws))
            raise RecordError(index, exc) from exc
    return Record(ruleset, players, tuple(parsed), names, player_ids, abandoned, draws)


def draws_from(value: Any, ruleset: Ruleset) -> tuple[tuple[str, str], ...] | None:
    """R10.3: a record's `draws`, ``[{"tile", "nonce"}…]``: in a hand game only, and there
    required (a hand is refilled from them)."""
    if ruleset.hand == 1:
        if value is not None:
            raise MalformedError("bad_record", "draws belong to a hand game's record", "R10.3")
        return None
    if not isinstance(value, list) or len(value) > MAX_TURNS:
        raise MalformedError(
            "bad_draws", "a hand game's record lists its draws: [{tile, nonce}…]", "R10.3"
        )
    out = []
    for item in value:
        if (
            not isinstance(item, dict)
            or set(item) != {"tile", "nonce"}
            or not all(isinstance(item[k], str) and item[k] for k in ("tile", "nonce"))
        ):
            raise MalformedError("bad_draws", "a draw is {tile, nonce}, two strings", "R10.3")
        out.append((item["tile"], item["nonce"]))
    return tuple(out)


class Step(NamedTuple):
    """One step of a record's replay: the start, a turn, or the closing `EndGame`."""

    turn: int | None  # index of the record turn (None: the start, or the end when turns ran out)
    player: int | None  # whose turn it was (None for the start and the end)
    events: list[Event]  # what the step appended


def play_record(record: Record, state: GameState) -> Iterator[Step]:
    """Replay `record` on a fresh `state`, a step at a time, each turn checked by `decide`.

    `state` stands after each step when it is yielded; `RecordError` names the first bad turn.
    """

    def run(command: Any) -> list[Event]:
        events = decide(state, command)
        for event in events:
            state.apply(event)
        return events

    try:
        started = run(StartGame(record.ruleset, record.players))
    except GameError as exc:
        raise RecordError(None, exc) from exc
    if record.names is not None or record.player_ids is not None:
        # The log says who played, as the record does (`record_from_events` reads it back).
        started = with_seats(started, record.names, record.player_ids)
    yield Step(None, None, started)
    hand_draws = iter(record.draws or ())
    for index, turn in enumerate(record.turns):
        if state.hands:
            try:
                refilled = _refill(state, hand_draws, run)
            except GameError as exc:
                raise RecordError(index, exc) from exc
            player = state.current
            try:
                events = refilled + _hand_turn(state, turn, run)
                _refusal_replayed(turn, player, events)
            except GameError as exc:
                raise RecordError(index, exc) from exc
            yield Step(index, player, events)
            continue
        player = state.current
        try:
            if turn.resign is not None:
                player = turn.resign
                events = run(Resign(player, not turn.takeover_refused))
            elif turn.undo:
                player, events = _undo(state, run)
            else:
                # A record has no clock: its draws start at time 0, so a turn limit's deadline
                # is `turn_seconds` after it, and a timed-out turn times out right then; its
                # moves are made at time 0 too (a bank keeps all of itself, plus the increment).
                events = _drawn(state, turn, run)
                if turn.timeout:
                    deadline = state.deadline_ms or 0
                    events += run(TimeOutTurn(player, deadline, not turn.takeover_refused))
                elif turn.discard:
                    events += run(DiscardTile(player))
                elif turn.recall:  # R9.2: the abbot taken back instead of a meeple
                    events += run(RecallAbbot(player, turn.x, turn.y, turn.rotation, 0))
                else:
                    move = PlayTurn(player, turn.x, turn.y, turn.rotation, turn.meeple, now_ms=0)
                    events += run(move)
            _refusal_replayed(turn, player, events)
        except GameError as exc:
            raise RecordError(index, exc) from exc
        yield Step(index, player, events)
    if state.phase != OVER:
        closing = _refill(state, hand_draws, run, strict=False) if state.hands else []
        if state.phase != OVER:
            closing += run(AbandonGame(0) if record.abandoned else EndGame())
        yield Step(None, None, closing)


def _refusal_replayed(turn: Turn, player: int, events: list[Event]) -> None:
    """A turn's `takeover_refused` is a fact of the game it records, so its replay must log
    the `TakeoverRefused` (docs/takeover.md): a flag the rules give no takeover to refuse
    for (`on_leave: "skip"`, a timeout that leaves the seat in, the last seat still in
    leaving) would be dropped by the replay and the record's re-export, so it is refused."""
    if turn.takeover_refused and not any(isinstance(e, TakeoverRefused) for e in events):
        raise MalformedError(
            "no_takeover_to_refuse",
            "takeover_refused, but no bot was to take this seat over here: the ruleset's "
            "on_leave is skip, the seat is still in, or it was the last seat still in "
            "(docs/takeover.md)",
            player=player,
        )


def _refill(
    state: GameState,
    draws: Iterator[tuple[str, str]],
    run: Callable[[Any], list[Event]],
    strict: bool = True,
) -> list[Event]:
    """R10.3: the player to move draws back up to the hand's size from the record's draws
    (each with its nonce). `strict`: running out of draws is an error (before a turn)."""
    events: list[Event] = []
    while state.phase == DRAW:
        pair = next(draws, None)
        if pair is None:
            if not strict:
                break
            raise MalformedError(
                "draws_short", "the record's draws end before this hand is refilled", "R10.3"
            )
        events += run(DrawTile(pair[0], nonce=pair[1]))
    return events


def _hand_turn(state: GameState, turn: Turn, run: Callable[[Any], list[Event]]) -> list[Event]:
    """R10.3: a record turn of a hand game: the tile named is the hand's tile played or set
    aside (a hand tile that fits nowhere, R4.4/R10.4), or a seat resigning."""
    if turn.resign is not None:
        return run(Resign(turn.resign, not turn.takeover_refused))
    if turn.discard:
        return run(DiscardTile(state.current, turn.tile))
    if turn.timeout or turn.undo or turn.recall:
        raise MalformedError("bad_turn", "a hand game has no timeouts, undos or abbot", "R10.3")
    return run(PlayTurn(state.current, turn.x, turn.y, turn.rotation, turn.meeple, turn.tile))


def _drawn(state: GameState, turn: Turn, run: Callable[[Any], list[Event]]) -> list[Event]:
    """The draw of a turn's tile (at time 0: a record has no clock); after an undo none: the
    same tile is in hand again, and the turn must name it."""
    if state.phase != PLACE:
        return run(DrawTile(turn.tile, 0))
    if turn.tile != state.drawn:
        raise IllegalMoveError(
            "undo_same_tile",
            f"after an undo the player places the same tile again ({state.drawn})",
            "R3",
            tile=state.drawn,
        )
    return []


def _undo(state: GameState, run: Callable[[Any], list[Event]]) -> tuple[int, list[Event]]:
    """A record's undo turn: the request by the player who placed last, and each other
    player's consent when the ruleset asks for it (a record holds granted undos only). At
    time 0 with no answer deadline, as the record's draws (a turn limit's renewed deadline
    is then `turn_seconds`)."""
    point = state.undo_point
    player = point.current if point is not None else state.current
    events = run(RequestUndo(player, 0))
    if not any(isinstance(e, TurnUndone) for e in events):
        request = events[0].request  # type: ignore[union-attr]
        for voter in undo_voters(state, player):
            events += run(AnswerUndo(voter, request, True, 0))
    return player, events


def record_events(record: Record) -> list[Event]:
    """Every event of the recorded game, each turn checked (`RecordError` on the first bad one)."""
    return [event for step in play_record(record, GameState()) for event in step.events]


def replay(record: Record) -> GameState:
    """The final state of a recorded game (every turn checked)."""
    state = GameState()
    for _ in play_record(record, state):
        pass
    return state


def score_report(state: GameState, names: Sequence[str] | None = None) -> dict[str, Any]:
    """Final scores, scores before final scoring, ranks, winners and every explanation (each
    score event with its sentence, `explain.explain`, naming seats by `names` when known)."""
    rank, winners = ranks(state.scores, [why is not None for why in state.out])
    report: dict[str, Any] = {
        "final_scores": list(state.scores),
        "scores_before_final": list(state.scores_before_final or state.scores),
        "ranks": list(rank),
        "winners": list(winners),
        "events": [{**s.to_dict(), "explanation": explain(s, names)} for s in state.log],
    }
    if any(why is not None for why in state.out):  # docs/lifecycle.md: seats out rank last
        report["out"] = list(state.out)
    if any(state.taken_over):  # docs/takeover.md: the seats out that a bot played on
        report["taken_over"] = list(state.taken_over)
    if state.abandoned:  # ended by the server: no final scoring, no winner
        report["abandoned"] = True
        report["winners"] = []
    return report


def score_record(record: Record) -> dict[str, Any]:
    """Score a record: what `carcassonne score` prints."""
    return score_report(replay(record))


def record_from_events(
    events: Iterable[Event],
    names: Sequence[str] | None = None,
    player_ids: Sequence[str | None] | None = None,
) -> Record:
    """The record of a game from its events (for export and replay elsewhere), with the
    seats' names and player ids (kept only if there is one per seat): those its `GameStarted`
    logged, else the `names` and `player_ids` given (a game logged before names were, whose
    names are kept beside the log)."""
    ruleset, players, turns, abandoned = Ruleset(), 2, [], False
    drawn: list[str] = []  # R10.3: the draws' commitments in order
    opened: dict[str, list[tuple[str, str]]] = {}  # commitment -> its (tile, nonce) openings
    for event in events:
        _open_draws(event, drawn, opened)
        match event:
            case GameStarted():
                ruleset, players = event.ruleset, event.players
                names = event.names if event.names is not None else names
                player_ids = event.player_ids if event.player_ids is not None else player_ids
            case TilePlaced():
                turns.append(Turn(event.tile, event.x, event.y, event.rotation, event.meeple))
            case TileDiscarded() | TileReturned():
                turns.append(Turn(event.tile, discard=True))
            case TurnTimedOut():
                turns.append(Turn(event.tile, timeout=True))
            case PlayerResigned():
                turns.append(Turn("", resign=event.player))
            case TakeoverRefused():  # follows its turn's PlayerResigned or PlayerTimedOut
                turns[-1] = replace(turns[-1], takeover_refused=True)
            case GameAbandoned():
                abandoned = True
            case TurnUndone():
                turns.append(UNDO)
            case AbbotRecalled():  # follows its turn's TilePlaced
                turns[-1] = replace(turns[-1], recall=True)
    return Record(
        ruleset,
        players,
        tuple(turns),
        tuple(names) if names is not None and len(names) == players else None,
        tuple(player_ids) if player_ids is not None and len(player_ids) == players else None,
        abandoned,
        _draws(drawn, opened) if ruleset.hand > 1 else None,
    )


def _open_draws(event: Event, drawn: list[str], opened: dict[str, list[tuple[str, str]]]) -> None:
    """R10.3: note a draw's commitment, or the (tile, nonce) an event opens one with."""
    pairs: list[tuple[str, str]] = []
    match event:
        case HandDrawn():
            drawn.append(event.commitment)
            if event.tile is not None and event.nonce is not None:
                pairs = [(event.tile, event.nonce)]
        case TilePlaced() | TileDiscarded() | TileReturned() if event.nonce is not None:
            pairs = [(event.tile, event.nonce)]
        case HandsRevealed():
            pairs = [pair for hand in event.hands for pair in hand]
    for tile, nonce in pairs:
        key = commit(tile, nonce)
        if (tile, nonce) not in opened.setdefault(key, []):
            opened[key].append((tile, nonce))


def _draws(
    drawn: list[str], opened: dict[str, list[tuple[str, str]]]
) -> tuple[tuple[str, str], ...]:
    """R10.3: every draw of a hand game as (tile, nonce), from the events that opened them;
    a draw not yet opened (a game still going: the hands are secret) makes no record."""
    out = []
    for key in drawn:
        pairs = opened.get(key)
        if not pairs:
            raise MalformedError(
                "hand_not_revealed",
                "a hand game has a record once it is over: until then the hands are secret",
                "R10.3",
            )
        out.append(pairs[0])
    return tuple(out)
