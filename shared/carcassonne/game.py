"""The game as functions: `decide(state, command) -> events`, `evolve(state, event) -> state`.

`decide` validates a command against the rules and returns the events it causes, or raises
a `GameError` naming the rule broken; it never changes the state. `evolve` is pure: it
returns a new state. `fold` rebuilds a state from events (in place on a fresh state, which
gives the same result as reducing with `evolve`, without the copies).
"""

from __future__ import annotations

from collections.abc import Iterable

from .board import Pos
from .errors import IllegalMoveError, MalformedError, OutOfTurnError
from .events import (
    AbandonGame,
    AbbotRecalled,
    AnswerUndo,
    BankCharged,
    ClockPaused,
    ClockResumed,
    Command,
    DiscardTile,
    DrawTile,
    EndGame,
    Event,
    GameAbandoned,
    GameEnded,
    GameStarted,
    HandDrawn,
    HandsRevealed,
    PauseClock,
    PlayerResigned,
    PlayerTimedOut,
    PlayTurn,
    RecallAbbot,
    RequestUndo,
    Resign,
    ResumeClock,
    SeatTakenOver,
    StartGame,
    TakeoverRefused,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
    TileReturned,
    TimeOutTurn,
    TurnTimedOut,
)
from .geometry import DELTA, EDGES
from .hand import commit
from .pauses import Window, advanced, containing, ended_at, running_ms
from .ruleset import MAX_PLAYERS, MIN_PLAYERS
from .state import DRAW, NEW, OVER, PLACE, GameState, HandTile, river_turn
from .tiles import (
    CITY,
    FIELD,
    GARDEN,
    MONASTERY,
    ROAD,
    Meeple,
    Orientation,
    TileType,
)
from .tilesets import LAKE
from .undo import answer_undo, request_undo

Placement = tuple[int, int, int]  # x, y, rotation
Action = tuple[int, int, int, Meeple | None]
# The action "place the tile and, instead of a meeple, take the abbot back" (R9.2): its
# command is `RecallAbbot` (`command_for_action` turns any action into its command).
RECALL_ABBOT = Meeple("abbot", "recall")
# The kinds of segment a meeple (not the abbot) may take, with and without farmers (R5.2,
# R9.2: never a garden).
_MEEPLE_KINDS = {
    True: frozenset((ROAD, CITY, FIELD, MONASTERY)),
    False: frozenset((ROAD, CITY, MONASTERY)),
}


def evolve(state: GameState, event: Event) -> GameState:
    """The state after `event`; `state` itself is left as it was."""
    twin = state.copy()
    twin.apply(event)
    return twin


def fold(events: Iterable[Event], upto: int | None = None) -> GameState:
    """The state after the first `upto` events (all of them by default)."""
    state = GameState()
    for index, event in enumerate(events):
        if upto is not None and index >= upto:
            break
        state.apply(event)
    return state


# ------------------------------------------------------------------------- legal moves


def placements(state: GameState, tile: str | None = None) -> list[Placement]:
    """Every legal (x, y, rotation) for `tile` (default: the drawn tile), R4.1-R4.3, R10.5.

    Only the open frontier is looked at; rotation sets are memoised per edge pattern.
    """
    name = tile if tile is not None else state.drawn
    if name is None:
        return []
    ttype = state.tiles.types[name]
    if ttype.river:
        return river_placements(state, ttype)
    out: list[Placement] = []
    for (x, y), key in state.board.frontier.items():
        for rotation in ttype.rotations_for(key):
            out.append((x, y, rotation))
    return out


def is_unplaceable(state: GameState, tile: str | None = None) -> bool:
    """Whether the tile fits nowhere on the board (R4.4)."""
    name = tile if tile is not None else state.drawn
    if name is None:
        return False
    ttype = state.tiles.types[name]
    if ttype.river:
        return not river_placements(state, ttype)
    return not any(ttype.rotations_for(key) for key in state.board.frontier.values())


def nothing_placeable(state: GameState) -> bool:
    """Whether no tile left in the bag fits anywhere (R10.4 Decision: the game then ends)."""
    return all(is_unplaceable(state, name) for name in state.bag)


def river_placements(state: GameState, ttype: TileType) -> list[Placement]:
    """R9.1: a river tile goes only where the river ends, continuing it: edges match (R4.2),
    a curve does not turn the way the tile just before it turned (no immediate U-turn; after
    a straight either way is fine), and its own river end leads to an empty square on the
    table. Empty when nothing continues the river: the tile fits nowhere (R4.4)."""
    end = state.river_end
    if end is None:
        return []
    key = state.board.frontier.get(end)
    if key is None:
        return []
    return [
        (end[0], end[1], rotation)
        for rotation in ttype.rotations_for(key)
        if _river_fault(state, ttype, end, rotation) is None
    ]


