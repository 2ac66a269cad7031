"""Who played is in the log: `GameStarted` schema version 2 lists the seats (name and player
id, seat order), v1 games are upcast with null seats, records and the notation carry the names.

Every test here fails on the code before the change: there was no GameStarted v2 schema, the
engine event had no `names`/`player_ids`, `record_from_events` took names only from its
arguments, and the notation had no names (a `names=` header option was "unknown").
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from carcassonne.errors import MalformedError, RecordError
from carcassonne.events import GameStarted, event_from_dict, event_to_dict, with_seats
from carcassonne.export import record_from_export
from carcassonne.notation import format_record, parse_record
from carcassonne.record import load_record, record_events, record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore.envelope import MOVES, NewEvent
from eventstore.errors import SchemaError
from eventstore.port import InMemoryEventStore
from eventstore.schemas import CURRENT, to_engine, to_new, validate_payload
from services.query.projector import Projector
from services.query.views import board_view

from .samples import README_NOTATION, README_RECORD

RULES = Ruleset().to_dict()
NAMED = GameStarted(Ruleset(), 3, ("Ann", "Bob Lee", "Zoë"), ("u-1", None, "u-3"))


def seats(event: object) -> tuple[object, ...]:
    """What names a GameStarted's seats (they take no part in comparing events)."""
    assert isinstance(event, GameStarted)
    return event.players, event.names, event.player_ids


def _stored_game(first: NewEvent) -> InMemoryEventStore:
    """A whole random game in a store, its first event replaced by `first`."""
    _, events = random_game(random.Random(3), 3, Ruleset())
    store = InMemoryEventStore()
    moves = [first] + [to_new(e) for e in events[1:]]
    store.append("g", MOVES, moves, expected=0, command_id="c", marker="$seq")
    return store


# ------------------------------------------------------------------ the stored event


def test_game_started_is_stored_at_version_2_with_its_seats() -> None:
    assert CURRENT["GameStarted"] == 2
    new = to_new(NAMED)
    assert (new.type, new.version) == ("GameStarted", 2)
    assert new.payload == {
        "ruleset": RULES,
        "players": [
            {"name": "Ann", "player_id": "u-1"},
            {"name": "Bob Lee", "player_id": None},
            {"name": "Zoë", "player_id": "u-3"},
        ],
    }
    validate_payload("GameStarted", 2, new.payload)


def test_an_engine_game_without_names_is_stored_with_null_seats() -> None:
    new = to_new(GameStarted(Ruleset(), 2))
    assert new.version == 2
    assert new.payload["players"] == [{"name": None, "player_id": None}] * 2
    validate_payload("GameStarted", 2, new.payload)


@pytest.mark.parametrize(
    "players",
    [
        2,  # the v1 form is not v2
        [{"name": "a", "player_id": None}],  # one seat
        [{"name": "a", "player_id": None}] * 7,
        [{"name": "a"}, {"name": "b"}],  # both keys are always written
        [{"name": "", "player_id": None}, {"name": "b", "player_id": None}],
        [{"name": "x" * 41, "player_id": None}, {"name": "b", "player_id": None}],
        [{"name": "a", "player_id": ""}, {"name": "b", "player_id": None}],
        [{"name": "a", "player_id": None, "seat": 0}, {"name": "b", "player_id": None}],
        [{"name": 1, "player_id": None}, {"name": "b", "player_id": None}],
    ],
)
def test_a_bad_v2_payload_is_refused(players: object) -> None:
    with pytest.raises(SchemaError):
        validate_payload("GameStarted", 2, {"ruleset": RULES, "players": players})


def test_a_stored_v1_game_is_read_as_v2_with_null_seats_and_no_names() -> None:
    store = _stored_game(NewEvent("GameStarted", 1, {"ruleset": RULES, "players": 3}))
    first = store.read("g", MOVES)[0]
    assert first.version == 2
    assert first.payload["players"] == [{"name": None, "player_id": None}] * 3
    event = to_engine(first)
    assert event == GameStarted(Ruleset(), 3) and seats(event) == (3, None, None)


