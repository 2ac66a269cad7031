"""Drawing tiles from a game's bag with its secret seed: the command service after each
command, and the scoring worker's turn timer after a timed-out turn (services never import
each other, so the one draw order lives here).

Every draw has its own index (`GameState.drawn_count`), so the tile of draw N is the same
whoever draws it and however often it is decided again. After an undo (docs/undo.md) the
draws are made under the game's undo count too (`GameState.undos`): the tiles drawn after an
undone placement went back in the bag, and the next draw is a fresh one over it, so the
tile an undo showed tells nobody what comes next.
"""

from __future__ import annotations

import hashlib
import hmac
import random

from carcassonne.events import DiscardTile, DrawTile, Event, HandDrawn
from carcassonne.game import decide, drawable, is_unplaceable
from carcassonne.hand import unseal
from carcassonne.state import DRAW, OVER, GameState


def draw_tile(seed: str, draws: int, bag: dict[str, int], undos: int = 0) -> str:
    """The tile for draw number `draws` after `undos` undos: uniform over the bag,
    reproducible from the seed."""
    rng = random.Random(f"{seed}:{draws}" + (f":u{undos}" if undos else ""))
    pool = sorted(bag.items())
    pick = rng.randrange(sum(n for _, n in pool))
    for name, count in pool:
        if pick < count:
            return name
        pick -= count
    raise AssertionError("unreachable: the pick lies inside the bag")


def draw_nonce(seed: str, draws: int, undos: int = 0) -> str:
    """R10.3: the secret salt of draw number `draws`'s commitment (after `undos` undos), from
    the game's seed (an HMAC, so that a revealed nonce tells nothing of the seed or of other
    draws)."""
    label = f"hand-nonce:{draws}" + (f":u{undos}" if undos else "")
    return hmac.new(seed.encode(), label.encode(), hashlib.sha256).hexdigest()[:32]


def draw_until_placeable(state: GameState, seed: str, now_ms: int | None = None) -> list[Event]:
    """Draw for the player to move; a tile that fits nowhere is discarded or returned (R4.4).

    `state` is changed in place. `now_ms` starts the drawn turn's clock (its deadline, with a
    turn limit): the engine has no clock of its own."""
    if state.hands:
        return refill_hand(state, seed)
    events: list[Event] = []
    while state.phase == DRAW and state.bag_size:
        # every draw has its own index; the river's tiles come first (R9.1, `drawable`)
        tile = draw_tile(seed, state.drawn_count, drawable(state), state.undos)
        events += _run(state, DrawTile(tile, now_ms))
        if is_unplaceable(state):
            events += _run(state, DiscardTile(state.current))
    return events


def _run(state: GameState, command: DrawTile | DiscardTile) -> list[Event]:
    events = decide(state, command)
    for event in events:
        state.apply(event)
    return events


def refill_hand(state: GameState, seed: str) -> list[Event]:
    """R10.3: the player to move draws back up to the hand's size (each draw committed with
    its nonce); then each hand tile that fits nowhere is set aside (R4.4 or R10.4) and the
    hand refilled again. `state` (which knows the hands) is changed in place; the events are
    the engine's own form: seal them (`carcassonne.hand.seal`) before they go in the log."""
    events: list[Event] = []
    while state.phase != OVER:
        if state.phase == DRAW:
            index = state.drawn_count
            tile = draw_tile(seed, index, drawable(state), state.undos)
            events += _run(state, DrawTile(tile, nonce=draw_nonce(seed, index, state.undos)))
            continue
        hand = state.hands[state.current]
        dead = next((h.tile for h in hand if h.tile and is_unplaceable(state, h.tile)), None)
        if dead is None:
            break
        events += _run(state, DiscardTile(state.current, dead))
    return events


def opened(state: GameState, event: Event, seed: str | None) -> Event:
    """`event` as the engine decided it: a sealed hand draw (R10.3, as the log stores it)
    opened again with its nonce from the seed, to be applied to `state` next (the draw's
    index is `state.drawn_count`). Whoever holds the seed knows the hands; nobody else. An
    imported game has no seed (None): its log, over, reveals every hand itself."""
    if seed and isinstance(event, HandDrawn) and event.tile is None:
        return unseal(event, draw_nonce(seed, state.drawn_count, state.undos), state.tiles.types)
    return event


def fold_opened(events: list[Event], seed: str) -> GameState:
    """The state of a game from its stored (sealed) events, its hands known (R10.3)."""
    state = GameState()
    for event in events:
        state.apply(opened(state, event, seed))
    return state
