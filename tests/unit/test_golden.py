"""Golden games (tests/golden/*.json): recorded games with hand-verified expected scores.

Each file is a `carcassonne-record/1` record plus "expected" and "why" (and, for regression
snapshots, "regression"); those keys are stripped before `load_record`, which rejects unknown
keys. See tests/golden/README.md.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from carcassonne.game import fold
from carcassonne.notation import format_record, parse_record
from carcassonne.record import (
    load_record,
    record_events,
    record_from_events,
    replay,
    score_record,
)
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.tiles import FIELD

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
EXTRA_KEYS = ("expected", "why", "regression")
FILES = sorted(GOLDEN.glob("*.json"))
HAND = [f for f in FILES if not f.name.startswith("regression_")]
REGRESSION = [f for f in FILES if f.name.startswith("regression_")]


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def strip(data: dict[str, Any]) -> dict[str, Any]:
    """The record part of a golden file."""
    return {k: v for k, v in data.items() if k not in EXTRA_KEYS}


def ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_golden_set_is_complete():
    assert 6 <= len(HAND) <= 16, "6-16 hand-verified games"
    assert len(REGRESSION) == 3
    for path in FILES:
        data = read(path)
        assert set(data["expected"]) == {"final_scores", "scores_before_final"}, path.name
        assert len(data["expected"]["final_scores"]) == data["players"], path.name
        assert len(data["expected"]["scores_before_final"]) == data["players"], path.name
        assert isinstance(data["why"], str) and len(data["why"]) > 100, path.name
    for path in REGRESSION:
        assert "REGRESSION SNAPSHOT" in read(path)["why"]
    for path in HAND:
        assert "REGRESSION" not in read(path)["why"]
        assert 3 <= len(read(path)["turns"]) <= 25


def test_golden_set_covers_the_required_cases():
    records = [load_record(strip(read(p))) for p in HAND]
    assert {r.players for r in records} >= {2, 3, 5}
    assert {r.ruleset.tileset for r in records} == {"base", "demo"}
    assert {r.ruleset.farm_scoring for r in records if r.ruleset.farmers} == {"1st", "2nd", "3rd"}
    assert any(not r.ruleset.incomplete_score for r in records)
    assert any(not r.ruleset.farmers for r in records)
    assert any(t.discard for r in records for t in r.turns)
    assert any(r.ruleset.area is not None for r in records)
    assert any(r.ruleset.unplaceable == "return" for r in records)
    assert any(r.ruleset.hole_extra_turn for r in records)
    assert any(r.ruleset.river for r in records)
    assert any(r.ruleset.abbot and r.ruleset.tile_edition == "2nd" for r in records)
    assert any(t.recall for r in records for t in r.turns)
    assert any(r.ruleset.hand == 3 and r.draws for r in records)  # R10.3


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_golden_scores(path: Path):
    data = read(path)
    report = score_record(load_record(strip(data)))
    assert report["final_scores"] == data["expected"]["final_scores"]
    assert report["scores_before_final"] == data["expected"]["scores_before_final"]


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_golden_explanations_add_up(path: Path):
    """Every point comes from an explanation; during-play ones give scores_before_final."""
    state = replay(load_record(strip(read(path))))
    players = state.players
    total = [sum(s.awarded[p] for s in state.log) for p in range(players)]
    during = [sum(s.awarded[p] for s in state.log if not s.final) for p in range(players)]
    assert total == state.scores
    assert tuple(during) == state.scores_before_final
    assert state.over


@pytest.mark.parametrize("path", HAND, ids=ids(HAND))
def test_golden_notation_round_trip(path: Path):
    record = load_record(strip(read(path)))
    assert parse_record(format_record(record)) == record
    assert record.to_dict() == strip(read(path))


def test_readme_example_is_the_golden_one():
    """The README's JSON and notation examples are golden game readme_example_2p."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", readme, re.S)
    readme_record = load_record(json.loads(blocks[0]))
    golden = load_record(strip(read(GOLDEN / "readme_example_2p.json")))
    assert readme_record == golden
    notation = re.search(r"```\n(carcassonne-record/1 .*?)```", readme, re.S)
    assert notation is not None
    assert parse_record(notation.group(1)) == golden
    assert score_record(golden)["final_scores"] == [0, 1]


def test_discard_golden_accounts_for_every_tile():
    state = replay(load_record(strip(read(GOLDEN / "discard_bounded_2p.json"))))
    assert state.discarded == ["B", "E", "V"]
    assert state.drawn_count == 5
    assert len(state.board.tiles) == 3  # start tile + 2 placed
    assert state.turn == 2


