"""`Scorer`: catches one game's score stream up with its move stream.

Progress (the last move scored) is the score stream's marker, saved by the same atomic
append as the score events it produced and conditional on the progress the scorer started
from. So a crash at any point, a redelivered task or two workers on one game can neither
skip a move nor score one twice: the loser of a race appends nothing and starts again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.errors import ConcurrencyError
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from eventstore.score_stream import score_events
from services.common.kept import Kept

log = logging.getLogger(__name__)


@dataclass
class _Cached:
    state: GameState  # after move `progress`
    progress: int  # last move scored
    score_seq: int  # last score event appended


@dataclass(frozen=True)
class CatchUp:
    """What one catch-up did."""

    game_id: str
    moves: int  # move events scored
    events: int  # score events appended
    conflicts: int  # appends lost to another worker (then redone from its progress)
    progress: int  # last move scored afterwards
    lags_ms: tuple[int, ...] = ()  # per score event: its append time minus its move's


class Scorer:
    """Scores games from their move streams; keeps folded states of recent games."""

    def __init__(self, store: EventStore, batch: int = 1_000, cache_size: int = 2_000) -> None:
        self.store = store
        self.batch = max(1, batch)
        self._cache: Kept[str, _Cached] = Kept(cache_size, lambda cached: cached.progress)

    def catch_up(self, game_id: str, until: int | None = None) -> CatchUp:
        """Score every move of the game not scored yet (up to move `until`, if given), a
        batch per atomic append."""
        moves = events = conflicts = 0
        lags: list[int] = []
        while True:
            taken = self._cache.take(game_id)
            cached = taken or self._load(game_id)
            want = self.batch if until is None else min(self.batch, until - cached.progress)
            batch = (
                self.store.read(game_id, MOVES, after=cached.progress, limit=want)
                if want > 0
                else []
            )
            if not batch:
                if taken is not None and self._behind(game_id, cached):
                    continue  # dropped from the cache: folded again from the saved progress
                self._cache.keep(game_id, cached)
                break
            state = cached.state
            try:
                scored = score_events(state, batch)  # `state` now stands after the batch
            except Exception:
                # A failover rewound the moves this cached state folded and the log grew past
                # it again before we looked: the new moves may not fold on it at all (a
                # ValueError in tests/hosts, the game then left unscored). Fold again from
                # the saved progress before blaming the moves.
                if taken is not None and self._behind(game_id, cached):
                    continue
                raise
            last = batch[-1].seq
            try:
                result = self.store.append(
                    game_id,
                    SCORES,
                    scored,
                    expected=cached.score_seq,
                    command_id=f"score:{cached.progress + 1}-{last}",
                    marker=str(last),
                    expected_marker=str(cached.progress) if cached.progress else "",
                )
            except ConcurrencyError:
                conflicts += 1  # another worker scored some of these: start from its progress
                log.info("game %s: lost a race at move %d; reloading", game_id, cached.progress)
                continue
            self._cache.keep(game_id, _Cached(state, last, result.last_seq))
            moves += len(batch)
            events += len(scored)
            if scored and not result.duplicate:
                moved = {e.seq: e.time_ms for e in batch}
                lags += [result.time_ms - moved[e.payload["move"]] for e in scored]
            if len(batch) < want:
                break
        kept = self._cache.peek(game_id)
        return CatchUp(game_id, moves, events, conflicts, kept.progress if kept else 0, tuple(lags))

    def _behind(self, game_id: str, cached: _Cached) -> bool:
        """Whether the saved progress is no longer where the cached state stands: a failover
        lost moves or score events this state reflected (the game would otherwise wait,
        unscored, until its moves grew past the cached progress: tests/hosts)."""
        raw = self.store.marker(game_id, SCORES)
        if (int(raw) if raw else 0) == cached.progress:
            return False
        log.warning("game %s: its saved progress moved back from move %d; folding again",
                    game_id, cached.progress, extra={"game_id": game_id})  # fmt: skip
        return True

    def folded(self, game_id: str) -> tuple[GameState, int] | None:
        """A copy of the game's folded state and the move it stands after, if this scorer
        has it cached (the turn timer starts from it rather than from the first move)."""
        cached = self._cache.peek(game_id)
        return None if cached is None else (cached.state.copy(), cached.progress)

    def _load(self, game_id: str) -> _Cached:
        """The game folded up to its saved progress (no cache, or the cache was stale)."""
        raw = self.store.marker(game_id, SCORES)
        progress = int(raw) if raw else 0
        score_seq = self.store.last_seq(game_id, SCORES)
        state = GameState()
        if progress:
            for stored in self.store.read(game_id, MOVES, after=0, limit=progress):
                state.apply(to_engine(stored))
        return _Cached(state, progress, score_seq)
