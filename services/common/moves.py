"""The move stream's one write path: `append_moves`, and the `run_command` retry loop.

Every writer of a game's moves goes through here: the command service's handlers (create,
turns, resign, token re-issue, undo, import), the bot worker and the turn timer. A command
is decided on a folded state, the events are applied, the next tiles drawn with the game's
seed, and everything is appended in one conditional, idempotent append: on the condition
that the stream is still at the state's sequence, under the command's id (the store's one
append script). A refused append (another command got in first) or a duplicate (this
command id was appended before) goes back to the handler, which catches its state up from
its cached sequence and decides again, or answers.

It lives in services/common because the command service, the bot worker and the scoring
worker (the turn timer) all write moves, and services never import each other. It is not
beside the event-store port (shared/eventstore): the port stores events and knows nothing
of deciding or drawing, and the draws (`services.common.draws`) belong to the services.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from carcassonne.errors import GameError, OutOfTurnError
from carcassonne.events import Event
from carcassonne.state import GameState
from eventstore.envelope import MOVES, AppendResult, NewEvent, StoredEvent
from eventstore.errors import CommandReused, ConcurrencyError
from eventstore.port import EventStore
from eventstore.schemas import to_new
from services.common.draws import draw_until_placeable
from services.common.observability import REQUEST_ID

STALE = "the game moved on; reload and retry"
STALE_SEQUENCE = "stale_sequence"  # every attempt of a command lost its append (`run_command`)


def now_ms() -> int:
    """The services' clock (Unix ms): deadlines are computed here, never in the engine."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Appended:
    """What one append of moves wrote (or found written: `result.duplicate`)."""

    game_id: str
    command_id: str
    events: list[Event]  # the engine's events, in the order appended
    new_events: list[NewEvent]
    result: AppendResult

    @property
    def stored(self) -> list[StoredEvent]:
        """The events as stored (seqs and time from the append's result)."""
        first, time_ms = self.result.first_seq, self.result.time_ms
        return [
            StoredEvent(
                self.game_id, MOVES, seq, e.type, e.version, time_ms, self.command_id, e.payload
            )
            for seq, e in enumerate(self.new_events, start=first)
        ]


def append_moves(
    store: EventStore,
    game_id: str,
    events: Sequence[Event],
    *,
    expected: int,
    command_id: str,
    fingerprint: str = "",
    after_command: str = "",
) -> Appended:
    """Append the engine's `events` to the game's move stream if it is at `expected` (and,
    with `after_command`, its event there is that command's: the same history, not only the
    same length), idempotent by `command_id` (bound to the request's `fingerprint` in the
    same script).

    The marker is the new last sequence ("moves up to here exist"): the scoring worker
    compares its progress with it. `ConcurrencyError` and `CommandReused` are the caller's."""
    new_events = [to_new(e) for e in events]
    result = store.append(
        game_id,
        MOVES,
        new_events,
        expected=expected,
        command_id=command_id,
        marker="$seq",
        fingerprint=fingerprint,
        trace=REQUEST_ID.get(),  # the worker's logs of this move name the request
        after_command=after_command,
    )
    return Appended(game_id, command_id, list(events), new_events, result)


def still_holds(fresh: Sequence[StoredEvent], seq: int, command: str) -> bool:
    """Whether `fresh`, a read of the move stream from `seq` on, starts with the event a
    state cached at `seq` folded last (appended by `command`; "": not known). If not, a
    failover lost moves that state reflects, and it must be folded again from the first
    move (the command service's cache, the turn timer's; tests/integration/
    test_lost_suffix.py)."""
    head = fresh[0] if fresh else None
    return head is not None and head.seq == seq and (not command or head.command_id == command)


@dataclass(frozen=True)
class Decision:
    """A command decided: the engine's events (not applied yet), the append's command id and
    request fingerprint, and the seed the next tiles are drawn with (None: no draws) from
    `now` (Unix ms, the drawn turn's clock; None: `now_ms()`)."""

    events: list[Event]
    command_id: str
    seed: str | None
    fingerprint: str = ""
    now: int | None = None


def with_draws(state: GameState, decision: Decision) -> list[Event]:
    """Apply a decided command's events to `state` and add the draws that follow (R4.4)."""
    for event in decision.events:
        state.apply(event)
    if decision.seed is None:
        return list(decision.events)
    clock = now_ms() if decision.now is None else decision.now
    return decision.events + draw_until_placeable(state, decision.seed, clock)


