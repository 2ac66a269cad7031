"""Hints: the move a bot would play now for the seat to move, kept per position and level.

An mcts hint holds the worker for HINT_THINK_MS, so a hint worked out once is kept by
(game, seq, level): a client asking again (or a thousand times) for the same position gets
the same answer at once, and each position costs one search per level.

A searched hint takes a fixed time whatever the seat's hand (services/common/pace.py): mcts
its HINT_THINK_MS for the whole request (every view of a hand, R10.3, shares one deadline),
greedy and random HINT_FLOOR_MS (and never less), waited out before answering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import Counter

from carcassonne.bots import Budget, choose, choose_in_hand, hand_views, player_view
from carcassonne.errors import OutOfTurnError
from carcassonne.events import meeple_to_dict
from services.common.kept import Kept
from services.common.pace import Paced, move_ms

from .cache import Cached
from .errors import Forbidden

HINTS = Counter(
    "carcassonne_hints_total",
    "Hints answered, by level and whether the bot searched or a kept hint was sent",
    ["level", "source"],
)
HINTS_KEPT = 1_024  # positions whose hints a process keeps (one search per position and level)

KeptHints = Kept[tuple[str, int, str], dict[str, Any]]


def kept_hints() -> KeptHints:
    """An empty store of hints, `HINTS_KEPT` positions at most (oldest out first)."""
    return Kept(HINTS_KEPT)


def hint(
    kept: KeptHints,
    game_id: str,
    cached: Cached,
    seat: int,
    level: str,
    think_ms: int,
    floor_ms: int = 0,
    paced: Callable[[int, int], Paced] = Paced,
) -> dict[str, Any]:
    """The move bot `level` would play now for `seat`, with its estimated value; only in a
    game whose ruleset allows hints, and only for the seat to move.

    The bot sees `player_view(state)` (no draw seed) and its generator is seeded by the game
    and sequence, so the same position gets the same hint (greedy, random); a hint worked out
    once is kept, so it is the same at every level and asking again costs no search. A
    searched hint is answered `move_ms(level, think_ms, floor_ms)` after it started (a kept
    one at once: it tells nothing new); `paced(duration, think)` makes its pace (tests)."""
    state = cached.state
    key = (game_id, cached.seq, level)
    known = kept.peek(key)
    if known is not None and known["player"] == seat:
        HINTS.labels(level, "kept").inc()
        return dict(known)
    if not state.ruleset.hints:
        raise Forbidden(
            "hints_disabled", "this game's ruleset does not allow hints (ruleset.hints)"
        )
    if state.over:
        raise OutOfTurnError("game_over", "the game is over", "R7.1")
    if seat != state.current:
        raise OutOfTurnError(
            "not_your_turn", f"it is player {state.current}'s turn", "R2.2", current=state.current
        )
    pace = paced(move_ms(level, think_ms, floor_ms), think_ms)
    answer = search(game_id, cached, seat, level, pace.budget())
    answer["think_ms"] = pace.duration_ms  # what the request takes, not what the work took
    pace.wait()  # the hint's fixed duration, whatever its work took
    HINTS.labels(level, "searched").inc()
    kept.keep(key, answer)
    return dict(answer)


def search(game_id: str, cached: Cached, seat: int, level: str, budget: Budget) -> dict[str, Any]:
    """Ask bot `level` for its move on the seat's view of the position, within `budget` (one
    deadline for every view of a hand); `think_ms` of the answer is left to the caller."""
    state = cached.state
    tile = state.drawn
    seed = f"hint:{game_id}:{cached.seq}"
    if state.hands:  # R10.3: the bot weighs each tile of the seat's own hand
        tile, choice = choose_in_hand(level, hand_views(state), seed, budget)
    else:
        choice = choose(level, player_view(state), seed, budget)
    x, y, rotation, meeple = choice.action
    return {
        "game_id": game_id,
        "seq": cached.seq,
        "player": seat,
        "tile": tile,
        "level": level,
        "x": x,
        "y": y,
        "rotation": rotation,
        "meeple": None if meeple is None else meeple_to_dict(meeple),
        "value": round(choice.value, 2),
        "playouts": choice.playouts,
        "think_ms": 0,
    }
