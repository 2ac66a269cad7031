"""Instructions a request costs the web app that serves it (`make bench`, issue 27).

bench_command judges turn throughput against the Flask + one XADD baseline, but on this shared
2-core machine one commit measured 0.46x and 0.81x of the baseline in two runs minutes apart
(other jobs took the cores in turns). This counts what does not move with the machine: the
instructions executed in user space for one request by the WSGI app, under valgrind's
callgrind (the same count for the same code and input whatever else runs), for
`POST /games/{id}/turns` in the command service and for the baseline's `POST /xadd`, in the
same run, against one private Redis.

Each app runs in a process of its own, called through WSGI directly (werkzeug's test
environ): counted are Flask, the app and its Redis client, not gunicorn's HTTP handling (the
same for both), the kernel's socket work, Redis or the client, which bench_command's CPU
columns show. Each game's first turn is sent before counting (it folds the game into the
process's cache: a cold turn, which bench_command's games pay once a game), and what that
built is frozen as a served worker's is (deploy/gunicorn: `post_worker_init`).

Judged: a turn at most 2.9x the baseline's instructions, a guard on what issue 27 gained (the
figure the issue asks for is bench_command's throughput; this one says whether a change made a
turn's own work cheaper or dearer, without the machine's noise). Needs valgrind (skipped with
a note without it).

Measured for issue 27 (this bench's method, 12 games, 840 turns, one dataset): the code before
issue 27's last changes, 1,721k instructions a turn; after them (each answer's request and app
read behind flask's proxies once, one JSON encoder, token_hex ids, the hardening headers and
the body's length read without raised KeyErrors), 1,517k (-11.9 %); with the strict
decoder made once and the engine's cheaper placements and copies too, 1,482k (2.62x the
baseline's 565k; 3.05x before).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402

BASELINE_BODY = b'{"x": 1, "y": 0, "rotation": 0, "meeple": null}'


def _environ(path: str, body: bytes, auth: str | None) -> dict[str, Any]:
    from werkzeug.test import EnvironBuilder

    headers = [("Content-Type", "application/json"), *([("Authorization", auth)] if auth else [])]
    environ = EnvironBuilder(path=path, method="POST", data=body, headers=headers).get_environ()
    environ["bench.body"] = environ["wsgi.input"].read()
    return environ


def _serve(app: Any, environs: list[dict[str, Any]]) -> None:
    statuses: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        statuses.append(status)

    for environ in environs:
        environ = dict(environ, **{"wsgi.input": io.BytesIO(environ["bench.body"])})
        b"".join(app(environ, start_response))
    refused = [s for s in statuses if not s.startswith("200")]
    assert not refused, refused[:5]


def inner(mode: str, prepared: Path) -> None:
    """In the counted process (run under callgrind): warm up, then serve with the
    instrumentation on, for this process only."""
    data = json.loads(prepared.read_text())
    os.environ["REDIS_URL"] = data["redis_url"]
    os.environ.update(LOG_LEVEL="warning", ADDRESS_WRITE_RATE="0", API_KEY_RATE="0")
    if mode == "turn":
        from services.command.wsgi import app

        games = [[_environ(p, b.encode(), a) for p, a, b in game] for game in data["games"]]
        warm, counted = [g[0] for g in games], [e for g in games for e in g[1:]]
    else:
        from tests.bench.baseline_app import app

        warm = [_environ("/xadd", BASELINE_BODY, None) for _ in range(20)]
        counted = [_environ("/xadd", BASELINE_BODY, None) for _ in range(data["requests"])]
    _serve(app, warm)
    gc.collect()
    gc.freeze()  # as a served worker's post_worker_init (plus what warming built)
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
    _serve(app, counted)
    subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
    print(f"requests {len(counted)}")


def counted(mode: str, prepared: Path, out_dir: Path) -> tuple[int, int]:
    """(instructions, requests) of `mode`'s counted requests, in a process under callgrind."""
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no",
         f"--callgrind-out-file={out_dir}/{mode}.%p",
         sys.executable, __file__, "--inner", mode, str(prepared)],
        capture_output=True, text=True, cwd=ROOT, timeout=1800,
    )  # fmt: skip
    total = re.search(r"Collected : (\d+)", run.stderr)
    requests = re.search(r"requests (\d+)", run.stdout)
    if run.returncode or not total or not requests:
        raise RuntimeError(f"{mode} under callgrind failed:\n{run.stdout}\n{run.stderr[-3000:]}")
    return int(total.group(1)), int(requests.group(1))


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--games", type=int, default=size(12, 2), help="games played")
    parser.add_argument("--inner", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner[0], Path(args.inner[1]))
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed: instructions per request not measured")
        return 0
    from tests.bench.bench_command import CONFIG, prepare_games
    from tests.integration.http_client import gunicorn
    from tests.redis_server import start_redis

    redis_proc, redis_url, workdir = start_redis()
    out_dir = Path(tempfile.mkdtemp(prefix="cc-callgrind-"))
    try:
        # The games are made by the command service as deployed, then played in the counted
        # process (which folds each from Redis on its first turn).
        with gunicorn("services.command.wsgi:app", CONFIG, {"REDIS_URL": redis_url}, 1) as base:
            games = prepare_games(base, redis_url, random.Random(27), args.games)
        prepared = out_dir / "games.json"
        turns = sum(len(game) - 1 for game in games)
        prepared.write_text(json.dumps({
            "redis_url": redis_url, "requests": turns,
            "games": [[(p, a, b.decode()) for p, a, b in game] for game in games],
        }))  # fmt: skip
        figures = {mode: counted(mode, prepared, out_dir) for mode in ("turn", "baseline")}
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(out_dir, ignore_errors=True)
    per = {mode: total / max(1, n) for mode, (total, n) in figures.items()}
    turns = figures["turn"][1]
    print(f"instructions per request in the WSGI app (callgrind, user space; {turns} turns "
          f"of {args.games} games, as many baseline requests):")  # fmt: skip
    print(f"  baseline: Flask + one XADD     {per['baseline']:>12,.0f}")
    print(f"  POST /games/{{id}}/turns        {per['turn']:>12,.0f}"
          f"  ({per['turn'] / per['baseline']:.2f}x the baseline's)")  # fmt: skip
    judge("turn instructions / Flask + XADD's (WSGI app)", per["turn"] / 1000,
          per["baseline"] / 1000, max_ratio=2.9, unit="k")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
