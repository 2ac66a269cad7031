"""Smoke mode of the benchmarks: `BENCH_SMOKE=1` runs each one's whole path end to end (the
same servers, workers, requests and judging code) with the smallest sizes and durations that
still exercise it, so that `make test` (tests/integration/test_benches_smoke.py) notices a
benchmark that no longer runs. Its figures mean nothing: tests/bench/targets.py prints them
marked "smoke" and never fails on a missed target (but for the correctness figures that hold
at any size, `check(..., always=True)`); a crash or a failed assertion still fails.
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

SMOKE = os.environ.get("BENCH_SMOKE", "") not in ("", "0")


def size(full: T, smoke: T) -> T:
    """`smoke` in smoke mode, else `full`: a benchmark's default size or duration."""
    return smoke if SMOKE else full
