"""The TypeScript client (clients/typescript), as a mobile app's developers would build it: types
generated from the published OpenAPI document with openapi-typescript, checked by `tsc` (a
request the document does not allow, or a field it does not promise, fails the build), calls
made with openapi-fetch, run in Node against the real suite through nginx's one public URL.

Two players queue for a match (`POST /tickets`, the platform's key), are matched into one
game, and play it on two phones, each holding only its seat's token and following
`GET /games/{id}/live` (the running suite closes a live stream every 0.5 s, so each phone also
resumes with Last-Event-ID many times): every item comes once and in order to both, every move
is played by its own seat, the scores the client reads are those `POST /v1/score` gives for
the game's exported record, and the client then reads both players' new ratings.

Node.js and npm are installed with apt-get when missing and this runs as root (as CI does); the
npm packages come from the registry by the committed package-lock.json (`npm ci`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.local.host import installed
from tests import nginx as private_nginx
from tests.integration.http_client import api_key, call
from tests.stack import Stack

pytestmark = pytest.mark.slow  # npm ci, tsc and a whole game in Node

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
_TRIED: dict[str, list[str]] = {"nodejs": [], "npm": []}


def tool_or_skip(package: str, command: str) -> str:
    found, why = installed(package, lambda: shutil.which(command), _TRIED[package],
                           f"apt-get install {package}")  # fmt: skip
    if found is None:
        warnings.warn(f"TypeScript client test skipped: {why}", stacklevel=2)
        pytest.skip(why)
    return found


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(argv, cwd=CLIENT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def built() -> Path:
    """The client installed (`npm ci`) and built: types generated from the document, `tsc`."""
    node, npm = tool_or_skip("nodejs", "node"), tool_or_skip("npm", "npm")
    run([npm, "ci", "--no-audit", "--no-fund"])
    run([npm, "run", "build"])
    assert (CLIENT / "src" / "schema.d.ts").stat().st_size > 10_000
    return Path(node)


@pytest.fixture(scope="module")
def public_url(running_suite: Stack) -> Iterator[str]:
    binary, why = private_nginx.find_nginx()
    if binary is None:
        warnings.warn(f"TypeScript client test skipped: {why}", stacklevel=1)
        pytest.skip(why)
    upstreams = {
        "command": running_suite.command.removeprefix("http://"),
        "query": running_suite.query.removeprefix("http://"),
    }
    with private_nginx.nginx(upstreams) as proxy:
        yield proxy["public"]


def test_two_players_are_matched_and_play_a_whole_game_following_live(
    built: Path, public_url: str, running_suite: Stack
) -> None:
    key = api_key(running_suite.redis_url)["X-Api-Key"]
    out = run(
        [str(built), "dist/play.js"],
        {"CC_BASE_URL": public_url, "CC_API_KEY": key, "CC_SEED": "7", "CC_TIMEOUT_SECONDS": "400"},
        timeout=450,
    )
    report = json.loads(out.strip().splitlines()[-1])
    game_id = report["game_id"]
    assert report["matched"] is True and report["over"] is True
    phones = report["phones"]
    assert [p["seat"] for p in phones] == [0, 1]
    assert all(p["end"] == "game_scored" and p["in_order"] for p in phones), phones
    assert phones[0]["items"] == phones[1]["items"]  # both saw the whole log

    status, record = call(running_suite.command, "GET", f"/games/{game_id}/record")
    assert status == 200, record
    placed = [item["payload"] for item in log(running_suite.query, game_id)
              if item["type"] == "TilePlaced"]  # fmt: skip
    assert len(placed) == sum(1 for t in record["turns"] if t.get("x") is not None)
    for seat in (0, 1):  # each phone played its own seat's turns, and only those
        assert phones[seat]["played"] == sum(1 for p in placed if p["player"] == seat)
    status, scored = call(
        running_suite.command, "POST", "/v1/score", record, api_key(running_suite.redis_url)
    )
    assert status == 200, scored
    assert report["final_scores"] == scored["final_scores"]
    assert report["winners"] == scored["winners"]
    # Both players' first rated game (fresh ids each run): the winner's skill went up.
    ratings = {r["player_id"]: r for r in report["ratings"]}
    assert set(ratings) == set(report["players"]) and all(r["games"] == 1 for r in ratings.values())
    finals = dict(zip(report["players"], scored["final_scores"], strict=True))
    best, worst = sorted(report["players"], key=lambda p: -finals[p])
    if finals[best] > finals[worst]:
        assert ratings[best]["mu"] > 25 > ratings[worst]["mu"]


def log(query: str, game_id: str) -> list[dict[str, Any]]:
    """The game's whole merged log, page after page (GET /games/{id}/events)."""
    items: list[dict[str, Any]] = []
    after = "0-0"
    for _ in range(100):
        status, page = call(query, "GET", f"/games/{game_id}/events?after={after}")
        assert status == 200, page
        items += page["items"]
        if not page["more"]:
            return items
        after = page["next"]
    raise AssertionError("more than 100 pages of events")


def test_the_client_says_how_it_is_used(built: Path) -> None:
    out = run([str(built), "dist/play.js", "--help"])
    assert "CC_BASE_URL" in out and "CC_API_KEY" in out
