"""Play a full game between bots through the HTTP API of a running suite (`make demo`).

`--bots mcts greedy …` makes those seats the server's own bot seats (played by the bot
worker, docs/bots.md); the other seats are played here by tools/gameclient.py's random bots,
or by you at the terminal with `--human` (hints on). Afterwards: the score track, from the
query service if it answers, else from the command service's last turn view, and the game's
URL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from carcassonne.progress import Progress
from carcassonne.track import SPACES, track_position
from tools.gameclient import (
    Game,
    GameError,
    choose,
    create_game,
    hint,
    play_game,
    query_scores,
    totals,
    turn_view,
)

NAMES = ("Ada", "Brunel", "Curie", "Darwin", "Euler", "Faraday")
BOARD_PATH = "/games/{id}/board"  # the query service's board view: the game's URL
VIEW_PATH = "/games/{id}/view"  # the same game in a browser (services/query/pages.py)


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
            _, answer = hint(command, game.game_id, auth)  # pending (202) until worked out
            out.write(f"hint: {answer}\n")
            continue
        try:
            placement = options[int(answer[0])]
            meeple = placement["meeples"][int(answer[1])] if len(answer) > 1 else None
        except (ValueError, IndexError):
            out.write("not a listed placement or meeple spot\n")
            continue
        keys = ("x", "y", "rotation")
        return {**{k: placement[k] for k in keys}, "meeple": meeple}


class TurnProgress:
    """The demo's turns on the project's one progress line (carcassonne.progress): a bar on
    a terminal, a plain line per turn otherwise; the note is the running score."""

    def __init__(self, stream: TextIO, tty: bool | None = None) -> None:
        self.bar = Progress(0, stream, unit="turns", tty=tty, lines=True, every_s=0)

    def __call__(self, game: Game, done: int, total: int) -> None:
        """Show that `done` of about `total` turns are played."""
        scores = game.view.get("scores") or []
        tally = "  ".join(f"{n} {s}" for n, s in zip(game.names, scores, strict=False))
        self.bar.update(done, tally, total=total)


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
        help="the API's one base URL (COMMAND_URL, or http://127.0.0.1:$COMMAND_PORT; port "
        "8000): nginx sends each path to its service",
    )
    add(
        "--query-url",
        default=os.environ.get("QUERY_URL"),
        help="where to read scores and boards (QUERY_URL; default: --command-url, the one base "
        "URL; a `make run` without nginx serves the query service alone on port 8001)",
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
    add(
        "--api-key",
        default=os.environ.get("API_KEY"),
        help="the key that creates the game (API_KEY; `make run` also takes none: ANONYMOUS_GAMES)",
    )
    args = parser.parse_args(argv)
    if args.names is not None and not 2 <= len(args.names) <= 6:
        parser.error("--names takes 2 to 6 names")
    if args.names is None and len(args.bots) + args.human > args.players:
        args.players = len(args.bots) + args.human
    if len(args.bots) + args.human > (len(args.names) if args.names else args.players):
        parser.error("more bots (and you) than players")
    args.query_url = args.query_url or args.command_url
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Play one game and print its result; exit 1 if the suite is not running."""
    args = parse_args(argv)
    names = args.names or list(NAMES[: args.players])
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    out = sys.stdout
    try:
        game = create_game(
            args.command_url,
            names,
            args.tileset,
            args.bots,
            args.think_ms,
            args.human,
            api_key=args.api_key,
            public=True,  # a demo is there to be watched: listed on the viewer's home page
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
            TurnProgress(out),
            human=human,
            ask=ask_human,
        )
        final = turn_view(args.command_url, game)
    except (GameError, OSError) as exc:
        out.write(f"\nmake demo: {exc}\n")
        return 1
    scores = list(final["scores"])
    view = query_scores(args.query_url, game, scores, wait=15.0)
    out.write("\nfinal score track")
    if view is not None and totals(view) is not None:
        out.write(f" (query service {args.query_url}):\n")
        players = view["players"]
        shown = [str(p.get("name") or game.names[i]) for i, p in enumerate(players)]
        out.write("\n".join(track_lines(shown, totals(view) or [])) + "\n")
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