def test_a_stored_v2_game_reads_back_as_the_named_engine_event() -> None:
    store = _stored_game(to_new(NAMED))
    event = to_engine(store.read("g", MOVES)[0])
    assert event == NAMED and seats(event) == (3, NAMED.names, NAMED.player_ids)


# ------------------------------------------------------------------ the engine event


def test_the_engine_form_is_unchanged_without_names_and_round_trips_with_them() -> None:
    assert event_to_dict(GameStarted(Ruleset(), 2)) == {
        "type": "GameStarted",
        "ruleset": RULES,
        "players": 2,
    }
    data = json.loads(json.dumps(event_to_dict(NAMED)))
    assert seats(event_from_dict(data)) == seats(NAMED) == (3, NAMED.names, NAMED.player_ids)
    ids_only = GameStarted(Ruleset(), 2, None, (None, "u-2"))
    assert seats(event_from_dict(event_to_dict(ids_only))) == (2, None, (None, "u-2"))
    names_only = GameStarted(Ruleset(), 2, ("a", "b"), (None, None))
    assert names_only.player_ids is None  # no ids at all is None: one form only
    assert seats(event_from_dict(event_to_dict(names_only))) == (2, ("a", "b"), None)


def test_names_take_no_part_in_comparing_events() -> None:
    """The rules never see names: a stored game equals what `decide` made of it."""
    assert GameStarted(Ruleset(), 3) == NAMED and hash(NAMED) == hash(GameStarted(Ruleset(), 3))
    assert GameStarted(Ruleset(), 2, NAMED.names) != NAMED


def test_names_are_all_or_nothing() -> None:
    data = {"type": "GameStarted", "ruleset": RULES, "players": [
        {"name": "a", "player_id": "u"}, {"name": None, "player_id": None}]}  # fmt: skip
    assert seats(event_from_dict(data)) == (2, None, ("u", None))


@pytest.mark.parametrize(
    "players", [[{"name": "a"}], [{"name": 3}, {"name": "b"}], [{"nick": "a"}, {}], ["a", "b"]]
)
def test_malformed_seats_are_bad_players(players: object) -> None:
    with pytest.raises(MalformedError) as err:
        event_from_dict({"type": "GameStarted", "ruleset": RULES, "players": players})
    assert err.value.code == "bad_players"


def test_with_seats_names_only_the_first_event() -> None:
    _, events = random_game(random.Random(1), 2, Ruleset())
    named = with_seats(events, ["a", "b"], ["u", None])
    assert named[0] == events[0] and seats(named[0]) == (2, ("a", "b"), ("u", None))
    assert named[1:] == events[1:]


# ----------------------------------------------------------------------------- records


def test_a_record_with_names_logs_them_and_reads_them_back_from_the_log() -> None:
    record = load_record({**README_RECORD, "names": ["Ann", "Bob"], "player_ids": [None, "u"]})
    events = record_events(record)
    assert seats(events[0]) == (2, ("Ann", "Bob"), (None, "u"))
    assert record_from_events(events) == record  # from the log alone
    stored: list[Any] = [to_engine_of(to_new(e)) for e in events]
    assert record_from_events(stored) == record


def to_engine_of(new: NewEvent) -> object:
    """A new event through the store's JSON form and back (as a reader sees it)."""
    store = InMemoryEventStore()
    store.append("g", MOVES, [new], expected=0, command_id="c")
    return to_engine(store.read("g", MOVES)[0])


def test_the_logged_names_win_over_the_given_ones_and_old_games_fall_back() -> None:
    record = load_record({**README_RECORD, "names": ["Ann", "Bob"]})
    named = record_events(record)
    assert record_from_events(named, ["old", "names"], ["x", "y"]).names == ("Ann", "Bob")
    assert record_from_events(named, ["old", "names"], ["x", "y"]).player_ids == ("x", "y")
    unnamed = record_events(load_record(README_RECORD))
    fallback = record_from_events(unnamed, ["old", "names"], [None, "y"])
    assert (fallback.names, fallback.player_ids) == (("old", "names"), (None, "y"))


