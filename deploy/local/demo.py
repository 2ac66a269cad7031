"""Play a full game between bots through the HTTP API of a running suite (`make demo`).

`--bots mcts greedy …` makes those seats the server's own bot seats (played by the bot
worker, docs/bots.md); the other seats are played here, by a random client bot each, or by
you at the terminal with `--human` (hints on). The client bots ask the command service for
the legal placements (GET /games/{id}/turn), pick one at random (seeded) and sometimes a
meeple spot, and play it (POST /games/{id}/turns with the seat's bearer token, an
Idempotency-Key so that a retried request never plays twice, and If-Match with the sequence
they saw). Afterwards: the score track, from the query service if it answers, else from the
command service's last turn view, and the game's URL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from carcassonne.track import SPACES, track_position

NAMES = ("Ada", "Brunel", "Curie", "Darwin", "Euler", "Faraday")
BOARD_PATH = "/games/{id}/board"  # the query service's board view: the game's URL
VIEW_PATH = "/games/{id}/view"  # the same game in a browser (services/query/pages.py)
SCORES_PATH = "/games/{id}/scores"  # the query service's score track
RETRIES = 8  # a turn is retried (same Idempotency-Key) on a 5xx or a refused connection


class DemoError(RuntimeError):
    """The suite is not there or answered something a bot cannot handle."""


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
) -> Game:
    """POST /games: a new game for these players (seats in the server's random order); the
    first `len(bots)` players are the server's bot seats at those levels."""
    players: list[dict[str, Any]] = [{"name": n} for n in names]
    for player, level in zip(players, bots, strict=False):
        player.update(bot=level, think_ms=think_ms)
    ruleset: dict[str, Any] = {"tileset": tileset}
    if hints:
        ruleset["hints"] = True
    body = {"players": players, "ruleset": ruleset}
    try:
        status, created = call(command, "POST", "/games", body)
    except OSError as exc:
        raise DemoError(f"no command service at {command} ({exc}): is `make run` running?") from exc
    if status != 201:
        raise DemoError(f"POST /games answered {status}: {created}")
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
            raise DemoError(f"the bot of seat {view['player']} did not move: is the bot worker up?")
        time.sleep(0.1)
    return view


def ask_human(command: str, game: Game, rng: random.Random) -> dict[str, Any]:
    """Your move at the terminal: a numbered placement, a meeple spot, or `h` for a hint."""
    view, out = game.view, sys.stdout
    options = view["placements"]
    out.write(f"\nyour tile {view['tile']}, scores {view['scores']}; placements:\n")
    for i, p in enumerate(options):
        spots = ", ".join(f"{j}:{m['feature']}" for j, m in enumerate(p["meeples"]))
        out.write(f"  {i:>3}: x={p['x']} y={p['y']} rotation={p['rotation']}  meeples {spots}\n")
    while True:
        answer = input("move (N, N M for a meeple, h for a hint, Enter for random): ").split()
        if not answer:
            return choose(view, rng, 0.3)
        if answer[0] == "h":
            seat = int(view["player"])
            auth = {"Authorization": f"Bearer {game.tokens[seat]}"}
            _, hint = call(command, "GET", f"/games/{game.game_id}/hint", headers=auth)
            out.write(f"hint: {hint}\n")
            continue
        try:
            placement = options[int(answer[0])]
            meeple = placement["meeples"][int(answer[1])] if len(answer) > 1 else None
        except (ValueError, IndexError):
            out.write("not a listed placement or meeple spot\n")
            continue
        keys = ("x", "y", "rotation")
        return {**{k: placement[k] for k in keys}, "meeple": meeple}


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
        raise DemoError(f"POST {path} answered {status}: {body}")
    game.turns.append(body)
    return dict(body)


def turn_view(command: str, game: Game) -> dict[str, Any]:
    """GET /games/{id}/turn (retried: a read)."""
    status, view = call_retrying(command, "GET", f"/games/{game.game_id}/turn")
    if status != 200:
        raise DemoError(f"GET /games/{game.game_id}/turn answered {status}: {view}")
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
) -> Game:
    """Play until the game is over (or `stop_after` turns); `on_turn(game, done, total)`.
    Seats without a token are the server's bots (waited for); seat `human` asks you."""
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
        if human is not None and int(view["player"]) == human:
            move = ask_human(command, game, rng)
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


class Progress:
    """A progress bar on a terminal; a plain line per turn otherwise."""

    def __init__(self, stream: TextIO, tty: bool | None = None, width: int = 30) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.width = width

    def __call__(self, game: Game, done: int, total: int) -> None:
        """Show that `done` of about `total` turns are played."""
        scores = game.view.get("scores") or []
        tally = "  ".join(f"{n} {s}" for n, s in zip(game.names, scores, strict=False))
        if self.tty:
            filled = self.width * done // max(total, 1)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r[{bar}] {done:>3}/{total:<3} turns  {tally}\x1b[K")
            if done >= total:
                self.stream.write("\n")
        else:
            self.stream.write(f"turn {done}/{total}: {tally}\n")
        self.stream.flush()


def query_scores(query: str, game: Game, expected: list[int], wait: float) -> Any | None:
    """The query service's score view once it shows the final totals (None if it is absent)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            status, body = call(query, "GET", SCORES_PATH.format(id=game.game_id), timeout=5)
        except OSError:
            return None
        if status == 200 and _totals(body) in (None, expected):
            return body
        if status not in (200, 404):
            return None
        if time.monotonic() > deadline:
            return body if status == 200 else None
        time.sleep(0.2)  # the worker and the query projection are catching up


def _totals(body: Any) -> list[int] | None:
    """Each player's total in a score view, if its shape is one we know."""
    players = body.get("players") if isinstance(body, dict) else None
    if not isinstance(players, list):
        return None
    totals = [p.get("total", p.get("score")) if isinstance(p, dict) else None for p in players]
    numbers = [t for t in totals if isinstance(t, int)]
    return numbers if len(numbers) == len(totals) else None


