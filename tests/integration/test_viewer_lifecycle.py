"""The viewer shows every lifecycle fact (docs/viewer.md), in a real headless Chromium on the
whole suite (as tests/integration/test_viewer_page.py, whose fixtures it uses):

- a seat that resigned, a timed-out turn, a placement taken back (undo), an abandoned game
  (an imported game with all of them: tests/lifecycle_games.py), and bot seats;
- whose turn it is, in words, without hovering;
- each seat's mark (its colour and its number) beside its name, on one line however long the
  name, and the same number on its meeples and track marker;
- meeples at least MIN_MEEPLE_PX on screen at the "fit" zoom of a whole 72-tile board, on a
  1280×900 screen and on a 390×844 phone, and never smaller when zooming in.

Screenshots at both sizes land in var/screenshots/ (not committed) for a person to look at.
"""

from __future__ import annotations

import random
import time
from typing import Any

import redis

from carcassonne.record import record_from_events
from services.redis_store import RedisEventStore
from services.scoring.timer import Timer
from tests.lifecycle_games import (
    RESIGNED_SEAT,
    TIMED_OUT_SEAT,
    UNDONE_TURN,
    lifecycle_game,
)
from tools import gameclient as demo  # the client `make demo` plays with

from .http_client import call
from .test_viewer_page import (  # noqa: F401  (module fixtures: this module gets its own)
    browser,
    finished,
    shot,
    suite,
    wait_turn,
    wait_until,
)

MIN_MEEPLE_PX = 12
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# 40 characters: the longest name a seat may have.
LONG_NAME = "Maximiliane Alexandrina von Hohenzollern"
NAMES = ["Ada", LONG_NAME, "Cy", "Dee"]


def scored_so_far(query: str, game_id: str) -> dict[str, Any]:
    """The score view once the worker has scored every move (an abandoned game gets no final
    scoring, so it is never `over` there)."""

    def done() -> dict[str, Any] | None:
        status, body = call(query, "GET", f"/games/{game_id}/scores")
        return body if status == 200 and body["unscored_moves"] == 0 else None

    return dict(wait_until(done, 60, f"game {game_id} scored"))


def imported(urls: dict[str, str], events: Any, names: list[str]) -> str:
    record = record_from_events(events).to_dict()
    status, body = call(
        urls["command"], "POST", "/games/import", {**record, "names": names, "public": True},
        {"X-Api-Key": urls["key"]},  # public: listed on the home page (/) as well
    )  # fmt: skip
    assert status == 201, body
    game_id = str(body["game_id"])
    scored_so_far(urls["query"], game_id)
    return game_id


def row_facts(page: Any) -> list[dict[str, Any]]:
    """Each player row as shown: its mark, name, labels (their text and whether they are
    visible) and the geometry of the name beside its mark."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('#players tbody tr')].map((row) => {
            const mark = row.querySelector('.mark').getBoundingClientRect();
            const name = row.querySelector('.player-name');
            const box = name.getBoundingClientRect();
            const style = getComputedStyle(name);
            return {
                seat: Number(row.dataset.seat),
                classes: row.className,
                mark: row.querySelector('.mark').textContent,
                markColour: getComputedStyle(row.querySelector('.mark')).backgroundColor,
                name: name.textContent,
                tags: [...row.querySelectorAll('.tag')].map((t) => t.textContent),
                visibleTags: [...row.querySelectorAll('.tag')].filter((t) => {
                    const r = t.getBoundingClientRect();
                    const shown = getComputedStyle(t).visibility === 'visible';
                    return r.width > 0 && r.height > 0 && shown;
                }).length,
                nameHeight: box.height,
                lineHeight: parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.4,
                nameMiddle: box.top + box.height / 2,
                markMiddle: mark.top + mark.height / 2,
                nameLeft: box.left,
                markRight: mark.right,
                cut: name.scrollWidth > name.clientWidth,
            };
        })"""
        )
    )