def _river_fault(state: GameState, ttype: TileType, pos: Pos, rotation: int) -> str | None:
    """Why a river tile may not lie at `pos` turned `rotation` (edges already match), or None."""
    entry = state.river_heading ^ 2
    outs = [d for d in ttype.river_edges(rotation) if d != entry]
    if not outs:
        return None  # the lake ends the river
    out = outs[0]
    turn = river_turn(state.river_heading, out)
    if turn and turn == state.river_turn:
        return "river_u_turn"
    dx, dy = DELTA[out]
    ahead = (pos[0] + dx, pos[1] + dy)
    if ahead in state.board.tiles or not state.board.in_bounds(ahead):
        return "river_blocked"
    return None


def drawable(state: GameState) -> dict[str, int]:
    """The tiles that may be drawn now, with their counts: the whole bag, except that with
    the river (R9.1) its tiles come first and the lake last of them."""
    if not state.ruleset.river:
        return state.bag
    types = state.tiles.types
    river = {name: n for name, n in state.bag.items() if types[name].river}
    if not river:
        return state.bag
    if len(river) > 1:
        river.pop(LAKE, None)
    return river


def meeple_spots(
    state: GameState, x: int, y: int, rotation: int, tile: str | None = None
) -> list[Meeple]:
    """Legal meeple spots on a tile placed at (x, y, rotation) by the player to move (R5)."""
    name = tile if tile is not None else state.drawn
    assert name is not None
    orient = state.tiles.types[name].orientations[rotation]
    spots = _abbot_spots(state, orient) if state.ruleset.abbot else []
    if state.supply[state.current] == 0:  # R5.5
        return spots
    board = state.board
    occupied = board.occupied_segments((x, y), orient, board.occupied_mask((x, y)))
    return _free_segments(orient, occupied, state.ruleset.farmers) + spots


def _free_segments(orient: Orientation, occupied: int, farmers: bool) -> list[Meeple]:
    """Spots of segments that join no occupied feature (R5.3); fields only with farmers,
    gardens never (only the abbot, R9.2)."""
    kinds = _MEEPLE_KINDS[farmers]
    return [
        seg.meeple for seg in orient.segments if not (seg.mask & occupied) and seg.kind in kinds
    ]


def _abbot_spots(state: GameState, orient: Orientation) -> list[Meeple]:
    """R9.2: the abbot, if in the supply, may go on the tile's monastery or garden."""
    if orient.surrounded < 0 or not state.abbots[state.current]:
        return []
    kind = orient.segments[orient.surrounded].kind
    return [Meeple(kind, kind, True)]


def _recall_fault(state: GameState, x: int, y: int) -> str | None:
    """Why the player to move may not take the abbot back after placing on (x, y), or None."""
    abbot = _abbot_square(state)
    if abbot is None:
        return "abbot_not_placed"
    return "abbot_feature_completed" if _completes(abbot, x, y) else None


def _abbot_square(state: GameState) -> tuple[Pos, bool] | None:
    """Where the abbot of the player to move stands, and whether its monastery or garden
    lacks just one neighbour (None: the abbot is in the supply)."""
    meeple_id = state.abbot_of(state.current)
    if meeple_id is None:
        return None
    pos = state.meeples[meeple_id].pos
    return pos, state.board.neighbours(pos) == 7


def _completes(abbot: tuple[Pos, bool], x: int, y: int) -> bool:
    """Decision (R9.2): a tile that completes the abbot's own monastery or garden scores it
    (9, R6.3) and sends the abbot home anyway, so it cannot also take the abbot back."""
    (ax, ay), one_missing = abbot
    return one_missing and max(abs(ax - x), abs(ay - y)) == 1


def action_events(state: GameState, action: Action) -> list[Event]:
    """The events of `action` (one of `actions(state)`) for the player to move, unchecked:
    for simulations that trust the action list. Taking the abbot back (R9.2) is the tile
    placed, then `AbbotRecalled`."""
    assert state.drawn is not None
    x, y, rotation, meeple = action
    if meeple != RECALL_ABBOT:
        return [TilePlaced(state.current, state.drawn, x, y, rotation, meeple)]
    abbot = state.abbot_of(state.current)
    assert abbot is not None
    ax, ay = state.meeples[abbot].pos
    return [
        TilePlaced(state.current, state.drawn, x, y, rotation),
        AbbotRecalled(state.current, ax, ay),
    ]


def command_for_action(state: GameState, action: Action) -> PlayTurn | RecallAbbot:
    """The command that plays `action` (one of `actions(state)`) for the player to move."""
    x, y, rotation, meeple = action
    if meeple == RECALL_ABBOT:
        return RecallAbbot(state.current, x, y, rotation)
    return PlayTurn(state.current, x, y, rotation, meeple)


def hand_actions(state: GameState) -> list[tuple[str, Action]]:
    """R10.3: every legal (tile, action) of the player to move: the choice of hand tile is
    part of the turn. Without a hand, the drawn tile's actions."""
    if not state.hands:
        name = state.drawn
        return [] if name is None else [(name, action) for action in actions(state)]
    if state.phase != PLACE:
        return []
    out: list[tuple[str, Action]] = []
    for name in sorted({held.tile for held in state.hands[state.current] if held.tile}):
        out += [(name, action) for action in actions(state, name)]
    return out