class Unit(Protocol):
    """A game's folded state for one command (cosmicpython's unit of work): where it comes
    from, how it catches up after a lost race, and where it goes once appended."""

    @property
    def seq(self) -> int:
        """The sequence the state stands at: the append's condition."""

    @property
    def command(self) -> str:
        """The command id of the event at `seq` ("": not known): the append's condition too,
        so a state folded before a failover lost moves is not played on a log that grew
        back to the same length with others (tests/integration/test_lost_suffix.py)."""

    @property
    def checked(self) -> bool:
        """The state was caught up with the stream (not only taken from a cache on trust)."""

    def work(self) -> GameState:
        """The state a decision is applied to (the state itself, or a copy)."""

    def catch_up(self) -> None:
        """Back to the state at `seq` (if work ran ahead on it), then the moves after it."""

    def commit(self, state: GameState, appended: Appended) -> None:
        """Keep `state`, the state after the append."""

    def release(self) -> None:
        """Done without an append of ours: keep the state (unless work ran ahead on it)."""


U = TypeVar("U", bound=Unit)
A = TypeVar("A")


class Handler(Generic[U, A]):
    """A command over a unit of work: `decide` gives a `Decision` to append (or an answer,
    e.g. a replay, or raises `GameError`); `lost` is told of a refused or duplicate append."""

    stale = STALE  # the message when every attempt lost its race

    def decide(self, unit: U) -> Decision | A:
        """The command decided on `unit`'s state."""
        raise NotImplementedError

    def lost(self, unit: U, appended: Appended | None) -> A | None:
        """Another command got in first (`appended` None), or this command id was appended
        before (`appended.result.duplicate`): an answer, or None to decide again."""
        unit.catch_up()
        return None


@dataclass(frozen=True)
class Committed:
    """A command's append, and the state after it."""

    state: GameState
    appended: Appended


def run_command(
    store: EventStore,
    game_id: str,
    unit: U,
    handler: Handler[U, A],
    *,
    attempts: int = 4,
) -> Committed | A:
    """Decide, draw and append conditionally, up to `attempts` times: a refusal by a state
    not checked against the stream is decided again once caught up; a lost race goes to
    `handler.lost`. Every attempt lost: `stale_sequence`."""
    for _attempt in range(attempts):
        decision = _decided(unit, handler)
        if not isinstance(decision, Decision):
            unit.release()
            return decision
        state = unit.work()
        events = with_draws(state, decision)
        appended: Appended | None
        try:
            appended = append_moves(
                store,
                game_id,
                events,
                expected=unit.seq,
                command_id=decision.command_id,
                fingerprint=decision.fingerprint,
                after_command=unit.command,
            )
        except CommandReused:
            unit.release()
            raise
        except ConcurrencyError:
            appended = None
        if appended is not None and not appended.result.duplicate:
            unit.commit(state, appended)
            return Committed(state, appended)
        try:
            answer = handler.lost(unit, appended)
        except BaseException:
            unit.release()
            raise
        if answer is not None:
            unit.release()
            return answer
    unit.release()
    raise OutOfTurnError(STALE_SEQUENCE, handler.stale, None)


def _decided(unit: U, handler: Handler[U, A]) -> Decision | A:
    """The handler's decision; a refusal by a state taken from a cache on trust is checked
    against the stream first (the cached state may be behind, or the command a retry)."""
    while True:
        try:
            return handler.decide(unit)
        except GameError:
            if unit.checked:
                unit.release()
                raise
            unit.catch_up()


@dataclass
class Fold:
    """A state its caller folded for one command (the bot worker, the turn timer): decided
    on once and never caught up here (a lost race is the caller's answer)."""

    state: GameState
    seq: int
    checked: bool = True
    command: str = ""  # the command id of the event at `seq` ("": not known)

    def work(self) -> GameState:
        """See `Unit.work`: the state itself (the caller's own)."""
        return self.state

    def catch_up(self) -> None:
        """See `Unit.catch_up`: nothing (the caller folds again next time)."""

    def commit(self, state: GameState, appended: Appended) -> None:
        """See `Unit.commit`: the caller keeps what it needs."""

    def release(self) -> None:
        """See `Unit.release`."""


class Once(Handler[Fold, A]):
    """A decision appended once: a lost race is `lost(appended)`'s answer, never retried."""

    def __init__(self, decision: Decision, lost: Callable[[Appended | None], A]) -> None:
        self.decision = decision
        self.answer = lost

    def decide(self, unit: Fold) -> Decision | A:
        """See `Handler.decide`."""
        return self.decision

    def lost(self, unit: Fold, appended: Appended | None) -> A | None:
        """See `Handler.lost`."""
        return self.answer(appended)
