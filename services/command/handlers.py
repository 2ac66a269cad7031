"""A seat's commands as handlers over the game's cached state (`Taken`), each run by the one
write path (`services.common.moves.run_command`): a turn, an undo request or answer, a
resignation, a token re-issue.

A handler finds the seat of the request's token, binds an Idempotency-Key to (seat,
request), answers a command appended before from the stream (a replay), and otherwise
decides with the engine. A lost race catches the state up from its cached sequence (never
the whole game) and decides again; a duplicate of this command's id answers what was stored.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from carcassonne.errors import OutOfTurnError
from carcassonne.events import (
    Event,
    PauseClock,
    PlayTurn,
    RecallAbbot,
    Resign,
    ResumeClock,
    TokenReissued,
    meeple_to_dict,
)
from carcassonne.game import decide
from carcassonne.state import OVER, GameState
from carcassonne.tiles import Meeple
from eventstore.envelope import MOVES, StoredEvent
from eventstore.port import EventStore
from services.common.body import fingerprint
from services.common.moves import Appended, Decision, Handler, now_ms
from services.common.takeover import TakeoverPayer

from .cache import Cached, Taken
from .errors import AuthError, Forbidden, check_reuse
from .secrets_store import token_hash


@dataclass(frozen=True)
class TurnResult:
    """What a command appended and what comes next."""

    events: list[StoredEvent]
    state: GameState
    seq: int
    replayed: bool = False


def seat_of(cached: Cached, token: str | None) -> int:
    """The seat a bearer token belongs to."""
    if not token:
        raise AuthError("missing_token", "send Authorization: Bearer <player token>")
    seat = cached.secrets["tokens"].get(token_hash(token))
    if seat is None:
        raise Forbidden("bad_token", "this token belongs to no player of this game")
    return int(seat)


def not_taken_over(state: GameState, seat: int) -> None:
    """409 `player_out` for a seat a bot plays since it left (docs/takeover.md): its old
    token may no longer move, nor ask to undo the bot's placements."""
    if seat < len(state.taken_over) and state.taken_over[seat] is not None:
        raise OutOfTurnError(
            "player_out",
            f"player {seat} is out of the game: a {state.taken_over[seat]} bot plays this seat",
            None,
            taken_over=state.taken_over[seat],
        )


def replayed(
    store: EventStore, game_id: str, cached: Cached, command_id: str, request: str
) -> TurnResult | None:
    """The original result of a command id already appended, if it was (and came from the
    same request: else `IdempotencyKeyReused`)."""
    done = store.command_result(game_id, MOVES, command_id)
    if done is None:
        return None
    check_reuse(done.fingerprint, request)
    events = store.read(
        game_id, MOVES, after=done.first_seq - 1, limit=done.last_seq - done.first_seq + 1
    )
    return TurnResult(events, cached.state, done.last_seq, replayed=True)


@dataclass(frozen=True)
class Asked:
    """Who asks what of which game: the bearer token, the request's Idempotency-Key, and the
    command id it appends under without one (one per request, kept across its attempts)."""

    store: EventStore
    game_id: str
    token: str | None
    key: str | None = None
    # 128 random bits as 32 hex digits, as uuid4().hex gave, for under half its CPU (1.0 µs
    # against 2.5).
    any_id: str = field(default_factory=lambda: secrets.token_hex(16))


class SeatCommand(Handler[Taken, TurnResult]):
    """A seat's command: the seat from the token, checked again after every catch-up (a
    re-issued token brought fresh secrets: the old one must stop working at once)."""

    def __init__(self, asked: Asked) -> None:
        self.store, self.game_id, self.token = asked.store, asked.game_id, asked.token
        self.key, self.any_id = asked.key, asked.any_id
        self.seat = -1  # the token's seat, as last decided

    def seated(self, unit: Taken) -> int:
        """The token's seat in the state as it is now (and remembered for `lost`)."""
        self.seat = seat_of(unit.cached, self.token)
        return self.seat

    def ids(self, seat: int) -> tuple[str, str]:
        """The append's command id and request fingerprint for the seat."""
        return self.any_id, ""

    def replay(self, unit: Taken, seat: int) -> TurnResult | None:
        """The answer of this command appended before, if it was."""
        command_id, request = self.ids(seat)
        return replayed(self.store, self.game_id, unit.cached, command_id, request)

    def lost(self, unit: Taken, appended: Appended | None) -> TurnResult | None:
        """See `Handler.lost`: caught up; a duplicate (our own append retried after its reply
        was lost, or a client's retry that got there first) answers what was stored."""
        unit.catch_up()
        if appended is None:
            return None
        return self.replay(unit, self.seat)


