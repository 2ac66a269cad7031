"""The move stream's one write path (services/common/moves.py): `append_moves` and the
`run_command` loop, on the in-memory store."""

from __future__ import annotations

import pytest

from carcassonne.errors import GameError, OutOfTurnError
from carcassonne.events import StartGame
from carcassonne.game import decide
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from eventstore.envelope import MOVES
from eventstore.port import InMemoryEventStore
from services.common.moves import (
    Appended,
    Committed,
    Decision,
    Fold,
    Handler,
    Once,
    run_command,
)


def start() -> Decision:
    """A two-player game's start, with the first draw from seed "s"."""
    return Decision(decide(GameState(), StartGame(Ruleset(), 2)), "create", "s")


def test_a_decision_is_applied_drawn_for_and_appended_once_under_its_id() -> None:
    store = InMemoryEventStore()
    state = GameState()
    done = run_command(store, "g", Fold(state, 0), Once(start(), lambda a: "lost"))
    assert isinstance(done, Committed) and done.state is state
    stored = store.read("g", MOVES)
    assert [e.type for e in stored] == [e.type for e in done.appended.new_events]
    assert stored[-1].type == "TileDrawn" and state.drawn is not None  # drawn after the start
    assert done.appended.stored == stored  # as the append's result places them
    assert store.marker("g", MOVES) == str(stored[-1].seq)  # "moves up to here exist"
    # The same command id again is a duplicate; another one at a stale sequence a conflict:
    # either way a `Once` answers its `lost` and appends nothing.
    seen: list[Appended | None] = []

    def lost(appended: Appended | None) -> str:
        seen.append(appended)
        return "lost"

    again = run_command(store, "g", Fold(GameState(), 0), Once(start(), lost), attempts=1)
    late = Decision(start().events, "other", "s")
    assert run_command(store, "g", Fold(GameState(), 0), Once(late, lost), attempts=1) == "lost"
    assert again == "lost" and seen[0] is not None and seen[0].result.duplicate
    assert seen[1] is None
    assert len(store.read("g", MOVES)) == len(stored)


class Counted(Fold):
    """A unit that counts its catch-ups and releases (and starts unchecked)."""

    def __init__(self, state: GameState, seq: int) -> None:
        super().__init__(state, seq, checked=False)
        self.caught_up = self.released = 0

    def catch_up(self) -> None:
        self.caught_up += 1
        self.checked = True

    def release(self) -> None:
        self.released += 1


class Stubborn(Handler[Counted, str]):
    """Refuses once (on a state not checked yet), then decides at a stale sequence forever."""

    def __init__(self) -> None:
        self.decided = 0

    def decide(self, unit: Counted) -> Decision | str:
        self.decided += 1
        if not unit.checked:
            raise GameError("not_yet", "refused on a state taken on trust")
        return Decision(start().events, f"try-{self.decided}", "s")


def test_a_refusal_on_trust_is_caught_up_and_every_lost_race_retried_until_stale() -> None:
    store = InMemoryEventStore()
    run_command(store, "g", Fold(GameState(), 0), Once(start(), lambda a: "lost"))
    unit, handler = Counted(GameState(), 0), Stubborn()
    with pytest.raises(OutOfTurnError) as stale:
        run_command(store, "g", unit, handler, attempts=3)
    assert stale.value.code == "stale_sequence"
    # one catch-up after the refusal, one after each of the 3 lost races; released once
    assert (handler.decided, unit.caught_up, unit.released) == (4, 4, 1)
