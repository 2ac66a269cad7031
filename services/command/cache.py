"""The command service's fold cache: each game's state at the end of its move stream.

States are cached per process (a bounded LRU, `Kept`) with their sequence and secrets
record, and caught up from the stream (`XRANGE` after the cached sequence), so a late turn
costs what an early one does. A command takes a state out to change it in place and puts
it back once its append succeeded; `Cached` can rewind a state that ran ahead of a refused
append from its in-memory checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from carcassonne.errors import GameError, OutOfTurnError
from carcassonne.events import Event, TokenReissued
from carcassonne.state import GameState
from eventstore.envelope import MOVES
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from services.common.draws import opened
from services.common.kept import Kept
from services.common.moves import Appended, still_holds

from .errors import NotFound
from .secrets_store import Secrets

# What a turn costs beyond its append: move events read from the stream to bring a cached state
# up to date (a cold load reads the whole game). With each game served by one process it stays
# near 0 per turn; tests/bench/bench_instances.py reads it from /metrics.
EVENTS_READ = Counter(
    "carcassonne_events_read_total",
    "Move events read from the stream to catch a cached game state up (XRANGE entries)",
)

# Games folded again from their first move because their stream no longer held what the
# cached state had folded: moves lost to a failover (tests/hosts showed games stuck on it).
FOLDED_AGAIN = Counter(
    "carcassonne_cache_folded_again_total",
    "Cached game states dropped because the move stream lost events they reflected",
)

# Appends a cached game folds since its last checkpoint before it takes a new one (a copy of
# the state): a turn's events are applied to the cached state in place, and a refused append
# rebuilds the state at the cached sequence from the checkpoint and the events since. A copy
# per turn cost ~50 µs; one per this many turns costs a few µs a turn. Counted in appends,
# not events: a banked turn appended three events (`BankCharged` too, before the placement
# carried the bank) where a turn without a clock appends two, and counting 64 events made a
# banked game copy its state 1.5 times as often (issue 30); 32 appends is what 64 events
# were for a game without a clock (and a turn's events may still vary: discards, R4.4).
CHECKPOINT_APPENDS = 32


@dataclass
class Cached:
    """A game's state at `seq` (the last move event it reflects), with its secrets record.

    `base` is a copy of the state at `base_seq` and `since` the engine events applied after
    it up to `seq`, all in memory: a turn runs ahead of the stream on `state` itself, and if
    its append is refused, `rewound` gives the state at `seq` again without reading the
    stream (the events after `seq` are then read, never the whole game).
    """

    state: GameState
    seq: int
    secrets: dict[str, Any]
    base: GameState | None = None
    base_seq: int = 0
    since: list[Event] = field(default_factory=list)
    command: str = ""  # the command id of the event at `seq` ("": not known)
    appends: int = 0  # the appends `since` came in

    def checkpoint(self) -> None:
        """Make sure `state` can be rewound to `seq` after it is changed in place."""
        if self.base is None or self.appends >= CHECKPOINT_APPENDS:
            self.base, self.base_seq, self.since, self.appends = self.state.copy(), self.seq, [], 0

    def advanced(
        self, state: GameState, seq: int, events: list[Event], command: str = "", appends: int = 1
    ) -> Cached:
        """The cache entry for `state` at `seq` (the last event appended by `command`):
        this one's with `events` applied, which came in `appends` appends."""
        if self.base is None:
            return Cached(state, seq, self.secrets, command=command)
        since, count = self.since + events, self.appends + appends
        return Cached(state, seq, self.secrets, self.base, self.base_seq, since, command, count)

    def rewound(self) -> Cached:
        """The state at `seq` again, rebuilt from the checkpoint (the state ran ahead)."""
        if self.base is None:
            raise AssertionError("a cached state changed in place without a checkpoint")
        state = self.base.copy()
        for event in self.since:
            state.apply(event)
        return Cached(
            state,
            self.seq,
            self.secrets,
            self.base,
            self.base_seq,
            self.since,
            self.command,
            self.appends,
        )

    def before(self, state: GameState) -> Cached:
        """This entry as it was before a command ran ahead on `state` (rebuilt if in place)."""
        return self.rewound() if state is self.state else self


def archived_game(game_id: str) -> OutOfTurnError:
    """What every command on an archived game answers: a finished game's 409 `game_over`
    (its log is in the archive, read only; its tokens are gone)."""
    return OutOfTurnError(
        "game_over", f"the game is over (game {game_id} is archived: read only)", "R7.1"
    )


