"""Find games whose moves are not all scored (their notification was lost or is late)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis

from eventstore.envelope import MOVES, SCORES
from services.redis_store import game_keys

_PATTERN = game_keys("*", MOVES)[2]  # "{g:*}:marker:moves"
_PREFIX, _SUFFIX = _PATTERN.split("*")
log = logging.getLogger(__name__)


def unscored_games(client: redis.Redis, page: int = 1_000) -> Iterator[str]:
    """Ids of games whose last move is beyond their scoring progress.

    Walks the move-stream markers with SCAN (incremental: it never blocks Redis for long),
    comparing each with the score-stream marker a page at a time. On a Redis Cluster, run
    it against every primary (keys of one game share a slot, so each game is on one node).
    """
    batch: list[str] = []
    for key in client.scan_iter(match=_PATTERN, count=page):
        text = key.decode() if isinstance(key, bytes) else str(key)
        batch.append(text[len(_PREFIX) : -len(_SUFFIX)])
        if len(batch) >= page:
            yield from _behind(client, batch)
            batch = []
    if batch:
        yield from _behind(client, batch)


def _behind(client: redis.Redis, games: list[str]) -> Iterator[str]:
    pipe = client.pipeline(transaction=False)
    for game_id in games:
        pipe.get(game_keys(game_id, MOVES)[2])
        pipe.get(game_keys(game_id, SCORES)[2])
    values = pipe.execute()
    for i, game_id in enumerate(games):
        moved, scored = _number(values[2 * i]), _number(values[2 * i + 1])
        if moved is None or scored is None:
            # Not written by our services: one odd game must not stop the sweep of the rest.
            log.warning("game %s: unreadable stream markers, skipped", game_id)
        elif moved > scored:
            yield game_id


def _number(value: bytes | str | None) -> int | None:
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return None
