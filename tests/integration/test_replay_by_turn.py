"""Replay by turn on a real Redis: `?turn=N` (N placements done; a discarded or returned tile is
no turn) on the query service's board and scores beside `?at=` (not both: 422), and the
`carcassonne score` command reading a game's NDJSON export
(`/games/{id}/events?format=ndjson`)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from carcassonne.events import Event, TilePlaced
from carcassonne.game import fold
from carcassonne.record import load_record, record_events, replay, score_report
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore
from services.scoring.scorer import Scorer
from tests.integration.http_client import ROOT
from tests.unit.test_query_games import store_game

GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="module")
def query(redis_url: str) -> FlaskClient:
    return create_query_app({"REDIS_URL": redis_url, "SNAPSHOT_EVERY": 4}).test_client()


def stored(redis_client: redis.Redis, events: list[Event], scored: bool = True) -> str:
    """A game of these events in the real store (scored by the worker's own code)."""
    store = RedisEventStore(redis_client)
    game_id = uuid.uuid4().hex
    store_game(store, game_id, events)
    if scored:
        Scorer(store).catch_up(game_id)
    return game_id


def golden_events(name: str) -> list[Event]:
    data = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    record = {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}
    return record_events(load_record(record))


def after_turns(events: list[Event], turn: int) -> list[Event]:
    """The definition, written independently: the moves before the (turn + 1)-th placement
    (all of them once there is none)."""
    placed = 0
    for index, event in enumerate(events):
        if isinstance(event, TilePlaced):
            if placed == turn:
                return events[:index]
            placed += 1
    return events


def get(client: FlaskClient, path: str) -> tuple[int, Any]:
    reply = client.get(path)
    return reply.status_code, reply.get_json()


def test_turn_counts_placements_and_skips_discards(query, redis_client) -> None:
    """Golden game discard_bounded_2p: discard, place, discard, place, discard (R4.4). Two
    turns; each view shows the board after N placements with the next player's tile."""
    events = golden_events("discard_bounded_2p.json")
    game_id = stored(redis_client, events)
    placements = sum(isinstance(e, TilePlaced) for e in events)
    assert placements == 2
    for turn in range(placements + 1):
        status, board = get(query, f"/games/{game_id}/board?turn={turn}")
        assert status == 200, board
        state = fold(after_turns(events, turn))
        assert board["seq"] == len(after_turns(events, turn))
        assert board["tiles_placed"] == turn and len(board["tiles"]) == turn + 1
        assert board["discarded"] == list(state.discarded)
        assert [p["score"] for p in board["players"]] == state.scores
        if not state.over:
            assert (board["turn"]["player"], board["turn"]["tile"]) == (state.current, state.drawn)
    # turn=0: the game as created: the start tile, the first discard, the first real draw.
    status, first = get(query, f"/games/{game_id}/board?turn=0")
    assert first["discarded"] and first["turn"]["tile"] is not None
    status, last = get(query, f"/games/{game_id}/board?turn={placements}")
    assert last["over"] and last["seq"] == len(events)
    status, body = get(query, f"/games/{game_id}/board?turn={placements + 1}")
    assert status == 422 and body["code"] == "turn_out_of_range"
    assert body["details"] == {"turn": placements + 1, "last_turn": placements}


def test_every_turn_of_a_long_game_on_board_and_scores(query, redis_client) -> None:
    _, events = random_game(random.Random(15), 3, Ruleset())
    game_id = stored(redis_client, events)
    placements = sum(isinstance(e, TilePlaced) for e in events)
    for turn in [0, 1, 2, 7, placements // 2, placements - 1, placements, 3]:
        before = after_turns(events, turn)
        state = fold(before)
        status, board = get(query, f"/games/{game_id}/board?turn={turn}")
        assert status == 200 and board["seq"] == len(before) and board["tiles_placed"] == turn
        # The same view as ?at= with the move it names.
        assert get(query, f"/games/{game_id}/board?at={len(before)}")[1] == board
        status, scores = get(query, f"/games/{game_id}/scores?turn={turn}")
        assert status == 200 and scores["seq"] == len(before)
        assert [p["score"] for p in scores["players"]] == state.scores
        assert len(scores["events"]) == len(state.log)


@pytest.mark.parametrize("view", ["board", "scores"])
def test_at_and_turn_together_are_refused(query, redis_client, view: str) -> None:
    game_id = stored(redis_client, golden_events("readme_example_2p.json"), scored=False)
    status, body = get(query, f"/games/{game_id}/{view}?at=2&turn=1")
    assert status == 422 and body["code"] == "at_and_turn"
    assert body["details"] == {"at": 2, "turn": 1}
    status, body = get(query, f"/games/{game_id}/{view}?turn=-1")
    assert status == 422 and body["code"] == "invalid_query"
    assert get(query, f"/games/{uuid.uuid4().hex}/{view}?turn=0")[0] == 404


# ------------------------------------------------------------- the CLI reads the export


def cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "carcassonne", "score", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def export(query: FlaskClient, game_id: str, extra: str = "") -> str:
    reply = query.get(f"/games/{game_id}/events?format=ndjson{extra}")
    assert reply.status_code == 200 and reply.mimetype == "application/x-ndjson"
    return reply.get_data(as_text=True)


@pytest.mark.parametrize("name", ["discard_bounded_2p.json", "cities_farms_2nd_3p.json"])
def test_the_cli_scores_a_games_ndjson_export(query, redis_client, tmp_path, name) -> None:
    """Before: `carcassonne: …: not valid JSON (Extra data, line 2)`."""
    data = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    events = golden_events(name)
    game_id = stored(redis_client, events)
    file = tmp_path / "game.ndjson"
    file.write_text(export(query, game_id), encoding="utf-8")
    done = cli(file)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    assert report["final_scores"] == data["expected"]["final_scores"]
    record = {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}
    expected = score_report(replay(load_record(record)))
    del expected["ranks"], expected["winners"]
    assert report == expected


def test_the_cli_names_the_bad_line_of_an_export(query, redis_client, tmp_path) -> None:
    game_id = stored(redis_client, golden_events("readme_example_2p.json"))
    lines = export(query, game_id).splitlines()
    file = tmp_path / "game.ndjson"
    file.write_text("\n".join([*lines[:2], "{oops", *lines[2:]]) + "\n", encoding="utf-8")
    done = cli(file)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("carcassonne: bad_export: line 3: not valid JSON")
    file.write_text("\n".join([*lines[:2], '{"hello": 1}']) + "\n", encoding="utf-8")
    assert "line 3: not an event of an export" in cli(file).stderr
    file.write_text(export(query, game_id, "&after=3-0"), encoding="utf-8")
    done = cli(file)
    assert done.returncode == 2 and "line 1: the export starts at move 4" in done.stderr
    file.write_text("\n".join(lines[:3] + lines[4:]) + "\n", encoding="utf-8")  # a move lost
    assert "moves are missing" in cli(file).stderr
