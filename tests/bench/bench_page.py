"""Game viewer benchmark (`make bench`): the page in headless Chromium on loopback.

One query instance as deployed (gunicorn with deploy/gunicorn/query.py) on a private Redis
holding a finished 72-tile game (its score stream written by the worker's own code). The
system Chromium (tests/browser.py) driven by Playwright:

- **load**: open `/games/{id}/view` (the last turn) in a fresh browser context (empty cache)
  until the board is drawn (the page's `viewer-drawn` mark, after the first paint), `--loads`
  times. Baseline, same run: opening the board's JSON view (`/games/{id}/board`) the same way,
  to its load event.
- **step**: from turn 0 to the end with the → key, a pause between steps as a reader's
  (`--pause-ms`, the neighbouring turns are fetched meanwhile): key press to the new turn's
  picture in the page and the next frame. Baseline, same run: one `fetch` of the board view
  of a turn from the page's script (what a step would cost if it asked the server).

Targets (tests/bench/targets.py), each a ratio to the same run's baseline median (p50, the
steadier figure of a few samples): load p90 ≤ 14x the JSON view's load (was ≤ 1 s, set when
that load took ~70 ms: 1000 / 70); step p90 ≤ 16x one fetch (was ≤ 50 ms, set when a fetch
took ~3 ms: 50 / 3). p50 and the worst are printed too.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from carcassonne.events import TilePlaced  # noqa: E402
from carcassonne.ruleset import Ruleset  # noqa: E402
from carcassonne.simulate import random_game  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.scoring.scorer import Scorer  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.browser import find_chromium, playwright_chromium  # noqa: E402
from tests.integration.http_client import gunicorn  # noqa: E402
from tests.redis_server import private_redis  # noqa: E402
from tests.unit.test_query_games import store_game  # noqa: E402

MAX_LOAD_VS_JSON, MAX_STEP_VS_FETCH = 14, 16  # 1000 / 70 ms and 50 / 3 ms (the docstring)
GAME_ID = "be9c" + "0" * 28

# In the page: step with the → key `count` times, each timed from the key press to the new
# turn on screen and the frame after it; a reader's pause between steps.
STEPS_JS = """async ([count, pause]) => {
  const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
  const times = [];
  for (let i = 0; i < count; i += 1) {
    const target = String(Number(document.body.dataset.turn) + 1);
    const start = performance.now();
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
    while (document.body.dataset.turn !== target) await frame();
    await frame();
    times.push(performance.now() - start);
    await new Promise((done) => setTimeout(done, pause));
  }
  return times;
}"""
FETCH_JS = """async ([path, count]) => {
  const times = [];
  for (let i = 0; i < count; i += 1) {
    const start = performance.now();
    await (await fetch(`${path}?turn=${i % 70}`)).json();
    times.push(performance.now() - start);
  }
  return times;
}"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values):7.1f} ms  p90 {pct(values, 90):7.1f} ms  "
        f"max {max(values):7.1f} ms"
    )


def store_finished_game(url: str, seed: int) -> int:
    """A finished 72-tile base game in the store, scored; its number of turns."""
    store = RedisEventStore(redis.Redis.from_url(url))
    _, events = random_game(random.Random(seed), 3, Ruleset())
    store_game(store, GAME_ID, events)
    Scorer(store).catch_up(GAME_ID)
    return sum(isinstance(e, TilePlaced) for e in events)


def load_times(browser: Any, url: str, count: int, drawn: bool) -> list[float]:
    """ms from navigation start to the board drawn (the viewer) or the load event (JSON)."""
    times = []
    for _ in range(count):
        context = browser.new_context()  # an empty cache each time
        page = context.new_page()
        page.goto(url)
        if drawn:
            page.wait_for_function(
                "() => performance.getEntriesByName('viewer-drawn').length > 0", timeout=10_000
            )
            took = page.evaluate("() => performance.getEntriesByName('viewer-drawn')[0].startTime")
        else:
            took = page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
        times.append(float(took))
        context.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loads", type=int, default=size(15, 2))
    parser.add_argument("--pause-ms", type=int, default=size(150, 20))
    parser.add_argument("--seed", type=int, default=1616)
    args = parser.parse_args()
    chromium, why = find_chromium()
    if chromium is None:
        print(f"bench_page: no browser: {why}", file=sys.stderr)
        return 1
    with private_redis() as url:
        turns = store_finished_game(url, args.seed)
        with (
            gunicorn(
                "services.query.wsgi:app",
                "deploy/gunicorn/query.py",
                {"REDIS_URL": url},
                workers=2,
            ) as base,  # fmt: skip
            playwright_chromium(chromium) as browser,
        ):
            view = f"{base}/games/{GAME_ID}/view"
            load_times(browser, view, 2, drawn=True)  # warm the service's caches
            json_loads = load_times(browser, f"{base}/games/{GAME_ID}/board", args.loads, False)
            page_loads = load_times(browser, view, args.loads, drawn=True)

            page = browser.new_page()
            page.goto(f"{view}?turn=0")
            page.wait_for_function("() => document.body.dataset.turn === '0'")
            time.sleep(args.pause_ms / 1000)
            steps = page.evaluate(STEPS_JS, [turns, args.pause_ms])
            fetches = page.evaluate(FETCH_JS, [f"/games/{GAME_ID}/board", size(50, 5)])
            tiles = page.evaluate("() => document.querySelectorAll('#board g.tile').length")
            page.close()

    print(f"game viewer, a finished game of {turns} turns ({tiles} tiles drawn at the end)")
    print(f"  baseline: JSON board view load  {summary(json_loads)}")
    print(f"  page load to a drawn board      {summary(page_loads)}")
    print(f"  baseline: fetch of /board?turn  {summary(fetches)}")
    print(f"  step one turn ({len(steps):2d} steps)     {summary(steps)}")
    judge(
        "page load p90 / JSON view load p50",
        pct(page_loads, 90),
        statistics.median(json_loads),
        max_ratio=MAX_LOAD_VS_JSON,
    )
    judge(
        "step p90 / fetch of /board?turn p50",
        pct(steps, 90),
        statistics.median(fetches),
        max_ratio=MAX_STEP_VS_FETCH,
    )
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
