"""The turn timer and the abandon sweep: turns past their deadline and games idle too long,
ended by the server (docs/lifecycle.md).

Finding them never scans: the timer follows the change feed (services/redis_store/
changes.py) as the consumer "timer" and keeps, with its position in the same atomic step,
each shard's deadline index (game -> its turn's deadline) and idle index (game -> its last
move's time) for the games in progress (`TimerIndex`). A tick first catches the indexes up
with the feed, then reads only their due part, pipelined over the 64 shards.

Handling one is a command like any other, through the one write path
(`services.common.moves.run_command`): the game is folded from its move stream, the engine
decides (`TimeOutTurn` / `AbandonGame`, with the clock passed in as data), and the events
are appended on the condition that the stream is still at the sequence decided on, under a
command id named after that sequence. So however many worker processes and ticks
race for the same expired turn — or a player's move races the timer — exactly one append
wins; every other one is refused by the script and appends nothing.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import redis

from carcassonne.errors import GameError
from carcassonne.events import AbandonGame, Event, TimeOutTurn
from carcassonne.game import decide
from carcassonne.pauses import running_ms
from carcassonne.state import OVER, PLACE, GameState
from eventstore.envelope import MOVES
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from services.common.kept import Kept
from services.common.moves import Decision, Fold, Once, run_command, still_holds
from services.common.takeover import TakeoverPayer
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.indexes import shard_pages
from services.redis_store.keys import deadlines_key, idle_key, index_shard, secrets_key

log = logging.getLogger(__name__)


def due_games(client: redis.Redis, now_ms: int, page: int = 1_000) -> Iterator[str]:
    """Games whose turn deadline is at or before `now_ms` (their shards' due parts only)."""
    for members in shard_pages(client, deadlines_key, page, high=now_ms):
        yield from members


def idle_games(client: redis.Redis, idle_since_ms: int, page: int = 1_000) -> Iterator[str]:
    """Games in progress whose last move was at or before `idle_since_ms`."""
    for members in shard_pages(client, idle_key, page, high=idle_since_ms):
        yield from members


ENDINGS = ("GameEnded", "GameAbandoned")
TURNS = ("TileDrawn", "TurnUndone")  # the events that set a turn's deadline (docs/undo.md)
# A vacation's pause moves the running turn's deadline when it is the away seat's turn
# (its `deadline_ms` not null), and leaves it as it is otherwise (docs/clocks.md).
PAUSED = "ClockPaused"
CLOCK_MOVES = {PAUSED, "ClockResumed"}  # a vacation's start or early end: a moved deadline
_UNSET = -1  # `_deadline`: the change set no deadline (a pause of a seat not to move)


class TimerIndex:
    """The change feed's consumer "timer": per shard, the deadline and idle indexes of the
    games in progress, written with its position."""

    def __init__(self, store: EventStore, client: redis.Redis) -> None:
        self.store = store
        self.follower = Follower(client, "timer", self.writes)

    def catch_up(self) -> int:
        """Index every move change not indexed yet; returns how many changes."""
        return self.follower.catch_up()

    def writes(self, shard: int, changes: list[Change]) -> list[Write]:
        """A batch's index writes: a move appended (not a vacation's pause or end) makes its
        game idle from then on; a draw or an undo sets its turn's deadline (or clears it), and
        a pause or an end may move it; the game's end drops both. Only
        each game's last state in the batch is written (a catch-up over many turns of one
        game reads one event range, not one per turn)."""
        changed: dict[str, None] = {}  # every game of the batch, in order
        idle: dict[str, int] = {}
        turn: dict[str, list[Change]] = {}  # the last change with a draw, then later pauses
        ended: set[str] = set()
        for change in changes:
            if change.stream != MOVES or not change.types:  # no move appended (an announcement)
                continue
            game = change.game_id
            changed[game] = None
            if not CLOCK_MOVES.issuperset(change.types):
                # A vacation's pause or end is no move: counted as one, any seat's
                # declaration (or a call-off, which costs no day) would put off the game's
                # abandon sweep however long its seat to move has been gone.
                idle[game] = change.time_ms
            if any(t in TURNS for t in change.types):
                turn[game] = [change]
            elif CLOCK_MOVES.intersection(change.types):
                turn.setdefault(game, []).append(change)
            if any(t in ENDINGS for t in change.types):
                ended.add(game)
        out: list[Write] = []
        for game in changed:
            if game in ended:  # nothing is appended after the end
                out += [Write("zrem", deadlines_key(shard), game),
                        Write("zrem", idle_key(shard), game)]  # fmt: skip
                continue
            if game in idle:
                out.append(Write("zadd", idle_key(shard), game, idle[game]))
            deadline: int | None = _UNSET
            for change in reversed(turn.get(game, [])):
                deadline = self._deadline(change)
                if deadline != _UNSET:
                    break
            if deadline != _UNSET:
                out.append(
                    Write("zrem", deadlines_key(shard), game)
                    if deadline is None
                    else Write("zadd", deadlines_key(shard), game, deadline)
                )
        return out

    def _deadline(self, change: Change) -> int | None:
        """The deadline (Unix ms) the change's last draw, undo, pause or early return of the
        seat to move gave its turn, None if that cleared it, `_UNSET` if the change set none."""
        events = self.store.read(change.game_id, MOVES, after=change.first - 1,
                                 limit=change.last - change.first + 1)  # fmt: skip
        for event in reversed(events):
            deadline = event.payload.get("deadline_ms")
            if event.type in CLOCK_MOVES and deadline is not None:
                return int(deadline)
            if event.type in TURNS:
                return None if deadline is None else int(deadline)
        return _UNSET


@dataclass(frozen=True)
class Handled:
    """What a tick did: turns timed out and games abandoned by this process, and attempts
    another process (or a player's move) got to first."""

    timed_out: list[str]
    abandoned: list[str]
    lost: int


Warm = Callable[[str], "tuple[GameState, int] | None"]
Folded = tuple[GameState, int, str]  # a state, its sequence, the command id of its last event


class Timer:
    """Times out expired turns and abandons idle games, one conditional append each.

    Folding a game from its first move costs more the longer it is (~5 ms half-way through a
    base game), so a timer keeps the states it folded (up to `cache_size` games in progress)
    and only catches them up; `warm(game_id)` may offer a state folded elsewhere in the
    process (the scoring worker's: `Scorer.folded`), a copy at some sequence, to start from.
    """

    def __init__(
        self,
        store: EventStore,
        client: redis.Redis,
        cache_size: int = 2_000,
        warm: Warm | None = None,
        payer: TakeoverPayer | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.warm = warm
        # Reserves a takeover the timeout decides against its game's key (docs/takeover.md).
        self.payer = payer or TakeoverPayer(None, 0)
        self.index = TimerIndex(store, client)
        self._cache: Kept[str, Folded] = Kept(cache_size, lambda kept: kept[1])

    def expire(self, game_id: str, now_ms: int) -> bool:
        """Skip the game's current turn if its deadline has passed; True if this call did."""
        state, seq, command = self._fold(game_id)
        if state is None or state.phase != PLACE or state.deadline_ms is None:
            return False  # ended, or handled already (the index entry went with that append)
        if state.deadline_ms > now_ms:
            return False  # a newer turn: its deadline is ahead
        record = self._record(game_id)
        seed = _seed(game_id, record)
        if seed is None:
            return False
        player = state.current
        events = self.payer.decided(  # a takeover is reserved before the append, or refused
            state, game_id, record, lambda bot: _decided(state, TimeOutTurn(player, now_ms, bot))
        )
        # The next player's turn starts now: its deadline is counted from the timeout.
        decision = Decision(events, f"timeout:{seq}", seed, now=now_ms)
        return bool(events) and self._append(game_id, Fold(state, seq, command=command), decision)

    def abandon(self, game_id: str, now_ms: int, after_ms: int) -> bool:
        """End the game as abandoned if it has waited `after_ms` for its seat to move, that
        seat's declared absences left out (docs/clocks.md: a vacation declared to start
        later is logged at its declaration, so the wait before it would otherwise count);
        True if this call did."""
        stored = self.store.read(game_id, MOVES)
        if not stored:
            return False
        # since the last move: a vacation's pause or end is none (the index's `writes`)
        last = next((e.time_ms for e in reversed(stored) if e.type not in CLOCK_MOVES), 0)
        if now_ms - last < after_ms:
            return False  # moved since the index was read
        state = GameState()
        for event in stored:
            state.apply(to_engine(event))
        if state.phase == OVER:
            return False
        away = state.pauses_ms[state.current] if state.pauses_ms else []
        idle = running_ms(last, now_ms, away)
        if idle < after_ms:
            # Away meanwhile: the game is due again when the seat's clock has run `after_ms`
            # at the earliest. Only ever later (GT), and only while indexed (XX): a move or
            # the game's end, written by the index's consumer meanwhile, stands.
            shard = index_shard(game_id)
            self.client.zadd(idle_key(shard), {game_id: now_ms - idle}, xx=True, gt=True)
            return False
        seq = stored[-1].seq
        events = _decided(state, AbandonGame(idle))
        decision = Decision(events, f"abandon:{seq}", None)  # the game ends: nothing to draw
        unit = Fold(state, seq, command=stored[-1].command_id)
        return bool(events) and self._append(game_id, unit, decision)

    def tick(
        self,
        now_ms: int,
        abandon_after_ms: int,
        limit: int = 10_000,
        rng: random.Random | None = None,
    ) -> Handled:
        """Handle up to `limit` expired turns, then (if `abandon_after_ms` > 0) idle games.

        The due games are taken in a random order: ticks running at once on several worker
        processes then mostly work on different games instead of racing for the same ones
        (a race costs a refused append, never a second timeout)."""
        shuffle = (rng or random.Random()).shuffle
        self.index.catch_up()  # every move appended so far is in the indexes read below
        timed_out: list[str] = []
        abandoned: list[str] = []
        lost = 0
        due = _first(due_games(self.client, now_ms), limit)
        shuffle(due)
        for game_id in due:
            if self._safely(self.expire, game_id, now_ms):
                timed_out.append(game_id)
            else:
                lost += 1
        if abandon_after_ms > 0:
            idle = _first(idle_games(self.client, now_ms - abandon_after_ms), limit)
            shuffle(idle)
            for game_id in idle:
                if self._safely(self.abandon, game_id, now_ms, abandon_after_ms):
                    abandoned.append(game_id)
                else:
                    lost += 1
        return Handled(timed_out, abandoned, lost)

    @staticmethod
    def _safely(handle: Callable[..., bool], game_id: str, *args: int) -> bool:
        """One game's handling; a game that cannot be folded is logged, not fatal to the
        tick (it stays in its index, and the next tick tries again)."""
        try:
            return handle(game_id, *args)
        except Exception:  # one broken game must not hold up the others
            log.exception("game %s: lifecycle handling failed", game_id, extra={"game_id": game_id})
            return False

    def _fold(self, game_id: str) -> tuple[GameState | None, int, str]:
        """The game's state at the end of its move stream and the command id of its last
        event, for the caller to change: from this timer's cache, else the warm state
        offered, else from the first move.

        The read starts at the cached sequence's own event: if the stream no longer holds
        it (or holds another command's there), a failover lost moves the state reflects,
        and the game is folded again from its first move (as the command service's cache
        does, services/command/cache.py)."""
        hit = self._cache.take(game_id)
        if hit is None and self.warm is not None:
            warm = self.warm(game_id)
            hit = None if warm is None else (*warm, "")
        state, seq, command = hit if hit is not None else (GameState(), 0, "")
        fresh = self.store.read(game_id, MOVES, after=max(0, seq - 1))
        if seq:
            if not still_holds(fresh, seq, command):
                state, seq, command = GameState(), 0, ""
                fresh = self.store.read(game_id, MOVES)
            else:
                command, fresh = fresh[0].command_id, fresh[1:]
        for event in fresh:
            state.apply(to_engine(event))
        if fresh:
            seq, command = fresh[-1].seq, fresh[-1].command_id
        if seq == 0:
            return None, 0, ""
        if state.phase != OVER:  # kept as it is now; the caller changes its own copy
            self._cache.keep(game_id, (state.copy(), seq, command))
        return state, seq, command

    def _record(self, game_id: str) -> dict[str, Any]:
        """The game's secrets record ({} if it has none or it cannot be read)."""
        raw = self.client.get(secrets_key(game_id))
        try:
            record = json.loads(raw) if raw is not None else {}
        except ValueError:
            record = {}
        return record if isinstance(record, dict) else {}

    def _append(self, game_id: str, unit: Fold, decision: Decision) -> bool:
        """Append on the condition that the game is still at the unit's sequence and
        command: False if another process or a player got there first (nothing appended)."""
        once: Once[bool] = Once(decision, lambda _appended: False)
        return run_command(self.store, game_id, unit, once, attempts=1) is not False


def _decided(state: GameState, command: TimeOutTurn | AbandonGame) -> list[Event]:
    """The command's events, or none if the engine refuses it (the game changed since it
    was found due)."""
    try:
        return decide(state, command)
    except GameError:
        return []


def _seed(game_id: str, record: dict[str, Any]) -> str | None:
    """The game's draw seed from its secrets record (None, logged, if it has none)."""
    seed = record.get("seed")
    if not isinstance(seed, str):
        log.warning("game %s: no draw seed; its turn cannot time out", game_id)
        return None
    return seed


def _first(games: Iterator[str], limit: int) -> list[str]:
    out: list[str] = []
    for game_id in games:
        out.append(game_id)
        if len(out) >= limit:
            break
    return out
