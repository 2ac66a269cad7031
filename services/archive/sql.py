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
from dataclasses import dataclass
from typing import Any

from eventstore.archive import (
    ArchivedGame,
    Entry,
    ListQuery,
    Summary,
    copy_digest,
    final_totals,
    listed,
    pack,
    public_of,
)
from eventstore.envelope import MOVES, SCORES
from services.redis_store.indexes import is_text


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
    public: bool = False
    totals: str = "null"  # the last score event's totals, JSON (what a list row shows)

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
            public_of(game.meta.record),
            json.dumps(final_totals(game.events), separators=(",", ":")),
        )

    def seats(self) -> str:
        """The names and player ids (None where not given) in seat order, one JSON text."""
        ids = self.record.get("player_ids")
        seats = {"names": self.names, "player_ids": ids if isinstance(ids, list) else None}
        text = json.dumps(seats, separators=(",", ":"), ensure_ascii=False)
        # A name with a lone UTF-16 surrogate (stored before notation imports refused one)
        # is no text a database can hold: escaped, it reads back the same.
        return text if is_text(text) else json.dumps(seats, separators=(",", ":"))

    def who(self) -> list[str]:
        """The game's players as lists look them up: ``n:`` + name casefolded (`GET /games?
        player=`), ``i:`` + player id (``?player_id=``), and its owner: ``k:`` + API key id
        (an API key's games)."""
        found = {"n:" + n.casefold() for n in self.names} | {"i:" + i for i in self.player_ids}
        if self.key_id:
            found.add("k:" + self.key_id)
        # One that is no text (a lone surrogate, see `seats`) is left out: no list can ask
        # for it, and the database could not store it.
        return sorted(w for w in found if is_text(w))

    def players(self) -> list[tuple[str, int, str]]:
        """The ``archived_players`` rows of the game (SQLite)."""
        return [(w, self.created_ms, self.game_id) for w in self.who()]


def wanted(query: ListQuery) -> list[str]:
    """What a list looks up in a game's `Row.who` (all of them: the game has each)."""
    out = []
    if query.key_id is not None:
        out.append("k:" + query.key_id)
    if query.player is not None:
        out.append("n:" + query.player.casefold())
    if query.player_id is not None:
        out.append("i:" + query.player_id)
    return out


def seats_from(text: str) -> tuple[list[str], list[str | None]]:
    """Names and player ids from a row's ``seats`` JSON text (`Row.seats`)."""
    seats = json.loads(text)
    names = [str(n) for n in seats.get("names") or []]
    ids = seats.get("player_ids")
    if not isinstance(ids, list) or len(ids) != len(names):
        ids = [None] * len(names)
    return names, [None if i is None else str(i) for i in ids]


def page_of(
    query: ListQuery, found: Sequence[Sequence[Any]]
) -> tuple[list[tuple[Entry, dict[str, Any]]], Entry | None]:
    """A page from the rows a query read (at most ``query.limit``), each (game_id, status,
    created_ms, ended_ms, key_id, public, seats, moves, totals): the rows the list admits,
    and the last entry read when the query read as many as it could."""
    out = []
    last: Entry | None = None
    for game_id, status, created, ended, key_id, public, seats, moves, totals in found:
        entry = (int(created), str(game_id))
        last = entry
        names_ids = seats_from(seats)
        if query.admits(entry, status, key_id, bool(public), names_ids):
            row = listed(game_id, status, names_ids, int(moves), int(ended), json.loads(totals))
            out.append((entry, row))
    return out, last if len(found) >= query.limit else None


def rows_of(games: Sequence[ArchivedGame], archived_ms: int) -> list[Row]:
    """The rows of a batch of games, each log packed here (format 2's zstd takes ~0.06 ms a
    game: handing games to threads cost more than it saved)."""
    return [Row.of(game, archived_ms) for game in games]


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