def actions(state: GameState, tile: str | None = None) -> list[Action]:
    """Every legal (x, y, rotation, meeple-or-None) for `tile` (default: the drawn tile): a
    whole turn's choices."""
    name = tile if tile is not None else state.drawn
    if name is None:
        return []
    ttype = state.tiles.types[name]
    board = state.board
    has_meeple = state.supply[state.current] > 0
    farmers = state.ruleset.farmers
    out: list[Action] = []
    if state.ruleset.abbot:
        return _abbot_actions(state, ttype)
    if ttype.river:  # R9.1: only the river's end, and only the rotations that continue it
        for x, y, rotation in river_placements(state, ttype):
            out.append((x, y, rotation, None))
            if has_meeple:
                orient = ttype.orientations[rotation]
                occupied = board.occupied_segments((x, y), orient, board.occupied_mask((x, y)))
                for meeple in _free_segments(orient, occupied, farmers):
                    out.append((x, y, rotation, meeple))
        return out
    fits = ttype._fits
    for (x, y), key in board.frontier.items():
        hit = fits.get(key)  # the memo of `rotations_for`, read inline: this is hot
        rotations = hit if hit is not None else ttype.rotations_for(key)
        if not rotations:
            continue
        occupied = board.occupied_mask((x, y)) if has_meeple else 0
        for rotation in rotations:
            out.append((x, y, rotation, None))
            if has_meeple:
                orient = ttype.orientations[rotation]
                taken = board.occupied_segments((x, y), orient, occupied)  # R5.3
                for meeple in _free_segments(orient, taken, farmers):
                    out.append((x, y, rotation, meeple))
    return out


def _abbot_actions(state: GameState, ttype: TileType) -> list[Action]:
    """`actions` in a game with the abbot (R9.2): the meeple choices, the abbot on the tile's
    monastery or garden, or taking the abbot back instead of placing a figure."""
    board = state.board
    has_meeple = state.supply[state.current] > 0
    farmers = state.ruleset.farmers
    abbot = _abbot_square(state)
    in_supply = state.abbots[state.current]
    out: list[Action] = []
    if ttype.river:
        squares: dict[Pos, str] = {}
        for x, y, rotation in river_placements(state, ttype):
            squares[(x, y)] = squares.get((x, y), "") + str(rotation)
        frontier = squares
    else:
        frontier = board.frontier
    orientations = ttype.orientations
    fits = ttype._fits
    # The abbot's spot per rotation (R9.2), None where the tile has no monastery or garden.
    abbot_spot = [_abbot_meeple(o) if in_supply else None for o in orientations]
    for (x, y), key in frontier.items():
        if ttype.river:
            rotations: tuple[int, ...] = tuple(int(r) for r in key)
        else:
            hit = fits.get(key)  # the memo of `rotations_for`, read inline: this is hot
            rotations = hit if hit is not None else ttype.rotations_for(key)
        if not rotations:
            continue
        occupied = board.occupied_mask((x, y)) if has_meeple else 0
        recall = abbot is not None and not _completes(abbot, x, y)
        for rotation in rotations:
            out.append((x, y, rotation, None))
            if has_meeple:
                orient = orientations[rotation]
                taken = board.occupied_segments((x, y), orient, occupied)  # R5.3
                for meeple in _free_segments(orient, taken, farmers):
                    out.append((x, y, rotation, meeple))
            spot = abbot_spot[rotation]
            if spot is not None:
                out.append((x, y, rotation, spot))
            if recall:
                out.append((x, y, rotation, RECALL_ABBOT))
    return out


def _abbot_meeple(orient: Orientation) -> Meeple | None:
    if orient.surrounded < 0:
        return None
    kind = orient.segments[orient.surrounded].kind
    return Meeple(kind, kind, True)


# ------------------------------------------------------------------------------ decide


def decide(state: GameState, command: Command) -> list[Event]:
    """The events `command` causes, or a `GameError` naming the broken rule."""
    match command:
        case StartGame():
            return _start(state, command)
        case DrawTile():
            return _draw(state, command)
        case PlayTurn():
            return _play(state, command)
        case RecallAbbot():
            return _recall(state, command)
        case DiscardTile():
            return _discard(state, command)
        case EndGame():
            return _end(state, command)
        case TimeOutTurn():
            return _time_out(state, command)
        case Resign():
            return _resign(state, command)
        case AbandonGame():
            return _abandon(state, command)
        case RequestUndo():
            return request_undo(state, command)
        case AnswerUndo():
            return answer_undo(state, command)
        case PauseClock():
            return _pause(state, command)
        case ResumeClock():
            return _resume(state, command)
    raise MalformedError("unknown_command", f"unknown command {command!r}")


