"""README's quick start, executed: the curl block between its quick-start markers runs, as it
is written, against a suite started as `make run` starts it (nginx in front when installed:
one base URL), and plays a 2-player game to its end."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from deploy.local.host import free_ports
from tests.integration.test_suite_run import suite_runner

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def quick_start() -> str:
    """The shell block of README's quick start."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- quick-start[^>]*-->\s*```sh\n(.*?)```\s*<!-- /quick-start -->",
                      readme, re.S)  # fmt: skip
    assert found, "README has no quick-start block"
    return found.group(1)


def test_the_readme_quick_start_plays_a_game_to_its_end(tmp_path: Path) -> None:
    block = quick_start()
    assert len(re.findall(r"\bcurl\b", block)) >= 6  # create, turn, turns, scores, board, live
    ports = free_ports(3)
    started = time.monotonic()
    run = suite_runner(tmp_path / "var", (ports[0], ports[1], ports[2]))
    family: set[int] = set()
    try:
        run.wait_for("all healthy", timeout=120)
        family = run.family()
        healthy = time.monotonic() - started
        env = {**os.environ, "BASE": f"http://127.0.0.1:{ports[1]}"}
        played = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env,
                                capture_output=True, text=True, timeout=300)  # fmt: skip
        finished = time.monotonic() - started
        assert played.returncode == 0, played.stdout + played.stderr
        lines = played.stdout.splitlines()
        assert re.fullmatch(r'\{"over":true,"totals":\[\d+,\d+\],"ranks":\[\d,\d\]\}', lines[0])
        assert re.fullmatch(r'\{"tiles_placed":\d+,"over":true\}', lines[1])
        assert any(line.startswith(("event:", "data:", "id:", ":")) for line in lines[2:])
        print(f"quick start: suite healthy after {healthy:.1f} s, game over after {finished:.1f} s")
    finally:
        run.clean_up(family)
