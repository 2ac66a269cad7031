"""Play a bot seat's turn: fold the game, ask the bot's policy, append like a human turn.

A bot's turn goes through the one write path (`services.common.moves.run_command`), as a
human's does: the engine's `decide` validates the move, the next tiles are drawn from the
game's secret seed, and the event store's one append script appends everything on condition
that the game is still at the sequence the bot looked at, under the command id
``bot:<game>:<seq>``, once (a lost race is the answer, never retried). So a task
that is retried, duplicated or redelivered after its worker died plays the turn once: a
second append with the same id is a duplicate, one after another turn a conflict.

The policy is given `player_view(state)` and nothing else: the engine state holds the bag
as counts, and the seed stays in this module (it draws the tiles after the bot's move).

A move takes a fixed time from its start whatever the bot held (services/common/pace.py): its
search, over every view of a hand (R10.3), ends by one deadline, and the move waits out the
rest of its duration before its append, so the public gap before a bot's move tells nothing of
its hidden hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from carcassonne.bots import Budget, Choice, choose, choose_in_hand, hand_views, player_view
from carcassonne.events import PlayTurn
from carcassonne.game import command_for_action, decide
from carcassonne.state import PLACE, GameState
from eventstore.envelope import MOVES, StoredEvent
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from services.common.draws import fold_opened
from services.common.moves import Committed, Decision, Fold, Once, now_ms, run_command
from services.common.pace import Paced, move_ms
from services.common.takeover import TAKEOVER_THINK_MS
from services.redis_store.bot_index import bot_seats, plays_bots

# What a call found or did (the task decides what happens to the game's sweep entry).
PLAYED, HUMAN, OVER, GONE, RACED = "played", "human", "over", "gone", "raced"
WAITING = "waiting"  # a human may still take back their last placement: play at `due_ms`
TURN_MARGIN_MS = 5_000  # a waiting bot still plays this long before its turn limit, plus think
TAKEN_OVER = "SeatTakenOver"


@dataclass(frozen=True)
class Outcome:
    """What `BotPlayer.play` did: `kind` (above), the game's sequence after it, whether the
    next turn is a bot's too, and the choice."""

    kind: str
    seq: int = 0
    next_bot: bool = False
    choice: Choice | None = None
    think_ms: int = 0  # how long the move's work took (not public: the move is paced)
    level: str = ""
    due_ms: int | None = None  # a human's turn limit runs out then; WAITING: play then
    late_ms: int = 0  # how far the work overran the move's fixed duration (0: on time)


def seats_played(
    bots: list[dict[str, Any] | None], state: GameState
) -> list[dict[str, Any] | None]:
    """Per seat, the bot that plays it now: its bot seat's (the secrets record), or the bot
    that took it over when it went out (`SeatTakenOver` in the log, docs/takeover.md)."""
    played: list[dict[str, Any] | None] = []
    for seat in range(state.players):
        bot = bots[seat] if seat < len(bots) else None
        level = state.taken_over[seat] if seat < len(state.taken_over) else None
        if bot is None and level is not None:
            bot = {"level": level, "think_ms": TAKEOVER_THINK_MS, "takeover": True}
        played.append(bot)
    return played


def command_id(game_id: str, seq: int) -> str:
    """The bot turn's idempotency key: the game and the sequence it was decided at."""
    return f"bot:{game_id}:{seq}"


def undo_wait(
    state: GameState,
    stored: list[StoredEvent],
    bots: list[dict[str, Any] | None],
    grace_ms: int,
    now_ms: int,
) -> int | None:
    """Until when (Unix ms) the bot to move leaves a human's last placement undoable, or None
    to play now (docs/undo.md, "Bot seats").

    A bot's placement closes the window in which the player who placed last may take it
    back, and a bot replies in milliseconds: against bots a human could never undo. So,
    while that placement may still be undone (`undo_point`) and it was a human's, the bot
    waits `grace_ms` from its append; and while an undo request of it waits for another
    human's answer (`consent`), until the request's deadline (placing would refuse it).
    Never past `TURN_MARGIN_MS` before the bot's own turn limit (`turn_seconds`), with its
    think time: waiting must not make the bot's turn time out."""
    if state.undo_point is None:
        return None  # undo is off, or the last placement stands already
    placer = state.undo_point.current
    if placer < len(bots) and bots[placer] is not None:
        return None  # a bot's own placement: bots never ask
    request = state.undo
    if request is not None and request.refused_by is None and request.deadline_ms is not None:
        ends = request.deadline_ms
    elif grace_ms > 0:
        placed = next(e for e in reversed(stored) if e.type == "TilePlaced")  # the undoable one
        ends = placed.time_ms + grace_ms
    else:
        return None
    bot = bots[state.current] if state.current < len(bots) else None
    if state.deadline_ms is not None and bot is not None:
        ends = min(ends, state.deadline_ms - int(bot.get("think_ms") or 0) - TURN_MARGIN_MS)
    return ends if ends > now_ms else None