def _start(state: GameState, cmd: StartGame) -> list[Event]:
    if state.phase != NEW:
        raise OutOfTurnError("game_started", "the game has already started", "R2")
    if type(cmd.players) is not int or not MIN_PLAYERS <= cmd.players <= MAX_PLAYERS:
        raise MalformedError("bad_players", "a game has 2 to 6 players", "R1.3")
    return [GameStarted(cmd.ruleset, cmd.players)]


def _expect(state: GameState, phase: str) -> None:
    if state.phase == OVER:
        raise OutOfTurnError("game_over", "the game is over", "R7.1")
    if state.phase == NEW:
        raise OutOfTurnError("game_not_started", "the game has not started", "R2")
    if state.phase != phase:
        if phase == PLACE:
            raise OutOfTurnError("no_tile_drawn", "no tile has been drawn", "R3")
        raise OutOfTurnError("tile_already_drawn", "a tile is drawn and must be played", "R3")


def _expect_player(state: GameState, player: object) -> None:
    if type(player) is not int or not 0 <= player < state.players:
        raise MalformedError("bad_player", f"player must be 0-{state.players - 1}")
    if player != state.current:
        raise OutOfTurnError(
            "not_your_turn",
            f"it is player {state.current}'s turn, not player {player}'s: wait for your turn",
            "R2.2",
            current=state.current,
        )


def _draw(state: GameState, cmd: DrawTile) -> list[Event]:
    _expect(state, DRAW)
    if not isinstance(cmd.tile, str) or cmd.tile not in state.tiles.types:
        raise MalformedError(
            "unknown_tile", f"no tile {cmd.tile!r} in the {state.tiles.name} set", "R1"
        )
    if not state.bag.get(cmd.tile):
        raise IllegalMoveError(
            "tile_not_in_bag", f"no {cmd.tile} tile is left in the bag", "R1.1", tile=cmd.tile
        )
    if state.ruleset.river and cmd.tile not in drawable(state):
        if cmd.tile == LAKE:
            raise IllegalMoveError(
                "lake_last", "the lake is drawn after every other river tile", "R9.1"
            )
        raise IllegalMoveError(
            "river_first", "the river tiles are drawn before any other tile", "R9.1"
        )
    if state.hands:
        if not isinstance(cmd.nonce, str) or not cmd.nonce:
            raise MalformedError("bad_nonce", "a hand's draw needs a nonce (a string)", "R10.3")
        return [HandDrawn(state.current, commit(cmd.tile, cmd.nonce), cmd.tile, cmd.nonce)]
    if cmd.now_ms is None:  # no clock (a caller without one): no deadline
        return [TileDrawn(cmd.tile)]
    return _clocked_draw(state, cmd.tile, cmd.now_ms)


def _clocked_draw(state: GameState, tile: str, now_ms: int) -> list[Event]:
    """The draw at `now_ms` with its deadline (docs/lifecycle.md, docs/clocks.md): a turn
    limit's `turn_seconds`, or the mover's Fischer bank, counted from the draw on a clock
    that stands still in the mover's absences (running, or declared to come). With a bank,
    the placement just made is charged first: the placer keeps what was left of their bank
    at `now_ms` (its clock's time to the deadline), plus the increment."""
    events: list[Event] = []
    banks = list(state.banks_ms)
    if banks and state.charge is not None:  # a placement decided without a clock (BankCharged)
        player, deadline = state.charge
        banks[player] = _bank_after(state, player, deadline, now_ms)
        events.append(BankCharged(player, banks[player]))
    allotted = _allotment(state, banks)
    if allotted is None:
        events.append(TileDrawn(tile))
    else:
        windows = state.pauses_ms[state.current]
        events.append(TileDrawn(tile, advanced(now_ms, allotted, windows)))
    return events


def _bank_after(state: GameState, player: int, deadline: int, now_ms: int) -> int:
    """`player`'s Fischer bank after a move at `now_ms` in a turn due at `deadline`: what was
    left of it then (its clock's time to the deadline, skipping their absences; never below
    0), plus the increment (docs/clocks.md)."""
    left = min(state.banks_ms[player], running_ms(now_ms, deadline, state.pauses_ms[player]))
    return left + state.ruleset.increment_seconds * 1000


def _placement_bank(state: GameState, now_ms: int | None, ends: bool) -> int | None:
    """The bank a placement by the player to move carries (`TilePlaced.bank_ms`): charged at
    `now_ms`, the time the move is made. None without a bank or a clock (the next clocked
    draw charges it, as `BankCharged`), and for the placement that `ends` the game: as when
    the draw charged every bank, the last move is not charged (no turn follows it)."""
    deadline = state.deadline_ms
    if now_ms is None or ends or not state.banks_ms or deadline is None:
        return None
    return _bank_after(state, state.current, deadline, now_ms)


def _allotment(state: GameState, banks: list[int]) -> int | None:
    """The clock (ms) a turn of the seat to move starts with: its bank, or the turn limit
    (None: no clock)."""
    if banks:
        return banks[state.current]
    seconds = state.ruleset.turn_seconds
    return None if seconds is None else seconds * 1000


def _game_end_after(state: GameState, bag_size: int) -> list[Event]:
    return [GameEnded("last tile placed")] if bag_size == 0 else []  # R7.1


