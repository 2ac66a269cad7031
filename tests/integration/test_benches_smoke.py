"""Every benchmark of `make bench` still runs: each tests/bench/bench_<name>.py of the Makefile's
BENCHES, run as `make bench` runs it but in smoke mode (`BENCH_SMOKE=1`, tests/bench/smoke.py:
the same servers, workers, requests and judging code at the smallest sizes). Its figures mean
nothing and are not judged, but for the correctness figures that hold at any size (nothing
lost, doubled or refused); a crash, a failed assertion or any other non-zero exit fails.

Smoke mode is not the `smoke` marker (`make test-fast`): these run in `make test` only,
marked `slow`: the module is one xdist group, the benchmarks one after the other (~100 s and
~70 s of CPU on a quiet 2-core machine), handed out first. A benchmark that needs nginx or
Chromium gets it from the helpers the integration tests use (installed when we run as root),
or is skipped with their reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import nginx as private_nginx
from tests.browser import chromium_or_skip, playwright_or_skip

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 180  # each takes under 30 s alone; a loaded CI machine is slower
TAIL_LINES = 60


def benches() -> list[str]:
    """The Makefile's BENCHES list (one list: `make bench` and this test read the same)."""
    found = re.search(r"^BENCHES\s*:?=(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert found, "no BENCHES list in the Makefile"
    return found.group(1).split()


def needs(name: str) -> None:
    """Skip, with the helper's reason, when the benchmark's own server or browser is missing
    (nginx in front of the services, Chromium for the viewer)."""
    if name in ("proxy", "instances"):
        binary, why = private_nginx.find_nginx()
        if binary is None:
            pytest.skip(why)
    if name == "instructions" and shutil.which("callgrind_control") is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    if name == "page":
        playwright_or_skip()
        chromium_or_skip()


def tail(text: str) -> str:
    return "\n".join(text.splitlines()[-TAIL_LINES:])


pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", benches())
def test_bench_runs_in_smoke_mode(name: str, tmp_path: Path) -> None:
    needs(name)
    script = ROOT / "tests" / "bench" / f"bench_{name}.py"
    results = tmp_path / "results.jsonl"
    env = {**os.environ, "BENCH_SMOKE": "1", "BENCH_RESULTS": str(results)}
    # A session of its own: on a timeout its servers and workers go with it.
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{script.name} did not finish in {TIMEOUT_S} s:\n{tail(output)}")
    finally:  # nothing it started outlives the test (interrupted, or a process left behind)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, f"{script.name} exited {proc.returncode}:\n{tail(output)}"
    # It got as far as its judging code, in smoke mode (its figures recorded as such).
    rows = (
        [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    )
    assert rows, f"{script.name} judged no figure:\n{tail(output)}"
    assert any(row["smoke"] for row in rows), rows