class BotPlayer:
    """Plays the turn of the bot seat to move, if it is a bot's turn."""

    def __init__(
        self,
        store: EventStore,
        secrets: Callable[[str], dict[str, Any] | None],
        clock: Callable[[], float] = time.perf_counter,
        max_think_ms: int = 10_000,
        policy: Callable[..., Choice] = choose,
        undo_grace_ms: int = 0,
        wall: Callable[[], float] = time.time,
        floor_ms: int = 0,
        bot_only_max_think_ms: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store, self.secrets, self.clock = store, secrets, clock
        self.max_think_ms = max_think_ms
        self.policy = policy  # `carcassonne.bots.choose`; a test may wrap it to see its input
        self.undo_grace_ms = undo_grace_ms  # see `undo_wait`
        self.wall = wall  # Unix seconds, the clock the store stamps events with
        # Every move lasts at least this long (greedy and random exactly this), services/
        # common/pace.py; the worker's MOVE_FLOOR_MS.
        self.floor_ms = floor_ms
        # The most a bot thinks in a game where every seat still in is a bot.
        self.bot_only_max_think_ms = bot_only_max_think_ms
        self.sleep = sleep

    def play(self, game_id: str, on_think: Callable[[int], None] | None = None) -> Outcome:
        """Play the turn to move if a bot holds it; `on_think(ms)` is told, before the bot
        thinks, how long its move will take."""
        started = self.clock()  # the move's duration counts from here (before the reads)
        record = self.secrets(game_id)
        bots = bot_seats(record) if record is not None else []
        if record is None or not plays_bots(record):
            return Outcome(GONE)  # unknown, imported, or no bot seat and no takeover
        stored = self.store.read(game_id, MOVES)
        if not stored:
            return Outcome(GONE)
        seq = stored[-1].seq
        if not any(bots) and not any(e.type == TAKEN_OVER for e in stored):
            # Nobody has left yet (no fold needed to see it): the feed sends the task again
            # with the takeover's append.
            return Outcome(GONE, seq)
        state = fold_opened([to_engine(e) for e in stored], str(record["seed"]))
        if state.over:
            return Outcome(OVER, seq)
        bots = seats_played(bots, state)
        seat = state.current
        bot = bots[seat] if seat < len(bots) else None
        if bot is None or state.phase != PLACE:
            # With a turn limit, the human's turn may time out and pass to a bot without
            # anyone sending the task: the sweep should look again just after the deadline.
            return Outcome(HUMAN, seq, due_ms=state.deadline_ms)
        wait = undo_wait(state, stored, bots, self.undo_grace_ms, int(self.wall() * 1000))
        if wait is not None:
            return Outcome(WAITING, seq, due_ms=wait)
        think_ms = self.think_ms(state, bots, bot)
        level = str(bot["level"])
        duration = move_ms(level, think_ms, self.floor_ms)
        paced = Paced(duration, think_ms, self.clock, self.sleep, started)
        if on_think is not None:
            on_think(paced.duration_ms)
        command, choice = self._choose(game_id, seq, state, level, paced.budget())
        took = paced.elapsed_ms()
        late = paced.wait()  # the move's fixed duration, whatever its work took
        # Decided as a human turn, when it is made (after the wait): the placement carries
        # the bank charged then and the next turn's clock starts then (a bank or a turn limit,
        # docs/clocks.md, docs/lifecycle.md). A lost race: another task played this turn (or a
        # human moved on), or this very turn was appended by an earlier copy of the task.
        now = now_ms()
        moved = decide(state, replace(command, now_ms=now))
        decision = Decision(moved, command_id(game_id, seq), str(record["seed"]), now=now)
        raced = Once(
            decision, lambda appended: Outcome(RACED, appended.result.last_seq if appended else seq)
        )
        unit = Fold(state, seq, command=stored[-1].command_id)
        done = run_command(self.store, game_id, unit, raced, attempts=1)
        if not isinstance(done, Committed):
            return done
        result = done.appended.result
        following = None if state.over else bots[state.current]
        return Outcome(
            PLAYED,
            result.last_seq,
            following is not None,
            choice,
            took,
            level,
            state.deadline_ms,
            late,
        )

    def think_ms(
        self, state: GameState, bots: list[dict[str, Any] | None], bot: dict[str, Any]
    ) -> int:
        """How long the bot to move may think: its seat's `think_ms`, at most `max_think_ms`,
        and at most `bot_only_max_think_ms` when every seat still in the game is a bot (a
        game made before that ceiling, or whose humans have all left)."""
        think_ms = min(int(bot.get("think_ms") or 0), self.max_think_ms)
        humans = [
            seat
            for seat in range(state.players)
            if (seat >= len(bots) or bots[seat] is None)
            and (seat >= len(state.out) or state.out[seat] is None)
        ]
        if not humans and self.bot_only_max_think_ms is not None:
            think_ms = min(think_ms, self.bot_only_max_think_ms)
        return think_ms

    def _choose(
        self, game_id: str, seq: int, state: GameState, level: str, budget: Budget
    ) -> tuple[Any, Choice]:
        """The bot's move (the engine's command) and its choice, within `budget`: one
        deadline for the whole move, shared by a hand's views (R10.3)."""
        if not state.hands:
            choice = self.policy(level, player_view(state), f"{game_id}:{seq}", budget)
            return command_for_action(state, choice.action), choice
        # R10.3: the best move of each tile of its own hand (`hand_views`)
        tile, choice = choose_in_hand(
            level, hand_views(state), f"{game_id}:{seq}", budget, self.policy
        )
        x, y, rotation, meeple = choice.action
        return PlayTurn(state.current, x, y, rotation, meeple, tile), choice
