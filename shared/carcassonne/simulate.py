"""Random legal games: each turn, one action drawn uniformly from all legal actions.

The random generator comes in as an argument, so the engine stays free of global state.
Used by `carcassonne simulate`, the benchmarks and the property tests.
"""

from __future__ import annotations

import random

from .events import (
    Event,
    GameEnded,
    GameStarted,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
    TileReturned,
)
from .game import actions, nothing_placeable
from .ruleset import Ruleset
from .state import OVER, GameState
from .tilesets import LAKE


def random_game(
    rng: random.Random,
    players: int = 2,
    ruleset: Ruleset | None = None,
    max_turns: int | None = None,
) -> tuple[GameState, list[Event]]:
    """Play one random game; returns the final state and its events.

    Tiles come from a bag shuffled by `rng`; every turn enumerates all legal
    (placement, meeple) actions and picks one uniformly. `max_turns` stops early.
    """
    ruleset = ruleset or Ruleset()
    state = GameState()
    events: list[Event] = []

    def emit(event: Event) -> None:
        state.apply(event)
        events.append(event)

    emit(GameStarted(ruleset, players))
    bag = [name for name, n in sorted(state.bag.items()) for _ in range(n)]
    rng.shuffle(bag)
    if ruleset.river:  # R9.1: the river tiles first, the lake last of them (`bag` pops its end)
        river = state.tiles.types
        bag = (
            [t for t in bag if not river[t].river]
            + [LAKE]
            + [t for t in bag if river[t].river and t != LAKE]
        )
    while bag and state.phase != OVER:
        if max_turns is not None and state.turn >= max_turns:
            break
        tile = bag.pop()
        emit(TileDrawn(tile))
        choices = actions(state)
        if not choices:
            # R10.4: back into the bag, anywhere; never a river tile (R9.1, as `decide` does)
            if ruleset.unplaceable == "return" and not state.tiles.types[tile].river:
                emit(TileReturned(state.current, tile))
                bag.insert(rng.randrange(len(bag) + 1), tile)
                if nothing_placeable(state):
                    emit(GameEnded("no placeable tile left"))  # as `decide` does
            else:
                emit(TileDiscarded(state.current, tile))
            continue
        x, y, rotation, meeple = choices[rng.randrange(len(choices))]
        emit(TilePlaced(state.current, tile, x, y, rotation, meeple))
    if state.phase != OVER:
        emit(GameEnded("last tile placed" if not bag else "stopped"))
    return state, events