def _reveal(state: GameState) -> list[Event]:
    """R10.3: the game is ending: open the tiles still in hands (nothing without a hand)."""
    if not state.hands:
        return []
    return [HandsRevealed(_opened(state.hands))]


def _from_hand(state: GameState, player: int, tile: object) -> HandTile:
    """R10.3: the hand tile a turn names (its `tile` field)."""
    if tile is None:
        raise MalformedError(
            "tile_required", "with a hand, a turn names the tile it plays", "R10.3"
        )
    for held in state.hands[player]:
        if held.tile == tile:
            return held
    raise IllegalMoveError(
        "tile_not_in_hand", f"you hold no {tile} tile", "R10.3", hand=hand_of(state, player)
    )


def hand_of(state: GameState, player: int) -> list[str]:
    """`player`'s hand as tile names, in the order drawn (R10.3; names known to this state)."""
    return [held.tile for held in state.hands[player] if held.tile is not None]


def _checked_tile(state: GameState, cmd: PlayTurn | RecallAbbot) -> TileType:
    """The drawn tile, once the turn's player, coordinates and placement are checked."""
    _expect(state, PLACE)
    _expect_player(state, cmd.player)
    assert state.drawn is not None
    _check_coordinates(cmd)
    ttype = state.tiles.types[state.drawn]
    _check_placement(state, ttype, cmd.x, cmd.y, cmd.rotation)
    return ttype


def _recall(state: GameState, cmd: RecallAbbot) -> list[Event]:
    """R9.2: the tile is placed, then the abbot comes back instead of a meeple going out."""
    if not state.ruleset.abbot:
        raise IllegalMoveError("abbot_disabled", "this game is played without the abbot", "R9.2")
    _checked_tile(state, cmd)
    assert state.drawn is not None
    fault = _recall_fault(state, cmd.x, cmd.y)
    if fault == "abbot_not_placed":
        raise IllegalMoveError(fault, "your abbot is not on the board", "R9.2")
    if fault == "abbot_feature_completed":
        raise IllegalMoveError(
            fault, "this tile completes the abbot's feature: it scores 9 and comes home", "R9.2"
        )
    meeple_id = state.abbot_of(cmd.player)
    assert meeple_id is not None
    ax, ay = state.meeples[meeple_id].pos
    ended = _game_end_after(state, state.bag_size)
    bank = _placement_bank(state, cmd.now_ms, bool(ended))
    placed = TilePlaced(cmd.player, state.drawn, cmd.x, cmd.y, cmd.rotation, bank_ms=bank)
    return [placed, AbbotRecalled(cmd.player, ax, ay), *ended]


def _play(state: GameState, cmd: PlayTurn) -> list[Event]:
    if state.hands:
        _expect(state, PLACE)
        _expect_player(state, cmd.player)
        return _play_from_hand(state, cmd)
    ttype = _checked_tile(state, cmd)
    assert state.drawn is not None
    if cmd.tile is not None and cmd.tile != state.drawn:
        raise IllegalMoveError("tile_not_drawn", f"the drawn tile is {state.drawn}", "R3")
    meeple = cmd.meeple
    if meeple is not None:
        meeple = _check_meeple(state, ttype, cmd)
    ended = _game_end_after(state, state.bag_size)
    bank = _placement_bank(state, cmd.now_ms, bool(ended))
    placed = TilePlaced(cmd.player, state.drawn, cmd.x, cmd.y, cmd.rotation, meeple, None, bank)
    return [placed, *ended]


def _play_from_hand(state: GameState, cmd: PlayTurn) -> list[Event]:
    """R10.3: play one tile of the hand (the turn names it); refilling is the next draws."""
    held = _from_hand(state, cmd.player, cmd.tile)
    assert held.tile is not None
    _check_coordinates(cmd)
    ttype = state.tiles.types[held.tile]
    _check_placement(state, ttype, cmd.x, cmd.y, cmd.rotation)
    meeple = cmd.meeple
    if meeple is not None:
        meeple = _check_meeple(state, ttype, cmd)
    placed = TilePlaced(cmd.player, held.tile, cmd.x, cmd.y, cmd.rotation, meeple, held.nonce)
    return [placed, *_hand_end_after(state, cmd.player, held)]


def _hand_end_after(state: GameState, player: int, held: HandTile) -> list[Event]:
    """R10.3: the game ends when the bag and the hands of the seats that play (still in, or
    taken over by a bot) are empty, `held` taken out (a seat out of the game keeps its hand:
    revealed then)."""
    hands = [[h for h in hand if h is not held] for hand in state.hands]
    if state.bag_size or any(hands[p] for p in state.playing):
        return []
    return [HandsRevealed(_opened(hands)), GameEnded("last tile placed")]


def _opened(hands: list[list[HandTile]]) -> tuple[tuple[tuple[str, str], ...], ...]:
    """The hands as `HandsRevealed` opens them: (tile, nonce) per tile, per seat."""
    return tuple(tuple((h.tile or "", h.nonce or "") for h in hand) for hand in hands)