class FoldCache:
    """Games folded from their move streams, kept per process and caught up on load.

    `in_place`: a taken state is changed in place by the command that took it (one thread
    serves the process's requests); otherwise a catch-up works on a copy."""

    def __init__(
        self, store: EventStore, secrets: Secrets, size: int = 10_000, in_place: bool = True
    ) -> None:
        self.store = store
        self.secrets = secrets
        self.in_place = in_place
        self.kept: Kept[str, Cached] = Kept(size, lambda cached: cached.seq)

    def load(self, game_id: str, take: bool = False) -> Cached:
        """The game's state caught up to the end of its move stream.

        With `take`, the cached state is removed from the cache and handed over to be
        changed in place (a command puts it back with `keep` once its append succeeded);
        otherwise the cached state is shared and must only be read.
        """
        cached = self.kept.take(game_id) if take else self.kept.peek(game_id)
        if cached is None:
            found = self.secrets.get(game_id)
            if found is None:
                raise self._missing(game_id)
            cached = Cached(GameState(), 0, found)
        # A state at sequence 0 is new here; a taken one is ours alone when one thread runs.
        own = (take and self.in_place) or cached.seq == 0
        cached = self.caught_up(game_id, cached, own=own)
        if cached.seq == 0:  # no moves (or archived between the two reads above)
            raise self._missing(game_id)
        if not take:
            self.keep(game_id, cached)
        return cached

    def caught_up(self, game_id: str, cached: Cached, own: bool | None = None) -> Cached:
        """`cached` with the moves appended since its sequence applied (in place if `own`,
        by default when states change in place).

        The read starts at the cached sequence's own event: if the stream no longer holds
        it, or holds another command's there, a failover lost moves this state folded (Redis
        replication is asynchronous: deploy/README, tests/hosts), and the game is folded
        again from its first move, so nothing lost is believed or played on."""
        fresh = self.store.read(game_id, MOVES, after=max(0, cached.seq - 1))
        if cached.seq:
            if not fresh and self.secrets.archived(game_id):
                # The stream is gone from under a cached state: the game was archived (a
                # failover never loses a whole stream and leaves a tombstone). Folding it
                # again from nothing would answer as if the game had never started.
                self.kept.take(game_id)
                raise archived_game(game_id)
            if not still_holds(fresh, cached.seq, cached.command):
                FOLDED_AGAIN.inc()
                secrets = self.secrets.get(game_id) or cached.secrets
                return self.caught_up(game_id, Cached(GameState(), 0, secrets), own=True)
            fresh = fresh[1:]
        if not fresh:
            return cached
        EVENTS_READ.inc(len(fresh))
        if not (self.in_place if own is None else own):
            cached = Cached(cached.state.copy(), cached.seq, cached.secrets)
        events = []
        seed = cached.secrets["seed"]
        for stored in fresh:
            event = opened(cached.state, to_engine(stored), seed)  # R10.3: hands known here
            cached.state.apply(event)
            events.append(event)
        appends = len({stored.command_id for stored in fresh})  # each append's one command id
        advanced = cached.advanced(
            cached.state, fresh[-1].seq, events, fresh[-1].command_id, appends
        )
        if any(isinstance(e, TokenReissued) for e in events):
            # A seat's token was replaced: the cached token hashes are stale from here on.
            advanced.secrets = self.secrets.get(game_id) or advanced.secrets
        return advanced

    def _missing(self, game_id: str) -> GameError:
        """What a command on a game without moves here answers: a finished game's 409
        `game_over` when it was archived (its tombstone), else 404 `game_not_found`."""
        if self.secrets.archived(game_id):
            return archived_game(game_id)
        return NotFound("game_not_found", f"no game {game_id}")

    def keep(self, game_id: str, cached: Cached) -> None:
        """Cache a state (unless a newer one is there already)."""
        self.kept.keep(game_id, cached)


class Taken:
    """A game's cached state taken out of the fold cache for one command: the command
    service's unit of work (`services.common.moves.Unit`).

    With `trust`, a cached state is taken as current without reading the stream (`checked`
    False): the append is conditional on its sequence, so nothing rests on that belief.
    With `in_place` a decision is applied to the cached state itself (after a checkpoint),
    else to a copy; a lost race rewinds it from memory and reads only the moves after it."""

    def __init__(self, games: FoldCache, game_id: str, trust: bool, in_place: bool) -> None:
        self.games, self.game_id, self.in_place = games, game_id, in_place
        cached = games.kept.take(game_id) if trust else None
        self.checked = cached is None
        self.cached = games.load(game_id, take=True) if cached is None else cached
        self.ran_ahead: GameState | None = None

    @property
    def seq(self) -> int:
        """See `Unit.seq`."""
        return self.cached.seq

    @property
    def command(self) -> str:
        """See `Unit.command`."""
        return self.cached.command

    @property
    def state(self) -> GameState:
        """The state at `seq`, to decide on (never to change)."""
        return self.cached.state

    def work(self) -> GameState:
        """See `Unit.work`."""
        if not self.in_place:
            return self.cached.state.copy()  # other threads may be reading `cached.state`
        self.cached.checkpoint()
        self.ran_ahead = self.cached.state
        return self.ran_ahead

    def catch_up(self) -> None:
        """See `Unit.catch_up`."""
        before = self.cached if self.ran_ahead is None else self.cached.before(self.ran_ahead)
        self.cached, self.checked, self.ran_ahead = (
            self.games.caught_up(self.game_id, before),
            True,
            None,
        )

    def commit(self, state: GameState, appended: Appended) -> None:
        """See `Unit.commit`: a finished game takes no more commands, so it is not kept."""
        self.ran_ahead = None
        if state.over:
            return
        advanced = self.cached.advanced(
            state, appended.result.last_seq, appended.events, appended.command_id
        )
        if any(isinstance(e, TokenReissued) for e in appended.events):
            advanced.secrets = self.games.secrets.get(self.game_id) or advanced.secrets
        self.games.keep(self.game_id, advanced)

    def release(self) -> None:
        """See `Unit.release`: a state that ran ahead of the stream is not kept."""
        if self.ran_ahead is None:
            self.games.keep(self.game_id, self.cached)
