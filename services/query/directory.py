"""Which games exist, and their players' names, read from the sharded indexes (no SCAN).

`GET /games` lists games newest first from the games directory's indexes, which follow the
change feed (services/redis_store/directory_index.py; a page first catches them up, so a game
is listed as soon as its creation was answered), each split over 64 shards. Without an API key
only the games created public (``{<shard>}:idx:public``); with one only that key's games
(``idx:key:<key id>``), by player name (``idx:key:<key id>:player:<name, casefolded>``) or by
an app's player id (``idx:key:<key id>:pid:<id>``): a player's games are private to the
platform that created them. Operators' tools may list every game: by creation time
(``idx:games``), status (``idx:status:<status>``), player name (``idx:player:<name>``) or
player id (``idx:pid:<id>``). A page asks every shard for
its newest entries after the cursor (one pipelined round trip) and merges them; then one
pipelined round trip describes the page's games from their streams. So a page costs what it
returns, whatever the number of games stored. The cursor is the (creation ms, game id) of the
last game looked at; ties at the same millisecond are ordered by id.

Every listed game is described from its streams (the truth), and the filters are checked
again on that description: a game from before the indexes (indexed by the backfill, not kept
in step atomically) is never listed under a status it no longer has, and a game is listed only
to the key its seats record names (or, without a key, when the record says public).

Names, player ids, bot seats and owner come from the game's public seats record
(services/redis_store/seats.py), written beside the command service's secrets record: the
query service never reads the secrets (its Redis user may not: services/redis_store/acl.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

import redis

from eventstore.envelope import MOVES, SCORES
from services.redis_store import game_keys
from services.redis_store.directory_index import DirectoryIndex, owner_of
from services.redis_store.keys import (
    SHARDS,
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

from .projector import BadParameter

IN_PROGRESS, OVER, ABANDONED = "in_progress", "over", "abandoned"
# A game's status by its last move event (nothing is appended after either of these).
_STATUS_AFTER = {"GameEnded": OVER, "GameAbandoned": ABANDONED}
Entry = tuple[int, str]  # (creation ms, game id): the order of the list, newest first


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _names(raw: Any) -> list[str] | None:
    seats = _seats(raw)
    return None if seats is None else seats[0]


def _seats(raw: Any) -> tuple[list[str], list[str | None]] | None:
    """Names and player ids (None where not given) of a seats record, in seat order."""
    if raw is None:
        return None
    try:
        record = json.loads(raw)
        names, ids = record.get("names"), record.get("player_ids")
    except (ValueError, AttributeError):
        return None
    if not isinstance(names, list):
        return None
    if not isinstance(ids, list) or len(ids) != len(names):
        ids = [None] * len(names)
    return [str(n) for n in names], [None if i is None else str(i) for i in ids]


def _bots(raw: Any) -> list[dict[str, Any] | None] | None:
    """The bot seats of a seats record (None where a person plays), in seat order."""
    if raw is None:
        return None
    try:
        record = json.loads(raw)
        names, bots = record.get("names"), record.get("bots")
    except (ValueError, AttributeError):
        return None
    if not isinstance(names, list):
        return None
    if not isinstance(bots, list) or len(bots) != len(names):
        return [None] * len(names)
    return [
        {"level": str(b["level"]), "think_ms": int(b["think_ms"])}
        if isinstance(b, dict) and "level" in b and "think_ms" in b
        else None
        for b in bots
    ]


def encode_cursor(after: Entry) -> str:
    return base64.urlsafe_b64encode(f"v2:{after[0]}:{after[1]}".encode()).decode().rstrip("=")


# A cursor's creation time: what `encode_cursor` writes (Unix ms, 13 digits until 2286).
# Bounded so that a made-up one stays an integer every store takes: the archive's lists
# compare it with a 64-bit column (SQLite raised OverflowError on a larger one: a 500).
CURSOR_MS = re.compile(r"[0-9]{1,15}")
# Its game id: visible ASCII (a game id is 32 hex digits). The archive's lists compare it with
# a text column, and PostgreSQL refuses a NUL in one (read as the archive down: a 503).
CURSOR_ID = re.compile(r"[!-~]{1,128}")


def decode_cursor(cursor: str) -> Entry:
    """The (creation ms, game id) of a cursor `encode_cursor` made; 422 `bad_cursor` else."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, ms, game_id = text.split(":", 2)
        if version != "v2" or not CURSOR_MS.fullmatch(ms) or not CURSOR_ID.fullmatch(game_id):
            raise ValueError(cursor)
        return int(ms), game_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadParameter("bad_cursor", "not a cursor of this list", None) from None


