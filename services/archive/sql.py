"""What the two SQL adapters of the archive share: the rows a game is stored as, and the
read-back summary.

One row per game in ``archived_games``: the list columns (status, creation, end, owner key,
names, player ids), the event counts and digest, and the log itself packed
(`eventstore.archive.pack`, ~3 KB). Beside it ``archived_players``, one row per distinct
player name (``n:`` + name casefolded) and player id (``i:`` + id) of a game, keyed (who,
creation, game): a player's games newest first are an index range, however many games the
archive holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventstore.archive import ArchivedGame, Summary, pack, unpack


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
    digest: bytes
    log: bytes

    @classmethod
    def of(cls, game: ArchivedGame, archived_ms: int) -> Row:
        """The row of a game (packing its log)."""
        summary = Summary.of(game)
        return cls(
            game.game_id,
            game.meta.status,
            game.meta.created_ms,
            game.meta.ended_ms,
            archived_ms,
            game.meta.key_id,
            game.meta.names,
            game.meta.player_ids,
            summary.moves,
            summary.scores,
            summary.digest,
            pack(game),
        )

    def players(self) -> list[tuple[str, int, str]]:
        """The ``archived_players`` rows of the game."""
        who = {"n:" + n.casefold() for n in self.names} | {"i:" + i for i in self.player_ids}
        return [(w, self.created_ms, self.game_id) for w in sorted(who)]


def summary_of(game_id: str, moves: int, scores: int, digest: Any, log: Any) -> Summary:
    """The summary of a stored row, from its log read back: a log that does not unpack, or
    disagrees with the row's own counts and digest, gives a summary nothing matches."""
    try:
        game = unpack(bytes(log))
    except ValueError:
        return Summary(-1, -1, b"")
    found = Summary.of(game)
    if game.game_id != game_id or found != Summary(moves, scores, bytes(digest)):
        return Summary(-1, -1, b"")
    return found