def one_line_beside_its_mark(row: dict[str, Any]) -> None:
    assert row["nameHeight"] <= row["lineHeight"] * 1.2, row  # one line, never wrapped
    assert abs(row["nameMiddle"] - row["markMiddle"]) <= 3, row  # beside the mark
    assert row["nameLeft"] >= row["markRight"], row  # after it, not under it


def test_every_lifecycle_fact_is_shown_in_words(browser, suite) -> None:  # noqa: F811
    query = suite["query"]
    game_id = imported(suite, lifecycle_game()[1], NAMES)
    last = call(query, "GET", f"/games/{game_id}/board")[1]["turns"]
    for viewport, size in ((DESKTOP, "1280x900"), (PHONE, "390x844")):
        phone = viewport is PHONE
        context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))

        # Turn 2: Cy's turn timed out (Cy still plays); Dee holds the next tile.
        page.goto(f"{query}/games/{game_id}/view?turn=2")
        wait_turn(page, 2)
        rows = row_facts(page)
        assert [r["mark"] for r in rows] == ["1", "2", "3", "4"]
        assert [r["name"] for r in rows] == NAMES
        assert rows[TIMED_OUT_SEAT]["tags"] == ["1 turn timed out"]
        assert "out" not in rows[TIMED_OUT_SEAT]["classes"].split()
        assert rows[3]["tags"] == ["▶ to play"] and "current" in rows[3]["classes"]
        assert rows[3]["visibleTags"] == 1  # shown as it is, no hover needed
        info = page.locator("#turn-info")
        assert info.is_visible() and info.text_content().startswith("Dee to play tile B")
        # The long name stays on one line beside its mark, cut short, not wrapped.
        for row in rows:
            one_line_beside_its_mark(row)
        assert rows[RESIGNED_SEAT]["cut"]
        assert page.get_attribute(f"#players tr[data-seat='{RESIGNED_SEAT}'] .player-name",
                                  "title") == LONG_NAME  # fmt: skip
        assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
        shot(page, f"viewer-lifecycle-timeout-{size}")

        # The turn of the placement taken back says so; the next turn places it again.
        page.goto(f"{query}/games/{game_id}/view?turn={UNDONE_TURN}")
        wait_turn(page, UNDONE_TURN)
        assert page.text_content("#turn-label") == f"Turn {UNDONE_TURN} of {last} · undone"
        # Ada holds the tile again: the row and the line say it is her turn.
        assert page.text_content("#turn-info").startswith("Ada to play tile K again")
        assert row_facts(page)[0]["tags"] == ["▶ to play"]
        note = page.locator("#turn-note")
        assert note.is_visible()
        assert note.text_content().startswith("↶ Ada took this placement back (undo)")
        shot(page, f"viewer-lifecycle-undone-{size}")
        page.keyboard.press("ArrowRight")
        wait_turn(page, UNDONE_TURN + 1)
        assert not note.is_visible()
        assert page.text_content("#turn-label") == f"Turn {UNDONE_TURN + 1} of {last}"

        # That turn also saw a resignation and Cy's second timed-out turn: both are out.
        rows = row_facts(page)
        assert rows[RESIGNED_SEAT]["tags"] == ["resigned"]
        assert rows[TIMED_OUT_SEAT]["tags"] == ["out: 2 turns timed out"]
        assert [("out" in r["classes"].split()) for r in rows] == [False, True, True, False]
        assert page.text_content("#turn-info").startswith("Dee to play tile L")
        shot(page, f"viewer-lifecycle-out-{size}")

        # The end: abandoned, said in the status line and under the scores; nobody to play.
        page.keyboard.press("End")
        wait_turn(page, last)
        assert page.text_content("#status") == "abandoned"
        assert page.text_content("#turn-info") == "game abandoned"
        assert page.text_content("#result").startswith("Abandoned: nobody moved for too long")
        rows = row_facts(page)
        assert rows[RESIGNED_SEAT]["tags"] == ["resigned"]
        assert rows[TIMED_OUT_SEAT]["tags"] == ["out: 2 turns timed out"]
        assert not any("▶ to play" in r["tags"] or "★ winner" in r["tags"] for r in rows)
        for row in rows:
            one_line_beside_its_mark(row)
        shot(page, f"viewer-lifecycle-abandoned-{size}")
        assert not errors, errors

        # The game list says abandoned too.
        page.goto(f"{query}/")
        page.wait_for_function("() => document.body.dataset.loaded === 'true'")
        status = page.text_content(f"tr[data-game='{game_id}'] td.status")
        assert status == "abandoned"
        page.click("button[data-status='abandoned']")  # and lists it under its own filter
        page.wait_for_function(
            "() => [...document.querySelectorAll('#games tbody td.status')].every("
            "(td) => td.textContent === 'abandoned')"
        )
        assert page.locator(f"tr[data-game='{game_id}']").is_visible()
        context.close()