# The most games one page looks at (described from their streams and checked against the
# filters): a page of `limit` agreeing games costs `limit`; filters that disagree cost at most
# this, then answer a short page and a cursor.
MAX_EXAMINED = 200


class RedisDirectory:
    """Game listing and names on the event store's Redis."""

    def __init__(
        self, client: redis.Redis, max_steps: int = 50, max_examined: int = MAX_EXAMINED
    ) -> None:
        self.client = client
        self.max_steps = max_steps
        self.max_examined = max(1, max_examined)
        self.index = DirectoryIndex(client)

    def names(self, game_id: str) -> list[str] | None:
        """The players' names in seat order, if the game has a seats record."""
        return _names(self.client.get(seats_key(game_id)))

    def seats(self, game_id: str) -> tuple[list[str], list[str | None]] | None:
        """The players' names and player ids (None where not given), in seat order."""
        return _seats(self.client.get(seats_key(game_id)))

    def bots(self, game_id: str) -> list[dict[str, Any] | None] | None:
        """Each seat's bot ({"level", "think_ms"}; None: a person's seat), if the game has a
        seats record."""
        return _bots(self.client.get(seats_key(game_id)))

    def page(
        self,
        status: str | None,
        player: str | None,
        cursor: str | None,
        limit: int,
        player_id: str | None = None,
        key_id: str | None = None,
        public: bool = False,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """`entries` from a cursor: the page's games and the next page's cursor."""
        after = decode_cursor(cursor) if cursor else None
        found, following = self.entries(status, player, after, limit, player_id, key_id, public)
        return [game for _, game in found], encode_cursor(following) if following else None

    def entries(
        self,
        status: str | None,
        player: str | None,
        after: Entry | None,
        limit: int,
        player_id: str | None = None,
        key_id: str | None = None,
        public: bool = False,
    ) -> tuple[list[tuple[Entry, dict[str, Any]]], Entry | None]:
        """Up to `limit` games matching the filters, newest first, and the cursor of the next
        page (None at the end). Whose: the games of the API key `key_id`; else, with
        `public`, the games created public (GET /games sends one or the other, and no
        player filter with `public`); else every game (operators and tools). `player`
        matches a player's name exactly, ignoring case; `player_id` an app's player id
        exactly. A page looks at most `max_examined` games (and `max_steps` batches), so
        what a request costs is bounded by the work it does, not by what it returns
        (issue 32, finding 3: with filters that disagree a request read every game of the
        index): a filter on more than one of status, player and player id may then return a
        short page, even an empty one, with a cursor to go on. Each game comes with its
        entry (creation ms, id); the cursor is the entry down to which the page looked."""
        # Every game whose creation was answered is listed: the directory is caught up with
        # the change feed first (two pipelined round trips when nothing is new).
        self.index.catch_up()
        key: Callable[[int], str]
        if key_id is not None:
            if player_id is not None:
                key = lambda shard: key_player_id_key(shard, key_id, player_id)  # noqa: E731
            elif player is not None:
                key = lambda shard: key_player_key(shard, key_id, player)  # noqa: E731
            else:
                key = lambda shard: key_games_key(shard, key_id)  # noqa: E731
        elif public:
            key = public_key
        elif player_id is not None:
            key = lambda shard: player_id_key(shard, player_id)  # noqa: E731
        elif player is not None:
            key = lambda shard: player_key(shard, player)  # noqa: E731
        elif status is not None:
            key = lambda shard: status_key(shard, status)  # noqa: E731
        else:
            key = games_key
        wanted = player.casefold() if player is not None else None
        out: list[tuple[Entry, dict[str, Any]]] = []
        examined = 0
        for _ in range(self.max_steps):
            budget = min(limit - len(out), self.max_examined - examined)
            if budget <= 0:  # looked at enough for one request: the cursor goes on
                return out, after
            entries, more = self._newest(key, after, budget)
            if not entries:
                return out, None
            examined += len(entries)
            after = entries[-1]
            described = {g["game_id"]: g for g in self._describe([g for _, g in entries])}
            for entry in entries:
                game = described.get(entry[1])
                if game is None:
                    continue
                if status is not None and game["status"] != status:
                    continue
                if wanted is not None and wanted not in [n.casefold() for n in game["players"]]:
                    continue
                if player_id is not None and player_id not in game["player_ids"]:
                    continue
                owner, shown = game.pop("owner")
                if (key_id is not None and owner != key_id) or (public and not shown):
                    continue
                out.append((entry, game))
            if not more:
                return out, None
            if len(out) >= limit:
                return out, after
        return out, after

    def _newest(
        self, key: Callable[[int], str], after: Entry | None, count: int
    ) -> tuple[list[Entry], bool]:
        """The `count` newest entries of the 64 shards' sets that come after `after`, and
        whether more may follow.

        Each shard is asked for a few more than its share of a page (3 × count / 64 + 8),
        from the cursor's millisecond on (inclusive: entries tied with the cursor are then
        dropped here, so none is lost). The merge is only trusted down to the lowest entry
        read from a shard that may hold more; should a shard hold more than its share of the
        page (rare) or many ties, only such shards are asked for more. So the work follows
        the page size, not the number of games in a shard."""
        high = after[0] if after is not None else "+inf"
        share = -(-count * 3 // SHARDS) + 8
        fetched: list[Entry] = []
        floor: dict[int, Entry] = {}  # lowest entry read from a shard that may hold more
        offset = dict.fromkeys(range(SHARDS), 0)
        need = dict.fromkeys(range(SHARDS), share)
        for _ in range(30):  # bounded: each round reads twice as far into the shards asked
            pipe = self.client.pipeline(transaction=False)
            for shard, num in need.items():
                pipe.zrange(key(shard), high, "-inf", desc=True, byscore=True,
                            offset=offset[shard], num=num, withscores=True)  # fmt: skip
            for (shard, num), reply in zip(need.items(), pipe.execute(), strict=True):
                read = [(int(score), _text(member)) for member, score in reply]
                offset[shard] += len(read)
                fetched += [e for e in read if after is None or e < after]
                if len(read) < num:
                    floor.pop(shard, None)
                else:
                    floor[shard] = read[-1]
            merged = sorted(fetched, reverse=True)
            if not floor:
                return merged[:count], len(merged) > count
            bound = max(floor.values())
            safe = [e for e in merged if e >= bound]
            if len(safe) >= count:
                return safe[:count], True
            last = merged[count - 1] if len(merged) >= count else None
            need = {s: 2 * share for s, f in floor.items() if last is None or f >= last}
        return safe[:count], True

    def _describe(self, ids: list[str]) -> list[dict[str, Any]]:
        """Status, players, last move and latest totals of each game: one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for game_id in ids:
            pipe.xrevrange(game_keys(game_id, MOVES)[0], count=1)
            pipe.xrevrange(game_keys(game_id, SCORES)[0], count=1)
            pipe.get(seats_key(game_id))
        replies = pipe.execute()
        out = []
        for i, game_id in enumerate(ids):
            moves, scores, record = replies[3 * i : 3 * i + 3]
            if not moves:
                continue  # indexed, but its stream is gone (deleted by hand)
            entry_id, fields = moves[0]
            last = {_text(k): _text(v) for k, v in fields.items()}
            totals = None
            if scores:  # the last score event: GameScored has the final totals
                data = {_text(k): _text(v) for k, v in scores[0][1].items()}["data"]
                payload = json.loads(data)
                totals = payload.get("final_scores", payload.get("totals"))
            seats = _seats(record)
            names, player_ids = seats if seats is not None else ([], [])
            out.append(
                {
                    "game_id": game_id,
                    "status": _STATUS_AFTER.get(last["type"], IN_PROGRESS),
                    "players": names,
                    "player_ids": player_ids,
                    "seq": int(_text(entry_id).split("-", 1)[0]),
                    "updated_ms": int(last["t"]),
                    "scores": totals,
                    "owner": owner_of(record),  # (key id, public): checked, never shown
                }
            )
        return out