def _check_coordinates(cmd: PlayTurn | RecallAbbot) -> None:
    for name in ("x", "y"):
        value = getattr(cmd, name)
        if type(value) is not int or abs(value) > 10_000:
            raise MalformedError("bad_coordinate", f"{name} must be an integer within ±10000")
    if type(cmd.rotation) is not int or not 0 <= cmd.rotation <= 3:
        raise MalformedError("bad_rotation", "rotation must be 0, 1, 2 or 3", "R4.3")


def _check_placement(state: GameState, ttype: TileType, x: int, y: int, rotation: int) -> None:
    board = state.board
    pos = (x, y)
    if pos in board.tiles:
        raise IllegalMoveError("square_taken", f"a tile already lies on {x},{y}", "R4.1")
    if not board.in_bounds(pos):
        raise IllegalMoveError("out_of_bounds", f"{x},{y} is off the bounded table", "R10.5")
    if ttype.river and pos != state.river_end:
        raise IllegalMoveError(
            "river_not_continued", "a river tile must continue the river's open end", "R9.1"
        )
    key = board.frontier.get(pos)
    if key is None:
        raise IllegalMoveError("not_adjacent", f"{x},{y} shares no edge with a placed tile", "R4.1")
    edges = ttype.orientations[rotation].edges
    for d, (need, have) in enumerate(zip(key, edges, strict=True)):
        if need not in (".", have):
            dx, dy = DELTA[d]
            raise IllegalMoveError(
                "edge_mismatch",
                f"the {EDGES[d]} edge ({have}) does not match the tile at "
                f"{x + dx},{y + dy} ({need})",
                "R4.2",
                edge=EDGES[d],
            )
    fault = _river_fault(state, ttype, pos, rotation) if ttype.river else None
    if fault == "river_u_turn":
        raise IllegalMoveError(
            fault,
            "the river may not turn the same way on two river tiles in a row (no U-turn)",
            "R9.1",
        )
    if fault == "river_blocked":
        raise IllegalMoveError(fault, "the river would flow into a tile or off the table", "R9.1")


def _check_meeple(state: GameState, ttype: TileType, cmd: PlayTurn) -> Meeple:
    meeple = cmd.meeple
    if not isinstance(meeple, Meeple):
        raise MalformedError("bad_meeple", "meeple must be a Meeple", "R5")
    if meeple.feature == FIELD and not state.ruleset.farmers:
        raise IllegalMoveError("farmers_disabled", "this game is played without farmers", "R5.2")
    orient = ttype.orientations[cmd.rotation]
    if meeple.abbot:
        return _check_abbot(state, orient, meeple)
    if meeple.feature == GARDEN:
        raise IllegalMoveError("garden_abbot_only", "only the abbot stands in a garden", "R9.2")
    if state.supply[cmd.player] == 0:
        raise IllegalMoveError("no_meeple_left", "you have no meeple in your supply", "R5.5")
    seg_index = orient.spots.get(meeple.spot)
    if seg_index is None or orient.segments[seg_index].kind != meeple.feature:
        spots = {s.meeple.spot: s.kind for s in orient.segments}
        listed = ", ".join(f"{spot} ({kind})" for spot, kind in spots.items())
        raise IllegalMoveError(
            "no_such_feature",
            f"the tile as placed has no {meeple.feature} at spot {meeple.spot}; "
            f"its spots are {listed}",
            "R5.1",
            spots=list(spots),
            features=spots,
        )
    seg = orient.segments[seg_index]
    board, pos = state.board, (cmd.x, cmd.y)
    if seg.mask & board.occupied_segments(pos, orient, board.occupied_mask(pos)):
        raise IllegalMoveError(
            "feature_occupied",
            f"the {meeple.feature} at {meeple.spot} joins a feature that already holds a meeple",
            "R5.3",
        )
    return meeple


def _check_abbot(state: GameState, orient: Orientation, meeple: Meeple) -> Meeple:
    """R9.2: the abbot goes only on the monastery or garden of the tile just placed."""
    if not state.ruleset.abbot:
        raise IllegalMoveError("abbot_disabled", "this game is played without the abbot", "R9.2")
    if not state.abbots[state.current]:
        raise IllegalMoveError("abbot_in_play", "your abbot is already on the board", "R9.2")
    if (
        orient.surrounded < 0
        or meeple.feature != orient.segments[orient.surrounded].kind  # a garden is no monastery
        or orient.spots.get(meeple.spot) != orient.surrounded
    ):
        raise IllegalMoveError(
            "abbot_spot",
            "the abbot goes only on the monastery or garden of the tile just placed",
            "R9.2",
        )
    return Meeple(meeple.feature, meeple.feature, True)


