"""The `carcassonne` command: score, show, simulate (in-process through `cli.main`)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from carcassonne import cli
from carcassonne.notation import parse_record
from carcassonne.record import score_record

from .samples import README_NOTATION, README_RECORD


def run(argv: Sequence[str]) -> int:
    """The exit status of `carcassonne argv`, whether main returns it or raises SystemExit."""
    try:
        return cli.main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


@pytest.fixture
def record_file(tmp_path: Path) -> Path:
    path = tmp_path / "game.json"
    path.write_text(json.dumps(README_RECORD), encoding="utf-8")
    return path


def test_score_prints_scores_and_explanations(record_file, capsys):
    assert run(["score", str(record_file)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert len(out.strip().splitlines()) == 1, "compact JSON on one line"
    report = json.loads(out)
    assert set(report) == {"final_scores", "scores_before_final", "events"}
    assert report["final_scores"] == [0, 1]
    assert report["scores_before_final"] == [0, 0]
    city, farm = report["events"]
    assert city["kind"] == "city" and city["rule"] == "R7.2" and city["final"] is True
    assert city["tiles"] == [[0, 1]] and city["awarded"] == [0, 1] and city["winners"] == [1]
    assert farm["kind"] == "farm" and farm["awarded"] == [0, 0] and farm["cities"] == []
    assert farm["meeples"] == [1, 0]


def test_score_pretty_prints_the_same_report(record_file, capsys):
    assert run(["score", str(record_file)]) == 0
    compact = json.loads(capsys.readouterr().out)
    assert run(["score", "--pretty", str(record_file)]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) > 10
    assert json.loads(out) == compact


def test_score_reads_stdin_json(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(README_RECORD)))
    assert run(["score", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["final_scores"] == [0, 1]


def test_score_reads_stdin_notation(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(README_NOTATION))
    assert run(["score", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = score_record(parse_record(README_NOTATION))
    del expected["ranks"], expected["winners"]
    assert report == expected
    assert report["final_scores"] == [0, 1]


def test_score_reads_a_notation_file(tmp_path, capsys):
    path = tmp_path / "game.txt"
    path.write_text(README_NOTATION, encoding="utf-8")
    assert run(["score", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["final_scores"] == [0, 1]


def test_an_illegal_record_exits_2_naming_turn_code_and_rule(tmp_path, capsys):
    data = json.loads(json.dumps(README_RECORD))
    data["turns"][1]["x"], data["turns"][1]["y"] = 5, 5  # not next to any tile
    path = tmp_path / "illegal.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert run(["score", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("carcassonne: ")
    assert "not_adjacent" in err
    assert "turn index 1" in err
    assert "[R4.1]" in err


def test_an_edge_mismatch_names_its_rule(tmp_path, capsys):
    data = json.loads(json.dumps(README_RECORD))
    data["turns"][2]["rotation"] = 1  # E turned once: its city E edge against Q's field W edge
    path = tmp_path / "mismatch.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert run(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "edge_mismatch (turn index 2)" in err and "[R4.2]" in err


def test_a_record_level_error_has_no_turn_index(tmp_path, capsys):
    path = tmp_path / "players.json"
    path.write_text(json.dumps(README_RECORD | {"players": 7}), encoding="utf-8")
    assert run(["score", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad_players" in err and "turn index" not in err and "[R1.3]" in err


@pytest.mark.parametrize("text", ["{bad json", "", "[1, 2]", '"a string"', "null"])
def test_malformed_json_exits_2(tmp_path, capsys, text):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    assert run(["score", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("carcassonne: ")


def test_malformed_notation_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(README_NOTATION.replace("I2@0,1:E", "I2@0,1")
                                                  + "Q9@x,y\n"))  # fmt: skip
    assert run(["score", "-"]) == 2
    assert "bad_notation" in capsys.readouterr().err


def test_missing_file_exits_2(tmp_path, capsys):
    assert run(["score", str(tmp_path / "nowhere.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "nowhere.json" in err


def test_a_directory_is_not_a_record(tmp_path, capsys):
    assert run(["show", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_simulate_json_prints_one_line(capsys):
    assert run(["simulate", "--games", "3", "--players", "3", "--seed", "1", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert set(data) == {"games", "seconds", "ms_per_game_median"}
    assert data["games"] == 3
    assert data["seconds"] >= 0 and data["ms_per_game_median"] >= 0
    assert data["ms_per_game_median"] <= data["seconds"] * 1000 + 1e-6


def test_simulate_text_and_options(capsys):
    argv = ["simulate", "--games", "2", "--players", "5", "--tileset", "demo",
            "--farm-scoring", "1st", "--no-farmers"]  # fmt: skip
    assert run(argv) == 0
    assert capsys.readouterr().out.startswith("2 games of 5 players")


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--players", "7"],
        ["simulate", "--players", "1"],
        ["simulate", "--games", "0"],
        ["simulate", "--tileset", "moon"],
        ["simulate", "--farm-scoring", "4th"],
        ["score"],
        ["fly"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv, capsys):
    assert run(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_show_prints_the_board_and_scores(record_file, capsys):
    assert run(["show", str(record_file)]) == 0
    out = capsys.readouterr().out
    for label in ("D0", "Q1", "I2", "E2"):
        assert label in out
    assert "player 0:   0 points, 6 meeples in supply" in out
    assert "player 1:   1 points, 6 meeples in supply" in out
    rows = [line for line in out.splitlines() if line.strip()]
    assert len(rows) == 1 + 3 * 3 + 2  # x header, 3 rows of tiles 3 lines high, 2 players


def test_demo_prints_a_record_that_replays_to_the_shown_scores(capsys):
    assert run(["demo", "--seed", "3", "--players", "3"]) == 0
    out = capsys.readouterr().out
    notation = out.split("\n\n", 1)[0]
    report = score_record(parse_record(notation))
    for player, score in enumerate(report["final_scores"]):
        assert f"player {player}: {score:>3} points" in out


@pytest.mark.parametrize("argv", [["--help"], ["score", "--help"], ["simulate", "--help"]])
def test_help(argv, capsys):
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: carcassonne")


def test_help_lists_the_commands(capsys):
    run(["--help"])
    out = capsys.readouterr().out
    for command in ("score", "show", "simulate"):
        assert command in out


def test_python_dash_m_carcassonne(tmp_path):
    """The module entry point, in a real process: stdin in, JSON out, exit statuses."""
    good = subprocess.run(
        [sys.executable, "-m", "carcassonne", "score", "-"],
        input=json.dumps(README_RECORD), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["final_scores"] == [0, 1]
    bad = subprocess.run(
        [sys.executable, "-m", "carcassonne", "score", str(tmp_path / "missing.json")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stdout == "" and "carcassonne: cannot read" in bad.stderr


# Hostile files must be refused like any malformed record: a one-line message, exit 2 (README:
# "exit 2 on an illegal/malformed record"), never a traceback.
HOSTILE = [
    pytest.param(b'{"format": "\xff"}', id="not-utf8"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deeply-nested"),
    pytest.param(
        b'{"format": "carcassonne-record/1", "players": ' + b"9" * 5000 + b', "turns": []}',
        id="5000-digit-integer",
    ),
]


@pytest.mark.parametrize("content", HOSTILE)
def test_hostile_files_exit_2(tmp_path, capsys, content):
    path = tmp_path / "hostile.json"
    path.write_bytes(content)
    assert run(["score", str(path)]) == 2
    assert capsys.readouterr().err.startswith("carcassonne: ")


@pytest.mark.parametrize("content", HOSTILE)
def test_hostile_input_never_scores(tmp_path, content):
    """The same through a real process: exit 2, a message, no traceback, nothing scored."""
    path = tmp_path / "hostile.json"
    path.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "carcassonne", "score", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "ruleset",
    [
        {"river": True, "abbot": True, "tile_edition": "2nd"},
        {"hole_extra_turn": True, "area": {"width": 7, "height": 7, "border_closes": True}},
        {"hand": 3},  # R10.3: the choice of hand tile is part of each action
        {"hand": 3, "unplaceable": "return", "area": {"width": 5, "height": 5}},
    ],
)
def test_simulate_plays_any_recorded_ruleset(ruleset, capsys):
    """Issue 18: `simulate --ruleset` plays random games under the optional rules (R9, R10)."""
    argv = ["simulate", "--games", "3", "--seed", "2", "--json", "--ruleset", json.dumps(ruleset)]
    assert run(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["games"] == 3 and data["ms_per_game_median"] > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "--ruleset must be a JSON object"),
        ("{nope", "--ruleset must be a JSON object"),
        ('{"hand": 2}', "bad_hand"),  # R10.3: a hand holds 1 or 3 tiles
        ('{"tileset": "demo", "tile_edition": "2nd"}', "edition_not_in_tileset"),
    ],
)
def test_simulate_refuses_a_bad_ruleset(text, message, capsys):
    assert run(["simulate", "--games", "1", "--ruleset", text]) == 2
    assert message in capsys.readouterr().err


def test_score_reads_a_river_abbot_record(tmp_path, capsys):
    """`carcassonne score` scores a record with the river, the abbot and gardens (R9)."""
    golden = Path(__file__).resolve().parents[1] / "golden" / "river_abbot_2p.json"
    data = json.loads(golden.read_text(encoding="utf-8"))
    path = tmp_path / "game.json"
    path.write_text(json.dumps({k: v for k, v in data.items() if k not in ("expected", "why")}))
    assert run(["score", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["final_scores"] == data["expected"]["final_scores"]
    assert any(e["kind"] == "garden" and e["rule"] == "R9.2" for e in report["events"])


def test_progress_bar_shows_the_count_and_the_time_left_on_a_terminal() -> None:

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    bar = cli.Progress(4, stream=out, width=8)
    bar.update(2)
    bar.update(4)
    lines = out.getvalue().split("\r")
    assert "[####....] 2/4" in lines[1] and "s left" in lines[1]
    assert lines[-1].startswith("[########] 4/4") and lines[-1].endswith("\n")
    quiet = io.StringIO()  # not a terminal: a log file stays clean
    cli.Progress(4, stream=quiet).update(4)
    assert quiet.getvalue() == ""


def test_duel_refuses_a_results_file_it_cannot_write_before_playing(tmp_path, capsys):
    """A long series must not stop at its first finished game: the file is opened first."""
    for target in (tmp_path / "missing" / "games.jsonl", tmp_path):  # no folder; a folder
        argv = ["duel", "--a", "random", "--b", "random", "--games", "2", "--results"]
        assert run([*argv, str(target)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"carcassonne: cannot write {target}: ")
    written = tmp_path / "games.jsonl"
    assert run(["duel", "--a", "random", "--b", "random", "--games", "2", "--json",
                "--results", str(written)]) == 0  # fmt: skip
    assert len(written.read_text(encoding="utf-8").splitlines()) == 2


def test_duel_plays_the_ruleset_given_and_refuses_hand_games(tmp_path, capsys):
    """`--ruleset` as simulate takes it: with the river (12 more tiles, R9.1) and the abbot
    each game has more than the base set's 71 turns; a hand game (R10.3) is refused."""
    results = tmp_path / "river.jsonl"
    rules = '{"river": true, "abbot": true, "tile_edition": "2nd"}'
    argv = ["duel", "--a", "greedy", "--b", "random", "--games", "2", "--json"]
    assert run([*argv, "--ruleset", rules, "--results", str(results)]) == 0
    assert json.loads(capsys.readouterr().out)["games"] == 2
    for line in results.read_text(encoding="utf-8").splitlines():
        assert sum(json.loads(line)["moves"]) > 71
    assert run([*argv, "--ruleset", '{"hand": 3}']) == 2
    assert "hand (R10.3)" in capsys.readouterr().err
    assert run([*argv, "--ruleset", "[1]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err


def test_the_one_progress_line_off_a_terminal_is_silent_or_a_line_now_and_then() -> None:
    from carcassonne.progress import Progress

    log = io.StringIO()
    bar = Progress(1000, log, unit="keys", lines=True, every_s=3600)
    for done in range(1, 1001):
        bar.update(done, f"cursor {done}")
    lines = log.getvalue().splitlines()
    # the first and the last update only (one an hour): no bar redrawn into a log
    assert len(lines) == 2 and "\r" not in log.getvalue()
    assert lines[0].startswith("[") and "1/1,000 keys (0%)" in lines[0]
    assert "1,000/1,000 keys (100%)" in lines[1] and lines[1].endswith("cursor 1000")
    short = io.StringIO()
    Progress(10, short, lines=True).finish(7, "done")  # a scan that ended short of its estimate
    assert "7/10" in short.getvalue() and short.getvalue().endswith("done\n")


def test_make_demo_shows_a_line_per_turn_with_the_score_off_a_terminal() -> None:
    from tools.demo import TurnProgress
    from tools.gameclient import Game

    log = io.StringIO()
    game = Game("g", ["Ada", "Bo"], {0: "t0", 1: "t1"}, view={"scores": [3, 5]})
    show = TurnProgress(log)
    for done in (1, 2, 3):
        show(game, done, 3)
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and all(line.endswith("Ada 3  Bo 5") for line in lines)
    assert "3/3 turns (100%)" in lines[-1]
