"""A client that plays games through the HTTP API of a running suite: `make demo`
(tools/demo.py) and the tests that play over HTTP use it.

Its bots ask the command service for the legal placements (GET /games/{id}/turn), pick one at
random (seeded) and sometimes a meeple spot, and play it (POST /games/{id}/turns with the seat's
bearer token, an Idempotency-Key so that a retried request never plays twice, and If-Match with
the sequence they saw). Seats without a token are the server's own bot seats: waited for.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

SCORES_PATH = "/games/{id}/scores"  # the query service's score track
RETRIES = 8  # a turn is retried (same Idempotency-Key) on a 5xx or a refused connection


class GameError(RuntimeError):
    """The suite is not there or answered something a client cannot handle."""


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, Any]:
    """One HTTP request with a JSON body; returns (status, decoded JSON or text)."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Accept": "application/json", **(headers or {})}
    if data is not None:
        sent["Content-Type"] = "application/json"
    req = urllib.request.Request(base.rstrip("/") + path, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, payload = int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, exc.read()
    try:
        return status, json.loads(payload) if payload else None
    except json.JSONDecodeError:
        return status, payload.decode(errors="replace")


def hint(
    base: str,
    game_id: str,
    headers: dict[str, str],
    level: str = "greedy",
    timeout: float = 30.0,
    call: Callable[..., tuple[int, Any]] = call,
) -> tuple[int, Any]:
    """GET /games/{id}/hint, asked again at its `Location` after `retry_after_ms` while it
    answers 202 (the bot worker is working it out), until another answer or `timeout`
    seconds: (status, body) of the last answer. `call` is the request (tests pass theirs)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = call(base, "GET", f"/games/{game_id}/hint?level={level}", headers=headers)
        if status != 202 or time.monotonic() > deadline:
            return status, body
        time.sleep(min(1.0, int(body["retry_after_ms"]) / 1000))


def call_retrying(base: str, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    """`call`, retried on a refused connection or a 5xx (safe only for idempotent requests)."""
    for attempt in range(RETRIES):
        try:
            status, body = call(base, method, path, **kw)
        except OSError:
            if attempt == RETRIES - 1:
                raise
        else:
            if status < 500 or attempt == RETRIES - 1:
                return status, body
        time.sleep(min(2.0, 0.1 * 2**attempt))
    raise AssertionError("unreachable")


@dataclass
class Game:
    """A game being played: its id, seats, tokens, and every acknowledged turn response."""

    game_id: str
    names: list[str]
    tokens: dict[int, str | None]  # None: a bot seat of the server
    turns: list[dict[str, Any]] = field(default_factory=list)  # POST /turns answers
    view: dict[str, Any] = field(default_factory=dict)  # the last GET /turn answer


def create_game(
    command: str,
    names: Sequence[str],
    tileset: str = "base",
    bots: Sequence[str] = (),
    think_ms: int = 1000,
    hints: bool = False,
    api_key: str | None = None,
    public: bool = False,
) -> Game:
    """POST /games: a new game for these players (seats in the server's random order); the
    first `len(bots)` players are the server's bot seats at those levels. With `api_key` the
    key owns it (without, only a development server with ANONYMOUS_GAMES takes it); a
    `public` game is listed to everyone (GET /games, the viewer's home page)."""
    players: list[dict[str, Any]] = [{"name": n} for n in names]
    for player, level in zip(players, bots, strict=False):
        player.update(bot=level, think_ms=think_ms)
    ruleset: dict[str, Any] = {"tileset": tileset}
    if hints:
        ruleset["hints"] = True
    body = {"players": players, "ruleset": ruleset, "public": public}
    headers = {"X-Api-Key": api_key} if api_key else None
    try:
        status, created = call(command, "POST", "/games", body, headers)
    except OSError as exc:
        raise GameError(f"no command service at {command} ({exc}): is `make run` running?") from exc
    if status != 201:
        raise GameError(f"POST /games answered {status}: {created}")
    seats = created["players"]
    return Game(
        created["game_id"],
        [s["name"] for s in seats],
        {int(s["seat"]): s["token"] for s in seats},
        view=created["turn"],
    )


def choose(view: dict[str, Any], rng: random.Random, meeple_chance: float) -> dict[str, Any]:
    """A bot's move: a random legal placement, and a random meeple spot now and then."""
    placement = rng.choice(view["placements"])
    spots = placement["meeples"]
    meeple = rng.choice(spots) if spots and rng.random() < meeple_chance else None
    return {
        "x": placement["x"],
        "y": placement["y"],
        "rotation": placement["rotation"],
        "meeple": meeple,
    }


def wait_for_bot(command: str, game: Game, timeout: float = 60.0) -> dict[str, Any]:
    """The turn view once the server's bot to move has played (polled: GET /turn)."""
    seq, deadline = game.view["seq"], time.monotonic() + timeout
    while (view := turn_view(command, game))["seq"] == seq:
        if time.monotonic() > deadline:
            raise GameError(f"the bot of seat {view['player']} did not move: is the bot worker up?")
        time.sleep(0.1)
    return view


def play_turn(command: str, game: Game, move: dict[str, Any]) -> dict[str, Any] | None:
    """Play `move` for the player to move; None if the game moved on (then reload the turn)."""
    seat = int(game.view["player"])
    headers = {
        "Authorization": f"Bearer {game.tokens[seat]}",
        # One key per turn, kept across retries: a turn whose answer was lost is not replayed.
        "Idempotency-Key": uuid.uuid4().hex,
        "If-Match": str(game.view["seq"]),
    }
    path = f"/games/{game.game_id}/turns"
    status, body = call_retrying(command, "POST", path, body=move, headers=headers)
    if status == 409 and isinstance(body, dict) and body.get("code") == "stale_sequence":
        return None
    if status != 200:
        raise GameError(f"POST {path} answered {status}: {body}")
    game.turns.append(body)
    return dict(body)


def turn_view(command: str, game: Game) -> dict[str, Any]:
    """GET /games/{id}/turn (retried: a read)."""
    status, view = call_retrying(command, "GET", f"/games/{game.game_id}/turn")
    if status != 200:
        raise GameError(f"GET /games/{game.game_id}/turn answered {status}: {view}")
    game.view = view
    return dict(view)


def play_game(
    command: str,
    game: Game,
    rng: random.Random,
    meeple_chance: float = 0.5,
    delay: float = 0.0,
    on_turn: Callable[[Game, int, int], None] = lambda game, done, total: None,
    stop_after: int | None = None,
    human: int | None = None,
    ask: Callable[[str, Game, random.Random], dict[str, Any]] | None = None,
) -> Game:
    """Play until the game is over (or `stop_after` turns); `on_turn(game, done, total)`.
    Seats without a token are the server's bots (waited for); seat `human`'s moves come from
    `ask`, the others' from `choose`."""
    view = game.view
    while not view["over"]:
        if stop_after is not None and len(game.turns) >= stop_after:
            break
        if game.tokens.get(int(view["player"])) is None:
            view = wait_for_bot(command, game)
            game.turns.append({"seq": view["seq"], "bot": True})
            done = len(game.turns)
            on_turn(game, done, done + (0 if view["over"] else int(view["tiles_left"]) + 1))
            continue
        if ask is not None and int(view["player"]) == human:
            move = ask(command, game, rng)
        else:
            move = choose(view, rng, meeple_chance)
        played = play_turn(command, game, move)
        view = turn_view(command, game)
        if played is None:  # someone else moved first: choose again from the new view
            continue
        done = len(game.turns)
        on_turn(game, done, done + (0 if view["over"] else int(view["tiles_left"]) + 1))
        time.sleep(delay)
    return game


def query_scores(query: str, game: Game, expected: list[int], wait: float) -> Any | None:
    """The query service's score view once it shows the final totals (None if it is absent)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            status, body = call(query, "GET", SCORES_PATH.format(id=game.game_id), timeout=5)
        except OSError:
            return None
        if status == 200 and totals(body) in (None, expected):
            return body
        if status not in (200, 404):
            return None
        if time.monotonic() > deadline:
            return body if status == 200 else None
        time.sleep(0.2)  # the worker and the query projection are catching up


def totals(body: Any) -> list[int] | None:
    """Each player's total in a score view, if its shape is one we know."""
    players = body.get("players") if isinstance(body, dict) else None
    if not isinstance(players, list):
        return None
    totals = [p.get("total", p.get("score")) if isinstance(p, dict) else None for p in players]
    numbers = [t for t in totals if isinstance(t, int)]
    return numbers if len(numbers) == len(totals) else None