def _discard(state: GameState, cmd: DiscardTile) -> list[Event]:
    _expect(state, PLACE)
    _expect_player(state, cmd.player)
    if state.hands:
        return _discard_from_hand(state, cmd)
    assert state.drawn is not None
    if not is_unplaceable(state):
        raise IllegalMoveError("tile_fits", f"the {state.drawn} tile fits on the board", "R4.4")
    river = state.tiles.types[state.drawn].river
    # R9.1 decision: an unplaceable river tile leaves the game even under R10.4: drawn again
    # it would still fit nowhere, and the river tiles come before all others.
    if state.ruleset.unplaceable == "return" and not river:  # R10.4
        returned: list[Event] = [TileReturned(cmd.player, state.drawn)]
        if nothing_placeable(state):  # the drawn tile itself was just found unplaceable
            returned.append(GameEnded("no placeable tile left"))
        return returned
    return [TileDiscarded(cmd.player, state.drawn), *_game_end_after(state, state.bag_size)]


def _discard_from_hand(state: GameState, cmd: DiscardTile) -> list[Event]:
    """R10.3 with R4.4/R10.4: a hand tile that fits nowhere leaves the hand: discarded (shown
    to all, with its nonce) or back into the bag. Then the player refills (discard) or, under
    R10.4 while they still hold a tile, stops drawing for this turn."""
    held = _from_hand(state, cmd.player, cmd.tile)
    assert held.tile is not None
    if not is_unplaceable(state, held.tile):
        raise IllegalMoveError("tile_fits", f"the {held.tile} tile fits on the board", "R4.4")
    if state.ruleset.unplaceable == "return":  # R10.4
        returned: list[Event] = [TileReturned(cmd.player, held.tile, held.nonce)]
        rest = [h for h in state.hands[cmd.player] if h is not held]
        if not rest and nothing_placeable(state):
            hands = [rest if p == cmd.player else h for p, h in enumerate(state.hands)]
            returned += [HandsRevealed(_opened(hands)), GameEnded("no placeable tile left")]
        return returned
    discarded = TileDiscarded(cmd.player, held.tile, held.nonce)
    return [discarded, *_hand_end_after(state, cmd.player, held)]


def _end(state: GameState, cmd: EndGame) -> list[Event]:
    if state.hands and state.phase == PLACE:  # R10.3: a record may end with tiles in hands
        return [*_reveal(state), GameEnded(cmd.reason)]
    _expect(state, DRAW)
    return [*_reveal(state), GameEnded(cmd.reason)]


# --------------------------------------------------------------------------- lifecycle
#
# Decisions (docs/lifecycle.md): a timed-out turn is skipped, its tile goes back into the
# bag and the next player still in draws; after `max_timeouts` timed-out turns, or on
# resigning, a seat is out: skipped from then on, its meeples stay on the board and score
# for it. With fewer than two players still in, the game ends with final scoring (R7).
#
# With the ruleset's `on_leave: "bot:<level>"` (docs/takeover.md) the seat going out is taken
# over instead (`SeatTakenOver`, in the same append): a bot plays its turns from its next one,
# so the others' game goes on. The game then ends early only when nobody is left in: the
# last seat still in going out ends it (a game of bots alone is nobody's game).


def _too_few_left(state: GameState, leaving: int, takeover: bool = True) -> list[Event]:
    """What follows `leaving` going out: `SeatTakenOver` under `on_leave: "bot:<level>"` while
    another seat is still in; else `GameEnded` if fewer than two players are left in. A
    takeover the caller may not pay for (`takeover` False) is logged as `TakeoverRefused` and
    the seat is skipped as under `skip`."""
    left = [p for p in state.still_in if p != leaving]
    level = state.ruleset.takeover
    refused: list[Event] = []
    if level is not None and left:
        if takeover:
            return [SeatTakenOver(leaving, level)]
        refused = [TakeoverRefused(leaving, level)]
    ended = [*_reveal(state), GameEnded("fewer than two players left")] if len(left) < 2 else []
    return refused + ended


def _time_out(state: GameState, cmd: TimeOutTurn) -> list[Event]:
    _expect(state, PLACE)
    _expect_player(state, cmd.player)
    assert state.drawn is not None
    deadline = state.deadline_ms
    if deadline is None or type(cmd.now_ms) is not int or cmd.now_ms < deadline:
        raise OutOfTurnError(
            "turn_not_expired",
            "this turn has no deadline" if deadline is None else "the turn's deadline is ahead",
            None,
            deadline_ms=deadline,
        )
    events: list[Event] = [TurnTimedOut(cmd.player, state.drawn)]
    timeouts = state.timeouts[cmd.player] + 1
    if timeouts >= state.ruleset.max_timeouts and state.out[cmd.player] is None:
        # (a seat taken over by a bot is out already: its bot's timeouts only skip turns)
        events.append(PlayerTimedOut(cmd.player, timeouts))
        events += _too_few_left(state, cmd.player, cmd.takeover)
    return events


