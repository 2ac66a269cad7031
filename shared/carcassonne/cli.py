"""`carcassonne`: score, show and simulate games from the command line.

This module is the engine's only edge with I/O (files, stdin, the clock, a terminal).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from .bots import LEVELS
from .bots.budget import Budget
from .bots.duel import GameResult, play_duel_game, summarize
from .errors import GameError, RecordError
from .export import looks_like_export, record_from_export
from .notation import format_record, parse_record
from .progress import Progress
from .record import Record, load_record, play_record, record_from_events, replay, score_report
from .render import render_board, render_scores
from .ruleset import FARM_EDITIONS, Ruleset
from .simulate import random_game
from .state import GameState
from .svg import board_svg
from .tilesets import TILESETS

EXIT_BAD_INPUT = 2


def read_record(path: str) -> Record:
    """Load a record from a JSON file (or `-` for stdin); the notation and a game's NDJSON
    export (`/games/{id}/events?format=ndjson`) are accepted too."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        raise SystemExit(_fail(f"cannot read {path}: {exc.strerror}")) from exc
    except UnicodeDecodeError as exc:
        raise SystemExit(_fail(f"{path}: not UTF-8 text")) from exc
    if text.lstrip().startswith("carcassonne-record/"):
        return parse_record(text)
    if looks_like_export(text):  # GET /games/{id}/events?format=ndjson, saved to a file
        return record_from_export(text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(_fail(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})")) from exc
    except (RecursionError, ValueError) as exc:  # absurd nesting, a 5000-digit number
        raise SystemExit(_fail(f"{path}: JSON too deeply nested or a number too long")) from exc
    return load_record(data)


def _fail(message: str) -> int:
    print(f"carcassonne: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _error_text(exc: GameError) -> str:
    where = ""
    if isinstance(exc, RecordError) and exc.index is not None:
        where = f" (turn index {exc.index})"
    rule = f" [{exc.rule}]" if exc.rule else ""
    return f"{exc.code}{where}: {exc.message}{rule}"


def cmd_score(args: argparse.Namespace) -> int:
    """Print the scores and every score explanation of a record as JSON."""
    record = read_record(args.record)
    report = score_report(replay(record), record.names)
    del report["ranks"], report["winners"]
    print(json.dumps(report, indent=2 if args.pretty else None))
    return 0


def state_at_turn(record: Record, turn: int | None) -> GameState:
    """The record's game after `turn` placements (the end by default), as `?turn=` shows it."""
    state = GameState()
    for _ in play_record(record, state):
        if turn is not None and state.turn == turn:
            return state
    if turn is not None and state.turn != turn:
        raise SystemExit(_fail(f"--turn {turn}: this game has turns 0-{state.turn}"))
    return state


def cmd_show(args: argparse.Namespace) -> int:
    """Print the board of a record as text, with the scores; or draw it as SVG (`--svg`)."""
    record = read_record(args.record)
    state = state_at_turn(record, args.turn)
    if args.svg is None:
        sys.stdout.write(render_board(state))
        sys.stdout.write(render_scores(state))
        return 0
    picture = board_svg(state, args.open)
    if args.svg == "-":
        sys.stdout.write(picture)
        return 0
    try:
        with open(args.svg, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(picture)
    except OSError as exc:
        return _fail(f"cannot write {args.svg}: {exc.strerror}")
    return 0


def _ruleset(args: argparse.Namespace) -> Ruleset:
    """`--ruleset` (the whole ruleset as recorded JSON) or the --tileset, --farm-scoring and
    --no-farmers options."""
    if args.ruleset is None:
        return Ruleset(
            tileset=args.tileset, farmers=not args.no_farmers, farm_scoring=args.farm_scoring
        )
    try:
        data = json.loads(args.ruleset)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise SystemExit(
            _fail("--ruleset must be a JSON object, e.g. '{\"hole_extra_turn\": true}'")
        )
    # The recorded ruleset as a whole: keys it leaves out take the ruleset's defaults.
    return Ruleset.from_dict(data)


def cmd_simulate(args: argparse.Namespace) -> int:
    """Play random legal games and report throughput."""
    ruleset = _ruleset(args)
    rng = random.Random(args.seed)
    progress = Progress(args.games)
    times = []
    started = time.perf_counter()
    for done in range(1, args.games + 1):
        t0 = time.perf_counter()
        random_game(rng, args.players, ruleset)
        times.append(time.perf_counter() - t0)
        progress.update(done)
    seconds = time.perf_counter() - started
    median_ms = statistics.median(times) * 1000
    if args.json:
        print(
            json.dumps(
                {
                    "games": args.games,
                    "seconds": round(seconds, 4),
                    "ms_per_game_median": round(median_ms, 4),
                }
            )
        )
    else:
        print(
            f"{args.games} games of {args.players} players in {seconds:.2f} s: "
            f"{args.games / seconds:,.1f} games/s, median {median_ms:.2f} ms per game"
        )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Play one random game in the engine and show it (what `make run` does for now)."""
    state, events = random_game(random.Random(args.seed), args.players)
    record = record_from_events(events)
    sys.stdout.write(format_record(record))
    print()
    sys.stdout.write(render_board(state))
    print()
    sys.stdout.write(render_scores(state))
    return 0


def _duel_game(job: tuple[int, argparse.Namespace, Ruleset]) -> GameResult:
    """One game of a duel (module level: `--jobs` sends it to worker processes)."""
    game, args, ruleset = job
    # `--clock cpu`: this process's CPU time, so a move's think time does not shrink when
    # other work shares the machine (each `--jobs` worker reads its own).
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    budget = Budget(
        playouts=args.playouts,
        think_ms=args.think_ms,
        clock=clock if args.think_ms is not None else None,
    )
    return play_duel_game(
        game,
        args.seed,
        (args.a, args.b),
        args.players,
        ruleset,
        (budget, budget),
        clock,
    )


def cmd_duel(args: argparse.Namespace) -> int:
    """Play bot A against bot B and print wins, draws and the score difference with 95 % CIs."""
    ruleset = _ruleset(args)
    if ruleset.hand > 1:
        return _fail('duel: games with a hand (R10.3) are not supported; leave out "hand"')
    progress = Progress(args.games)
    jobs = [(game, args, ruleset) for game in range(args.games)]
    results: list[GameResult] = []
    try:  # before the first game: a long series must not fail at its first result
        log = open(args.results, "a", encoding="utf-8") if args.results else None  # noqa: SIM115
    except OSError as exc:
        return _fail(f"cannot write {args.results}: {exc.strerror}")

    def finished(result: GameResult) -> None:
        results.append(result)
        progress.update(len(results))
        if log is not None:  # one line a game as it ends: a long series stopped keeps its games
            log.write(json.dumps(dataclasses.asdict(result) | {"diff": result.diff}) + "\n")
            log.flush()

    try:
        if args.jobs > 1:
            import multiprocessing  # only here: the engine itself never starts processes

            with multiprocessing.Pool(args.jobs) as pool:
                for result in pool.imap_unordered(_duel_game, jobs):
                    finished(result)
        else:
            for job in jobs:
                finished(_duel_game(job))
    finally:
        if log is not None:
            log.close()
    summary = summarize(results)
    moves_a = sum(r.moves[0] for r in results) or 1
    moves_b = sum(r.moves[1] for r in results) or 1
    ms_a = 1000 * sum(r.seconds[0] for r in results) / moves_a
    ms_b = 1000 * sum(r.seconds[1] for r in results) / moves_b
    if args.json:
        print(
            json.dumps(
                {
                    "a": args.a,
                    "b": args.b,
                    "games": summary.games,
                    "wins_a": summary.wins_a,
                    "wins_b": summary.wins_b,
                    "draws": summary.draws,
                    "share_a": round(summary.share_a, 4),
                    "ci95": [round(v, 4) for v in summary.ci95],
                    "mean_diff": round(summary.mean_diff, 3),
                    "ci95_diff": [round(v, 3) for v in summary.ci95_diff],
                    "ms_per_move_a": round(ms_a, 3),
                    "ms_per_move_b": round(ms_b, 3),
                    "clock": args.clock,
                }
            )
        )
        return 0
    lo, hi = summary.ci95
    dlo, dhi = summary.ci95_diff
    print(
        f"{args.a} (A) vs {args.b} (B): {summary.games} games of {args.players} players, "
        f"seed {args.seed}\n"
        f"  wins A {summary.wins_a}, wins B {summary.wins_b}, draws {summary.draws}\n"
        f"  A's share {summary.share_a:.1%} (95 % CI {lo:.1%} - {hi:.1%}; a draw counts half)\n"
        f"  mean score difference A - B {summary.mean_diff:+.1f} "
        f"(95 % CI {dlo:+.1f} .. {dhi:+.1f})\n"
        f"  thinking: A {ms_a:.1f} ms per move, B {ms_b:.1f} ms per move ({args.clock} clock)"
    )
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _turn(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("a turn is a whole number") from exc
    if not 0 <= value <= 10**6:
        raise argparse.ArgumentTypeError("a turn is a number of placements: 0 or more")
    return value


def _players(text: str) -> int:
    value = int(text)
    if not 2 <= value <= 6:
        raise argparse.ArgumentTypeError("a game has 2 to 6 players (R1.3)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `carcassonne`."""
    parser = argparse.ArgumentParser(
        prog="carcassonne", description="Score, show and simulate Carcassonne games."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    score = sub.add_parser(
        "score", help="score a game record (JSON, notation, or a game's NDJSON event export)"
    )
    score.add_argument("record", help="path to the record, or - for stdin")
    score.add_argument("--pretty", action="store_true", help="indent the JSON")
    score.set_defaults(func=cmd_score)

    show = sub.add_parser("show", help="print a record's board as text, or draw it as SVG")
    show.add_argument("record", help="path to the record, or - for stdin")
    show.add_argument("--svg", metavar="FILE", help="write the board as SVG to FILE (- for stdout)")
    show.add_argument(
        "--turn", type=_turn, default=None, help="the board after this many placements (0: start)"
    )
    show.add_argument("--open", action="store_true", help="with --svg: outline open features")
    show.set_defaults(func=cmd_show)

    sim = sub.add_parser("simulate", help="play random legal games and report throughput")
    sim.add_argument("--games", type=_positive, default=100)
    sim.add_argument("--players", type=_players, default=2)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--tileset", choices=sorted(TILESETS), default="base")
    sim.add_argument("--farm-scoring", choices=FARM_EDITIONS, default="3rd")
    sim.add_argument("--no-farmers", action="store_true")
    sim.add_argument(
        "--ruleset",
        default=None,
        help="the whole ruleset as recorded JSON (replaces --tileset, --farm-scoring and "
        "--no-farmers), e.g. '{\"hole_extra_turn\": true}'",
    )
    sim.add_argument("--json", action="store_true", help="print one JSON line")
    sim.set_defaults(func=cmd_simulate)

    duel = sub.add_parser("duel", help="play bot A against bot B and report who is stronger")
    duel.add_argument("--a", choices=LEVELS, default="mcts", help="bot A (default mcts)")
    duel.add_argument("--b", choices=LEVELS, default="greedy", help="bot B (default greedy)")
    duel.add_argument("--games", type=_positive, default=200)
    duel.add_argument("--players", type=_players, default=2, help="A in one seat, B in the rest")
    duel.add_argument("--seed", type=int, default=1)
    duel.add_argument(
        "--think-ms", type=_positive, default=None, help="mcts: time per move (machine-dependent)"
    )
    duel.add_argument(
        "--playouts", type=_positive, default=None, help="mcts: playouts per move (reproducible)"
    )
    duel.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="what --think-ms is read on: wall time, or the CPU time of the process playing "
        "the game (steady on a shared machine)",
    )
    duel.add_argument("--jobs", type=_positive, default=1, help="games played at once")
    duel.add_argument("--tileset", choices=sorted(TILESETS), default="base")
    duel.add_argument("--farm-scoring", choices=FARM_EDITIONS, default="3rd")
    duel.add_argument("--no-farmers", action="store_true")
    duel.add_argument(
        "--ruleset",
        default=None,
        help="the whole ruleset as recorded JSON (replaces --tileset, --farm-scoring and "
        '--no-farmers), e.g. \'{"river": true, "abbot": true, "tile_edition": "2nd"}\'',
    )
    duel.add_argument("--json", action="store_true", help="print one JSON line")
    duel.add_argument(
        "--results", metavar="FILE", default=None, help="append one JSON line per game as it ends"
    )
    duel.set_defaults(func=cmd_duel)

    demo = sub.add_parser("demo", help="play and show one random game")
    demo.add_argument("--players", type=_players, default=2)
    demo.add_argument("--seed", type=int, default=None)
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; exit status 2 on a malformed or illegal record.

    A reader that closes the pipe early (`carcassonne score x.json | head -1`) ends the
    command quietly with status 0: what was asked for was read, nothing went wrong here."""
    args = build_parser().parse_args(argv)
    try:
        result: Any = args.func(args)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
    except GameError as exc:
        return _fail(_error_text(exc))
    except BrokenPipeError:
        _silence_stdout()
        return 0
    return int(result)


def _silence_stdout() -> None:
    """Point stdout at /dev/null: the interpreter flushes it once more at exit, and that
    write to the closed pipe would print a second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test's capture): nothing to do
        pass


if __name__ == "__main__":
    sys.exit(main())