def test_bot_seats_are_marked_and_named_when_they_are_to_play(browser, suite) -> None:  # noqa: F811
    query = suite["query"]
    body = {
        "players": [{"name": "Ann"}, {"name": "Robo", "bot": "greedy"}],
        "seat_order": [1, 0],  # the bot moves first (no bot worker here: it waits)
    }
    status, created = call(suite["command"], "POST", "/games", body, {"X-Api-Key": suite["key"]})
    assert status == 201, created
    game_id = created["game_id"]
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{query}/games/{game_id}/view")
    wait_turn(page, 0)
    rows = row_facts(page)
    assert [(r["name"], r["tags"]) for r in rows] == [
        ("Robo", ["▶ to play", "bot · greedy"]), ("Ann", [])]  # fmt: skip
    assert page.text_content("#turn-info").startswith("Robo (bot) to play tile ")
    shot(page, "viewer-bot-seat-1280x900")
    page.close()


def meeple_sizes(page: Any) -> list[dict[str, Any]]:
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('#board g.meeple')].map((g) => {
            const r = g.querySelector('path').getBoundingClientRect();
            return { seat: Number(g.dataset.player), width: r.width, height: r.height,
                     mark: g.querySelector('.meeple-mark').textContent };
        })"""
        )
    )


def test_meeples_are_readable_at_the_fit_zoom_on_a_screen_and_a_phone(
    browser,  # noqa: F811
    suite,  # noqa: F811
    finished,  # noqa: F811
) -> None:
    query, game_id = suite["query"], finished["game_id"]
    last = finished["board"]["tiles_placed"]
    for viewport, size in ((DESKTOP, "1280x900"), (PHONE, "390x844")):
        phone = viewport is PHONE
        context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
        page = context.new_page()
        page.goto(f"{query}/games/{game_id}/view?turn={last}")
        wait_turn(page, last)
        page.click("#zoom-fit")
        fit = meeple_sizes(page)
        assert fit and len(fit) == len(finished["board"]["meeples"])
        smallest = min(min(m["width"], m["height"]) for m in fit)
        assert smallest >= MIN_MEEPLE_PX, f"a meeple is {smallest:.1f} px at the fit zoom ({size})"
        # The second cue: each meeple wears its seat's number, as the mark beside the name.
        assert all(m["mark"] == str(m["seat"] + 1) for m in fit)
        marks = page.eval_on_selector_all(
            "#players tbody tr",
            "rows => rows.map(r => [r.dataset.seat, r.querySelector('.mark').textContent])",
        )
        assert all(mark == str(int(seat) + 1) for seat, mark in marks)
        track = page.eval_on_selector_all(
            "#track .marker-mark", "els => els.map(e => e.textContent)"
        )
        assert sorted(track) == ["1", "2"]
        shot(page, f"viewer-meeples-fit-{size}")
        # Zooming in never makes them smaller; far enough in they are drawn at their own size.
        page.click("#zoom-in")
        closer = meeple_sizes(page)
        assert min(m["height"] for m in closer) >= min(m["height"] for m in fit) - 0.5
        for _ in range(6):
            page.click("#zoom-in")
        near = meeple_sizes(page)
        assert min(m["height"] for m in near) > min(m["height"] for m in fit) * 1.5
        shot(page, f"viewer-meeples-zoomed-{size}")
        context.close()


def test_a_followed_game_shows_a_resignation_and_its_abandonment_as_they_happen(
    browser,  # noqa: F811
    suite,  # noqa: F811
    redis_url: str,
) -> None:
    """Live: a resignation and the server's abandoning of the game reach the page without a
    reload (the /live stream's move events), and the page stops following once the worker
    has caught up, although an abandoned game gets no final score event."""
    command, query = suite["command"], suite["query"]
    game = demo.create_game(command, ["Eve", "Finn", "Gus"], api_key=suite["key"])
    rng = random.Random(7)
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{query}/games/{game.game_id}/view")
    wait_turn(page, 0)
    page.wait_for_function("() => document.body.dataset.live === 'open'")
    for turn in (1, 2):
        demo.play_turn(command, game, demo.choose(game.view, rng, 0.6))
        wait_turn(page, turn)
        demo.turn_view(command, game)
    seat = next(s for s, token in game.tokens.items() if s != game.view["player"] and token)
    status, body = call(
        command, "POST", f"/games/{game.game_id}/resign", None,
        {"Authorization": f"Bearer {game.tokens[seat]}"},
    )  # fmt: skip
    assert status == 200, body
    page.wait_for_function(
        "s => [...document.querySelectorAll(`#players tr[data-seat='${s}'] .tag`)]"
        ".some((t) => t.textContent === 'resigned')",
        arg=seat,
        timeout=5_000,
    )
    client = redis.Redis.from_url(redis_url)
    # What the worker's abandon sweep does to a game idle for ABANDON_AFTER (here: 0 s).
    assert Timer(RedisEventStore(client), client).abandon(game.game_id, int(time.time() * 1000), 0)
    page.wait_for_function(
        "() => document.querySelector('#status').textContent === 'abandoned'", timeout=10_000
    )
    page.wait_for_function("() => document.body.dataset.live === 'closed'", timeout=10_000)
    assert page.text_content("#result").startswith("Abandoned")
    assert page.text_content("#turn-info") == "game abandoned"
    shot(page, "viewer-live-abandoned-1280x900")
    page.close()


def takeover_game() -> list[Any]:
    """A 2-player demo game whose seat 1 resigns after the first placement, under `on_leave:
    "bot:random"`: a random bot plays seat 1 to the end (docs/takeover.md); engine events."""
    from carcassonne.bots import choose, player_view
    from carcassonne.events import DiscardTile, DrawTile, Resign, StartGame
    from carcassonne.game import command_for_action, decide, is_unplaceable
    from carcassonne.ruleset import Ruleset
    from carcassonne.simulate import bag_order
    from carcassonne.state import GameState

    state, log = GameState(), []

    def run(command: Any) -> None:
        for event in decide(state, command):
            state.apply(event)
            log.append(event)

    run(StartGame(Ruleset(tileset="demo", on_leave="bot:random"), 2))
    bag = bag_order(state, random.Random(4))
    while not state.over:
        if state.drawn is None:
            run(DrawTile(bag.pop()))
        elif is_unplaceable(state):
            run(DiscardTile(state.current))
        else:
            run(command_for_action(state, choose("random", player_view(state), len(log)).action))
            if state.turn == 1:
                run(Resign(1))
    return log


def test_a_seat_a_bot_took_over_is_marked_from_the_takeover_on(browser, suite) -> None:  # noqa: F811
    query = suite["query"]
    game_id = imported(suite, takeover_game(), ["Ada", "Bo"])
    last = call(query, "GET", f"/games/{game_id}/board")[1]["turns"]
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(f"{query}/games/{game_id}/view?turn=0")
    wait_turn(page, 0)
    assert row_facts(page)[1]["tags"] == []  # before it left: a person's seat
    page.keyboard.press("End")
    wait_turn(page, last)
    rows = row_facts(page)
    assert rows[1]["tags"] == ["resigned", "bot · random plays on"]
    assert "out" in rows[1]["classes"].split() and rows[1]["visibleTags"] == 2
    context.close()