def _pause(state: GameState, cmd: PauseClock) -> list[Event]:
    """A seat away from `from_ms` until `until_ms` (a vacation, docs/clocks.md; it may start
    later): its clock stands still then. A turn of its own already running keeps its clock:
    its deadline moves by the part of the absence the clock would have run through. A
    vacation paused already: nothing; one whose end the log has already (it reached this
    game first): paused as that end leaves it, nothing if it was called off."""
    _seat_in_game(state, cmd.player, f"player {cmd.player} is out of the game")
    start = cmd.now_ms if cmd.from_ms is None else cmd.from_ms
    if not (
        type(cmd.now_ms) is int and type(start) is int and type(cmd.until_ms) is int
        and cmd.until_ms > start and (cmd.vacation is None or type(cmd.vacation) is str)
    ):  # fmt: skip
        raise MalformedError("bad_vacation", "a pause ends after it begins")
    before = state.absences[cmd.player]
    window = (start, cmd.until_ms)
    if cmd.vacation is not None:
        if before.window_of(cmd.vacation) is not None:
            return []
        back = before.back_at(cmd.vacation)
        if back is not None:
            kept = ended_at(window, back)
            if not kept:
                return []
            window = kept[0]
    windows = before.paused(cmd.vacation, window).windows()
    # A pause that reaches the service after its start (a retry) counts from its start.
    deadline = _moved(state, cmd.player, min(cmd.now_ms, start), windows)
    return [ClockPaused(cmd.player, *window, deadline, cmd.vacation)]


def _resume(state: GameState, cmd: ResumeClock) -> list[Event]:
    """A seat back at `now_ms` from an absence declared to last longer (a vacation ended
    early, docs/clocks.md), or, with `from_ms` later than now, an absence called off before
    it starts: the absence ends then; a turn of its own running gets the deadline its clock
    gives without the rest of it. Without `vacation`, a seat not away then: nothing. With
    it, a vacation ended already, or paused and over by then: nothing; one not paused in
    this game yet: its end is logged all the same, for its pause to come (an end and a pause
    sent at once may reach a game in either order)."""
    _seat_in_game(state, cmd.player, f"player {cmd.player} is out of the game")
    if (
        type(cmd.now_ms) is not int or not (cmd.from_ms is None or type(cmd.from_ms) is int)
        or not (cmd.vacation is None or type(cmd.vacation) is str)
    ):  # fmt: skip
        raise MalformedError("bad_vacation", "a clock resumes at a time (Unix ms)")
    at = cmd.now_ms if cmd.from_ms is None else max(cmd.now_ms, cmd.from_ms)
    before = state.absences[cmd.player]
    if cmd.vacation is None:
        if containing(state.pauses_ms[cmd.player], at) is None:
            return []
    elif before.back_at(cmd.vacation) is not None:
        return []
    else:
        own = before.window_of(cmd.vacation)
        if own is not None and ended_at(own, at) == [own]:
            return []  # over by then: nothing to end
    windows = before.resumed(cmd.vacation, at).windows()
    if windows == state.pauses_ms[cmd.player]:  # an end that comes before its pause
        return [ClockResumed(cmd.player, at, None, cmd.vacation)]
    deadline = _moved(state, cmd.player, cmd.now_ms, windows)
    return [ClockResumed(cmd.player, at, deadline, cmd.vacation)]


def _moved(state: GameState, player: int, at_ms: int, windows: list[Window]) -> int | None:
    """The deadline of `player`'s running turn once their absences are `windows`: what its
    clock had left at `at_ms`, counted on from then (None: not their turn, or no clock)."""
    deadline = state.deadline_ms
    if state.phase != PLACE or player != state.current or deadline is None:
        return None
    allotted = _allotment(state, state.banks_ms) or 0
    left = min(allotted, running_ms(at_ms, deadline, state.pauses_ms[player]))
    return advanced(at_ms, left, windows)


def _seat_in_game(state: GameState, player: object, out: str) -> None:
    """Refuse a command for a seat unless the game runs and the seat is in it (`out`: the
    message when it has left)."""
    if state.phase == OVER:
        raise OutOfTurnError("game_over", "the game is over", "R7.1")
    if state.phase == NEW:
        raise OutOfTurnError("game_not_started", "the game has not started", "R2")
    if type(player) is not int or not 0 <= player < state.players:
        raise MalformedError("bad_player", f"player must be 0-{state.players - 1}")
    if state.out[player] is not None:
        raise OutOfTurnError("player_out", out)


def _resign(state: GameState, cmd: Resign) -> list[Event]:
    _seat_in_game(state, cmd.player, f"player {cmd.player} is already out of the game")
    return [PlayerResigned(cmd.player), *_too_few_left(state, cmd.player, cmd.takeover)]


def _abandon(state: GameState, cmd: AbandonGame) -> list[Event]:
    if state.phase == OVER:
        raise OutOfTurnError("game_over", "the game is over", "R7.1")
    if state.phase == NEW:
        raise OutOfTurnError("game_not_started", "the game has not started", "R2")
    if type(cmd.idle_ms) is not int or cmd.idle_ms < 0:
        raise MalformedError("bad_idle", "idle_ms must be a non-negative integer")
    return [*_reveal(state), GameAbandoned(cmd.idle_ms)]
