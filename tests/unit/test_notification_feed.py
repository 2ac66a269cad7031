"""The notification feed of a game (services/scoring/feed.py) and the subscription signature
(services/common/signing.py): pure pieces, no Redis."""

from __future__ import annotations

import random

import pytest

from carcassonne.events import with_seats
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_new
from eventstore.score_stream import score_events
from services.common.notifications import live_secrets
from services.common.signing import sign, verify
from services.scoring.feed import Feed, feed_items, with_match


def stored_game(seed: int) -> InMemoryEventStore:
    """A whole random 3-player game with player ids, and its score stream."""
    _, events = random_game(random.Random(seed), 3)
    events = with_seats(events, ["Ann", "Bob", "Cy"], ["u-a", None, "u-c"])
    store = InMemoryEventStore()
    store.append("g", MOVES, [to_new(e) for e in events], expected=0, command_id="c")
    store.append("g", SCORES, score_events(GameState(), store.read("g", MOVES)), expected=0,
                 command_id="s")  # fmt: skip
    return store


def test_the_feed_follows_the_game_in_seq_order() -> None:
    store = stored_game(5)
    moves, scores = store.read("g", MOVES), store.read("g", SCORES)
    items = feed_items(moves, scores)
    assert [i.seq for i in items] == sorted(i.seq for i in items)
    placed = [m for m in moves if m.type in ("TilePlaced", "TileDiscarded")]
    made = [i for i in items if i.kind == "move_made"]
    assert [i.seq for i in made] == [m.seq for m in placed]
    assert [i.data["seat"] for i in made] == [m.payload["player"] for m in placed]
    # Every turn_started names the seat that moves next, with its player id (or null).
    started = [i for i in items if i.kind == "turn_started"]
    for item in started:
        following = next(m for m in placed if m.seq > item.seq)
        assert item.data["seat"] == following.payload["player"]
        assert item.data["player_id"] == ["u-a", None, "u-c"][item.data["seat"]]
        assert item.data["deadline_ms"] is None  # no turn limit in this game
    assert [i.score_seq for i in items if i.kind in ("score", "game_over")] == [
        s.seq for s in scores
    ]
    assert items[-1].kind == "game_over"
    # Each move's scores come after the move and before the next turn.
    for item in items:
        if item.kind == "score":
            assert item.data["move"] == item.seq


def test_a_game_starts_with_one_item_naming_every_seat_before_its_first_turn() -> None:
    store = stored_game(6)
    items = feed_items(store.read("g", MOVES), store.read("g", SCORES))
    assert [i.kind for i in items[:2]] == ["game_started", "turn_started"]
    assert items[0].seq == 1 and items[0].data == {
        "players": [
            {"seat": 0, "player_id": "u-a", "name": "Ann"},
            {"seat": 1, "player_id": None, "name": "Bob"},
            {"seat": 2, "player_id": "u-c", "name": "Cy"},
        ]
    }
    assert sum(i.kind == "game_started" for i in items) == 1


def test_a_matched_game_says_match_found_with_each_seats_ticket_after_it_starts() -> None:
    store = stored_game(6)
    items = feed_items(store.read("g", MOVES), store.read("g", SCORES))
    assert with_match(items, {"names": ["Ann", "Bob", "Cy"]}) == items  # not a match
    matched = with_match(items, {"match": {"tickets": ["t_a", "t_b", "t_c"]}})
    assert [i.kind for i in matched[:3]] == ["game_started", "match_found", "turn_started"]
    assert [(p["seat"], p["player_id"], p["ticket_id"]) for p in matched[1].data["players"]] == [
        (0, "u-a", "t_a"), (1, None, "t_b"), (2, "u-c", "t_c")
    ]  # fmt: skip
    assert matched[1].seq == 1 and len(matched) == len(items) + 1