class Turn(SeatCommand):
    """Play the drawn tile (or a hand's `tile`) for the token's seat; with `recall` the seat
    takes its abbot back instead of placing a meeple (R9.2)."""

    def __init__(
        self,
        asked: Asked,
        move: tuple[Any, Any, Any, Meeple | None],
        expected_seq: int | None = None,
        recall: bool = False,
        tile: str | None = None,
    ) -> None:
        super().__init__(asked)
        self.move, self.expected_seq, self.recall, self.tile = move, expected_seq, recall, tile

    def ids(self, seat: int) -> tuple[str, str]:
        """See `SeatCommand.ids`: `turn:<seat>:<key>`, bound to the turn as it means it."""
        if not self.key:
            return self.any_id, ""
        request = turn_fingerprint(self.game_id, seat, *self.move, self.tile)
        request += ":recall_abbot" if self.recall else ""  # R9.2: another request
        return f"turn:{seat}:{self.key}", request

    def decide(self, unit: Taken) -> Decision | TurnResult:
        """See `Handler.decide`."""
        seat = self.seated(unit)
        if unit.checked and self.key and (replay := self.replay(unit, seat)) is not None:
            return replay
        if self.expected_seq is not None and self.expected_seq != unit.seq:
            raise OutOfTurnError(
                "stale_sequence",
                f"you sent If-Match {self.expected_seq} but the game is at sequence {unit.seq}: "
                "another move came first; read the turn again before playing",
                None,
                expected=self.expected_seq,
                actual=unit.seq,
            )
        not_taken_over(unit.state, seat)
        x, y, rotation, meeple = self.move
        # One clock for the move and the draw after it (the same append): the placement
        # carries the bank charged at `now`, the draw's deadline counts from it (clocks.md).
        now = now_ms()
        command = (
            RecallAbbot(seat, x, y, rotation, now)
            if self.recall
            else PlayTurn(seat, x, y, rotation, meeple, self.tile, now)
        )
        command_id, request = self.ids(seat)
        events = decide(unit.state, command)
        return Decision(events, command_id, unit.cached.secrets["seed"], request, now)

    def lost(self, unit: Taken, appended: Appended | None) -> TurnResult | None:
        """See `SeatCommand.lost`: with the client's If-Match, a lost race is its answer."""
        if appended is None and self.expected_seq is not None:
            raise OutOfTurnError(
                "stale_sequence",
                "another move came first; read the turn again before playing",
                None,
                expected=self.expected_seq,
            )
        return super().lost(unit, appended)


Decide = Callable[[GameState, int, dict[str, Any]], list[Event]]


class Command(SeatCommand):
    """A seat's rarer command (an undo request or answer): `decided(state, seat, secrets
    record)` gives its events; an Idempotency-Key is bound to (path, seat, body)."""

    def __init__(self, asked: Asked, decided: Decide, path: str, body: dict[str, Any]) -> None:
        super().__init__(asked)
        self.decided, self.path, self.body = decided, path, body

    def ids(self, seat: int) -> tuple[str, str]:
        """See `SeatCommand.ids`: `cmd:<seat>:<key>`."""
        if not self.key:
            return self.any_id, ""
        return f"cmd:{seat}:{self.key}", fingerprint("POST", self.path, {"seat": seat, **self.body})

    def decide(self, unit: Taken) -> Decision | TurnResult:
        """See `Handler.decide`."""
        seat = self.seated(unit)
        if self.key and (replay := self.replay(unit, seat)) is not None:
            return replay
        command_id, request = self.ids(seat)
        not_taken_over(unit.state, seat)
        events = self.decided(unit.state, seat, unit.cached.secrets)
        return Decision(events, command_id, unit.cached.secrets["seed"], request)


class Resignation(SeatCommand):
    """The token's seat leaves the game (docs/lifecycle.md); a seat resigns once, so its
    command id is fixed (`resign:<seat>`) and a retry answers the first result."""

    stale = "the game moved on; retry"

    def __init__(self, asked: Asked, payer: TakeoverPayer) -> None:
        super().__init__(asked)
        self.payer = payer

    def ids(self, seat: int) -> tuple[str, str]:
        """See `SeatCommand.ids`."""
        return f"resign:{seat}", ""

    def decide(self, unit: Taken) -> Decision | TurnResult:
        """See `Handler.decide`: a takeover the engine decides is reserved against the game's
        API key before the append (services/common/takeover.py), or refused."""
        seat = self.seated(unit)
        if unit.state.out[seat] is not None and (replay := self.replay(unit, seat)) is not None:
            return replay
        state, secrets = unit.state, unit.cached.secrets
        events = self.payer.decided(
            state, self.game_id, secrets, lambda takeover: decide(state, Resign(seat, takeover))
        )
        return Decision(events, f"resign:{seat}", secrets["seed"])


