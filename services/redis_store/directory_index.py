"""The games directory: a consumer of the change feed that keeps each shard's lists of games.

Per shard (services/redis_store/keys.py): every game, the games of each status, the games of
each player name and of each player id, each scored by the game's creation time; and what
GET /games reads: the public games, and per API key its games, its games of each player name
and of each player id (a key lists only its own games; without a key only public ones). They are
written only here, from the feed (services/redis_store/changes.py), with the directory's
position in the same step. The query service catches the directory up before it answers a
list (so a game is listed as soon as its creation was answered), and the worker's follower
keeps it current in the background; either may run it, any number at once.

A game's names, player ids, API key and `public` flag are not in its events: the command
service writes them to the game's public seats record (services/redis_store/seats.py) before
its first append (and never changes them), so the first change of a game is looked up there
(never in its secrets record: the query service runs this too, and its Redis user may not
read secrets).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import redis

from eventstore.envelope import MOVES

from .changes import Change, Follower, Write
from .indexes import is_text
from .keys import (
    ABANDONED,
    IN_PROGRESS,
    OVER,
    games_key,
    key_games_key,
    key_player_id_key,
    key_player_key,
    player_id_key,
    player_key,
    public_key,
    seats_key,
    status_key,
)

CONSUMER = "directory"
ENDINGS = {"GameEnded": OVER, "GameAbandoned": ABANDONED}


def seats_of(raw: Any) -> tuple[list[str], list[str]]:
    """The names and the (given) player ids of a seats (or secrets) record's JSON ([] when
    unreadable)."""
    try:
        record = json.loads(raw) if raw is not None else {}
        names, ids = record.get("names"), record.get("player_ids")
    except (ValueError, AttributeError):
        return [], []
    return (
        keyable(str(n) for n in names) if isinstance(names, list) else [],
        keyable(str(i) for i in ids if i is not None) if isinstance(ids, list) else [],
    )


def keyable(values: Iterable[str]) -> list[str]:
    """The values that are text UTF-8 can encode (a Redis key is made of each). A lone UTF-16
    surrogate (a JSON escape such as "\\ud800") is not: a game stored with one before notation
    imports refused it is left out of that name's index, which no request could name anyway,
    rather than failing its change at every try and holding up the shard's consumer for good."""
    return [value for value in values if is_text(value)]


def owner_of(raw: Any) -> tuple[str | None, bool]:
    """The API key that created (or imported) a game, and whether it is public, from its
    seats (or secrets) record's JSON ((None, False) when unreadable)."""
    try:
        record = json.loads(raw) if raw is not None else {}
        imported = record.get("imported")
        key_id = record.get("key_id") or (imported or {}).get("key_id")
        public = record.get("public") is True
    except (ValueError, AttributeError):
        return None, False
    return (str(key_id) if key_id else None), public


class DirectoryIndex:
    """Turns a shard's changes into the directory's writes."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.follower = Follower(client, CONSUMER, self.writes)

    def catch_up(self) -> int:
        """Index every change not indexed yet (all shards); returns how many."""
        return self.follower.catch_up()

    def writes(self, shard: int, changes: list[Change]) -> list[Write]:
        """The index writes of a batch of one shard's changes, in order."""
        moves = [c for c in changes if c.stream == MOVES]
        # A game's creation is the change with its GameStarted (an entry without events,
        # such as the backfill's announcement of unscored moves, never creates one).
        started = [c for c in moves if "GameStarted" in c.types]
        ended = [c for c in moves if any(t in ENDINGS for t in c.types)]
        pipe = self.client.pipeline(transaction=False)
        for change in started:
            pipe.get(seats_key(change.game_id))
        for change in ended:
            pipe.zscore(games_key(shard), change.game_id)
        replies = pipe.execute()
        seats = dict(zip((c.game_id for c in started), replies[: len(started)], strict=True))
        created: dict[str, Any] = {
            c.game_id: score
            for c, score in zip(ended, replies[len(started) :], strict=True)
            if score is not None
        }
        out: list[Write] = []
        for change in moves:
            game, at = change.game_id, change.time_ms
            if "GameStarted" in change.types:
                created[game] = at
                names, ids = seats_of(seats.get(game))
                out += [Write("zadd", games_key(shard), game, at),
                        Write("zadd", status_key(shard, IN_PROGRESS), game, at)]  # fmt: skip
                out += [Write("zadd", player_key(shard, n), game, at) for n in sorted(set(names))]
                out += [Write("zadd", player_id_key(shard, i), game, at) for i in sorted(set(ids))]
                owner, public = owner_of(seats.get(game))
                out += [Write("zadd", public_key(shard), game, at)] if public else []
                if owner is not None:
                    out += [Write("zadd", key_games_key(shard, owner), game, at)]
                    out += [Write("zadd", key_player_key(shard, owner, n), game, at)
                            for n in sorted({n.casefold() for n in names})]  # fmt: skip
                    out += [Write("zadd", key_player_id_key(shard, owner, i), game, at)
                            for i in sorted(set(ids))]  # fmt: skip
            for kind in change.types:
                if kind in ENDINGS:
                    out += [Write("zrem", status_key(shard, IN_PROGRESS), game),
                            Write("zadd", status_key(shard, ENDINGS[kind]), game,
                                  int(float(created.get(game, at))))]  # fmt: skip
        return out
