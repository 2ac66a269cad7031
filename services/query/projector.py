"""Projections of games kept up to date incrementally, in a bounded in-process LRU cache.

Per game the cache holds the folded `GameState` after the last move read, the engine events
(to replay from) and the score events up to the worker's progress. Every read first catches
up from the streams (events after the cached positions only), so a view is as fresh as the
streams and never costs a whole-game fold once a game is cached.

Views of the past ("right after move N") replay from the nearest snapshot: the first such
view of a game folds up to N once, keeping a snapshot every `snapshot_every` moves on the
way, so later ones replay fewer moves than that. Snapshots are kept for the `replay_games`
most recently replayed games only (a final state is ~60 KiB; snapshots of a whole game ~5x).

States handed out are never changed afterwards: a catch-up applies new moves to a copy.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from carcassonne.errors import GameError
from carcassonne.events import Event, GameStarted, HandsRevealed, TilePlaced, TurnUndone
from carcassonne.hand import open_all
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from eventstore.score_stream import FEATURE_SCORED  # noqa: F401  (registers score schemas)
from services.common.kept import Kept
from services.common.moves import still_holds

log = logging.getLogger(__name__)
# Each cached fold of a game gets a new number: a view rendered from one is never served for
# another (the same ETag names another history once a failover cut the log back).
_GENERATIONS = itertools.count(1)

Names = Callable[[str], "list[str] | None"]
# A game's seats: names and the apps' player ids (None where not given), in seat order.
Seats = Callable[[str], "tuple[list[str], list[str | None]] | None"]
# A game's bot seats (docs/bots.md): {"level", "think_ms"} per seat, None for a human's.
Bots = Callable[[str], "list[dict[str, Any] | None] | None"]


class NotFound(GameError):
    """No such game (its move stream is empty)."""

    status = 404


class BadParameter(GameError):
    """A well-formed parameter that names something outside the game (422)."""


@dataclass(frozen=True)
class Position:
    """One consistent read of a game: the state after move `seq` and the scores of moves up to
    `progress` (the last move the scoring worker has scored; it may lag behind `seq`)."""

    game_id: str
    seq: int
    state: GameState  # shared: read only
    score_seq: int  # the last score event included (0: none)
    progress: int
    scores: tuple[StoredEvent, ...]
    names: tuple[str, ...] | None
    player_ids: tuple[str | None, ...] | None = None  # the app's user id of each seat, if set
    turns: int = 0  # placements in the log up to `seq`, undone ones too: what `?turn=` counts
    bots: tuple[dict[str, Any] | None, ...] | None = None  # each seat's bot, None: a human
    undone: bool = False  # a `?turn=` whose placement a later `TurnUndone` took back
    # R10.3: folded from the log with every hand opened (`open_all`, once `HandsRevealed` is
    # in it): a past position then shows the tiles it showed as secret before the end.
    opened: bool = False
    generation: int = 0  # the cached fold it comes from (`_Entry.generation`)


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    generation: int = field(default_factory=lambda: next(_GENERATIONS))
    state: GameState = field(default_factory=GameState)
    seq: int = 0
    events: list[Event] = field(default_factory=list)  # events[i] is move i + 1
    placements: list[int] = field(default_factory=list)  # seq of each TilePlaced (`at_turn`)
    # placements done -> seq of the TurnUndone that took the last of them back (`at_turn`)
    undone: dict[int, int] = field(default_factory=dict)
    snapshots: dict[int, GameState] = field(default_factory=dict)  # move -> state after it
    scores: tuple[StoredEvent, ...] = ()
    score_seq: int = 0
    progress: int = 0
    names: tuple[str, ...] | None = None
    player_ids: tuple[str | None, ...] | None = None
    bots: tuple[dict[str, Any] | None, ...] | None = None
    cursor: tuple[int, GameState] | None = None  # the last past state built (stepping is cheap)
    opened: bool = False  # R10.3: `events` have every hand opened (`Position.opened`)
    command: str = ""  # the command id of move `seq`: is it still the log's (`still_holds`)?
    score_command: str = ""  # the command id of score event `score_seq`


class Projector:
    """Caught-up game states and score lists, read through the `EventStore` port only."""

    def __init__(
        self,
        store: EventStore,
        names: Names | None = None,
        cache_size: int = 2_000,
        snapshot_every: int = 16,
        replay_games: int = 100,
        seats: Seats | None = None,
        bots: Bots | None = None,
    ) -> None:
        self.store = store
        self.names = names
        self.seats = seats  # preferred to `names` when given: names and player ids at once
        self.bots = bots  # which seats the computer plays (not in the log: the seats record)
        self.cache_size = max(1, cache_size)
        self.snapshot_every = max(1, snapshot_every)
        self.replay_games = max(1, replay_games)
        self._cache: Kept[str, _Entry] = Kept(self.cache_size)
        self._replayed: Kept[str, _Entry] = Kept(self.replay_games)  # games holding snapshots
        self.replayed = 0  # move events applied for past views (tests check it stays small)

    def _entry(self, game_id: str) -> _Entry:
        return self._cache.setdefault(game_id, _Entry)

    def _forget(self, game_id: str, entry: _Entry) -> None:
        self._cache.discard(game_id, entry)

    def current(self, game_id: str) -> Position:
        """The game as its streams stand now (404 `game_not_found` when it has no moves)."""
        entry = self._entry(game_id)
        with entry.lock:
            return self._now(game_id, entry)

    def position(self, game_id: str, at: int | None = None, turn: int | None = None) -> Position:
        """The game now, right after move `at`, or after `turn` placements (`at_turn`); at
        most one of `at` and `turn` (422 `at_and_turn`)."""
        if at is not None and turn is not None:
            raise BadParameter(
                "at_and_turn",
                "give at (a move's seq) or turn (placements done), not both",
                None,
                at=at,
                turn=turn,
            )
        if turn is not None:
            return self.at_turn(game_id, turn)
        if at is not None:
            return self.at(game_id, at)
        return self.current(game_id)

    def at_turn(self, game_id: str, turn: int) -> Position:
        """The game after `turn` placements (R3: a turn places one tile; a discarded or
        returned tile, R4.4/R10.4, is no turn): every move up to the draw of the next
        placement's tile, so the view shows whose turn is next and the tile they drew.
        `turn=0` is the game as created; the last turn includes `GameEnded`.

        An undone placement counts (docs/undo.md): its turn shows it on the board, up to the
        move before its `TurnUndone` (the undo request and answers included); the state
        after the undo is the turn before's again, and the next placement is the next turn."""
        entry = self._entry(game_id)
        with entry.lock:
            now = self._now(game_id, entry)
            placements = entry.placements
            if not 0 <= turn <= len(placements):
                raise BadParameter(
                    "turn_out_of_range",
                    f"turn must be a number of placements of this game: 0-{len(placements)}",
                    None,
                    turn=turn,
                    last_turn=len(placements),
                )
            at = placements[turn] - 1 if turn < len(placements) else now.seq
            undone = turn in entry.undone
            if undone:
                at = entry.undone[turn] - 1
            pos = self._at(game_id, entry, now, at)
            return dataclasses.replace(pos, undone=True) if undone else pos

    def at(self, game_id: str, at: int) -> Position:
        """The game as it stood right after move `at` (scores of the moves up to it)."""
        entry = self._entry(game_id)
        with entry.lock:
            return self._at(game_id, entry, self._now(game_id, entry), at)

    def _at(self, game_id: str, entry: _Entry, now: Position, at: int) -> Position:
        """The position right after move `at`; `entry`'s lock is held and `now` just read.
        (Lock order: entry, then the cache's lock in `_holds_snapshots`, as in `_forget`.)"""
        if not 1 <= at <= now.seq:
            raise BadParameter(
                "at_out_of_range",
                f"at must be a move of this game: 1-{now.seq}",
                None,
                at=at,
                last_seq=now.seq,
            )
        if at == now.seq:
            return now
        state = self._state_at(entry, at)
        self._holds_snapshots(game_id, entry)
        progress = min(at, now.progress)
        scores = tuple(e for e in now.scores if e.payload["move"] <= progress)
        score_seq = scores[-1].seq if scores else 0
        turns = bisect.bisect_right(entry.placements, at)
        return Position(
            game_id,
            at,
            state,
            score_seq,
            progress,
            scores,
            now.names,
            now.player_ids,
            turns,
            now.bots,
            opened=now.opened,
            generation=now.generation,
        )

    # -- catching up ------------------------------------------------------------------
    def _now(self, game_id: str, entry: _Entry) -> Position:
        """Catch `entry` up (its lock held) and read it."""
        self._catch_up(game_id, entry)
        if entry.seq == 0:
            self._forget(game_id, entry)  # unknown ids must not fill the cache
            raise NotFound("game_not_found", f"no game {game_id[:64]}")
        return Position(
            game_id,
            entry.seq,
            entry.state,
            entry.score_seq,
            entry.progress,
            entry.scores,
            entry.names,
            entry.player_ids,
            len(entry.placements),
            entry.bots,
            opened=entry.opened,
            generation=entry.generation,
        )

    def _catch_up(self, game_id: str, entry: _Entry) -> None:
        fresh = self._fresh_moves(game_id, entry)
        if fresh:
            first = entry.seq == 0
            state = entry.state.copy()  # readers may still hold the old state
            events: list[Event] = []
            placements: list[int] = []
            undone: dict[int, int] = {}
            for stored in fresh:  # into locals: a move that fails to fold changes nothing
                event = to_engine(stored)
                state.apply(event)
                events.append(event)
                if isinstance(event, TilePlaced):
                    placements.append(stored.seq)
                elif isinstance(event, TurnUndone):
                    undone[len(entry.placements) + len(placements)] = stored.seq
            entry.events += events
            entry.placements += placements
            entry.undone.update(undone)
            entry.state, entry.seq, entry.command = state, fresh[-1].seq, fresh[-1].command_id
            if any(isinstance(e, HandsRevealed) for e in events):
                # R10.3: the hands are public now: every position replays with them known
                entry.events = open_all(entry.events)
                entry.snapshots, entry.cursor, entry.opened = {}, None, True
            if first:
                self._seat(game_id, entry)
        self._catch_up_scores(game_id, entry)

    def _fresh_moves(self, game_id: str, entry: _Entry) -> list[StoredEvent]:
        """The moves after the entry's. Read from its own last move, which the stream must
        still hold: if a failover (or a restart from a stale AOF) cut the log back, the entry
        is emptied and the game read from its first move, as the command service's cache
        and the scorer do (tests/integration/test_lost_suffix.py)."""
        if entry.seq == 0:
            return self.store.read(game_id, MOVES)
        fresh = self.store.read(game_id, MOVES, after=entry.seq - 1)
        if still_holds(fresh, entry.seq, entry.command):
            return fresh[1:]
        log.warning("game %s: its log no longer holds move %d as folded; folding it again",
                    game_id, entry.seq, extra={"game_id": game_id})  # fmt: skip
        self._empty(entry)
        return self.store.read(game_id, MOVES)

    @staticmethod
    def _empty(entry: _Entry) -> None:
        """The entry as new (its lock kept, a new generation): nothing folded, nothing scored."""
        blank = _Entry()
        for found in dataclasses.fields(_Entry):
            if found.name != "lock":
                setattr(entry, found.name, getattr(blank, found.name))

    def _catch_up_scores(self, game_id: str, entry: _Entry) -> None:
        """The score events up to the worker's progress (no further than the moves read).

        The marker first: the worker sets it in the same atomic append as the events, so
        every score event of a move up to it is already in the stream when it is read. A
        marker behind the entry's progress, or a score stream that no longer holds the
        entry's last score event, was cut back by a failover: the scores are read again."""
        # No further than the moves read: a move appended and scored since they were read
        # must not count in scores shown beside the meeples of the move before it (its
        # score events wait for the next read, with the move).
        raw = self.store.marker(game_id, SCORES)
        progress = min(int(raw) if raw else 0, entry.seq)
        if progress < entry.progress:
            self._forget_scores(game_id, entry)
        if progress <= entry.progress:
            return
        read = self.store.read(game_id, SCORES, after=max(0, entry.score_seq - 1))
        if entry.score_seq:
            if still_holds(read, entry.score_seq, entry.score_command):
                read = read[1:]
            else:
                self._forget_scores(game_id, entry)
                read = self.store.read(game_id, SCORES)
        added = []
        for stored in read:
            if stored.payload["move"] > progress:
                break  # a batch appended after the marker was read: next time
            added.append(stored)
        if added:
            entry.scores += tuple(added)
            entry.score_seq, entry.score_command = added[-1].seq, added[-1].command_id
        entry.progress = progress

    @staticmethod
    def _forget_scores(game_id: str, entry: _Entry) -> None:
        log.warning("game %s: its score stream was cut back; reading it again", game_id,
                    extra={"game_id": game_id})  # fmt: skip
        entry.scores, entry.score_seq, entry.score_command, entry.progress = (), 0, "", 0
        entry.generation = next(_GENERATIONS)  # views rendered from the old scores: not these

    def _seat(self, game_id: str, entry: _Entry) -> None:
        """The seats' names and player ids: those the game's `GameStarted` logged (schema
        version 2), else — a game stored before the log named its seats — the directory's
        (the seats record), read once per cached game."""
        started = entry.events[0] if entry.events else None
        if isinstance(started, GameStarted) and started.names is not None:
            entry.names, entry.player_ids = started.names, started.player_ids
        elif self.seats is not None:
            seats = self.seats(game_id)
            if seats is not None:
                entry.names, entry.player_ids = tuple(seats[0]), tuple(seats[1])
        elif self.names is not None:
            found = self.names(game_id)
            entry.names = None if found is None else tuple(found)
        if self.bots is not None:
            bots = self.bots(game_id)
            entry.bots = None if bots is None else tuple(bots)

    def _state_at(self, entry: _Entry, at: int) -> GameState:
        """The state after move `at` < entry.seq, replayed from the nearest kept state; the
        snapshots passed on the way are kept."""
        snapshots = entry.snapshots
        base_seq, base = 0, GameState()
        below = [s for s in snapshots if s <= at]
        if below:
            base_seq = max(below)
            base = snapshots[base_seq]
        if entry.cursor is not None and base_seq <= entry.cursor[0] <= at:
            base_seq, base = entry.cursor
        if base_seq == at:
            return base
        state = base.copy()
        every = self.snapshot_every
        for seq in range(base_seq + 1, at + 1):
            state.apply(entry.events[seq - 1])
            if seq % every == 0 and seq < at and seq not in snapshots:
                snapshots[seq] = state.copy()
        if at % every == 0:
            snapshots[at] = state  # never changed after this
        self.replayed += at - base_seq
        entry.cursor = (at, state)
        return state

    def _holds_snapshots(self, game_id: str, entry: _Entry) -> None:
        """Bound the games that keep snapshots: the least recently replayed lose theirs."""
        for oldest in self._replayed.keep(game_id, entry):
            # New objects, not mutation: a replay running on it keeps consistent bases.
            oldest.snapshots, oldest.cursor = {}, None
