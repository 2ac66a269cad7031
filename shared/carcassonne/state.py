"""The state of one game and how each event changes it.

Everything that affects a game lives here: the board (`board.py`), the bag, the drawn
tile, whose turn it is, each player's supply and score, the meeples on the board, the
score explanations derived so far, and — when the ruleset allows undo — the state right
before the last placement and its undo request (`TurnUndone` puts that state back).
`GameState.apply` mutates a state its caller owns; `game.evolve` is the pure form (it
applies to a copy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .board import Board, Pos
from .events import (
    AbbotRecalled,
    BankCharged,
    ClockPaused,
    ClockResumed,
    Event,
    GameAbandoned,
    GameEnded,
    GameStarted,
    HandDrawn,
    HandsRevealed,
    PlayerResigned,
    PlayerTimedOut,
    SeatTakenOver,
    TakeoverRefused,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
    TileReturned,
    TokenReissued,
    TurnTimedOut,
    TurnUndone,
    UndoAccepted,
    UndoRefused,
    UndoRequested,
    meeple_to_dict,
)
from .geometry import DELTA
from .hand import commit
from .pauses import Absences, Window
from .ruleset import Ruleset
from .scoring import (
    ScoreEvent,
    score_completed,
    score_farms,
    score_incomplete,
    score_recall,
)
from .tiles import Meeple, TileSet, TileType

NEW, DRAW, PLACE, OVER = "new", "draw", "place", "over"
RESIGNED, TIMED_OUT = "resigned", "timed_out"  # why a seat is out (`GameState.out`)


def river_turn(heading: int, out: int) -> int:
    """How the river turns when it flows in heading `heading` and leaves across edge `out`:
    0 straight on, +1 right (clockwise), -1 left (R9.1's no-U-turn rule compares a curve's
    turn with the turn of the river tile just before it)."""
    if out == heading:
        return 0
    return 1 if out == (heading + 1) % 4 else -1


class HandTile(NamedTuple):
    """A tile in a hand (R10.3): its commitment, and its name and nonce where known (a fold of
    the public log knows a hand tile only once it is played, discarded, returned or revealed)."""

    commitment: str
    tile: str | None
    nonce: str | None


class MeepleOnBoard(NamedTuple):
    """A meeple standing on the board: its owner, square, spot and segment node."""

    player: int
    pos: Pos
    meeple: Meeple
    node: int


class UndoRequest(NamedTuple):
    """The undo request of the last placement: who asked, the deadline (Unix ms, consent;
    None: none), who accepted so far, and who refused (None: nobody yet)."""

    request: int
    player: int
    deadline_ms: int | None
    accepted: tuple[int, ...] = ()
    refused_by: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """As the views show it."""
        return {
            "request": self.request,
            "player": self.player,
            "deadline_ms": self.deadline_ms,
            "accepted": list(self.accepted),
            "refused_by": self.refused_by,
        }


class GameState:
    """A game as the fold of its events. Create with `GameState()`, then apply events."""

    __slots__ = (
        "abandoned",
        "abbots",
        "absences",
        "away_until_ms",
        "bag",
        "bag_size",
        "banks_ms",
        "board",
        "charge",
        "current",
        "deadline_ms",
        "discarded",
        "drawn",
        "drawn_count",
        "extra_turn",
        "hands",
        "log",
        "meeples",
        "next_meeple",
        "out",
        "pauses_ms",
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
        "taken_over",
        "tiles",
        "timeouts",
        "turn",
        "undo",
        "undo_point",
        "undo_requests",
        "undone_turn",
        "undos",
    )

    def __init__(self) -> None:
        self.phase = NEW
        self.ruleset = Ruleset()
        self.tiles: TileSet = self.ruleset.tiles
        self.players = 0
        self.board = Board()
        self.bag: dict[str, int] = {}
        self.bag_size = 0
        self.drawn: str | None = None
        self.drawn_count = 0
        self.discarded: list[str] = []
        self.current = 0
        self.supply: list[int] = []
        self.abbots: list[bool] = []  # R9.2: per player, whether the abbot is in the supply
        self.scores: list[int] = []
        self.scores_before_final: tuple[int, ...] | None = None
        self.log: list[ScoreEvent] = []
        self.meeples: dict[int, MeepleOnBoard] = {}
        self.next_meeple = 0
        self.turn = 0  # tiles placed after the start tile
        self.extra_turn = False  # the player to move is on a turn granted by R10.6
        # R9.1: the empty square the river must continue into (None: no river, or it ended),
        # the direction it flows there, and how the last river tile turned it (+1 right, -1
        # left, 0 straight on or none yet: a straight resets the no-U-turn rule).
        self.river_end: Pos | None = None
        self.river_heading = 0
        self.river_turn = 0
        # Lifecycle: the current turn's deadline (Unix ms, from its TileDrawn), each seat's
        # timed-out turns and why it is out (None: still in), and whether the server ended
        # the game as abandoned.
        self.deadline_ms: int | None = None
        self.timeouts: list[int] = []
        self.out: list[str | None] = []
        # Ruleset `on_leave: "bot:<level>"`: per seat, the level of the bot that plays it since
        # it went out (`SeatTakenOver`), or None. A seat taken over keeps its turns.
        self.taken_over: list[str | None] = []
        self.abandoned = False
        # Clocks (docs/clocks.md): each seat's Fischer time bank in ms (empty: no bank) as of
        # its last charge; each seat's declared absences, past, running or to come, by
        # vacation (carcassonne.pauses.Absences), their union (sorted disjoint windows: the
        # clock's) and the end of its last one (0: none); and the placement whose bank the
        # next draw charges: (seat, its turn's deadline).
        self.banks_ms: list[int] = []
        self.absences: list[Absences] = []
        self.pauses_ms: list[list[Window]] = []
        self.away_until_ms: list[int] = []
        self.charge: tuple[int, int] | None = None
        # Undo (ruleset `undo` not "off"): the state right before the last placement while
        # that placement may still be undone (until the next one, a refusal or the end). It
        # is never changed: `TurnUndone` puts a copy of it back. Its own `undo_point` is None,
        # so a game keeps one such copy, not a chain.
        self.undo_point: GameState | None = None
        self.undo: UndoRequest | None = None  # the last placement's undo request, if any
        self.undo_requests = 0  # requests so far: the next one's number is this + 1
        # Undos so far (`TurnUndone`s: never put back by one), which the draws after an undo
        # are made fresh by (services/common/draws.py: an undone draw goes back in the bag and
        # is not the next tile again, so an undo shows nothing of what comes); and the
        # placement a player makes again after theirs was undone: that placement
        # stands (one undo a turn, so an undo cannot redraw the next tile again and again):
        # `undone_turn` is the `turn` count an undo put back (-1: none), so the placement
        # made at it again gets no undo point.
        self.undos = 0
        self.undone_turn = -1
        # R10.3: each seat's hand (empty lists: no hand, the base game), and whether the
        # player to move stops refilling this turn (a tile returned under R10.4).
        self.hands: list[list[HandTile]] = []
        self.refill_stopped = False

    def copy(self, around: Pos | None = None) -> GameState:
        """An independent copy (immutable parts shared); with `around`, a copy only for
        placing the drawn tile on that square and nothing more (`Board.copy_around`: the
        features such a placement cannot change are shared with this state)."""
        twin = GameState.__new__(GameState)
        for name in _PLAIN_SLOTS:
            setattr(twin, name, getattr(self, name))
        twin.board = self.board.copy() if around is None else self.board.copy_around(around)
        twin.bag = dict(self.bag)
        twin.discarded = list(self.discarded)
        twin.supply = list(self.supply)
        twin.abbots = list(self.abbots)
        twin.scores = list(self.scores)
        twin.log = list(self.log)
        twin.meeples = dict(self.meeples)
        twin.timeouts = list(self.timeouts)
        twin.out = list(self.out)
        twin.taken_over = list(self.taken_over)
        twin.hands = [list(hand) for hand in self.hands]
        twin.banks_ms = list(self.banks_ms)
        twin.away_until_ms = list(self.away_until_ms)
        twin.pauses_ms = list(self.pauses_ms)  # each seat's list is replaced, never changed
        twin.absences = list(self.absences)
        return twin

    @property
    def over(self) -> bool:
        """Whether the game has ended (final scoring done)."""
        return self.phase == OVER

    @property
    def still_in(self) -> list[int]:
        """The seats not out of the game (resigned or timed out), in seat order."""
        return [p for p, why in enumerate(self.out) if why is None]

    @property
    def playing(self) -> list[int]:
        """The seats that have turns (still in, or taken over by a bot), in seat order."""
        return [p for p in range(self.players) if self.plays(p)]

    def plays(self, seat: int) -> bool:
        """Whether `seat` has turns: still in, or out and played by a bot (`taken_over`)."""
        return self.out[seat] is None or self.taken_over[seat] is not None

    def next_seat(self, seat: int) -> int:
        """The seat after `seat` that has turns (clockwise, R2.2): still in the game, or taken
        over by a bot; `seat` if none is."""
        for step in range(1, self.players + 1):
            candidate = (seat + step) % self.players
            if self.plays(candidate):
                return candidate
        return seat

    def owner(self, meeple_id: int) -> int:
        """The player a meeple on the board belongs to."""
        return self.meeples[meeple_id].player

    # -- events -----------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Change this state by one event (trusted: `decide` validated it)."""
        _APPLY[type(event)](self, event)

    def _started(self, e: GameStarted) -> None:
        self.ruleset = e.ruleset
        self.tiles = e.ruleset.tiles
        self.players = e.players
        self.board = Board(e.ruleset.bounds(), e.ruleset.border_closes)
        start = self.tiles.types[self.tiles.start]
        self.board.place(start, (0, 0), 0)  # R2.1: at the origin, unrotated
        if start.river:  # R9.1: the spring starts the river, flowing east
            (out,) = start.river_edges(0)
            self._river_flows((0, 0), out)
        self.bag = self.tiles.bag()
        self.bag_size = sum(self.bag.values())
        self.supply = [e.ruleset.meeples_per_player] * e.players
        self.abbots = [e.ruleset.abbot] * e.players
        self.scores = [0] * e.players
        self.timeouts = [0] * e.players
        self.out = [None] * e.players
        self.taken_over = [None] * e.players
        self.phase = DRAW
        self.hands = [[] for _ in range(e.players)] if e.ruleset.hand > 1 else []
        self.refill_stopped = False
        bank = e.ruleset.initial_seconds
        self.banks_ms = [bank * 1000] * e.players if bank is not None else []
        self.away_until_ms = [0] * e.players
        self.absences = [Absences()] * e.players  # frozen: shared until a seat's changes
        self.pauses_ms = [[] for _ in range(e.players)]

    def _drawn(self, e: TileDrawn) -> None:
        left = self.bag[e.tile] - 1
        if left:
            self.bag[e.tile] = left
        else:
            del self.bag[e.tile]
        self.bag_size -= 1
        self.drawn = e.tile
        self.drawn_count += 1
        self.deadline_ms = e.deadline_ms
        self.phase = PLACE
        self.charge = None

    def _placed(self, e: TilePlaced) -> None:
        point = None
        if self.ruleset.undo != "off" and self.turn != self.undone_turn:
            point = self.copy()
            point.undo_point, point.undo = None, None
        self.undo_point, self.undo = point, None
        if self.hands:
            self._take_from_hand(e.player, e.tile, e.nonce)
            self.refill_stopped = False
        self._place(e)
        if self.hands:
            self._settle_hand()

    def _place(self, e: TilePlaced) -> None:
        board = self.board
        tile = self.tiles.types[e.tile]
        pos = (e.x, e.y)
        base = board.place(tile, pos, e.rotation)
        if e.meeple is not None:
            node = base + tile.orientations[e.rotation].spots[e.meeple.spot]
            meeple_id = self.next_meeple
            self.next_meeple += 1
            self.meeples[meeple_id] = MeepleOnBoard(e.player, pos, e.meeple, node)
            board.feature(node).meeples.append(meeple_id)
            if e.meeple.abbot:
                self.abbots[e.player] = False
            else:
                self.supply[e.player] -= 1
        self.turn += 1
        if tile.river:
            self._river_placed(tile, pos, e.rotation)
        for root in board.completed_by(pos):
            self._score_completed(root)
        if e.bank_ms is not None:  # the move pressed the clock (docs/clocks.md)
            self.banks_ms[e.player] = e.bank_ms
        elif self.banks_ms and self.deadline_ms is not None:
            # no bank on the placement (an older log, or decided without a clock): the next
            # clocked draw charges it, as `BankCharged`
            self.charge = (e.player, self.deadline_ms)
        self.drawn = None
        self.deadline_ms = None
        self.phase = DRAW
        if self.ruleset.hole_extra_turn and not self.extra_turn and board.is_hole(pos):
            # R10.6 Decision: once per turn, not chained: the extra turn's own hole grants none.
            self.extra_turn = True
            return
        self.extra_turn = False
        self.current = self.next_seat(self.current)

    def _river_placed(self, tile: TileType, pos: Pos, rotation: int) -> None:
        """R9.1: the river now ends on this tile: flows on across its other river edge, or
        stops here (the lake)."""
        entry = self.river_heading ^ 2
        outs = [d for d in tile.river_edges(rotation) if d != entry]
        if not outs:
            self.river_end = None
            return
        out = outs[0]
        # R9.1: only an immediate U-turn is banned, so a straight (0) clears the last turn.
        self.river_turn = river_turn(self.river_heading, out)
        self._river_flows(pos, out)

    def _river_flows(self, pos: Pos, out: int) -> None:
        dx, dy = DELTA[out]
        self.river_end = (pos[0] + dx, pos[1] + dy)
        self.river_heading = out

    def _score_completed(self, root: int) -> None:
        """R6: score a just-completed feature and send its meeples home (R6.6)."""
        feat = self.board.feats[root]
        assert feat is not None
        scored = score_completed(self.board, root, self.owner, self.players, self.turn)
        for meeple_id in feat.meeples:
            self._home(meeple_id)
        feat.meeples = []
        feat.done = True
        self._record(scored)

    def _home(self, meeple_id: int) -> None:
        """A figure leaves the board for its owner's supply (R6.6; the abbot, R9.2)."""
        figure = self.meeples.pop(meeple_id)
        if figure.meeple.abbot:
            self.abbots[figure.player] = True
        else:
            self.supply[figure.player] += 1

    def abbot_of(self, player: int) -> int | None:
        """The id of `player`'s abbot on the board, or None (R9.2)."""
        for meeple_id, figure in self.meeples.items():
            if figure.player == player and figure.meeple.abbot:
                return meeple_id
        return None

    def _recalled(self, e: AbbotRecalled) -> None:
        """R9.2: the abbot comes back and its monastery or garden scores at once."""
        meeple_id = self.abbot_of(e.player)
        assert meeple_id is not None
        node = self.meeples[meeple_id].node
        root = self.board.find(node)
        scored = score_recall(self.board, root, self.owner, self.players, self.turn)
        self.board.feature(node).meeples.remove(meeple_id)
        self._home(meeple_id)
        self._record(scored)

    def _record(self, scored: ScoreEvent) -> None:
        self.log.append(scored)
        scores = self.scores
        for p, points in enumerate(scored.awarded):
            scores[p] += points

    def _discarded(self, e: TileDiscarded) -> None:
        self.discarded.append(e.tile)
        self.drawn = None
        self.deadline_ms = None
        self.phase = DRAW
        if self.hands:
            self._take_from_hand(e.player, e.tile, e.nonce)
            self._settle_hand()

    def _returned(self, e: TileReturned) -> None:
        if not self.hands:
            self._tile_back(e.tile)
            return
        # R10.3 with R10.4: the tile goes back into the bag; the player draws no more this
        # turn while they still hold a tile (else an unplaceable bag would be drawn forever).
        self._take_from_hand(e.player, e.tile, e.nonce)
        self.bag[e.tile] = self.bag.get(e.tile, 0) + 1
        self.bag_size += 1
        self.refill_stopped = bool(self.hands[e.player])
        self._settle_hand()

    # -- R10.3 hands --------------------------------------------------------------------
    def _hand_drawn(self, e: HandDrawn) -> None:
        self.hands[e.player].append(HandTile(e.commitment, e.tile, e.nonce))
        if e.tile is not None:
            self._unbag(e.tile)
        self.bag_size -= 1
        self.drawn_count += 1
        self._settle_hand()

    def _unbag(self, tile: str) -> None:
        left = self.bag[tile] - 1
        if left:
            self.bag[tile] = left
        else:
            del self.bag[tile]

    def _take_from_hand(self, player: int, tile: str, nonce: str | None) -> bool:
        """Take the tile opened by `nonce` out of `player`'s hand; whether it was known before.

        In a fold of the public log `bag` counts the tiles not yet seen (the bag and the
        hidden hand tiles): a tile seen here for the first time leaves that count now."""
        hand = self.hands[player]
        key = commit(tile, nonce or "")
        for index, held in enumerate(hand):
            if held.commitment == key:
                del hand[index]
                if held.tile is None:
                    self._unbag(tile)
                return held.tile is not None
        raise AssertionError(f"{tile} is not in player {player}'s hand")  # decide checked

    def _settle_hand(self) -> None:
        """R10.3: whose move it is and whether they draw first: a seat with an empty hand is
        skipped once the bag is empty; the player to move draws back up to the hand's size
        while the bag has tiles (and they have not stopped refilling, R10.4)."""
        if self.phase == OVER:
            return
        self.drawn = None
        self.deadline_ms = None
        for _ in range(self.players):
            if self.hands[self.current] or self.bag_size:
                break
            self.current = self.next_seat(self.current)
        hand = self.hands[self.current]
        refill = len(hand) < self.ruleset.hand and self.bag_size and not self.refill_stopped
        self.phase = DRAW if refill else PLACE

    def _hands_revealed(self, e: HandsRevealed) -> None:
        """Every hand opened: tiles not yet known leave the unseen count (`_take_from_hand`)."""
        for seat, revealed in enumerate(e.hands):
            hand = self.hands[seat]
            for tile, nonce in revealed:
                key = commit(tile, nonce)
                for index, held in enumerate(hand):
                    if held.commitment == key and held.tile is None:
                        hand[index] = HandTile(key, tile, nonce)
                        self._unbag(tile)
                        break

    def _tile_back(self, tile: str) -> None:
        """The drawn tile goes back into the bag (its turn is not played)."""
        self.bag[tile] = self.bag.get(tile, 0) + 1
        self.bag_size += 1
        self.drawn = None
        self.deadline_ms = None
        self.phase = DRAW

    def _timed_out(self, e: TurnTimedOut) -> None:
        self.undo_point = None  # the game moved on without a placement: no undo across it
        self._tile_back(e.tile)
        self.extra_turn = False  # an R10.6 extra turn not played is gone
        self.timeouts[e.player] += 1
        self.current = self.next_seat(e.player)
        if self.banks_ms:  # an exhausted bank: empty, then the turn's increment (clocks.md)
            self.banks_ms[e.player] = self.ruleset.increment_seconds * 1000

    def _bank_charged(self, e: BankCharged) -> None:
        self.banks_ms[e.player] = e.bank_ms
        self.charge = None

    def _clock_paused(self, e: ClockPaused) -> None:
        window = (e.from_ms, e.until_ms)
        self._absences(e.player, self.absences[e.player].paused(e.vacation, window))
        if e.deadline_ms is not None:  # their running turn, moved by the absence
            self.deadline_ms = e.deadline_ms

    def _clock_resumed(self, e: ClockResumed) -> None:
        self._absences(e.player, self.absences[e.player].resumed(e.vacation, e.at_ms))
        if e.deadline_ms is not None:  # their running turn: its clock runs from `at_ms`
            self.deadline_ms = e.deadline_ms

    def _absences(self, player: int, absences: Absences) -> None:
        """A seat's absences as they now stand, their union, and the end of its last one
        (the views')."""
        windows = absences.windows()
        self.absences[player] = absences
        self.pauses_ms[player] = windows
        self.away_until_ms[player] = windows[-1][1] if windows else 0

    def _player_timed_out(self, e: PlayerTimedOut) -> None:
        self.undo_point = None
        self.out[e.player] = TIMED_OUT

    def _resigned(self, e: PlayerResigned) -> None:
        self.undo_point = None  # an undo would bring the seat back: the placement stands
        self.out[e.player] = RESIGNED
        if e.player == self.current:
            if self.drawn is not None:
                self._tile_back(self.drawn)
            self.extra_turn = False
            self.current = self.next_seat(e.player)
            if self.hands:
                self.refill_stopped = False
                self._settle_hand()

    def _taken_over(self, e: SeatTakenOver) -> None:
        """A bot plays the seat that just went out: it has turns again from its next one (the
        turn in which it left was skipped as without a takeover)."""
        self.taken_over[e.player] = e.level

    def _abandoned(self, e: GameAbandoned) -> None:
        """The server ended the game: no final scoring (docs/lifecycle.md)."""
        self.abandoned = True
        self.undo_point = None
        self.drawn = None
        self.deadline_ms = None
        self.phase = OVER

    def _ended(self, e: GameEnded) -> None:
        """R7: incomplete features, then farms; meeples stay where they stood."""
        self.scores_before_final = tuple(self.scores)
        rules = self.ruleset
        final = score_incomplete(
            self.board, self.owner, self.players, self.turn, rules.incomplete_score
        )
        if rules.farmers:
            final += score_farms(
                self.board, self.owner, self.players, self.turn, rules.farm_scoring
            )
        for scored in final:
            self._record(scored)
        self.drawn = None
        self.deadline_ms = None
        self.phase = OVER
        self.undo_point = None  # a finished game's last placement stands (docs/undo.md)

    def _undo_requested(self, e: UndoRequested) -> None:
        self.undo = UndoRequest(e.request, e.player, e.deadline_ms)
        self.undo_requests = e.request

    def _undo_accepted(self, e: UndoAccepted) -> None:
        if self.undo is not None:
            self.undo = self.undo._replace(accepted=(*self.undo.accepted, e.player))

    def _undo_refused(self, e: UndoRefused) -> None:
        if self.undo is not None:
            self.undo = self.undo._replace(refused_by=e.player)
        self.undo_point = None  # the placement stands for good

    def _undone(self, e: TurnUndone) -> None:
        """Put back the state from right before the placement (a copy: the kept state may be
        shared by other copies of this one). The draws made since go back in the bag with
        their draw count; the next draws are fresh ones (`undos`), and the placement the
        player makes again stands (`undone_turn`)."""
        assert self.undo_point is not None, "decide allows an undo only with an undo point"
        before = self.undo_point.copy()
        requests, undos = self.undo_requests, self.undos
        pauses, away, absences = self.pauses_ms, self.away_until_ms, self.absences
        for name in GameState.__slots__:
            setattr(self, name, getattr(before, name))
        self.undo_requests = requests  # request numbers never repeat
        # absences are not moves: they stay
        self.pauses_ms, self.away_until_ms, self.absences = pauses, away, absences
        self.undos, self.undone_turn = undos + 1, self.turn
        self.deadline_ms = e.deadline_ms  # the turn given back has a clock of its own

    # -- views --------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything observable about the game, as plain data (for equality and views)."""
        return {
            "phase": self.phase,
            "players": self.players,
            "ruleset": self.ruleset.to_dict(),
            "tiles": sorted(
                (pos, placed.tile.name, placed.rotation) for pos, placed in self.board.tiles.items()
            ),
            "meeples": sorted(
                (m.player, m.pos, m.meeple.feature, m.meeple.spot, m.meeple.abbot)
                for m in self.meeples.values()
            ),
            "bag": dict(sorted(self.bag.items())),
            "drawn": self.drawn,
            "discarded": list(self.discarded),
            "current": self.current,
            "extra_turn": self.extra_turn,
            "river_end": self.river_end,
            "supply": list(self.supply),
            "abbots": list(self.abbots),
            "scores": list(self.scores),
            "scores_before_final": self.scores_before_final,
            "log": [s.to_dict() for s in self.log],
            "turn": self.turn,
            "deadline_ms": self.deadline_ms,
            "timeouts": list(self.timeouts),
            "out": list(self.out),
            **({"taken_over": list(self.taken_over)} if any(self.taken_over) else {}),
            "abandoned": self.abandoned,
            "undo": None if self.undo is None else self.undo.to_dict(),
            **({"hands": self.hand_lists()} if self.hands else {}),
        }

    def hand_lists(self) -> list[list[str | None]]:
        """Each seat's hand as tile names (None: a tile not known to this fold), R10.3."""
        return [[held.tile for held in hand] for hand in self.hands]

    def meeple_list(self) -> list[dict[str, Any]]:
        """The meeples on the board, in the game record's vocabulary."""
        return [
            {"player": m.player, "x": m.pos[0], "y": m.pos[1], "meeple": meeple_to_dict(m.meeple)}
            for m in self.meeples.values()
        ]


