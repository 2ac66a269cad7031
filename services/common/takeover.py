"""A takeover's bot time, paid by the game's API key (docs/takeover.md, "Who pays").

A bot that takes over a seat (`on_leave: "bot:<level>"`) spends the bot worker's CPU as a bot
seat does, so it is reserved against the same budgets of the API key that owns the game (its
bot seconds in flight and today, services/redis_store/bot_budget.py), by the same rule: its
paced move times its seat's share of the tiles left. The resignation (command service) and the
turn timer (scoring worker) decide the seat's leaving, reserve the takeover if the engine
decided one, then append. The budget is in the key's slot, not the game's, so the two steps
are not one script; the reservation comes first and is idempotent per game and seat, so a
crash between them holds the seconds only until a retry appends (charged once) or the game
ends (the bot worker gives everything of the game back). A key that cannot pay gets no bot:
the engine then logs `TakeoverRefused` instead of `SeatTakenOver` and the seat is skipped, as
under `on_leave: "skip"` (a resignation cannot be refused).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

from carcassonne.events import Event, SeatTakenOver
from carcassonne.state import GameState
from services.common.pace import move_ms
from services.redis_store.bot_budget import Refused

log = logging.getLogger(__name__)

# How long an mcts bot that took over a seat thinks a move: a bot seat's default `think_ms`
# (docs/bots.md). Random and greedy take the move floor, as bot seats do.
TAKEOVER_THINK_MS = 1_000


class TakeoverBudget(Protocol):
    """What reserves a takeover's seconds (services/redis_store/bot_budget.py `BotBudget`)."""

    def reserve_takeover(
        self, key_id: str, game_id: str, seat: int, seconds: float
    ) -> Refused | None:
        """None when reserved (or held already); else what refused it."""


def takeover_seconds(state: GameState, level: str, floor_ms: int) -> float:
    """The most a bot of `level` taking over a seat of `state` (before it leaves) may spend:
    its paced move times the seat's share of the tiles left to place (in the bag, drawn, and
    in hands: R10.3), as a bot seat is reserved at creation."""
    held = sum(len(hand) for hand in state.hands)
    tiles = state.bag_size + (1 if state.drawn is not None else 0) + held
    moves = math.ceil(tiles / max(1, len(state.playing)))
    return move_ms(level, TAKEOVER_THINK_MS, floor_ms) * moves / 1000


class TakeoverPayer:
    """Decides a seat's leaving with its takeover paid for, or refused when unpaid."""

    def __init__(self, budget: TakeoverBudget | None, floor_ms: int) -> None:
        self.budget, self.floor_ms = budget, floor_ms

    def decided(
        self,
        state: GameState,
        game_id: str,
        record: dict[str, Any],
        decide: Callable[[bool], list[Event]],
    ) -> list[Event]:
        """`decide(takeover)`'s events: with a takeover when the engine decides one and the
        game's key pays for it (reserved here, before the caller appends), else without."""
        events = decide(True)
        taken = next((e for e in events if isinstance(e, SeatTakenOver)), None)
        key_id = record.get("key_id")
        if taken is None or self.budget is None or not isinstance(key_id, str):
            return events  # no takeover, no budget, or a game made without a key
        seconds = takeover_seconds(state, taken.level, self.floor_ms)
        refused = self.budget.reserve_takeover(key_id, game_id, taken.player, seconds)
        if refused is None:
            return events
        log.warning(
            "game %s: the %s bot for seat %d is refused (%s budget: %.0f of %.0f held)",
            game_id, taken.level, taken.player, refused.budget, refused.held, refused.limit,
            extra={"game_id": game_id},
        )  # fmt: skip
        return decide(False)
