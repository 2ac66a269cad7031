"""The scoring worker's logic on the in-memory store: the score stream of every golden game
equals the engine's scoring (R6, R7.2-R7.5), whatever the batch size, crashes or races."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from carcassonne.record import load_record, record_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore import port
from eventstore.envelope import MOVES, SCORES, NewEvent, StoredEvent
from eventstore.errors import SchemaError
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_new, upcast
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED
from services.scoring.scorer import Scorer

GOLDEN = sorted((Path(__file__).resolve().parents[1] / "golden").glob("*.json"))


def stored_game(store: InMemoryEventStore, game_id: str, events: list[Any]) -> None:
    for start in range(0, len(events), 3):
        chunk = [to_new(e) for e in events[start : start + 3]]
        store.append(game_id, MOVES, chunk, expected=start, command_id=f"c{start}", marker="$seq")


def payloads(store: InMemoryEventStore, game_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.payload) for e in store.read(game_id, SCORES)]


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
@pytest.mark.parametrize("batch", [1, 5, 1000])
def test_golden_games_score_to_their_known_totals(path: Path, batch: int) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    record = load_record(
        {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}
    )
    store = InMemoryEventStore()
    stored_game(store, "g", record_events(record))
    done = Scorer(store, batch=batch).catch_up("g")
    assert done.moves == store.last_seq("g", MOVES) == done.progress
    scores = payloads(store, "g")
    final = scores[-1]
    assert final[0] == GAME_SCORED
    assert final[1]["final_scores"] == data["expected"]["final_scores"]
    assert final[1]["scores_before_final"] == data["expected"]["scores_before_final"]
    features = [p for kind, p in scores if kind == FEATURE_SCORED]
    # Each feature's points add up to the totals, and `totals` runs along with them.
    running = [0] * record.players
    for p in features:
        running = [r + a for r, a in zip(running, p["awarded"], strict=True)]
        assert p["totals"] == running
        assert p["rule"].startswith(("R6", "R9.2")) or p["final"]  # R9.2: gardens, the abbot
    assert running == data["expected"]["final_scores"]
    assert Scorer(store, batch=batch).catch_up("g").moves == 0  # nothing left: no new events


def test_batch_size_does_not_change_the_stream() -> None:
    _, events = random_game(random.Random(5), 3, Ruleset(farm_scoring="1st"))
    streams = []
    for batch in (1, 2, 7, 1000):
        store = InMemoryEventStore()
        stored_game(store, "g", events)
        Scorer(store, batch=batch).catch_up("g")
        streams.append(payloads(store, "g"))
    assert all(s == streams[0] for s in streams)


def test_racing_scorers_write_each_event_once() -> None:
    """Two scorers with stale caches take turns on one game: the loser of each race appends
    nothing and reloads from the winner's progress (different batch sizes: their appends
    never share a command id, so every race is decided by the progress marker)."""
    _, events = random_game(random.Random(9), 2, Ruleset())
    store, alone = InMemoryEventStore(), InMemoryEventStore()
    stored_game(alone, "g", events)
    Scorer(alone).catch_up("g")
    a, b = Scorer(store, batch=3), Scorer(store, batch=2)
    conflicts = 0
    for start in range(0, len(events), 3):  # moves arrive while both scorers work on them
        chunk = [to_new(e) for e in events[start : start + 3]]
        store.append("g", MOVES, chunk, expected=start, command_id=f"c{start}", marker="$seq")
        conflicts += a.catch_up("g").conflicts + b.catch_up("g").conflicts
        conflicts += b.catch_up("g").conflicts + a.catch_up("g").conflicts
    assert payloads(store, "g") == payloads(alone, "g")
    assert conflicts > 0  # the races really happened


def test_a_crash_before_the_append_redoes_the_batch_exactly_once() -> None:
    """A scorer that dies after computing a batch but before appending it leaves no trace;
    the next one scores the same moves once."""
    _, events = random_game(random.Random(4), 2, Ruleset())
    store, alone = InMemoryEventStore(), InMemoryEventStore()
    stored_game(store, "g", events)
    stored_game(alone, "g", events)
    Scorer(alone).catch_up("g")

    class Crash(Exception):
        pass

    real_append = store.append
    calls = 0

    def crashing_append(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Crash
        return real_append(*args, **kwargs)

    store.append = crashing_append  # type: ignore[method-assign]
    with pytest.raises(Crash):
        Scorer(store, batch=10).catch_up("g")
    store.append = real_append  # type: ignore[method-assign]
    Scorer(store, batch=10).catch_up("g")
    assert payloads(store, "g") == payloads(alone, "g")


def test_score_events_are_validated_on_write_and_read_as_stored() -> None:
    """The suite checks every append against the schemas (`CHECK_PAYLOADS`, tests/conftest.py):
    a score event they refuse is not written. What is stored is read as it is, not checked
    again: it was checked, or made by the engine, when it was written."""
    assert port.CHECK_PAYLOADS
    store = InMemoryEventStore()
    bad = NewEvent(FEATURE_SCORED, 1, {"move": 1, "kind": "castle"})
    with pytest.raises(SchemaError):
        store.append("g", SCORES, [bad], expected=0, command_id="x")
    assert store.last_seq("g", SCORES) == 0
    stored = StoredEvent("g", SCORES, 1, FEATURE_SCORED, 1, 0, "x", bad.payload)
    store.put_raw(stored)
    assert store.read("g", SCORES) == [upcast(stored)] == [stored]
