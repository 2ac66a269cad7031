"""The operator's command: ``python -m services.archive status|run|restore GAME_ID``.

Settings as the scoring worker's (services/scoring/config.py): REDIS_URL, ARCHIVE_URL,
ARCHIVE_AFTER; ``--redis-url`` and ``--archive-url`` override them. Exit status: 0, 1 when a
game failed to move, 2 when refused (a restore of a game not archived), 3 when the archive
database cannot be reached (one line on stderr, not a traceback).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

import redis

from services.redis_store.acl import default_url
from services.scoring.config import from_env

from . import open_archive
from .archiver import Archiver
from .fallthrough import unavailable_errors


def _bar(done: int, total: int, outcomes: Counter[str], started: float) -> None:
    """A progress bar on stderr: done/total, the outcomes so far, games/s."""
    width = 30
    filled = width * done // max(1, total)
    rate = done / max(1e-9, time.monotonic() - started)
    shown = " ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    end = "\n" if done >= total else ""
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:.0f} games/s {shown}"
        + end
    )
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the command; its exit status."""
    settings = from_env()
    parser = argparse.ArgumentParser(
        prog="python -m services.archive",
        description="Finished games: what waits for the archive, archive the due ones now, "
        "or put one back into Redis (deploy/README.md, 'The archive').",
    )
    parser.add_argument(
        "--redis-url",
        default=default_url(settings["REDIS_URL"]),
        help="the event store (default: REDIS_URL, else the admin user of `make run`'s)",
    )
    parser.add_argument(
        "--archive-url",
        default=settings["ARCHIVE_URL"],
        help="postgresql://… or sqlite:///path (default: ARCHIVE_URL, else var/archive.sqlite3)",
    )
    parser.add_argument(
        "--after",
        type=float,
        default=settings["ARCHIVE_AFTER"],
        help="seconds after its final score event a game is due (default ARCHIVE_AFTER)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="games waiting for the archive, and archived")
    run = commands.add_parser("run", help="archive every due game now (a progress bar)")
    run.add_argument("--limit", type=int, default=1_000_000, help="at most this many games")
    run.add_argument(
        "--ahead",
        type=float,
        default=0.0,
        help="also games due within this many seconds (e.g. before a maintenance window)",
    )
    run.add_argument("--batch", type=int, default=100, help="games copied per commit")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    restore = commands.add_parser("restore", help="put an archived game back into Redis")
    restore.add_argument("game_id")
    restore.add_argument(
        "--keep", action="store_true", help="do not schedule it for the archive again"
    )
    args = parser.parse_args(argv)

    client = redis.Redis.from_url(args.redis_url)
    try:
        archive = open_archive(args.archive_url)
    except unavailable_errors() as e:
        return _unavailable(e)
    batch = getattr(args, "batch", 100)
    archiver = Archiver(client, archive, after_ms=int(args.after * 1000), batch=batch)
    try:
        if args.command == "status":
            archiver.due_index.follower.catch_up()
            now = int(time.time() * 1000)
            waiting, due = archiver.waiting(now)
            print(f"waiting for the archive: {waiting} games, {due} of them due now")
            print(f"archived: {archive.count()} games")
        elif args.command == "run":
            started = time.monotonic()
            now = int(time.time() * 1000 + args.ahead * 1000)

            def bar(done: int, total: int, outcomes: Counter[str]) -> None:
                if not args.quiet:
                    _bar(done, total, outcomes, started)

            outcomes = archiver.run(now, limit=args.limit, progress=bar)
            print(", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items())) or "nothing due")
            return 1 if outcomes["failed"] else 0
        else:
            game = archiver.restore(args.game_id, schedule=not args.keep)
            print(f"restored {game.game_id}: {game.count()} events")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except unavailable_errors() as e:
        return _unavailable(e)
    finally:
        archive.close()
    return 0


UNAVAILABLE = 3  # the exit status when the archive database cannot be reached


def _unavailable(error: BaseException) -> int:
    """Say on one line that the archive is down (nothing was moved: every game stays in
    Redis) and give `UNAVAILABLE`, apart from a game that failed (1) or a refusal (2)."""
    why = " ".join(str(error).split())
    print(f"error: the archive is unavailable, nothing was moved: {why}", file=sys.stderr)
    return UNAVAILABLE


if __name__ == "__main__":
    sys.exit(main())
