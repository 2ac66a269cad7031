"""Random legal games: each turn, one action drawn uniformly from all legal actions.

The random generator comes in as an argument, so the engine stays free of global state.
Used by `carcassonne simulate`, the benchmarks and the property tests.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .events import (
    Command,
    DiscardTile,
    DrawTile,
    EndGame,
    Event,
    GameEnded,
    GameStarted,
    PlayTurn,
    StartGame,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
    TileReturned,
)
from .game import (
    RECALL_ABBOT,
    action_events,
    actions,
    decide,
    hand_actions,
    is_unplaceable,
    nothing_placeable,
)
from .ruleset import Ruleset
from .state import DRAW, OVER, GameState
from .tilesets import LAKE


def bag_order(state: GameState, rng: random.Random) -> list[str]:
    """The tiles left in `state`'s bag in a shuffled draw order (drawn from the end): with the
    river (R9.1) its tiles come first and the lake last of them, as `game.drawable` says."""
    bag = [name for name, n in sorted(state.bag.items()) for _ in range(n)]
    rng.shuffle(bag)
    if state.ruleset.river:
        types = state.tiles.types
        river = [t for t in bag if types[t].river]
        if LAKE in river and len(river) > 1:
            river.remove(LAKE)
            river.insert(0, LAKE)
        bag = [t for t in bag if not types[t].river] + river
    return bag


def set_aside(
    state: GameState,
    tile: str,
    bag: list[str],
    rng: random.Random,
    emit: Callable[[Event], None],
) -> None:
    """A drawn tile that fits nowhere: discarded (R4.4), or back into `bag` anywhere under
    R10.4 — never a river tile (R9.1) — and the game ends if nothing left fits (as `decide`)."""
    if state.ruleset.unplaceable == "return" and not state.tiles.types[tile].river:
        emit(TileReturned(state.current, tile))
        bag.insert(rng.randrange(len(bag) + 1), tile)
        if nothing_placeable(state):
            emit(GameEnded("no placeable tile left"))
    else:
        emit(TileDiscarded(state.current, tile))


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
    if ruleset.hand > 1:
        return random_hand_game(rng, players, ruleset, max_turns)
    state = GameState()
    events: list[Event] = []

    def emit(event: Event) -> None:
        state.apply(event)
        events.append(event)

    emit(GameStarted(ruleset, players))
    bag = bag_order(state, rng)
    while bag and state.phase != OVER:
        if max_turns is not None and state.turn >= max_turns:
            break
        tile = bag.pop()
        emit(TileDrawn(tile))
        choices = actions(state)
        if not choices:
            set_aside(state, tile, bag, rng, emit)
            continue
        x, y, rotation, meeple = choices[rng.randrange(len(choices))]
        if meeple == RECALL_ABBOT:  # R9.2: the tile, then the abbot back (as `decide` does)
            for event in action_events(state, (x, y, rotation, meeple)):
                emit(event)
            continue
        emit(TilePlaced(state.current, tile, x, y, rotation, meeple))
    if state.phase != OVER:
        emit(GameEnded("last tile placed" if not bag else "stopped"))
    return state, events


def random_hand_game(
    rng: random.Random, players: int, ruleset: Ruleset, max_turns: int | None = None
) -> tuple[GameState, list[Event]]:
    """A random game with a hand (R10.3), every command through `decide`: draws refill the
    hand (each with a nonce from `rng`), a hand tile that fits nowhere is set aside (R4.4 or
    R10.4), and each turn picks uniformly among all (tile, placement, meeple) actions."""
    state = GameState()
    events: list[Event] = []

    def run(command: Command) -> None:
        for event in decide(state, command):
            state.apply(event)
            events.append(event)

    run(StartGame(ruleset, players))
    while state.phase != OVER:
        if max_turns is not None and state.turn >= max_turns:
            run(EndGame("stopped"))
            break
        if state.phase == DRAW:
            bag = [name for name, n in sorted(state.bag.items()) for _ in range(n)]
            nonce = f"{rng.getrandbits(64):016x}"
            run(DrawTile(bag[rng.randrange(len(bag))], nonce=nonce))
            continue
        hand = [held.tile for held in state.hands[state.current] if held.tile]
        dead = [tile for tile in hand if is_unplaceable(state, tile)]
        if dead:
            run(DiscardTile(state.current, dead[0]))
            continue
        tile, (x, y, rotation, meeple) = rng.choice(hand_actions(state))
        run(PlayTurn(state.current, x, y, rotation, meeple, tile))
    return state, events
