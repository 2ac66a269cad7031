"""What a seat knows when it must move: the `PlayerView`, the only thing a bot is given.

The information boundary is this type. A player sees the board, the meeples on it, every
score and supply, the tile in hand and how many tiles of each type are still in the bag;
a player never knows the order in which the bag will be drawn (the service's secret seed,
the duel's shuffled list). `player_view` builds the view from a `GameState`, which holds
the bag as counts only, and nothing else reaches a policy: the order cannot leak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..board import Pos
from ..ruleset import Ruleset
from ..state import PLACE, GameState

# Every field of `GameState` is something all players see (the engine keeps the bag as
# counts; the draw order lives outside it: the service's seed, the duel's shuffled list).
# A view carries a private copy of the state for simulation; a new `GameState` field must be
# added here once someone has decided that a player may see it (a unit test holds the two
# lists equal).
PUBLIC_STATE = frozenset(
    {
        "abandoned",
        "abbots",  # R9.2: whose abbot is in the supply (its place on the board is public)
        "bag",
        "bag_size",
        "board",
        "current",
        "deadline_ms",
        "discarded",
        "drawn",
        "drawn_count",
        "extra_turn",
        "log",
        "meeples",
        "next_meeple",
        "out",
        "phase",
        "players",
        "refill_stopped",
        "river_end",
        "river_heading",
        "river_turn",
        "ruleset",
        "scores",
        "scores_before_final",
        "supply",
        "taken_over",  # which seats out a bot plays (SeatTakenOver is in the public log)
        "tiles",
        "timeouts",
        "turn",
        # Undo (docs/undo.md): the request, and the state right before the last placement —
        # a position every player saw, bag as counts: nothing of the draw order.
        "undo",
        "undo_point",
        "undo_requests",
        "undos",  # how many undos the log shows (the draws' generation, not their order)
        "undone_turn",
        # Clocks (docs/clocks.md): banks, absences and the turn's clock start are in the log.
        "absences",
        "away_until_ms",
        "banks_ms",
        "charge",
        "pauses_ms",
    }
)
# R10.3: a hand is its holder's alone. `player_view` never copies `hands`: the view's state is
# the base game's with the mover's chosen hand tile drawn, and every other hand tile (the
# mover's other tiles too) counted among the tiles not yet seen (`bag`).
HIDDEN_STATE = frozenset({"hands"})


@dataclass(frozen=True)
class PlayerView:
    """A position as the player to move sees it (compare views with `==`)."""

    ruleset: Ruleset
    players: int
    me: int  # the seat to move
    tile: str  # the tile to play (with a hand, R10.3: the one of `hand` this view is for)
    scores: tuple[int, ...]
    supply: tuple[int, ...]
    bag: tuple[tuple[str, int], ...]  # tiles left to draw, by type (sorted): counts, no order
    turn: int  # tiles placed after the start tile
    extra_turn: bool  # this turn was granted by R10.6 (its hole grants none)
    discarded: tuple[str, ...]
    placed: tuple[tuple[Pos, str, int], ...]  # (square, tile, rotation), sorted: the board
    # meeples: (player, square, feature, spot, abbot) — abbot: R9.2's figure, not a meeple
    standing: tuple[tuple[int, Pos, str, str, bool], ...]
    # The same position as the engine holds it (every field public: `PUBLIC_STATE`), for
    # simulation; derived from the fields above, so left out of `==`; never handed out:
    # `position()` copies it.
    state: GameState = field(compare=False, repr=False)
    hand: tuple[str, ...] = ()  # R10.3: the mover's own hand (empty without a hand)

    @property
    def tiles_left(self) -> int:
        """How many tiles are still to be drawn."""
        return sum(n for _, n in self.bag)

    def position(self) -> GameState:
        """A fresh engine state of this position, to simulate on (the caller owns it)."""
        return self.state.copy()


def hand_views(state: GameState) -> list[PlayerView]:
    """R10.3: one view per distinct tile of the mover's hand (a bot weighs each and plays the
    best `Choice`); each shows the mover's own hand and never another seat's."""
    if state.phase != PLACE or not state.hands:
        raise ValueError("hand views need a hand game's player to move")
    hand = [held.tile for held in state.hands[state.current] if held.tile is not None]
    return [player_view(state, tile) for tile in sorted(set(hand))]


def _as_drawn(state: GameState, tile: str) -> GameState:
    """A base-game copy of a hand game's state: `tile` drawn, every hand tile (the opponents',
    and the mover's others) back among the tiles not yet seen, so that the view knows no
    other seat's hand and a bot simulates as in the base game."""
    twin = state.copy()
    unseen = dict(twin.bag)
    for hand in state.hands:
        for held in hand:
            if held.tile is not None:
                unseen[held.tile] = unseen.get(held.tile, 0) + 1
    unseen[tile] -= 1
    twin.bag = {name: n for name, n in unseen.items() if n}
    twin.bag_size = sum(twin.bag.values())
    twin.hands = []
    twin.drawn = tile
    return twin


def player_view(state: GameState, tile: str | None = None) -> PlayerView:
    """The view of the player to move in a state with a tile drawn (phase `place`); with a
    hand (R10.3), the view for playing `tile` of it (`hand_views`)."""
    hand: tuple[str, ...] = ()
    if state.hands and state.phase == PLACE:
        hand = tuple(held.tile for held in state.hands[state.current] if held.tile is not None)
        if tile not in hand:
            raise ValueError(f"a hand view needs a tile of the hand {hand}")
        state = _as_drawn(state, tile)
    if state.phase != PLACE or state.drawn is None:
        raise ValueError("a player view needs a drawn tile to play")
    hidden = set(GameState.__slots__) - PUBLIC_STATE - HIDDEN_STATE
    if state.hands:  # only `_as_drawn`'s copy (no hands) may reach a view
        raise AssertionError("a view never carries the hands")
    if hidden:  # a new engine field nobody has classified: refuse rather than leak it
        raise AssertionError(f"GameState fields not known to be public: {sorted(hidden)}")
    return PlayerView(
        ruleset=state.ruleset,
        players=state.players,
        me=state.current,
        tile=state.drawn,
        scores=tuple(state.scores),
        supply=tuple(state.supply),
        bag=tuple(sorted(state.bag.items())),
        turn=state.turn,
        extra_turn=state.extra_turn,
        discarded=tuple(state.discarded),
        placed=tuple(
            sorted((pos, p.tile.name, p.rotation) for pos, p in state.board.tiles.items())
        ),
        standing=tuple(
            sorted(
                (m.player, m.pos, m.meeple.feature, m.meeple.spot, m.meeple.abbot)
                for m in state.meeples.values()
            )
        ),
        state=state.copy(),
        hand=hand,
    )