def test_an_ndjson_export_of_a_v2_game_gives_the_names() -> None:
    record = load_record({**README_RECORD, "names": ["Ann", "Bob"], "player_ids": ["u", None]})
    store = InMemoryEventStore()
    store.append("g", MOVES, [to_new(e) for e in record_events(record)], expected=0,
                 command_id="c")  # fmt: skip
    lines = [json.dumps(e.to_dict()) for e in store.read("g", MOVES)]
    assert record_from_export("\n".join(lines)) == record


# ---------------------------------------------------------------------------- notation


TRICKY = ["Ann Lee", 'Bob "the" #1 =x', "Zoë\u2028😀", "a\\b\tc"]


def test_the_notation_carries_names_and_ids_and_round_trips_with_the_json_record() -> None:
    data = {**README_RECORD, "players": 4, "turns": [], "names": TRICKY,
            "player_ids": ["u#1", None, 'q"2', None]}  # fmt: skip
    record = load_record(data)
    text = format_record(record)
    header = text.splitlines()[0]
    assert len(text.splitlines()) == 1  # one header line, whatever the names hold
    assert ' names=["Ann Lee","Bob \\"the\\" #1 =x","Zoë\\u2028😀","a\\\\b\\tc"]' in header
    assert header.endswith(' player_ids=["u#1",null,"q\\"2",null]')
    assert parse_record(text) == record
    assert load_record(parse_record(text).to_dict()) == record
    commented = "# a game\n\n" + header + "  # names above\n# no turns\n"
    assert parse_record(commented) == record


def test_an_old_notation_still_parses_and_a_record_without_names_is_written_as_before() -> None:
    old = parse_record(README_NOTATION)
    assert old.names is None and old.player_ids is None
    assert format_record(old) == README_NOTATION.strip() + "\n"


def test_names_in_the_header_can_come_alone_and_in_any_order() -> None:
    text = 'carcassonne-record/1 base names=["a","b"] players=2\nQ1@0,-1'
    record = parse_record(text)
    assert record.names == ("a", "b") and record.player_ids is None
    assert parse_record(format_record(record)) == record


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ('names=["a"]', "bad_names"),  # one name for two seats
        ('names=["a","  "]', "bad_names"),
        ('names=["a",2]', "bad_names"),
        ("names=[a,b]", "bad_notation"),  # not JSON
        ('names=["a","b"', "bad_notation"),
        ('names=["a","b"]x', "bad_notation"),
        ('names=["a","b"] names=["c","d"]', "bad_notation"),
        ('player_ids=["has space",null]', "bad_player_ids"),
        ("player_ids=[null]", "bad_player_ids"),
    ],
)
def test_bad_names_in_the_notation_are_refused(header: str, code: str) -> None:
    with pytest.raises(MalformedError) as err:
        parse_record(f"carcassonne-record/1 base players=2 {header}\nQ1@0,-1")
    assert err.value.code == code


def test_a_bad_notation_name_reaches_the_record_error_shape() -> None:
    from services.command.records import read_record

    with pytest.raises(RecordError):
        read_record(b'carcassonne-record/1 base players=2 names=["a"]\n', "text/plain")


# ------------------------------------------------------------------------ query views


def test_the_query_views_prefer_the_logged_names() -> None:
    store = _stored_game(to_new(NAMED))
    directory: tuple[list[str], list[str | None]] = (["secret", "names", "here"], ["x", "y", "z"])
    projector = Projector(store, seats=lambda _: directory)
    view = board_view(projector.current("g"))
    assert [(p["name"], p["player_id"]) for p in view["players"]] == [
        ("Ann", "u-1"), ("Bob Lee", None), ("Zoë", "u-3")]  # fmt: skip


def test_the_query_views_of_a_v1_game_take_the_directory_names() -> None:
    store = _stored_game(NewEvent("GameStarted", 1, {"ruleset": RULES, "players": 3}))
    asked: list[str] = []

    def seats(game_id: str) -> tuple[list[str], list[str | None]]:
        asked.append(game_id)
        return ["ann", "bob", "cy"], [None, "u-b", None]

    view = board_view(Projector(store, seats=seats).current("g"))
    assert [(p["name"], p["player_id"]) for p in view["players"]] == [
        ("ann", None), ("bob", "u-b"), ("cy", None)]  # fmt: skip
    assert asked == ["g"]
