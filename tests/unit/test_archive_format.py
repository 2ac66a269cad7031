"""The archive's stored format (eventstore/archive.py): a copy unpacks to the very game it
was packed from, whatever its ids and payload texts; its digest is read back from the copy;
a damaged copy is refused."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore.archive import (
    ArchivedGame,
    GameMeta,
    RawEvent,
    Summary,
    all_commands,
    canonical,
    copy_digest,
    digest,
    pack,
    unpack,
)
from eventstore.envelope import MOVES, SCORES
from tests.archive_games import archived

ids = st.one_of(
    st.text(max_size=40),
    st.integers(0, 2**128 - 1).map(lambda n: f"{n:032x}"),
    st.just("create"),
)
texts = st.one_of(st.text(max_size=60), st.just('{"a": 1,  "b":[2]}'), st.just("x\ny"))


@st.composite
def games(draw: st.DrawFn) -> ArchivedGame:
    events = []
    for stream in (MOVES, SCORES):
        for seq in range(1, draw(st.integers(0, 12)) + 1):
            events.append(RawEvent(stream, seq, draw(st.sampled_from(["A", "B", "Ω"])),
                                   draw(st.integers(1, 3)), draw(st.integers(0, 2**45)),
                                   draw(ids), draw(texts)))  # fmt: skip
    spans = {e.command_id for e in events if e.stream == MOVES}
    fingerprint = st.one_of(st.integers(0, 2**256 - 1).map(lambda n: f"{n:064x}"), st.text())
    records = {c: f"x{draw(fingerprint)}" for c in spans if draw(st.booleans())}
    saved = draw(st.integers(0, 99))
    records |= {"empty": f"{saved + 1}:{saved}", "odd": f"0{saved + 1}:{saved}"}
    meta = GameMeta("over", draw(st.integers(0, 2**45)), 5, {"names": draw(st.lists(st.text()))})
    return ArchivedGame(draw(ids), meta, tuple(events), {MOVES: "3"}, {MOVES: records})


@settings(max_examples=150, deadline=None)
@given(games())
def test_a_copy_unpacks_to_the_game_it_was_made_of(game: ArchivedGame) -> None:
    copy = pack(game)
    back = unpack(copy)
    assert back == game
    assert canonical(back) == canonical(game)
    assert copy_digest(copy) == digest(game) == Summary.of(back).digest
    assert all_commands(back, MOVES) == all_commands(game, MOVES)


def test_a_real_game_packs_small() -> None:
    game = archived("ab" * 16, 7)
    assert len(pack(game)) < len(canonical(game)) / 5


def test_a_damaged_copy_is_refused() -> None:
    copy = pack(archived("cd" * 16, 8))
    with pytest.raises(ValueError):
        unpack(copy[:-10])
    with pytest.raises(ValueError):
        copy_digest(copy[:100])


def test_a_log_with_a_hole_or_out_of_order_is_refused() -> None:
    game = archived("ef" * 16, 9)
    for events in (game.events[1:], game.events[::-1], (*game.events, game.events[0])):
        with pytest.raises(ValueError):
            pack(dataclasses.replace(game, events=events))


def test_format_1s_canonical_bytes_never_change() -> None:
    """The digest of canonical bytes made before the column-wise rewrite of `canonical`
    (copies made then verify, and are not copied again, only if these stay the same)."""
    made = hashlib.sha256()
    for i in range(12):
        game = archived(f"{i:032x}", i)
        cmd = next(e.command_id for e in game.events if e.command_id != "create")
        game = dataclasses.replace(game, commands={MOVES: {cmd: "x", "ab" * 16: "8:7"}})
        made.update(canonical(game))
    assert made.hexdigest() == "d17755e98bed9a353f3bf4a987ce87eab2bbc657f86e48124a970c4bdc103665"
