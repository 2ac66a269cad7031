"""One explanation of a score event (carcassonne.explain), said the same way by the CLI,
`POST /v1/score` (services/command/records.py) and the query service's `/scores`; correct
plurals; and the CLI ending quietly when its reader closes the pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from carcassonne import cli
from carcassonne.explain import explain, plural
from carcassonne.record import load_record, record_events
from eventstore.port import InMemoryEventStore
from services.command.records import replay_record, score_body
from services.query.projector import Projector
from services.query.views import scores_view
from services.scoring.scorer import Scorer

from .samples import README_RECORD
from .test_query_games import store_game

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.json"))


def _golden(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}


def _event(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "city", "rule": "R7.2", "final": True, "turn": 3, "complete": False,
        "tiles": [[0, 1]], "pennants": 0, "meeples": [0, 1], "winners": [1], "points": 1,
        "awarded": [0, 1],
    }  # fmt: skip
    return {**base, **changes}


def test_plural() -> None:
    assert plural(1, "point") == "1 point" and plural(0, "point") == "0 points"
    assert plural(2, "city", "cities") == "2 cities" and plural(1, "city", "cities") == "1 city"


def test_the_readme_game_reads_in_the_singular_where_it_should() -> None:
    """The issue's examples: "1 points" and "farm of 1 tiles" were wrong."""
    city = explain(_event(), ["ann", "bob"])
    assert city == "city of 1 tile, incomplete at the end of the game (R7.2): 1 point to bob"
    farm = _event(
        kind="farm", rule="R7.3", tiles=[[-1, -1]], winners=[0], points=3, awarded=[3, 0],
        cities=[[[0, -1]]], meeples=[1, 0],
    )  # fmt: skip
    assert explain(farm) == (
        "farm of 1 tile bordering 1 completed city, at the end of the game (R7.3): "
        "3 points to player 0"
    )


@pytest.mark.parametrize(
    ("changes", "text"),
    [
        (
            {"complete": True, "final": False, "rule": "R6.2", "tiles": [[0, 0], [0, 1]],
             "pennants": 1, "winners": [0, 1], "points": 6, "awarded": [6, 6]},
            "city of 2 tiles with 1 pennant, completed (R6.2): 6 points each to player 0 "
            "and player 1",
        ),
        (
            {"kind": "road", "rule": "R10.1", "tiles": [[0, 0], [1, 0]], "points": 0,
             "awarded": [0, 0]},
            "road of 2 tiles, incomplete at the end of the game (R10.1): 0 points to player 1",
        ),
        (
            {"kind": "monastery", "complete": True, "final": False, "rule": "R6.3",
             "tiles": [[x, y] for x in (-1, 0, 1) for y in (-1, 0, 1)], "points": 9,
             "awarded": [0, 9]},
            "monastery with 8 of 8 neighbouring tiles, completed (R6.3): 9 points to player 1",
        ),
        (
            {"kind": "farm", "rule": "R7.4", "tiles": [[0, 0], [1, 0]], "winners": [0, 1],
             "points": 6, "awarded": [6, 3], "cities": [[[5, 5]], [[6, 6]]]},
            "farm of 2 tiles bordering 2 completed cities, at the end of the game (R7.4): "
            "6 points each to player 0 and player 1; player 0 gains 6 points, "
            "player 1 gains 3 points",
        ),
        (
            {"kind": "farm", "rule": "R7.4", "tiles": [[0, 0]], "winners": [1], "points": 3,
             "awarded": [0, 0], "cities": [[[5, 5]]]},
            "farm of 1 tile bordering 1 completed city, at the end of the game (R7.4): "
            "3 points to player 1, who gains 0 points",
        ),
        ({"winners": [], "points": 1, "awarded": [0, 0]},
         "city of 1 tile, incomplete at the end of the game (R7.2): nobody stood in it: "
         "no points"),
    ],
)  # fmt: skip
def test_each_kind_of_score_in_one_sentence(changes: dict[str, Any], text: str) -> None:
    assert explain(_event(**changes)) == text


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_cli_v1_score_and_query_scores_say_the_same_sentence(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same score events explained by the CLI, `/v1/score` and `/scores` (seats
    unnamed: "player N" everywhere)."""
    record = _golden(path)
    file = tmp_path / "game.json"
    file.write_text(json.dumps(record), encoding="utf-8")
    assert cli.main(["score", str(file)]) == 0
    by_cli = [e["explanation"] for e in json.loads(capsys.readouterr().out)["events"]]
    body = score_body(replay_record(load_record(record)))
    by_api = [e["explanation"] for e in body["events"] + body["final_scoring"]]
    store = InMemoryEventStore()
    store_game(store, "g", record_events(load_record(record)))
    Scorer(store).catch_up("g")
    by_query = [e["explanation"] for e in scores_view(Projector(store).current("g"))["events"]]
    assert by_cli == by_api == by_query
    assert by_cli and not any(" 1 points" in t or " 1 tiles" in t for t in by_cli)


def test_names_appear_in_the_sentence_where_the_game_has_them() -> None:
    store = InMemoryEventStore()
    store_game(store, "g", record_events(load_record(README_RECORD)))
    Scorer(store).catch_up("g")
    view = scores_view(Projector(store, names=lambda _: ["ann", "bob"]).current("g"))
    assert view["events"][0]["explanation"].endswith("1 point to bob")


def test_cli_ends_quietly_when_the_reader_closed_the_pipe(tmp_path: Path) -> None:
    """`carcassonne score x.json | head -1`: the reader has gone before the report is
    written. No BrokenPipeError traceback; status 0."""
    file = tmp_path / "game.json"
    file.write_text(json.dumps(README_RECORD), encoding="utf-8")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "carcassonne", "score", "--pretty", str(file)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr.decode() == ""
    assert done.returncode == 0