def test_returned_tile_golden_puts_the_tile_back_into_the_bag():
    """R10.4: X fits nowhere twice, goes back both times, and stays in the bag."""
    data = read(GOLDEN / "monastery_hole_return_2p.json")
    record = load_record(strip(data))
    events = record_events(record)
    returned = [e for e in events if type(e).__name__ == "TileReturned"]
    assert [(e.player, e.tile) for e in returned] == [(1, "X"), (0, "X")]
    state = fold(events)
    assert state.discarded == []
    assert state.bag["X"] == 1
    assert state.drawn_count == 11 and state.turn == 9
    # the hole at (0,1) was filled last: its monastery scored at once, in turn 8
    monastery = [s for s in state.log if s.kind == "monastery"]
    assert [(s.turn, s.final, s.awarded) for s in monastery] == [(8, False, (0, 9))]
    # R10.5 decision: an even height extends south (y from -1 to 2)
    assert max(y for _, y in state.board.tiles) == 2
    assert state.ruleset.bounds() == (-1, 1, -1, 2)


def test_demo_golden_gives_five_meeples_each():
    """R1.2: 5 meeples per player in the demo set; the farmers and the monk stay out."""
    state = replay(load_record(strip(read(GOLDEN / "demo_5p_farms_1st.json"))))
    assert state.ruleset.meeples_per_player == 5
    assert state.supply == [4, 4, 3, 5, 4]
    assert sorted((m.player, m.meeple.feature) for m in state.meeples.values()) == [
        (0, "field"), (1, "field"), (2, "field"), (2, "field"), (4, "monastery"),
    ]  # fmt: skip


def test_farmers_off_golden_has_no_farm_scoring():
    state = replay(load_record(strip(read(GOLDEN / "farmers_off_3p.json"))))
    assert all(s.kind != "farm" for s in state.log)
    assert all(m.meeple.feature != FIELD for m in state.meeples.values())


def test_incomplete_off_golden_logs_zero_point_final_features():
    state = replay(load_record(strip(read(GOLDEN / "incomplete_off_2p.json"))))
    finals = [s for s in state.log if s.final and s.kind != "farm"]
    assert finals, "the game leaves occupied incomplete features"
    assert all(s.points == 0 and s.rule == "R10.1" and not any(s.awarded) for s in finals)
    farms = [s for s in state.log if s.kind == "farm"]
    assert [s.awarded for s in farms] == [(3, 0)]


@pytest.mark.parametrize("path", REGRESSION, ids=ids(REGRESSION))
def test_regression_record_replays_to_the_original_final_state(path: Path):
    data = read(path)
    params = data["regression"]
    ruleset = Ruleset.from_dict(params["ruleset"])
    state, events = random_game(random.Random(params["seed"]), params["players"], ruleset)
    record = load_record(strip(data))
    assert record == record_from_events(events), "the stored record is this seed's game"
    assert record.ruleset == ruleset and record.players == params["players"]
    replayed = replay(record)
    assert replayed.snapshot() == state.snapshot()
    assert fold(events).snapshot() == state.snapshot()
    assert record_events(record) == events
    assert list(state.scores) == data["expected"]["final_scores"]
    assert list(state.scores_before_final or ()) == data["expected"]["scores_before_final"]
    assert state.over and len(state.board.tiles) - 1 + len(state.discarded) >= 40


def test_cli_scores_a_golden_file(tmp_path: Path):
    data = read(GOLDEN / "cities_farms_2nd_3p.json")
    record_file = tmp_path / "game.json"
    record_file.write_text(json.dumps(strip(data)), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "carcassonne", "score", str(record_file)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"final_scores", "scores_before_final", "events"}
    assert report["final_scores"] == data["expected"]["final_scores"]
    assert report["scores_before_final"] == data["expected"]["scores_before_final"]
    kinds = [(e["kind"], e["final"]) for e in report["events"]]
    assert kinds == [
        ("city", False), ("city", False), ("road", False),
        ("monastery", True), ("farm", True), ("farm", True), ("farm", True), ("farm", True),
    ]  # fmt: skip
    assert sum(e["awarded"][2] for e in report["events"]) == data["expected"]["final_scores"][2]


def test_cli_rejects_a_golden_file_with_its_extra_keys():
    """The loader rejects unknown keys: golden files must be stripped before loading."""
    result = subprocess.run(
        [sys.executable, "-m", "carcassonne", "score", str(GOLDEN / "readme_example_2p.json")],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "bad_record" in result.stderr
