"""The game viewer (`/games/{id}/view`) and the game list (`/`) in a real headless Chromium.

The whole suite runs for real: Redis, the command and query services under gunicorn, a
Celery scoring worker. A full 72-tile game is imported and stepped through; another is
played over HTTP while the page follows it live; the page is checked on a phone-sized
screen, and a player named like an HTML tag is shown as text. Screenshots are saved under
var/screenshots/ for a person to look at.

Chromium is the system's (tests/browser.py: installed with apt-get when missing and we run
as root, as CI does; otherwise these tests are skipped with the reason shown), driven by
Playwright for Python (the `dev` extras), which never downloads a browser of its own here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.record import record_from_events
from services.command.apikeys import ApiKeys
from services.query.pages import CSP
from tests.browser import chromium_or_skip, playwright_chromium, playwright_or_skip
from tests.unit.test_query_games import long_game
from tools import gameclient as demo  # the client `make demo` plays with

from .http_client import ROOT, call, gunicorn
from .workers import celery_env, running, worker

SCREENSHOTS = ROOT / "var" / "screenshots"
HOSTILE = '<img src=x onerror="window.__pwned=1">'
LIVE_WAIT_S = 1.0  # each new tile appears on the page within this of its move


@pytest.fixture(scope="module")
def suite(redis_url: str) -> Iterator[dict[str, str]]:
    """Base URLs of a command and a query service (gunicorn) and a scoring worker."""
    env = celery_env(redis_url)
    command_env = {"REDIS_URL": redis_url, "BROKER_URL": env["BROKER_URL"]}
    with (
        running(worker(env, name="viewer")),
        gunicorn(
            "services.command.wsgi:app", "deploy/gunicorn/command.py", command_env, workers=1
        ) as command,  # fmt: skip
        gunicorn(
            "services.query.wsgi:app",
            "deploy/gunicorn/query.py",
            {"REDIS_URL": redis_url},
            workers=1,
        ) as query,  # fmt: skip
    ):
        key = ApiKeys(redis.Redis.from_url(redis_url)).create("viewer-tests")[1]
        yield {"command": command, "query": query, "key": key}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (each test opens its own page)."""
    executable = chromium_or_skip()
    playwright_or_skip()
    with playwright_chromium(executable) as launched:
        yield launched


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
    return value


def scored(query: str, game_id: str) -> dict[str, Any]:
    """The score view once the worker has scored the whole game."""

    def done() -> dict[str, Any] | None:
        status, body = call(query, "GET", f"/games/{game_id}/scores")
        return body if status == 200 and body["over"] and body["unscored_moves"] == 0 else None

    return dict(wait_until(done, 60, f"game {game_id} scored"))


@pytest.fixture(scope="module")
def finished(suite: dict[str, str]) -> dict[str, Any]:
    """A full 72-tile base game, imported and scored: a player laps the track twice (120
    points, R8.1), every kind of feature scores, the other player is named like an HTML tag."""
    _, events = long_game()
    record = record_from_events(events).to_dict()
    names = ["Ada", HOSTILE]
    status, body = call(
        suite["command"], "POST", "/games/import", {**record, "names": names, "public": True},
        {"X-Api-Key": suite["key"]},  # public: listed on the home page (/) as well
    )  # fmt: skip
    assert status == 201, body
    game_id = body["game_id"]
    scores = scored(suite["query"], game_id)
    board = call(suite["query"], "GET", f"/games/{game_id}/board")[1]
    assert len(board["tiles"]) + len(board["discarded"]) == 72  # the whole base set (R1)
    return {"game_id": game_id, "names": names, "scores": scores, "board": board}


def rgb(hex_colour: str) -> str:
    """`#d7263d` as a browser's computed style says it: `rgb(215, 38, 61)`."""
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


def view_box(page: Any) -> list[float]:
    return [float(v) for v in page.get_attribute("#board svg", "viewBox").split()]


def gesture(page: Any, steps: list[tuple[str, int, int, int]]) -> None:
    """Touch pointer events on the board: (type, pointer id, x, y) each."""
    page.eval_on_selector(
        "#board",
        """(board, steps) => { for (const [type, id, x, y] of steps) {
            board.dispatchEvent(new PointerEvent(type, { pointerId: id, clientX: x,
                clientY: y, pointerType: "touch", isPrimary: id === 1, bubbles: true }));
        } }""",
        steps,
    )


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def shown_turn(page: Any) -> int | None:
    value = page.evaluate("() => document.body.dataset.turn")
    return None if value is None else int(value)


def wait_turn(page: Any, turn: int, timeout_ms: float = 10_000) -> None:
    # A function, not an expression: the page's CSP (no eval) refuses Playwright's eval of one.
    page.wait_for_function("t => document.body.dataset.turn === t", arg=str(turn),
                           timeout=timeout_ms)  # fmt: skip


