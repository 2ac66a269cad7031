"""What the two SQL adapters of the archive share: the rows a game is stored as, and the
read-back summary.

One row per game in ``archived_games``: the list columns (status, creation, end, owner key,
names, player ids), the event counts, and the log itself packed
(`eventstore.archive.pack`, ~3 KB). Each distinct player name (``n:`` + name casefolded) and
player id (``i:`` + id) of a game is indexed for lists: on PostgreSQL in the row (``who``,
a GIN index); on SQLite in ``archived_players`` keyed (who, creation, game).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any

from eventstore.archive import ArchivedGame, Summary, canonical, copy_digest, pack
from eventstore.envelope import MOVES, SCORES


@dataclass(frozen=True)
class Row:
    """A game as the SQL adapters store it."""

    game_id: str
    status: str
    created_ms: int
    ended_ms: int
    archived_ms: int
    key_id: str | None
    names: list[str]
    player_ids: list[str]
    moves: int
    scores: int
    log: bytes
    record: dict[str, Any]

    @classmethod
    def of(cls, game: ArchivedGame, archived_ms: int, log: bytes | None = None) -> Row:
        """The row of a game (packing its log unless given)."""
        return cls(
            game.game_id,
            game.meta.status,
            game.meta.created_ms,
            game.meta.ended_ms,
            archived_ms,
            game.meta.key_id,
            game.meta.names,
            game.meta.player_ids,
            game.count(MOVES),
            game.count(SCORES),
            pack(game) if log is None else log,
            game.meta.record,
        )

    def seats(self) -> str:
        """The names and player ids (None where not given) in seat order, one JSON text."""
        ids = self.record.get("player_ids")
        seats = {"names": self.names, "player_ids": ids if isinstance(ids, list) else None}
        return json.dumps(seats, separators=(",", ":"), ensure_ascii=False)

    def who(self) -> list[str]:
        """The game's players as lists look them up: ``n:`` + name casefolded (`GET /games?
        player=`), ``i:`` + player id (``?player_id=``)."""
        found = {"n:" + n.casefold() for n in self.names} | {"i:" + i for i in self.player_ids}
        return sorted(found)

    def players(self) -> list[tuple[str, int, str]]:
        """The ``archived_players`` rows of the game (SQLite)."""
        return [(w, self.created_ms, self.game_id) for w in self.who()]


@cache
def _packers() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="archive-pack")


def rows_of(games: Sequence[ArchivedGame], archived_ms: int) -> list[Row]:
    """The rows of a batch of games, their logs compressed on two threads (zlib lets go of
    the GIL while it compresses: the costliest step of archiving a game)."""
    for game in games:
        canonical(game)  # made here, holding the GIL; compressed there, without it
    logs = list(_packers().map(pack, games)) if len(games) > 1 else [pack(g) for g in games]
    return [Row.of(game, archived_ms, log) for game, log in zip(games, logs, strict=True)]


def who_key(who: str) -> int:
    """A player's key in PostgreSQL's ``who`` column: the first 8 bytes of sha256 of
    ``n:`` + name casefolded or ``i:`` + player id, as a signed 64-bit integer (8 bytes in
    the row and the index, against ~14 for the text; a list compares the seats it finds
    with the name or id asked, so a collision, ~1 in 10^19, shows nothing wrong)."""
    return int.from_bytes(hashlib.sha256(who.encode()).digest()[:8], "big", signed=True)


def summary_of(moves: int, scores: int, log: Any) -> Summary:
    """The summary of a stored row: its counts, and the digest of the canonical bytes its
    log decompresses to, read back (a log that does not decompress gives a summary nothing
    matches). The counts were written in the same statement as the log, from the same game;
    `verify` compares both with the game's own."""
    try:
        return Summary(moves, scores, copy_digest(bytes(log)))
    except ValueError:
        return Summary(-1, -1, b"")
