"""Give back the bot seconds still held for games that are gone (an operator's repair; safe to
run again, or from cron).

    python -m services.redis_store.release_bot_time [--redis-url URL] [--grace S] [--dry-run]

An API key's bot seconds in flight (bot_budget.py) are given back when its game ends (the
bots consumer) or leaves for the archive (the archiver). Two kinds of reservation were never
given back, and hold part of the key's `BOT_SECONDS_IN_FLIGHT` for ever:

- a game archived by an archiver from before it gave seconds back: only its tombstone
  ``{g:G}:archived`` is left in Redis, so it ended;
- a game whose creation stopped between its reservation and its first append (the process
  killed, Redis lost mid-request): its move stream never came. The two steps are
  milliseconds apart, so a game still without a stream `--grace` seconds (60) after a first
  look never will have one; one that got it meanwhile keeps its seconds.

This walks every key's in-flight set (SCAN on each primary of a cluster) and releases those
games with `bot_budget.release`, which also gives back their takeover bots' seconds and marks
the game given back (a takeover of it reserves nothing after). A game in Redis keeps its
seconds, over or not: the bots consumer gives them back when it reaches its end.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator

import redis

from eventstore.envelope import MOVES

from .backfill import nodes
from .bot_budget import in_flight_key, release
from .indexes import text
from .keys import archived_key, game_keys
from .one_off import one_off

GRACE_SECONDS = 60.0
_PATTERN = in_flight_key("*")  # {k:*}:bots:in-flight
_TAKEOVER = ":takeover:"  # bot_budget.takeover_member's separator


def held(client: redis.Redis, count: int = 1000) -> Iterator[tuple[str, str]]:
    """(API key id, game id) of every game some key holds bot seconds for, each once per
    key (a game's takeover members name it too)."""
    for db in nodes(client):
        for found in db.scan_iter(match=_PATTERN, count=count):
            key = text(found)
            key_id = key[len("{k:") : key.index("}")]
            games = {text(m).partition(_TAKEOVER)[0] for m in client.zrange(key, 0, -1)}
            for game_id in sorted(games):
                yield key_id, game_id


def _started(client: redis.Redis, game_id: str) -> bool:
    return bool(client.exists(game_keys(game_id, MOVES)[0]))


def run(
    client: redis.Redis,
    grace: float = GRACE_SECONDS,
    dry_run: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, int]:
    """Release the seconds of every held game that was archived, or never started (still
    without a move stream after `grace` seconds). Counts, by kind; nothing is written with
    `dry_run`."""
    archived: list[tuple[str, str]] = []
    unstarted: list[tuple[str, str]] = []
    kept = 0
    for key_id, game_id in held(client):
        if client.exists(archived_key(game_id)):
            archived.append((key_id, game_id))
        elif not _started(client, game_id):
            unstarted.append((key_id, game_id))
        else:
            kept += 1
    if unstarted and grace > 0:
        sleep(grace)  # a creation between its two steps appends meanwhile
    never = [(k, g) for k, g in unstarted if not _started(client, g)]
    if not dry_run:
        for key_id, game_id in archived + never:
            release(client, key_id, game_id)
    return {
        "kept": kept + len(unstarted) - len(never),
        "archived": len(archived),
        "never_started": len(never),
        "released": 0 if dry_run else len(archived) + len(never),
    }


def main(argv: list[str] | None = None) -> int:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--grace",
            type=_seconds,
            default=GRACE_SECONDS,
            help="seconds a game without a move stream is given to get one before its "
            f"seconds are given back (default {GRACE_SECONDS:g})",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be given back; write nothing"
        )

    return one_off(
        "python -m services.redis_store.release_bot_time",
        "Give back the bot seconds held for games that were archived, or that never started "
        "(no move stream after --grace seconds). Safe to run again.",
        lambda client, args: run(client, args.grace, args.dry_run),
        argv,
        options,
    )


def _seconds(value: str) -> float:
    """A `--grace`: seconds, 0 or more."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"a number of seconds >= 0, not {value!r}")
    return seconds


if __name__ == "__main__":
    sys.exit(main())
