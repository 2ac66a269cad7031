"""Third-party records at the edge (services/command/records.py): safe decoding, the one-pass
replay behind `POST /v1/score`, explanations, and the errors an illegal record gets (R1-R7)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from carcassonne.errors import GameError, RecordError
from carcassonne.notation import format_record
from carcassonne.record import load_record, record_events, record_from_events, score_record
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from services.command.records import (
    MAX_DEPTH,
    BodyError,
    check_depth,
    parse_json,
    player_names,
    read_record,
    replay_record,
    score_body,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FILES = sorted(GOLDEN.glob("*.json"))


def golden(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the record part, the expected scores) of a golden file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    expected = data.pop("expected")
    data.pop("why"), data.pop("regression", None)
    return data, expected


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_golden_games_score_as_expected_and_as_the_engine(path: Path) -> None:
    record, expected = golden(path)
    body = score_body(replay_record(load_record(record)))
    assert body["final_scores"] == expected["final_scores"]
    assert body["scores_before_final"] == expected["scores_before_final"]
    engine = score_record(load_record(record))
    added = ("index", "totals")  # the explanation is the engine's: the CLI has it too
    both = body["events"] + body["final_scoring"]
    assert [{k: v for k, v in e.items() if k not in added} for e in both] == engine["events"]
    assert (body["ranks"], body["winners"]) == (engine["ranks"], engine["winners"])
    # The timeline ends where play ended (R6); the final scoring (R7) comes on top of it.
    assert body["timeline"][-1]["scores"] == expected["scores_before_final"]
    assert all(e["final"] for e in body["final_scoring"])
    assert not any(e["final"] for e in body["events"])


def test_the_one_pass_replay_makes_the_events_of_record_events() -> None:
    rng = random.Random(5)
    rulesets = [Ruleset(), Ruleset(farm_scoring="1st"),
                Ruleset(tileset="demo", unplaceable="return"), Ruleset(area=(5, 5)),
                Ruleset(farmers=False, incomplete_score=False)]  # fmt: skip
    for i in range(20):
        state, events = random_game(rng, 2 + i % 5, rulesets[i % len(rulesets)])
        record = record_from_events(events)
        replayed = replay_record(record)
        assert replayed.events == record_events(record) == events
        assert replayed.state.snapshot() == state.snapshot()
        body = score_body(replayed)
        assert body["final_scores"] == list(state.scores)
        assert len(body["timeline"]) == len(record.turns)
        # Each turn's scores: those of the turn before plus what its score events awarded.
        before = [0] * record.players
        for step in body["timeline"]:
            gained = [e["awarded"] for e in body["events"] if e["index"] == step["index"]]
            assert step["scores"] == [b + sum(a) for b, *a in zip(before, *gained, strict=True)]
            before = step["scores"]
        totals = body["events"][-1]["totals"] if body["events"] else [0] * record.players
        assert totals == body["scores_before_final"]


def test_a_discard_is_a_timeline_step_that_passes_no_turn() -> None:
    """R4.4: the discard golden game; the player who discarded plays next too."""
    record, _ = golden(GOLDEN / "discard_bounded_2p.json")
    timeline = score_body(replay_record(load_record(record)))["timeline"]
    actions = [(s["player"], s["action"]) for s in timeline]
    assert ("discarded" in dict(actions).values()) and len(actions) == len(record["turns"])
    for step, following in itertools.pairwise(timeline):
        if step["action"] == "discarded":
            assert following["player"] == step["player"]


def test_explanations_name_feature_points_winners_and_rule() -> None:
    record, _ = golden(GOLDEN / "cities_farms_2nd_3p.json")
    body = score_body(replay_record(load_record(record)))
    first = body["events"][0]
    assert first["explanation"] == (
        "city of 4 tiles with 1 pennant, completed (R6.2): 10 points each to player 0 and player 1"
    )
    farms = [e["explanation"] for e in body["final_scoring"] if e["kind"] == "farm"]
    assert farms and all("farm of" in f and "(R7.4)" in f for f in farms)
    # 2nd edition: a city pays each player once; the second farm says what it gained.
    assert farms[-1].endswith("3 points to player 0, who gains 0 points")


@pytest.mark.parametrize(
    ("change", "index", "code", "rule"),
    [
        (lambda r: r["turns"][1].update(tile="Z"), 1, "unknown_tile", "R1"),
        (lambda r: r["turns"][2].update(x=0, y=0), 2, "square_taken", "R4.1"),
        (lambda r: r["turns"][1].update(x=40, y=40), 1, "not_adjacent", "R4.1"),
        (lambda r: r["turns"][0].update(rotation=0), 0, "edge_mismatch", "R4.2"),
        (lambda r: r["turns"][1].update(rotation=7), 1, "bad_turn", None),
        (lambda r: r["turns"][1].update(meeple={"feature": "castle"}), 1, "bad_meeple", "R5.2"),
        (lambda r: r.update(players=9), None, "bad_players", "R1.3"),
        (lambda r: r.update(format="carcassonne-record/2"), None, "bad_format", None),
        (lambda r: r["ruleset"].update(farm_scoring="4th"), None, "unknown_farm_scoring", "R7.4"),
    ],
)
def test_an_illegal_record_names_its_first_bad_turn_the_code_and_the_rule(
    change: Any, index: int | None, code: str, rule: str | None
) -> None:
    record, _ = golden(GOLDEN / "readme_example_2p.json")
    change(record)
    with pytest.raises(RecordError) as info:
        replay_record(read_record(json.dumps(record).encode(), "application/json")[0])
    assert (info.value.index, info.value.code, info.value.rule) == (index, code, rule)
    assert info.value.status == 422 and info.value.details["index"] == index


# Issue #26: a River record made elsewhere, as its body reached `POST /v1/score`. It was
# refused at its third turn (river_u_turn, R9.1): turn right, straight, turn right is legal
# (TILES.md §3: only an immediate U-turn is forbidden). An immediate second right turn is
# still refused.
ISSUE_26 = (
    '{"format": "carcassonne-record/1",'
    ' "ruleset": {"tileset": "base", "farmers": true, "farm_scoring": "3rd",'
    ' "incomplete_score": true, "river": true},'
    ' "players": 2,'
    ' "start": {"tile": "RIVA", "x": 0, "y": 0, "rotation": 0},'
    ' "turns": [{"tile": "RIVG", "x": 1, "y": 0, "rotation": 0, "meeple": null},'
    ' {"tile": "RIVD", "x": 1, "y": 1, "rotation": 1, "meeple": null},'
    ' {"tile": "RIVJ", "x": 1, "y": 2, "rotation": 1, "meeple": null}]}'
)


def test_issue_26_river_record_turning_right_straight_right_is_scored() -> None:
    body = score_body(replay_record(read_record(ISSUE_26.encode(), "application/json")[0]))
    assert body["final_scores"] == [0, 0] and len(body["timeline"]) == 3
    u_turn = json.loads(ISSUE_26)
    u_turn["turns"][1].update(tile="RIVJ", rotation=1)  # right again at once: south to west
    del u_turn["turns"][2]
    with pytest.raises(RecordError) as info:
        replay_record(read_record(json.dumps(u_turn).encode(), "application/json")[0])
    assert (info.value.index, info.value.code, info.value.rule) == (1, "river_u_turn", "R9.1")


def test_a_meeple_on_an_occupied_feature_is_refused_at_its_turn() -> None:
    """R5.3: a knight already stands in the city the new tile joins."""
    record, _ = golden(GOLDEN / "readme_example_2p.json")
    record["turns"][0]["meeple"] = {"feature": "city", "edge": "N"}  # P0's knight on Q1's city
    replay_record(load_record(record))
    # E3 at (1,-1): its cap faces west into the same city; P0 may not put a second knight.
    record["turns"][2] = {
        "tile": "E", "x": 1, "y": -1, "rotation": 3, "meeple": {"feature": "city", "edge": "W"},
    }  # fmt: skip
    with pytest.raises(RecordError) as info:
        replay_record(load_record(record))
    assert (info.value.index, info.value.code, info.value.rule) == (2, "feature_occupied", "R5.3")


def test_hostile_json_is_refused_cheaply_with_400() -> None:
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        with pytest.raises(BodyError) as info:
            parse_json(text.encode())
        assert (info.value.code, info.value.status) == ("json_too_deep", 400)
    nested: Any = 1
    for _ in range(MAX_DEPTH):
        nested = [nested]
    check_depth(nested)
    with pytest.raises(BodyError):
        check_depth([nested])
    for raw in (b"\xff\xfe", b"{", b"[1,]", b"1" * 5000):
        with pytest.raises(BodyError) as info:
            parse_json(raw)
        assert info.value.code == "invalid_json"


def test_a_record_deep_inside_is_still_too_deep() -> None:
    record, _ = golden(GOLDEN / "readme_example_2p.json")
    deep: Any = {}
    for _ in range(40):
        deep = {"x": deep}
    record["ruleset"] = deep
    with pytest.raises(BodyError) as info:
        read_record(json.dumps(record).encode(), "application/json")
    assert info.value.code == "json_too_deep"


def test_the_notation_is_accepted_as_text_plain() -> None:
    record, _ = golden(GOLDEN / "cities_farms_3rd_3p.json")
    loaded = load_record(record)
    text = format_record(loaded).encode()
    assert read_record(text, "text/plain")[0] == loaded
    with pytest.raises(RecordError) as info:
        read_record(b"carcassonne-record/1 base players=2\nQ1@0,-1 nonsense", "text/plain")
    assert info.value.code == "bad_notation"


def test_extra_keys_are_taken_only_when_allowed() -> None:
    record, _ = golden(GOLDEN / "readme_example_2p.json")
    raw = json.dumps({**record, "names": ["ann", "bob"]}).encode()
    loaded, extra = read_record(raw, "application/json", extra=("names",))
    assert extra == {"names": ["ann", "bob"]} and loaded == load_record(record)
    # `names` is a record key of its own now (optional, carcassonne-record/1 keeps old
    # records valid): without the extra it is the record's names.
    assert read_record(raw, "application/json")[0].names == ("ann", "bob")
    with pytest.raises(RecordError) as info:
        read_record(json.dumps({**record, "colours": ["red"]}).encode(), "application/json")
    assert info.value.code == "bad_record"


def test_player_names_default_and_checks() -> None:
    assert player_names(None, 3) == ["Player 1", "Player 2", "Player 3"]
    assert player_names([" ann ", "bob"], 2) == ["ann", "bob"]
    for bad in (["ann"], ["ann", ""], ["ann", 3], "ann,bob", ["x" * 41, "bob"]):
        with pytest.raises(GameError) as info:
            player_names(bad, 2)
        assert info.value.code == "bad_names"
