"""Games for the query-service tests: a greedy player that laps the score track (R8.1), and
storing engine events as the command service appends them."""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any

from carcassonne.events import Event, GameEnded, GameStarted, TileDiscarded, TileDrawn, TilePlaced
from carcassonne.game import actions, fold
from carcassonne.ruleset import Ruleset
from carcassonne.state import OVER, GameState
from eventstore.envelope import MOVES
from eventstore.port import EventStore
from eventstore.schemas import to_new


def greedy_game(seed: int) -> tuple[GameState, list[Event]]:
    """Two players: player 0 takes the action that would give it the most points if the game
    ended right after it (the engine's own final scoring, R6/R7); player 1 plays at random
    without meeples. Tiles come from a bag shuffled by `seed`."""
    rng = random.Random(seed)
    state, events = GameState(), []

    def emit(event: Event) -> None:
        state.apply(event)
        events.append(event)

    emit(GameStarted(Ruleset(), 2))
    bag = [name for name, n in sorted(state.bag.items()) for _ in range(n)]
    rng.shuffle(bag)
    while bag and state.phase != OVER:
        tile = bag.pop()
        emit(TileDrawn(tile))
        choices = actions(state)
        if not choices:
            emit(TileDiscarded(state.current, tile))
            continue
        if state.current == 0:
            best: tuple[float, tuple] | None = None
            for choice in choices:
                trial = state.copy()
                trial.apply(TilePlaced(0, tile, *choice))
                trial.apply(GameEnded("trial"))
                value = trial.scores[0] + rng.random()  # random tie-break
                if best is None or value > best[0]:
                    best = (value, choice)
            assert best is not None
            x, y, rotation, meeple = best[1]
        else:
            x, y, rotation, meeple = rng.choice([c for c in choices if c[3] is None])
        emit(TilePlaced(state.current, tile, x, y, rotation, meeple))
    if state.phase != OVER:
        emit(GameEnded("last tile placed"))
    return state, events


@lru_cache(maxsize=1)
def long_game() -> tuple[GameState, tuple[Event, ...]]:
    """The first greedy game (by seed) in which a player passes 100 points."""
    for seed in range(50):
        state, events = greedy_game(seed)
        if max(state.scores) >= 100:
            return state, tuple(events)
    raise AssertionError("no greedy game reached 100 points")


def store_game(store: EventStore, game_id: str, events: list[Event] | tuple[Event, ...]) -> None:
    """Append a game's events a few at a time, as the command service does (marker = last)."""
    seq = store.last_seq(game_id, MOVES)
    for start in range(0, len(events), 3):
        chunk = [to_new(e) for e in events[start : start + 3]]
        store.append(game_id, MOVES, chunk, expected=seq, command_id=f"c{seq}", marker="$seq")
        seq += len(chunk)


def test_the_long_game_is_a_legal_game_that_laps_the_track_twice() -> None:
    state, events = long_game()
    assert fold(events).snapshot() == state.snapshot()  # a fold of its own events
    assert state.over and max(state.scores) >= 100


def test_merged_pages_list_every_game_once_in_order_whatever_each_side_stops_at() -> None:
    """`merge_pages` over two sides that each stop early (a directory page that looked at
    its most, an archive page that is full): walking the cursor lists every game once,
    newest first; a game on both sides once."""
    import random

    from services.query.service import merge_pages

    rng = random.Random(7)
    for _ in range(200):
        created = [rng.randrange(30) for _ in range(200)]  # a game's creation ms: ties
        hot = {(created[n], f"{n:04x}") for n in rng.sample(range(200), 25)}
        cold = {(created[n], f"{n:04x}") for n in rng.sample(range(200), 25)}
        cold |= set(rng.sample(sorted(hot), 3))  # being archived: in both for a moment
        every = sorted({e[1]: e for e in hot | cold}.values(), reverse=True)
        limit = rng.randrange(1, 6)

        def side(entries: set, after: Any, most: int) -> tuple[list, Any]:
            found = sorted((e for e in entries if after is None or e < after), reverse=True)
            page = found[:most]
            return [(e, {"game_id": e[1]}) for e in page], page[-1] if len(found) > most else None

        listed: list[str] = []
        after = None
        for _ in range(500):
            hot_page, hot_to = side(hot, after, rng.randrange(1, limit + 1))  # short pages
            cold_page, cold_to = side(cold, after, limit)
            page, after = merge_pages(hot_page, hot_to, cold_page, cold_to, limit)
            assert len(page) <= limit
            listed += [g["game_id"] for g in page]
            if after is None:
                break
        assert listed == [e[1] for e in every]
