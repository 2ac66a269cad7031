"""Print every figure the benchmarks judged (the JSON lines of tests/bench/targets.py) as one
table: `python tests/bench/summary.py RESULTS_FILE`. Exits 1 if any figure missed (a smoke
run's figures, tests/bench/smoke.py, are shown as "smoke" and never miss, but for the
correctness figures judged at any size)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROW = "{:<13}{:<54}{:>13}{:>13}{:>9}{:>11}  {}"


def number(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.4g}{' ' + unit if unit else ''}"


def main(path: str) -> int:
    file = Path(path)
    rows = [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []
    print(f"== make bench: {len(rows)} judged figures")
    print(ROW.format("bench", "figure", "value", "baseline", "ratio", "target", "verdict"))
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}x"
        value, baseline = number(r["value"], r["unit"]), number(r["baseline"], r["unit"])
        verdict = "smoke" if r.get("smoke") else "ok" if r["ok"] else "MISSED"
        bench = r["bench"].removeprefix("bench_")
        print(ROW.format(bench, r["name"], value, baseline, ratio, r["target"], verdict))
    missed = sum(1 for r in rows if not r["ok"] and not r.get("smoke"))
    smoked = sum(1 for r in rows if r.get("smoke"))
    note = f" ({smoked} figures of a smoke run, BENCH_SMOKE, not judged)" if smoked else ""
    print((f"{missed} missed" if missed else "every judged figure met its target") + note)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
