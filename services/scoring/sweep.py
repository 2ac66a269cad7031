"""Find games whose moves are not all scored (their notification was lost or is late).

The append script keeps each game in its shard's unscored index (``{<shard tag>}:idx:
unscored``: game -> time of its first unscored move) from the move append that gets ahead of
the scoring progress to the progress append that reaches the last move, in the same atomic
step. The sweep reads the 64 shards' indexes (pipelined): its cost is the games waiting,
not the games stored. No SCAN.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis

from eventstore.envelope import MOVES, SCORES
from services.redis_store import game_keys
from services.redis_store.indexes import marker_number, shard_pages
from services.redis_store.keys import index_shard, shard_of, unscored_key

log = logging.getLogger(__name__)


def unscored_games(client: redis.Redis, page: int = 1_000) -> Iterator[str]:
    """Ids of games whose last move is beyond their scoring progress.

    A game on a shard slot is in its index exactly when it is behind (same script). A game
    from before the indexes (put there by `services.redis_store.backfill`) is not kept in step
    by the script: its markers are compared here, and its entry dropped once it is scored.
    """
    for members in shard_pages(client, unscored_key, page):
        legacy = []
        for game_id in members:
            if shard_of(game_id) is None:
                legacy.append(game_id)
            else:
                yield game_id
        if legacy:
            yield from _behind(client, legacy)


def _behind(client: redis.Redis, games: list[str]) -> Iterator[str]:
    pipe = client.pipeline(transaction=False)
    for game_id in games:
        pipe.get(game_keys(game_id, MOVES)[2])
        pipe.get(game_keys(game_id, SCORES)[2])
    values = pipe.execute()
    for i, game_id in enumerate(games):
        moved, scored = marker_number(values[2 * i]), marker_number(values[2 * i + 1])
        if moved is None or scored is None:
            # Not written by our services: one odd game must not stop the sweep of the rest.
            log.warning("game %s: unreadable stream markers, skipped", game_id)
        elif moved > scored:
            yield game_id
        else:  # scored since the backfill indexed it (not atomic: see the backfill)
            client.zrem(unscored_key(index_shard(game_id)), game_id)
