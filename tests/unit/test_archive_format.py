"""The archive's stored format (eventstore/archive.py): a copy unpacks to the very game it
was packed from, whatever its ids and payload texts; its digest is read back from the copy;
a damaged copy is refused; copies of format 1 (archive_format1_copies.json, packed before
format 2) still read back."""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
from pathlib import Path

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

FORMAT1 = Path(__file__).with_name("archive_format1_copies.json")  # copies packed by format 1

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


def _commanded(i: int) -> ArchivedGame:
    """Test game `i` as the copies and the digest below were made of it: a random game with
    two command records its events do not imply, its placements at TilePlaced v2 (v3,
    docs/clocks.md, has the same payload in a game without a bank; only the version
    differs). Read back from its format 1 copy: these tests pin the archive's format, and
    the game `archived(i)` plays now changes whenever the engine's legal moves do (random
    play picks among them: the R5.3 fix of the placed tile's joined fields changed it)."""
    return _format1_games()[i]


@functools.cache
def _format1_games() -> dict[int, ArchivedGame]:
    stored = json.loads(FORMAT1.read_text())
    return {
        item["seed"]: unpack(base64.b64decode(item["copy"]))
        for item in stored["copies"]
        if item["seed"] is not None
    }


def _odd() -> ArchivedGame:
    """A game with what the column layouts must not trip on: a payload with a newline, an
    empty one, non-ASCII, odd command ids and records, an abandoned game's meta."""
    events = (RawEvent(MOVES, 1, "A", 1, 5, "create", '{"a": 1,  "b":[2]}'),
              RawEvent(MOVES, 2, "Ω", 2, 9, "ab" * 16, "x\ny"),
              RawEvent(MOVES, 3, "A", 1, 3, "cmd é", ""),
              RawEvent(SCORES, 1, "B", 3, 11, "score:1-3", "ü"))  # fmt: skip
    meta = GameMeta("abandoned", 5, 11, {"names": ["Ådá", "b"], "public": True})
    records = {"ab" * 16: "2:2:" + "cd" * 32, "empty": "4:3", "odd": "04:3"}
    return ArchivedGame("odd-é", meta, events, {MOVES: "3"}, {MOVES: records})


def test_format_2s_canonical_bytes_never_change() -> None:
    """The digest of format 2's canonical bytes (copies made verify, and are not copied
    again, only if these stay the same)."""
    made = hashlib.sha256()
    for i in range(12):
        made.update(canonical(_commanded(i)))
    assert made.hexdigest() == "4dfbd4a922fcd7abe50a0dcaefa4ba056855692dbce936a3c0e4b3116fcd8820"


def test_format_1_copies_still_read_back() -> None:
    """Copies packed in format 1 (zlib 9, archive_v1.zdict, no prefix byte) by the code
    before format 2: each unpacks to its game, and its digest is the one verified then; the
    same game packed now (format 2) unpacks the same, with another digest (a format 1 copy
    of a game still in Redis is copied again, in format 2)."""
    stored = json.loads(FORMAT1.read_text())
    for item in stored["copies"]:
        game = _odd() if item["seed"] is None else _commanded(item["seed"])
        old = base64.b64decode(item["copy"])
        assert old[:1] == b"x"  # a bare zlib stream
        assert unpack(old) == game
        assert copy_digest(old).hex() == item["digest"]
        new = pack(game)
        assert new[:1] == b"\x02"
        assert unpack(new) == game
        assert copy_digest(new) == digest(game) != copy_digest(old)


def test_a_format_2_copy_is_small_and_refused_when_damaged() -> None:
    game = _commanded(3)
    copy = pack(game)
    assert len(copy) < len(canonical(game)) / 5
    for damaged in (copy[:-10], b"\x03" + copy[1:], copy[1:], b"\x02"):
        with pytest.raises(ValueError):
            unpack(damaged)
        with pytest.raises(ValueError):
            copy_digest(damaged)


def test_more_event_types_than_letters_round_trip() -> None:
    events = tuple(RawEvent(MOVES, i + 1, f"T{i % 30}", 1, i, "create", "{}") for i in range(40))
    game = ArchivedGame("many", GameMeta("over", 0, 39), events, {MOVES: "40"})
    assert unpack(pack(game)) == game
