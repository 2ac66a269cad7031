"""Hints worked out in the bot worker (issue 32, finding 4): the move bot `level` would play
now for the seat to move, asked for by the command service (services/redis_store/
hint_store.py) and answered by it once this has written it.

The bot sees `player_view(state)` (no draw seed; a hand game: the seat's own hand, R10.3)
and its generator is seeded by the game and sequence, so the same position gets the same hint
(greedy, random). A hint is paced as a move is (services/common/pace.py): its search ends by
one deadline from the task's start, shared by a hand's views, and the hint is shown
`ms` after that start (`ready_ms`), whatever the hand, however soon the search ended: the
worker does not wait for it (its process is free at once), the command service answers 202
until then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from carcassonne.bots import Budget, choose, choose_in_hand, hand_views, player_view
from carcassonne.events import meeple_to_dict
from carcassonne.state import GameState
from eventstore.envelope import MOVES
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from services.common.draws import fold_opened
from services.common.pace import Paced


def work_out(
    store: EventStore,
    secrets: Callable[[str], dict[str, Any] | None],
    game_id: str,
    seq: int,
    level: str,
    ms: int,
    think_ms: int,
    clock: Callable[[], float] = time.perf_counter,
    wall: Callable[[], float] = time.time,
) -> tuple[dict[str, Any], int] | None:
    """The hint of the game at `seq` for the seat to move, lasting `ms` of which the search
    may take `think_ms`, and when it may be shown (Unix ms: `ms` after this call started, or
    when its work ended if that overran); None when the game is unknown, over or has moved on
    (nobody will ask for this position's hint any more)."""
    started, started_ms = clock(), int(wall() * 1000)
    record = secrets(game_id)
    stored = store.read(game_id, MOVES) if record is not None else []
    if not stored or stored[-1].seq != seq:
        return None
    state = fold_opened([to_engine(e) for e in stored], str(record["seed"]))  # type: ignore[index]
    if state.over:
        return None
    pace = Paced(ms, think_ms, clock, started=started)
    answer = search(game_id, seq, state, level, pace.budget())
    answer["think_ms"] = pace.duration_ms  # what the hint takes, not what the work took
    return answer, max(started_ms + ms, int(wall() * 1000))


def search(game_id: str, seq: int, state: GameState, level: str, budget: Budget) -> dict[str, Any]:
    """Ask bot `level` for its move on the seat's view of the position, within `budget` (one
    deadline for every view of a hand); `think_ms` of the answer is left to the caller."""
    tile = state.drawn
    seed = f"hint:{game_id}:{seq}"
    if state.hands:  # R10.3: the bot weighs each tile of the seat's own hand
        tile, choice = choose_in_hand(level, hand_views(state), seed, budget)
    else:
        choice = choose(level, player_view(state), seed, budget)
    x, y, rotation, meeple = choice.action
    return {
        "game_id": game_id,
        "seq": seq,
        "player": state.current,
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