def test_a_prefix_of_the_moves_gives_a_prefix_of_the_feed() -> None:
    store = stored_game(8)
    moves, scores = store.read("g", MOVES), store.read("g", SCORES)
    whole = [i.to_dict() for i in feed_items(moves, scores)]
    cut = moves[len(moves) // 2].seq
    part = feed_items(moves[: len(moves) // 2 + 1], [s for s in scores if s.payload["move"] <= cut])
    assert [i.to_dict() for i in part] == whole[: len(part)]


def test_a_feed_resumed_move_by_move_gives_the_whole_feed_and_refuses_a_gap() -> None:
    store = stored_game(9)
    moves, scores = store.read("g", MOVES), store.read("g", SCORES)
    feed, resumed = Feed(), []
    for move in moves:
        resumed += feed.advance([move], [s for s in scores if s.payload["move"] == move.seq])
    assert feed.seq == moves[-1].seq
    assert [i.to_dict() for i in resumed] == [i.to_dict() for i in feed_items(moves, scores)]
    with pytest.raises(ValueError, match="given move 3"):
        Feed().advance(moves[2:], scores)  # a fold that skipped moves would tell wrong seats


def test_signatures_carry_one_v1_per_live_secret_and_a_window() -> None:
    body = b'{"kind":"turn_started"}'
    header = sign(["new-secret", "old-secret"], body, 1_800_000_000)
    assert header.startswith("t=1800000000,v1=") and header.count("v1=") == 2
    for secret in ("new-secret", "old-secret"):
        assert verify(header, body, secret, now=1_800_000_100)
    assert not verify(header, body, "other", now=1_800_000_100)
    assert not verify(header, body + b"x", "new-secret", now=1_800_000_100)
    assert not verify(header, body, "new-secret", now=1_800_000_000 + 301)  # replayed late
    assert not verify("v1=" + header.split("v1=")[1], body, "new-secret", now=1_800_000_000)
    config = {"secrets": [{"secret": "a", "until_ms": None}, {"secret": "b", "until_ms": 10},
                          {"secret": "c", "until_ms": 5}]}  # fmt: skip
    assert live_secrets(config, now_ms=7) == ["a", "b"]
    assert live_secrets(config, now_ms=10) == ["a"]


def test_a_hand_game_starts_each_turn_without_naming_a_tile() -> None:
    """R10.3: in a hand game each turn_started comes once the seat's hand is refilled, names
    the seat that places next, and never a tile (the hand is secret: its /hand says it)."""
    from carcassonne.ruleset import Ruleset

    _, events = random_game(random.Random(4), 2, Ruleset(hand=3))
    store = InMemoryEventStore()
    store.append("g", MOVES, [to_new(e) for e in events], expected=0, command_id="c")
    moves = store.read("g", MOVES)
    items = feed_items(moves, [])
    started = [i for i in items if i.kind == "turn_started"]
    # as in the base game, a hand tile set aside (R4.4) starts the same seat's turn again
    made = [m for m in moves if m.type in ("TilePlaced", "TileDiscarded")]
    assert len(started) == len(made) > 0
    for item, move in zip(started, made, strict=True):
        assert item.seq <= move.seq and item.data["seat"] == move.payload["player"]
        assert item.data["tile"] is None


def test_an_end_that_changes_no_clock_in_the_game_is_no_player_back() -> None:
    """docs/clocks.md: a vacation's end may reach a game before its pause (logged there for
    the pause to come, which it drops or cuts). The others hear `player_back` only of an end
    that stops an absence of the game; a call-off that came first then says nothing at all,
    and an early end that came first tells of the absence as it was (`player_away`)."""
    from carcassonne.events import PauseClock, ResumeClock
    from tests.unit.engine_steps import NOW, run, started

    for back, kinds in ((NOW + 1_000, []), (NOW + 500_000, ["player_away"])):
        state, log = started(initial_seconds=300)
        start, until = NOW + 200_000, NOW + 900_000
        log += run(state, ResumeClock(0, back, start, "v"))  # the end, before its pause
        log += run(state, PauseClock(0, NOW + 2_000, until, start, "v"))
        store = InMemoryEventStore()
        store.append("g", MOVES, [to_new(e) for e in log], expected=0, command_id="c")
        items = feed_items(store.read("g", MOVES), [])
        assert [i.kind for i in items if i.kind.startswith("player_")] == kinds
    (away,) = [i for i in items if i.kind == "player_away"]
    assert (away.data["from_ms"], away.data["until_ms"]) == (start, NOW + 500_000)