def track_lines(names: Sequence[str], scores: Sequence[int]) -> list[str]:
    """The score track (R8.1): each player's space on the 50-space track, laps, point tiles."""
    lines = []
    row = ["."] * SPACES
    for name, score in zip(names, scores, strict=True):
        pos = track_position(score)
        tiles = " + ".join(str(t) for t in pos.point_tiles) or "none"
        lines.append(
            f"  {name:<10} {score:>4} points   space {pos.space:>2}, "
            f"lap {pos.laps}, point tiles: {tiles}"
        )
        mark = name[:1].upper()
        row[pos.space] = mark if row[pos.space] == "." else "*"  # * : several players
    scale = [" "] * SPACES
    for space in range(0, SPACES, 10):
        scale[space : space + len(str(space))] = str(space)
    scale[-2:] = str(SPACES - 1)  # the last space, its last digit above it
    lines.append("  space      " + "".join(scale).rstrip())
    lines.append("  track      " + "".join(row))
    return lines


def winners(names: Sequence[str], scores: Sequence[int]) -> str:
    """Who won (ties share the win, R8.2)."""
    best = max(scores)
    return " and ".join(n for n, s in zip(names, scores, strict=True) if s == best)


def _env_url(name: str, port_var: str, port: int) -> str:
    return os.environ.get(name) or f"http://127.0.0.1:{os.environ.get(port_var) or port}"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="make demo",
        description="Play a full game between bots through the HTTP API of a running suite "
        "(start it with `make run`), then print the score track and the game's URL.",
    )
    add = parser.add_argument
    add(
        "--command-url",
        default=_env_url("COMMAND_URL", "COMMAND_PORT", 8000),
        help="command service (COMMAND_URL, or http://127.0.0.1:$COMMAND_PORT; port 8000)",
    )
    add(
        "--query-url",
        default=_env_url("QUERY_URL", "QUERY_PORT", 8001),
        help="query service (QUERY_URL, or http://127.0.0.1:$QUERY_PORT; port 8001)",
    )
    add("--players", type=int, default=2, choices=range(2, 7), help="number of bots (2)")
    add("--names", nargs="+", metavar="NAME", help="the bots' names (default: Ada, Brunel…)")
    add(
        "--seed",
        type=int,
        default=None,
        help="the bots' random choices (the draws are the server's secret)",
    )
    add("--tileset", choices=("base", "demo"), default="base", help="tile set (base: 72 tiles)")
    add("--meeple-chance", type=float, default=0.5, help="how often a bot places a meeple")
    add("--delay", type=float, default=0.0, help="seconds between turns (to watch it live)")
    add(
        "--bots",
        nargs="+",
        default=[],
        choices=("random", "greedy", "mcts"),
        metavar="LEVEL",
        help="the first players are the server's bot seats at these levels (random, greedy, "
        "mcts), played by the bot worker; the rest are this script's random bots",
    )
    add("--think-ms", type=int, default=1000, help="how long a server mcts bot thinks (1000)")
    add("--human", action="store_true", help="you play the last seat at the terminal (hints on)")
    args = parser.parse_args(argv)
    if args.names is not None and not 2 <= len(args.names) <= 6:
        parser.error("--names takes 2 to 6 names")
    if args.names is None and len(args.bots) + args.human > args.players:
        args.players = len(args.bots) + args.human
    if len(args.bots) + args.human > (len(args.names) if args.names else args.players):
        parser.error("more bots (and you) than players")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Play one game and print its result; exit 1 if the suite is not running."""
    args = parse_args(argv)
    names = args.names or list(NAMES[: args.players])
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    out = sys.stdout
    try:
        game = create_game(
            args.command_url, names, args.tileset, args.bots, args.think_ms, args.human
        )
        human = None
        if args.human:  # you are the last name; find your seat
            human = game.names.index(names[-1])
        out.write(
            f"game {game.game_id}: {', '.join(game.names)} (in seat order), bot seed {seed}\n"
        )
        out.flush()
        play_game(
            args.command_url,
            game,
            random.Random(seed),
            args.meeple_chance,
            args.delay,
            Progress(out),
            human=human,
        )
        final = turn_view(args.command_url, game)
    except (DemoError, OSError) as exc:
        out.write(f"\nmake demo: {exc}\n")
        return 1
    scores = list(final["scores"])
    view = query_scores(args.query_url, game, scores, wait=15.0)
    out.write("\nfinal score track")
    if view is not None and _totals(view) is not None:
        out.write(f" (query service {args.query_url}):\n")
        players = view["players"]
        shown = [str(p.get("name") or game.names[i]) for i, p in enumerate(players)]
        out.write("\n".join(track_lines(shown, _totals(view) or [])) + "\n")
    elif view is not None:
        out.write(f" (query service {args.query_url}):\n{json.dumps(view, indent=2)}\n")
    else:
        out.write(" (command service: the query service did not answer):\n")
        out.write("\n".join(track_lines(game.names, scores)) + "\n")
    out.write(f"winner: {winners(game.names, scores)}\n")
    if view is not None:
        out.write(f"the game: {args.query_url}{BOARD_PATH.format(id=game.game_id)}\n")
        out.write(f"watch it: {args.query_url}{VIEW_PATH.format(id=game.game_id)}\n")
    else:
        out.write(
            f"the game: {args.command_url}/games/{game.game_id}/turn "
            "(the query service's board view when it runs)\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