def on_page(page: Any) -> dict[str, Any]:
    """What the page shows: tiles and meeples drawn, and each seat's name, score, supply."""
    return dict(
        page.evaluate(
            """() => ({
            tiles: document.querySelectorAll('#board g.tile').length,
            meeples: document.querySelectorAll('#board g.meeple').length,
            svgTurn: document.querySelector('#board svg').dataset.turn,
            players: [...document.querySelectorAll('#players tbody tr')].map((row) => ({
                seat: Number(row.dataset.seat),
                name: row.querySelector('.player-name').textContent,
                score: Number(row.querySelector('.score-value').textContent),
                supply: Number(row.querySelector('.supply').textContent),
            })),
            events: [...document.querySelectorAll('#events li.event')].map((li) => ({
                kind: li.dataset.kind, found: Number(li.dataset.found),
                text: li.querySelector('.explanation').textContent,
            })),
            highlighted: document.querySelectorAll('#board .hl').length,
            error: document.body.dataset.error || null,
        })"""
        )
    )


def check_turn(page: Any, query: str, game_id: str, turn: int) -> dict[str, Any]:
    """The page at `turn` shows what the views say: tiles, meeples, scores, score events."""
    shown = on_page(page)
    assert shown["error"] is None, shown["error"]
    board = call(query, "GET", f"/games/{game_id}/board?turn={turn}")[1]
    scores = call(query, "GET", f"/games/{game_id}/scores?turn={turn}")[1]
    assert shown["svgTurn"] == str(turn)
    assert shown["tiles"] == len(board["tiles"]) == turn + 1  # the start tile and N placed
    assert shown["meeples"] == len(board["meeples"])
    assert [(p["seat"], p["name"], p["score"], p["supply"]) for p in shown["players"]] == [
        (p["seat"], p["name"], p["score"], p["meeples"]["supply"]) for p in scores["players"]
    ]
    this_turn = [e for e in scores["events"] if e["turn"] == turn]
    assert [(e["kind"], e["text"]) for e in shown["events"]] == [
        (e["kind"], e["explanation"]) for e in this_turn
    ]
    # Each score's feature is found on the board picture and highlighted.
    assert all(e["found"] > 0 for e in shown["events"]), shown["events"]
    assert (shown["highlighted"] > 0) == bool(this_turn)
    return shown


def test_a_finished_game_steps_to_turn_30_and_to_the_end(browser, suite, finished) -> None:
    query, game_id = suite["query"], finished["game_id"]
    last = finished["board"]["tiles_placed"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{query}/games/{game_id}/view?turn=28")
    wait_turn(page, 28)
    page.click("#next")  # a button
    wait_turn(page, 29)
    page.keyboard.press("ArrowRight")  # a key
    wait_turn(page, 30)
    assert page.url.endswith("?turn=30")  # the URL keeps the turn
    check_turn(page, query, game_id, 30)
    whole = view_box(page)
    box = page.locator("#board").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -300)  # the wheel zooms in about the pointer
    page.wait_for_function("w => document.querySelector('#board svg').viewBox.baseVal.width < w",
                           arg=whole[2])  # fmt: skip
    page.click("#zoom-fit")
    assert view_box(page) == whole
    # The open features outlined (board.svg?open=1), and gone again.
    page.check("#open")
    page.wait_for_function("() => document.querySelectorAll('#board .open-feature').length > 0")
    shot(page, "viewer-turn-30")
    page.uncheck("#open")
    page.wait_for_function("() => !document.querySelector('#board .open-feature')")

    page.keyboard.press("End")
    wait_turn(page, last)
    shown = check_turn(page, query, game_id, last)
    # At the end the scores shown are the final ones, the same as /scores.
    assert [p["score"] for p in shown["players"]] == [
        p["score"] for p in finished["scores"]["players"]
    ]
    assert any(e["kind"] == "farm" for e in shown["events"])  # final scoring (R7.3)
    # The score track (R8.1): 120 points stand on space 20 after two laps, one "100" tile.
    leader = finished["scores"]["players"][0]
    assert leader["score"] >= 100 and leader["track"]["point_tiles"]
    tiles = page.eval_on_selector_all(
        "#players tr[data-seat='0'] .point-tile", "els => els.map(e => Number(e.textContent))"
    )
    assert tiles == leader["track"]["point_tiles"]
    space = page.get_attribute("#track .marker[data-seat='0']", "data-space")
    assert space == str(leader["track"]["space"])
    assert "Final scores" in page.text_content("#result")
    # The track's markers wear the colours of the players' meeples on the board.
    colours = page.evaluate(
        """() => ({
        meeples: [...document.querySelectorAll('#board g.meeple')].map(
            (g) => [g.dataset.player, g.querySelector('[fill]').getAttribute('fill')]),
        markers: [...document.querySelectorAll('#track .marker')].map(
            (c) => [c.dataset.seat, getComputedStyle(c).fill]),
    })"""
    )
    markers = dict(colours["markers"])
    assert colours["meeples"] and all(markers[p] == rgb(fill) for p, fill in colours["meeples"])
    shot(page, "viewer-end")

    # The slider, and a turn with scores during play: every event explained and found.
    during = sorted(
        {e["turn"] for e in finished["scores"]["events"] if not e["final"]} - {30, last}
    )
    for turn in during[:5]:
        page.eval_on_selector(
            "#slider", "(s, t) => { s.value = t; s.dispatchEvent(new Event('input')); }", turn
        )
        wait_turn(page, turn)
        check_turn(page, query, game_id, turn)
    # A reload keeps the turn.
    page.reload()
    wait_turn(page, during[4] if len(during) > 4 else during[-1])
    assert not errors, errors
    page.close()


