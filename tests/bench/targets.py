"""Targets of `make bench`: every figure is printed beside its target, and a benchmark that
missed one exits non-zero (after printing all its figures), so `make bench` fails."""

from __future__ import annotations

import sys

_missed: list[str] = []


def verdict(name: str, ok: bool) -> str:
    """'ok' or 'MISSED' for a figure; a miss is remembered for `exit_code`."""
    if not ok:
        _missed.append(name)
    return "ok" if ok else "MISSED"


def exit_code() -> int:
    """1 if any figure missed its target (named on stderr), else 0."""
    if _missed:
        print(f"MISSED {len(_missed)} target(s): {', '.join(_missed)}", file=sys.stderr)
        return 1
    return 0
