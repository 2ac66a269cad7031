"""A game's notification feed: what its move and score streams mean to a player's app, as a
list of items in the game's order (pure: no Redis, no clock).

The move stream is folded with the engine (the same `GameState` the worker and the views
fold), so an item says who is to play after each move. For move seq M, in this order:

- ``move_made``: a tile was placed or discarded (`TilePlaced`, `TileDiscarded`), or a
  placement was taken back (`TurnUndone`, docs/undo.md): the seat, its player id and the
  event's payload;
- ``score`` / ``game_over``: the score events the worker appended for M (`FeatureScored`,
  `ScoreReverted` after an undo, `GameScored`), each with its score seq;
- ``player_out``: a seat left the game (the events in `OUT_EVENTS`);
- ``seat_taken_over``: right after it, when the ruleset's `on_leave` has a bot play on for
  the seat (`SeatTakenOver`, docs/takeover.md): the seat, its player id and the bot's level;
- ``takeover_refused``: in its place when the game's API key could not pay for that bot
  (`TakeoverRefused`: the seat is skipped): the seat, its player id, the level and
  ``"reason": "bot_budget"``;
- ``game_over`` also for a game the server ended as abandoned (`GameAbandoned`: no final
  scoring, so no `GameScored`): ``{"reason": "abandoned", "scores", "winners": []}``;
- ``turn_started``: a tile was drawn for a seat (`TileDrawn`; with a three-tile hand, R10.3,
  once the seat to move has its hand refilled, ``tile`` null: the hand is secret): the seat,
  its player id, the tile and the turn's deadline (`deadline_ms`, null when the game has no
  turn limit), and with a Fischer clock the seat's time bank at the draw (`bank_ms`,
  docs/clocks.md; the key is left out without one). After a discard the same seat draws
  again: a new ``turn_started`` with the new tile. After an undo (`TurnUndone`) the seat
  that placed has its turn again: ``turn_started`` with its tile.

- ``player_away``: a seat declared a vacation (`ClockPaused`, docs/clocks.md): the seat, its
  player id, `from_ms` (later than the item for a vacation to come), `until_ms` and its
  running turn's moved deadline (`deadline_ms`, null when it was not that seat's turn), so
  the other players know why nothing moves.
- ``player_back``: that seat's vacation ended early, or was called off before its start
  (`ClockResumed`, `at_ms` then the start it will not have): the seat, its player id,
  `at_ms` and its running turn's new deadline (`deadline_ms`, null when it was not that
  seat's turn). Only for an end that stops an absence of this game: one logged before its
  pause (which it then drops or cuts) or in a game its vacation never paused says nothing.

- ``game_started`` (move 1, `GameStarted`, before the first ``turn_started``): every seat
  with its name and player id (``players``: seat order), so each player of a game made for
  them (a lobby that filled, a rematch: docs/lobby.md) can be told.

A game made by matchmaking (its secrets record names the match's tickets) also has
``match_found`` right after ``game_started``, each seat with its ``ticket_id``
(`with_match`: the record is not in the log, so the dispatcher adds it).

Items are ordered by move seq (then as listed), so a receiver that gets them in order sees
the game as it was played.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from carcassonne.events import GameStarted
from carcassonne.state import PLACE, GameState
from eventstore.envelope import StoredEvent
from eventstore.schemas import to_engine
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED, SCORE_REVERTED

UNDONE = "TurnUndone"
MOVES_MADE = ("TilePlaced", "TileDiscarded", UNDONE)
# Events by which a seat leaves the game, with the reason the item gives.
OUT_EVENTS = {"PlayerResigned": "resigned", "PlayerTimedOut": "timed_out"}
TAKEN_OVER = "SeatTakenOver"  # a bot plays the seat that left from here on
REFUSED = "TakeoverRefused"  # the key's bot budget could not pay for it: skipped instead
PAUSED = "ClockPaused"  # a seat away on vacation: player_away (docs/clocks.md)
RESUMED = "ClockResumed"  # back early from it: player_back
ABANDONED = "GameAbandoned"  # ended by the server with no final scoring: no GameScored
SCORE_KINDS = {FEATURE_SCORED: "score", SCORE_REVERTED: "score", GAME_SCORED: "game_over"}


def _seat(ids: tuple[str | None, ...], index: int) -> dict[str, Any]:
    return {"seat": index, "player_id": ids[index] if 0 <= index < len(ids) else None}


@dataclass(frozen=True)
class Item:
    """One notification: `seq` is the move seq it stems from (its order in the game)."""

    kind: str
    seq: int
    time_ms: int
    data: dict[str, Any]
    score_seq: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The item as stored in a delivery's log entry (and sent in its body)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "seq": self.seq,
            "time_ms": self.time_ms,
            "data": self.data,
        }
        if self.score_seq is not None:
            out["score_seq"] = self.score_seq
        return out


def _hand_turn_starts(state: GameState, was: tuple[str, int]) -> bool:
    """R10.3: whether a hand game's seat to move has just got its turn (its hand refilled,
    or the turn passed to it with the bag empty), holding a tile to play."""
    if not state.hands or state.over or state.phase != PLACE:
        return False
    return was != (PLACE, state.current) and bool(state.hands[state.current])


def _away(state: GameState, stored: StoredEvent) -> list[tuple[int, int]]:
    """The absences of the seat a clock event names, as `state` has them."""
    player = int(stored.payload["player"])
    return list(state.pauses_ms[player]) if 0 <= player < len(state.pauses_ms) else []


class Feed:
    """A game's feed folded forward: `advance` turns the moves after `seq` into their items
    and keeps the fold, so a dispatcher that keeps a `Feed` per game folds each move once
    instead of the whole game at every dispatch (services/scoring/subscriptions.py)."""

    __slots__ = ("ids", "seq", "state")

    def __init__(self) -> None:
        self.state = GameState()
        self.ids: tuple[str | None, ...] = ()
        self.seq = 0  # the last move folded

    def advance(self, moves: Iterable[StoredEvent], scores: Iterable[StoredEvent]) -> list[Item]:
        """The items of `moves` (the moves right after `seq`, in order), with those of the
        score events given that belong to them; the fold then stands after the last move."""
        by_move: dict[int, list[StoredEvent]] = {}
        for score in scores:
            by_move.setdefault(int(score.payload["move"]), []).append(score)
        items: list[Item] = []
        for stored in moves:
            if stored.seq != self.seq + 1:
                raise ValueError(f"feed at move {self.seq} given move {stored.seq}")
            self._fold(stored, by_move.get(stored.seq, ()), items)
            self.seq = stored.seq
        return items

    def _fold(self, stored: StoredEvent, scored: Iterable[StoredEvent], items: list[Item]) -> None:
        state = self.state
        event = to_engine(stored)
        was = (state.phase, state.current)
        # A vacation's end tells the others only if it stops an absence of this game: one
        # that reached the game before its pause (logged for that pause to come), or a
        # retry reaching a game the vacation never paused, changes no clock here.
        away_was = _away(state, stored) if stored.type == RESUMED else None
        state.apply(event)
        seq, at = stored.seq, stored.time_ms
        if isinstance(event, GameStarted):
            self.ids = tuple(event.player_ids or (None,) * event.players)
            names = event.names or (None,) * event.players
            seats = [{**_seat(self.ids, i), "name": names[i]} for i in range(event.players)]
            items.append(Item("game_started", seq, at, {"players": seats}))
        ids = self.ids

        if stored.type in MOVES_MADE:
            player = int(stored.payload["player"])
            items.append(
                Item(
                    "move_made",
                    seq,
                    at,
                    {**_seat(ids, player), "event": stored.type, "move": dict(stored.payload)},
                )
            )
        for score in scored:
            items.append(
                Item(SCORE_KINDS[score.type], seq, score.time_ms, dict(score.payload), score.seq)
            )
        if stored.type in OUT_EVENTS:
            player = int(stored.payload.get("player", stored.payload.get("seat", -1)))
            items.append(
                Item(
                    "player_out", seq, at, {**_seat(ids, player), "reason": OUT_EVENTS[stored.type]}
                )
            )
        if stored.type == TAKEN_OVER:
            player = int(stored.payload["player"])
            data = {**_seat(ids, player), "level": str(stored.payload["level"])}
            items.append(Item("seat_taken_over", seq, at, data))
        if stored.type == REFUSED:
            player = int(stored.payload["player"])
            data = {**_seat(ids, player), "level": str(stored.payload["level"])}
            items.append(Item("takeover_refused", seq, at, {**data, "reason": "bot_budget"}))
        if stored.type == PAUSED:
            player = int(stored.payload["player"])
            away = {k: stored.payload.get(k) for k in ("from_ms", "until_ms", "deadline_ms")}
            items.append(Item("player_away", seq, at, {**_seat(ids, player), **away}))
        if stored.type == RESUMED and away_was != _away(state, stored):
            player = int(stored.payload["player"])
            back = {k: stored.payload.get(k) for k in ("at_ms", "deadline_ms")}
            items.append(Item("player_back", seq, at, {**_seat(ids, player), **back}))
        if stored.type == ABANDONED:
            ended = {"reason": "abandoned", "scores": list(state.scores), "winners": []}
            items.append(Item("game_over", seq, at, ended))
        if stored.type in ("TileDrawn", UNDONE) and not state.over:
            data = {**_seat(ids, state.current), "tile": state.drawn,
                    "deadline_ms": state.deadline_ms}  # fmt: skip
            if state.banks_ms:  # Fischer clock: the seat's bank as its turn began
                data["bank_ms"] = state.banks_ms[state.current]
            items.append(Item("turn_started", seq, at, data))
        elif _hand_turn_starts(state, was):
            # R10.3: its tiles are the seat's secret: `tile` is null (the seat's /hand says).
            data = {**_seat(ids, state.current), "tile": None, "deadline_ms": None}
            items.append(Item("turn_started", seq, at, data))


def with_match(items: list[Item], record: dict[str, Any] | None) -> list[Item]:
    """`items` with a ``match_found`` after a ``game_started`` of a game made by matchmaking
    (`record`: the game's secrets record, whose ``match`` lists its tickets in seat order)."""
    tickets = ((record or {}).get("match") or {}).get("tickets")
    if not tickets:
        return items
    out: list[Item] = []
    for item in items:
        out.append(item)
        if item.kind == "game_started":
            seats = [
                {**seat, "ticket_id": tickets[i] if i < len(tickets) else None}
                for i, seat in enumerate(item.data["players"])
            ]
            out.append(Item("match_found", item.seq, item.time_ms, {"players": seats}))
    return out


def feed_items(moves: Iterable[StoredEvent], scores: Iterable[StoredEvent]) -> list[Item]:
    """The items of a game's moves from its first (the fold starts there), with the score
    events given (those of moves not given are ignored)."""
    return Feed().advance(moves, scores)
