"""`FallThroughStore` (services/archive/fallthrough.py) on an in-memory store and archive:
when it looks for a tombstone (never on a hot game's reads once it has a score marker), what
it keeps, and an archive that cannot be read."""

from __future__ import annotations

import json
import sqlite3

import pytest

from eventstore.archive import InMemoryArchive
from eventstore.envelope import MOVES, SCORES, NewEvent
from eventstore.port import InMemoryEventStore
from services.archive.fallthrough import ArchiveUnavailable, FallThroughStore
from tests.archive_games import archived


class Tombstones:
    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.asked: list[str] = []

    def __call__(self, game_id: str) -> bool:
        self.asked.append(game_id)
        return game_id in self.ids


def setup() -> tuple[FallThroughStore, InMemoryArchive, Tombstones, InMemoryEventStore]:
    archive, tombstones, inner = InMemoryArchive(), Tombstones(), InMemoryEventStore()
    return FallThroughStore(inner, tombstones, lambda: archive, logs=2), archive, tombstones, inner


def test_an_archived_game_reads_as_it_was_stored_and_is_read_from_the_archive_once() -> None:
    store, archive, tombstones, _ = setup()
    game = archived("a" * 32, 3)
    archive.put(game)
    tombstones.ids.add(game.game_id)
    moves = store.read(game.game_id, MOVES)
    assert [(e.seq, e.type, e.version, e.time_ms, e.command_id) for e in moves] == [
        (e.seq, e.type, e.version, e.time_ms, e.command_id)
        for e in game.events if e.stream == MOVES
    ]  # fmt: skip
    assert moves[4].payload == json.loads(
        next(e.data for e in game.events if e.stream == MOVES and e.seq == 5)
    )
    assert store.last_seq(game.game_id, SCORES) == game.count(SCORES)
    assert store.marker(game.game_id, SCORES) == game.markers[SCORES]
    assert (
        store.read(game.game_id, SCORES, after=2, limit=3) == store.read(game.game_id, SCORES)[2:5]
    )
    assert store.read(game.game_id, MOVES, after=game.count(MOVES)) == []
    assert store.record(game.game_id) == game.meta.record
    assert (store.loads, tombstones.asked) == (1, [game.game_id])


def test_a_hot_game_with_a_marker_never_looks_for_a_tombstone() -> None:
    store, _, tombstones, inner = setup()
    game = archived("b" * 32, 4)
    events = [e for e in game.events if e.stream == MOVES][:5]
    inner.append("hot", MOVES, [NewEvent(e.type, e.version, json.loads(e.data)) for e in events],
                 expected=0, command_id="c", marker="$seq")  # fmt: skip
    inner.append("hot", SCORES, [], expected=0, command_id="s", marker="5")
    assert len(store.read("hot", MOVES)) == 5
    assert store.read("hot", MOVES, after=5) == []
    assert store.read("hot", SCORES) == []  # no score events yet: not a tombstone question
    assert store.marker("hot", SCORES) == "5"
    assert store.last_seq("hot", MOVES) == 5
    assert tombstones.asked == []
    # Unknown: one look each time it is asked, and nothing kept.
    assert store.read("nope", MOVES) == [] and store.last_seq("nope", MOVES) == 0
    assert tombstones.asked == ["nope", "nope"]
    assert not store.is_archived("nope")


def test_an_archive_that_cannot_be_read_is_a_503_and_is_opened_again_after() -> None:
    archive, tombstones, inner = InMemoryArchive(), Tombstones(), InMemoryEventStore()
    game = archived("c" * 32, 5)
    archive.put(game)
    tombstones.ids.add(game.game_id)
    opened: list[int] = []

    def open_archive() -> InMemoryArchive:
        opened.append(1)
        if len(opened) == 1:
            raise sqlite3.OperationalError("unable to open database file")
        return archive

    store = FallThroughStore(inner, tombstones, open_archive)
    with pytest.raises(ArchiveUnavailable) as info:
        store.read(game.game_id, MOVES)
    assert (info.value.status, info.value.code) == (503, "archive_unavailable")
    assert len(store.read(game.game_id, MOVES)) == game.count(MOVES)
    assert len(opened) == 2


def test_a_log_let_go_is_read_again_and_the_facts_stay() -> None:
    store, archive, tombstones, _ = setup()  # logs=2
    games = [archived(c * 32, i) for i, c in enumerate("def")]
    for game in games:
        archive.put(game)
        tombstones.ids.add(game.game_id)
        assert store.last_seq(game.game_id, MOVES) == game.count(MOVES)
    assert store.loads == 3
    # The first game's log made room; its ends and markers are still known (no I/O).
    assert store.last_seq(games[0].game_id, MOVES) == games[0].count(MOVES)
    assert store.marker(games[0].game_id, SCORES) == games[0].markers[SCORES]
    assert store.loads == 3
    assert len(store.read(games[0].game_id, MOVES)) == games[0].count(MOVES)
    assert store.loads == 4