def test_every_score_of_the_game_is_explained_and_found_on_the_board(
    browser, suite, finished
) -> None:
    """Step through the whole game: at each turn the page lists that turn's score events, in
    order, and finds every one's feature on the board picture (roads, cities, monasteries
    by their 3×3 square, farms)."""
    query, game_id = suite["query"], finished["game_id"]
    by_turn: dict[int, list[str]] = {}
    for event in finished["scores"]["events"]:
        by_turn.setdefault(event["turn"], []).append(event["kind"])
    assert {"road", "city", "monastery", "farm"} <= {k for ks in by_turn.values() for k in ks}
    page = browser.new_page()
    page.goto(f"{query}/games/{game_id}/view?turn=0")
    wait_turn(page, 0)
    for turn in range(1, finished["board"]["tiles_placed"] + 1):
        page.keyboard.press("ArrowRight")
        wait_turn(page, turn)
        shown = on_page(page)
        assert [e["kind"] for e in shown["events"]] == by_turn.get(turn, []), turn
        missing = [e for e in shown["events"] if e["found"] == 0]
        assert not missing, (turn, missing)
    page.close()


def test_hostile_player_names_are_shown_as_text(browser, suite, finished) -> None:
    query, game_id = suite["query"], finished["game_id"]
    page = browser.new_page()
    page.goto(f"{query}/games/{game_id}/view?turn=5")
    wait_turn(page, 5)
    names = page.eval_on_selector_all("#players .player-name", "els => els.map(e => e.textContent)")
    assert names == finished["names"]
    assert page.locator("#players img").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert HOSTILE in page.text_content("#title")

    page.goto(f"{query}/")  # the list too
    page.wait_for_function("() => document.body.dataset.loaded === 'true'")
    row = page.locator(f"tr[data-game='{game_id}']")
    assert HOSTILE in row.text_content()
    assert row.locator("img").count() == 0 and page.evaluate("() => window.__pwned") is None
    shot(page, "games-list")
    row.locator("a").click()
    page.wait_for_url(f"**/games/{game_id}/view")
    wait_turn(page, finished["board"]["tiles_placed"])  # a finished game opens at its end
    page.close()


def test_the_page_fits_a_phone_screen(browser, suite, finished) -> None:
    query, game_id = suite["query"], finished["game_id"]
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    page.goto(f"{query}/games/{game_id}/view?turn=40")
    wait_turn(page, 40)
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    boxes = {
        sel: page.locator(sel).bounding_box()
        for sel in ("#board", "#prev", "#next", "#slider", "#zoom-in", "#players", "#track")
    }
    for sel, box in boxes.items():
        assert box is not None and box["width"] > 0, sel
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (sel, box)
    # Board on top, the panels below it.
    assert boxes["#board"]["y"] + boxes["#board"]["height"] <= boxes["#players"]["y"]
    assert boxes["#board"]["height"] >= 300
    page.tap("#next")
    wait_turn(page, 41)
    whole = view_box(page)
    page.tap("#zoom-in")
    zoomed = view_box(page)
    assert zoomed[2] < whole[2] and zoomed[3] < whole[3]
    # One finger drags the board (the view moves against it); two fingers pinch to zoom.
    gesture(page, [("pointerdown", 1, 100, 200), ("pointermove", 1, 160, 230),
                   ("pointerup", 1, 160, 230)])  # fmt: skip
    dragged = view_box(page)
    assert dragged[0] < zoomed[0] and dragged[1] < zoomed[1] and dragged[2] == zoomed[2]
    gesture(page, [("pointerdown", 1, 150, 200), ("pointerdown", 2, 250, 200),
                   ("pointermove", 2, 350, 200), ("pointerup", 1, 150, 200),
                   ("pointerup", 2, 350, 200)])  # fmt: skip
    pinched = view_box(page)
    assert pinched[2] == pytest.approx(dragged[2] / 2, rel=0.01)  # fingers twice as far apart
    page.tap("#next")  # the view stays put while stepping
    wait_turn(page, 42)
    assert view_box(page) == pinched
    shot(page, "viewer-phone")
    page.tap("#zoom-fit")
    assert view_box(page)[2] > pinched[2]
    page.goto(f"{query}/")  # the game list fits too
    page.wait_for_function("() => document.body.dataset.loaded === 'true'")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    assert page.locator(f"tr[data-game='{game_id}'] a").is_visible()
    shot(page, "games-list-phone")
    context.close()