class Reissue(Handler[Taken, TurnResult]):
    """Append `TokenReissued` for a seat whose token was replaced in the secrets record:
    conditional like any append, so it never lands after the game's end."""

    stale = "the game moved on; retry"

    def __init__(self, seat: int, command_id: str) -> None:
        self.seat, self.command_id = seat, command_id

    def decide(self, unit: Taken) -> Decision | TurnResult:
        """See `Handler.decide`."""
        if unit.state.phase == OVER:
            raise OutOfTurnError("game_over", "the game is over", "R7.1")
        return Decision([TokenReissued(self.seat)], self.command_id, None)

    def lost(self, unit: Taken, appended: Appended | None) -> TurnResult | None:
        """See `Handler.lost`: a duplicate is this very re-issue, appended already."""
        if appended is not None:
            return TurnResult(appended.stored, unit.state, appended.result.last_seq, True)
        unit.catch_up()
        return None


class Pause(Handler[Taken, "TurnResult | None"]):
    """Append `ClockPaused` for a seat away on vacation, or `ClockResumed` for a seat back
    early (docs/clocks.md), conditional like any append; its command id names the vacation
    and the seat, so it lands once per game and seat. A game over, a seat out, or (back) a
    seat not away by the time it is decided: nothing (None)."""

    stale = "the game moved on; retry"

    def __init__(
        self,
        command: PauseClock | ResumeClock,
        command_id: str,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.command, self.command_id = command, command_id
        # A pause's (and a call-off's) clock is read as it is decided (`clock`, Unix ms), not
        # only when its request began: a turn of the seat drawn in between started its clock
        # at its draw, and counted from the earlier reading its deadline would come too soon
        # (what is left of a turn is capped at its allotment).
        self.clock = clock
        # The seat's absences the last decision was taken on: an end that leaves them as
        # they were (logged before its pause, or in a game its vacation never paused) stops
        # no clock, and the end's answer does not list it as resumed.
        self.before: list[tuple[int, int]] = []

    def decide(self, unit: Taken) -> Decision | TurnResult | None:
        """See `Handler.decide`."""
        state = unit.state
        if state.phase == OVER or state.out[self.command.player] is not None:
            return None
        self.before = list(state.pauses_ms[self.command.player])
        events = decide(state, self._fresh(self.command))
        return Decision(events, self.command_id, None) if events else None

    def _fresh(self, command: PauseClock | ResumeClock) -> PauseClock | ResumeClock:
        """`command` on the clock read now: a pause counts from then (its window's start at
        the latest); a call-off (a start later than its request's clock) too, up to that
        start, which stays where the window goes (`ResumeClock`'s `at`). An early end keeps
        its return: every game ends the vacation at the one time the book has."""
        if self.clock is None:
            return command
        if isinstance(command, PauseClock):
            return replace(command, now_ms=max(command.now_ms, self.clock()))
        start = command.from_ms
        if start is not None and command.now_ms < start:
            return replace(command, now_ms=min(max(command.now_ms, self.clock()), start))
        return command

    def lost(self, unit: Taken, appended: Appended | None) -> TurnResult | None:
        """See `Handler.lost`: a duplicate is this very pause, appended already."""
        if appended is not None:
            return TurnResult(appended.stored, unit.state, appended.result.last_seq, True)
        unit.catch_up()
        return None


def turn_fingerprint(
    game_id: str,
    seat: int,
    x: Any,
    y: Any,
    rotation: Any,
    meeple: Meeple | None,
    tile: str | None = None,
) -> str:
    """What a turn's Idempotency-Key is bound to: the request as the command means it (the
    seat of its token, the placement and the meeple), so a retry that spells the same body
    differently (key order, an explicit `"meeple": null`) is still the same request."""
    body = {
        "seat": seat,
        "x": x,
        "y": y,
        "rotation": rotation,
        "meeple": None if meeple is None else meeple_to_dict(meeple),
    }
    if tile is not None:  # R10.3: the hand tile played is part of the request
        body["tile"] = tile
    return fingerprint("POST", f"/games/{game_id}/turns", body)