# The slots `copy` shares as they are (values never changed in place); the others it copies
# one by one. Set apart so that a copy does not set those twice: a copy is most of what a
# bot's glance at a move costs (simple.glance). With Feature.copy's: a whole copy of a late
# state takes 14 % fewer instructions (callgrind; docs/bots.md, "Cheaper playouts").
_OWN_SLOTS = frozenset(
    (
        *("board", "bag", "discarded", "supply", "abbots", "scores", "log", "meeples"),
        *("timeouts", "out", "taken_over", "hands", "banks_ms", "away_until_ms"),
    )
)
_PLAIN_SLOTS = tuple(name for name in GameState.__slots__ if name not in _OWN_SLOTS)

_APPLY: dict[type, Callable[[GameState, Any], None]] = {
    GameStarted: GameState._started,
    TileDrawn: GameState._drawn,
    TilePlaced: GameState._placed,
    TileDiscarded: GameState._discarded,
    TileReturned: GameState._returned,
    AbbotRecalled: GameState._recalled,
    GameEnded: GameState._ended,
    TurnTimedOut: GameState._timed_out,
    PlayerTimedOut: GameState._player_timed_out,
    PlayerResigned: GameState._resigned,
    SeatTakenOver: GameState._taken_over,
    TakeoverRefused: lambda state, event: None,  # the seat stays out and is skipped
    GameAbandoned: GameState._abandoned,
    TokenReissued: lambda state, event: None,  # not a game fact: secrets live outside
    UndoRequested: GameState._undo_requested,
    UndoAccepted: GameState._undo_accepted,
    UndoRefused: GameState._undo_refused,
    TurnUndone: GameState._undone,
    HandDrawn: GameState._hand_drawn,
    HandsRevealed: GameState._hands_revealed,
    BankCharged: GameState._bank_charged,
    ClockPaused: GameState._clock_paused,
    ClockResumed: GameState._clock_resumed,
}