def test_a_game_being_played_is_followed_live(browser, suite) -> None:
    command, query = suite["command"], suite["query"]
    game = demo.create_game(command, ["Curie", "Darwin"], api_key=suite["key"])
    rng = random.Random(16)
    page = browser.new_page()
    page.goto(f"{query}/games/{game.game_id}/view")
    wait_turn(page, 0)
    assert page.text_content("#status").startswith("live")
    page.wait_for_function("() => document.body.dataset.live === 'open'")
    slowest = 0.0

    def play_and_see(turn: int) -> None:
        nonlocal slowest
        demo.play_turn(command, game, demo.choose(game.view, rng, 0.6))
        played = time.monotonic()
        wait_turn(page, turn, timeout_ms=5_000)
        slowest = max(slowest, time.monotonic() - played)
        assert on_page(page)["tiles"] == turn + 1
        demo.turn_view(command, game)

    for turn in range(1, 11):
        play_and_see(turn)
    assert page.url.endswith(f"/games/{game.game_id}/view")  # following: no turn in the URL
    # Stepping back stops following: a new turn only lengthens the slider; "go live" returns.
    page.keyboard.press("ArrowLeft")
    wait_turn(page, 9)
    assert page.url.endswith("?turn=9")
    demo.play_turn(command, game, demo.choose(game.view, rng, 0.6))
    demo.turn_view(command, game)
    page.wait_for_function("() => document.querySelector('#slider').max === '11'")
    assert shown_turn(page) == 9
    page.click("#live")
    wait_turn(page, 11)
    # Every other turn to the end, each on the page within LIVE_WAIT_S of its move.
    turn = 11
    while not game.view["over"]:
        turn += 1
        play_and_see(turn)
    assert slowest <= LIVE_WAIT_S, f"a new tile appeared after {slowest:.2f} s"
    final = scored(query, game.game_id)
    assert call(query, "GET", f"/games/{game.game_id}/board")[1]["tiles_placed"] == turn
    page.wait_for_function("() => document.body.dataset.live === 'closed'", timeout=10_000)
    page.wait_for_function(
        "() => !document.querySelector('#status').textContent.includes('scoring')",
        timeout=10_000,
    )
    shown = on_page(page)
    assert [p["score"] for p in shown["players"]] == [p["score"] for p in final["players"]]
    assert page.text_content("#status") == "game over"
    shot(page, "viewer-live-end")
    page.close()


def test_a_turn_out_of_range_in_the_url_shows_the_nearest_turn(browser, suite, finished):
    """A hand-edited URL never breaks the page: a turn past the end shows the last one, a
    negative one the first, a word the latest; the URL then names the turn shown."""
    query, game_id = suite["query"], finished["game_id"]
    last = finished["board"]["tiles_placed"]
    page = browser.new_page()
    for asked, shown in (("999", last), ("-4", 0), ("abc", last)):
        page.goto(f"{query}/games/{game_id}/view?turn={asked}")
        wait_turn(page, shown)
        assert page.url.endswith(f"/view?turn={shown}"), (asked, page.url)
        assert on_page(page)["error"] is None
    page.close()


def test_the_pages_headers_and_bad_ids(suite, finished) -> None:
    query = suite["query"]
    for path in ("/", f"/games/{finished['game_id']}/view"):
        status, headers, body = fetch(query, path)
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert headers["content-security-policy"] == CSP
        assert '<script type="module" src="/viewer/' in body
        assert "http://" not in body and "https://" not in body  # nothing from another host
    status, error = call(query, "GET", "/games/not-a-game/view")
    assert (status, error["code"], error["detail"], error["rule"]) == (
        404, "game_not_found", "no game not-a-game", None)  # fmt: skip
    status, body = call(query, "GET", f"/games/{'0' * 32}/view")
    assert (status, body["code"]) == (404, "game_not_found")
    status, _, script = fetch(query, "/viewer/view.js")
    assert status == 200 and "EventSource" in script
    assert fetch(query, "/viewer/missing.js")[0] == 404


def fetch(base: str, path: str) -> tuple[int, dict[str, str], str]:
    """A GET returning the headers too (for the pages' HTML and files)."""
    import http.client

    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode()
    finally:
        conn.close()
