"""Player ratings in Redis: one API key's ratings, leaderboards and history under its own hash
tag ``{k:<key id>}`` (one slot per key, so a game's update is one script on a cluster too).

Written by the ratings consumer (services/scoring/ratings.py) and read by the query service
(GET /v1/ratings/…). Per key:

- ``…:ratings:games`` hash: game id -> the id of its entry in the log (a game is rated once);
- ``…:ratings:log`` stream: one entry per rated game, in the order the ratings were applied
  (``g`` game, ``p`` pool): the one fact a rebuild needs besides the games' own logs, since two
  games ending at once on two shards may be rated in either order;
- per pool ``…:ratings:<pool>`` hash: player -> its rating as JSON (`Rating.to_json`),
  ``…:ratings:<pool>:board`` sorted set: player -> ordinal (the leaderboard), and
  ``…:ratings:<pool>:h:<player>`` list: the player's last `HISTORY` rated games, newest first.

`apply` writes one game's new ratings with its log entry, conditional on every rating it
started from being the current one (another game of the same player rated meanwhile: 'stale',
computed again) and on the game not being rated yet ('dup': a batch redone after a crash).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from .indexes import text
from .scripts import script

HISTORY = 200  # rated games kept per player and pool (the rating itself covers them all)
POOLS = ("classic", "hand", "demo")  # docs/ratings.md says which games go where


def pool_of(ruleset: dict[str, Any]) -> str:
    """The rating pool of a ruleset (docs/ratings.md): the demo tile set apart, games with a
    hand of three (R10.3) apart, every other base game — whatever its house rules — one pool."""
    if ruleset.get("tileset") == "demo":
        return "demo"
    if int(ruleset.get("hand", 1)) > 1:
        return "hand"
    return "classic"


def _base(key_id: str) -> str:
    return "{k:" + key_id + "}:ratings"


def games_key(key_id: str) -> str:
    return _base(key_id) + ":games"


def log_key(key_id: str) -> str:
    return _base(key_id) + ":log"


def pool_key(key_id: str, pool: str) -> str:
    return _base(key_id) + ":" + pool


def board_key(key_id: str, pool: str) -> str:
    return pool_key(key_id, pool) + ":board"


def history_key(key_id: str, pool: str, player: str) -> str:
    return pool_key(key_id, pool) + ":h:" + player


@dataclass(frozen=True)
class Rating:
    """An OpenSkill rating: `mu` (skill) and `sigma` (its uncertainty); `ordinal`, the
    conservative mu - 3 sigma, orders leaderboards (openskill's own default)."""

    mu: float
    sigma: float
    games: int = 0

    @property
    def ordinal(self) -> float:
        return self.mu - 3 * self.sigma

    def to_json(self) -> str:
        # repr of a float is exact: what is read back is bit for bit what was computed.
        return json.dumps({"mu": self.mu, "sigma": self.sigma, "games": self.games})

    @classmethod
    def from_json(cls, raw: str | bytes) -> Rating:
        data = json.loads(raw)
        return cls(float(data["mu"]), float(data["sigma"]), int(data["games"]))


@dataclass(frozen=True)
class Update:
    """One player's change in a rated game."""

    player: str
    before: Rating | None  # None: the player's first game in the pool
    after: Rating
    rank: int  # 1 = best, among the game's rated seats
    seat: int


def history_entry(game_id: str, time_ms: int, update: Update, of: int) -> dict[str, Any]:
    """The player's history entry for one rated game (`of`: its rated seats): what `apply`
    stores and what a rebuild computes again."""
    return {
        "game_id": game_id,
        "time_ms": time_ms,
        "seat": update.seat,
        "rank": update.rank,
        "of": of,
        "before": None if update.before is None else _view(update.before),
        "after": _view(update.after),
    }


@dataclass
class Projection:
    """Everything the ratings of one API key are, as comparable values: each (pool, player)'s
    rating, each pool's leaderboard in its order (player, ordinal; best first, ties by player
    descending, as Redis orders equal scores) and each (pool, player)'s history, newest
    first (at most `HISTORY`)."""

    ratings: dict[tuple[str, str], Rating] = field(default_factory=dict)
    boards: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    history: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)


# KEYS: games hash, log stream, pool hash, board zset, then each player's history list.
# ARGV: game id, pool, time (ms), history length, then per player five values: player, its
# rating before ("" for none), after, ordinal after, history entry.
APPLY_LUA = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'dup' end
local n = (#ARGV - 4) / 5
for i = 0, n - 1 do
  local b = 5 + i * 5
  local current = redis.call('HGET', KEYS[3], ARGV[b]) or ''
  if current ~= ARGV[b + 1] then return 'stale' end
end
local id = redis.call('XADD', KEYS[2], '*', 'g', ARGV[1], 'p', ARGV[2], 't', ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], id)
for i = 0, n - 1 do
  local b = 5 + i * 5
  redis.call('HSET', KEYS[3], ARGV[b], ARGV[b + 2])
  redis.call('ZADD', KEYS[4], ARGV[b + 3], ARGV[b])
  redis.call('LPUSH', KEYS[5 + i], ARGV[b + 4])
  redis.call('LTRIM', KEYS[5 + i], 0, tonumber(ARGV[4]) - 1)
end
return 'ok'
"""


# KEYS: board zset, pool hash. ARGV: from (a position), count, then a cursor's ordinal ("" for
# none) and player. Reads only. One snapshot of a leaderboard's page: its players with their
# scores and ratings, how many rank strictly above its first row (equal ordinals share a rank:
# R7.5) and the board's size. With a cursor, the page starts right after where (ordinal,
# player) stands in the board's order (ordinal descending, then player descending byte by
# byte, as Redis orders equal scores), wherever that player is now: its tied players are
# searched by halves (bytes compared one by one: Lua's `<` on strings follows the locale).
BOARD_LUA = """
local from, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
if ARGV[3] ~= '' then
  local lo = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[3], '+inf')
  local hi = lo + redis.call('ZCOUNT', KEYS[1], ARGV[3], ARGV[3])
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if before(redis.call('ZREVRANGE', KEYS[1], mid, mid)[1], ARGV[4]) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  from = lo
end
local page = redis.call('ZREVRANGE', KEYS[1], from, from + count - 1, 'WITHSCORES')
local above = 0
if #page > 0 then above = redis.call('ZCOUNT', KEYS[1], '(' .. page[2], '+inf') end
local players = {}
for i = 1, #page, 2 do table.insert(players, page[i]) end
local ratings = {}
if #players > 0 then ratings = redis.call('HMGET', KEYS[2], unpack(players)) end
for i = 1, #players do ratings[i] = ratings[i] or '' end
return {from, above, redis.call('ZCARD', KEYS[1]), page, ratings}
"""


@dataclass(frozen=True)
class BoardPage:
    """A page of a leaderboard, read in one step: its rows and the board's size."""

    rows: list[dict[str, Any]]
    total: int
    start: int  # the position of its first row (0: the best)
    last: tuple[float, str] | None  # its last row's (ordinal, player): the next page's cursor


class Ratings:
    """One Redis's ratings (every key's)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._apply = script(client, APPLY_LUA)
        self._board = script(client, BOARD_LUA)

    def current(self, key_id: str, pool: str, players: Sequence[str]) -> list[Rating | None]:
        """The players' ratings in the pool now (None: not rated there yet)."""
        if not players:
            return []
        raw = self.client.hmget(pool_key(key_id, pool), list(players))
        return [None if r is None else Rating.from_json(r) for r in raw]

    def rated(self, key_id: str, game_id: str) -> bool:
        return bool(self.client.hexists(games_key(key_id), game_id))

    def apply(
        self, key_id: str, game_id: str, pool: str, time_ms: int, updates: Sequence[Update]
    ) -> str:
        """Record a game's updates: 'ok', 'dup' (rated already) or 'stale' (a rating it
        started from has changed: compute again)."""
        keys = [games_key(key_id), log_key(key_id), pool_key(key_id, pool), board_key(key_id, pool)]
        args: list[Any] = [game_id, pool, time_ms, HISTORY]
        for u in updates:
            keys.append(history_key(key_id, pool, u.player))
            entry = history_entry(game_id, time_ms, u, len(updates))
            before = "" if u.before is None else u.before.to_json()
            args += [u.player, before, u.after.to_json(), u.after.ordinal, json.dumps(entry)]
        return text(self._apply(keys=keys, args=args))

    def snapshot(self, key_id: str) -> Projection:
        """The key's live ratings, leaderboards and histories, whole (for a rebuild's check
        and an operator: bounded by the key's players, not paged)."""
        out = Projection()
        for pool in POOLS:
            raw = cast(dict[bytes, bytes], self.client.hgetall(pool_key(key_id, pool)))
            players = sorted(text(p) for p in raw)
            out.ratings.update({(pool, text(p)): Rating.from_json(r) for p, r in raw.items()})
            board = cast(list[Any], self.client.zrevrange(board_key(key_id, pool), 0, -1,
                                                          withscores=True))  # fmt: skip
            if board:
                out.boards[pool] = [(text(p), float(score)) for p, score in board]
            pipe = self.client.pipeline(transaction=False)  # one slot: the key's tag
            for player in players:
                pipe.lrange(history_key(key_id, pool, player), 0, -1)
            for player, entries in zip(players, pipe.execute(), strict=True):
                out.history[(pool, player)] = [json.loads(e) for e in entries]
        return out

    def log_ids(self, key_id: str, count: int, after: str = "-") -> list[tuple[str, str, str]]:
        """(entry id, game id, pool) of the log, `count` from after `after`."""
        start = after if after == "-" else "(" + after
        entries: list[Any] = cast(Any, self.client.xrange(log_key(key_id), start, "+", count=count))
        return [(text(i), text(f[b"g"]), text(f[b"p"])) for i, f in entries]

    def board(
        self,
        key_id: str,
        pool: str,
        offset: int,
        limit: int,
        after: tuple[float, str] | None = None,
    ) -> BoardPage:
        """A page of the pool's leaderboard from position `offset` (0: the best), or right
        after the row `after` (its ordinal and player: a cursor, which does not shift when
        ratings change between pages), best first. A row's rank is 1 + the players with a
        strictly higher ordinal: equal ordinals share it (as R7.5's ties share a place), also
        across a page's edge."""
        ordinal, player = ("", "") if after is None else (repr(float(after[0])), after[1])
        reply = self._board(keys=[board_key(key_id, pool), pool_key(key_id, pool)],
                            args=[offset, limit, ordinal, player])  # fmt: skip
        reply = cast(list[Any], reply)
        start, above, total = int(reply[0]), int(reply[1]), int(reply[2])
        page, raws = cast(list[Any], reply[3]), cast(list[Any], reply[4])
        rows: list[dict[str, Any]] = []
        rank, last = above + 1, None
        end = None if not raws else (float(page[-1]), text(page[-2]))
        for i, raw in enumerate(raws):
            player, score = text(page[2 * i]), float(page[2 * i + 1])
            if last is not None and score != last:
                rank = start + i + 1  # everyone before it ranks strictly above it
            last = score
            if raw:  # a board entry without its rating (never written apart): left out
                rows.append({"rank": rank, "player": player, **_view(Rating.from_json(raw))})
        return BoardPage(rows, total, start, end)

    def size(self, key_id: str, pool: str) -> int:
        return int(self.client.zcard(board_key(key_id, pool)))

    def rank(self, key_id: str, pool: str, player: str) -> int | None:
        """The player's rank on the pool's leaderboard: 1 + the players with a strictly
        higher ordinal (equal ordinals share a rank); None when it is not on it."""
        score = self.client.zscore(board_key(key_id, pool), player)
        if score is None:
            return None
        return 1 + int(self.client.zcount(board_key(key_id, pool), f"({score!r}", "+inf"))

    def player(self, key_id: str, player: str, history: int) -> list[dict[str, Any]]:
        """The player's rating and rank in each pool it plays in, with its last games."""
        out = []
        for pool in POOLS:
            (rating,) = self.current(key_id, pool, [player])
            if rating is None:
                continue
            rank = self.rank(key_id, pool, player)
            # LRANGE's end is inclusive and -1 means the last: 0 games asked must read none.
            raw = (
                self.client.lrange(history_key(key_id, pool, player), 0, history - 1)
                if history > 0
                else []
            )
            out.append(
                {
                    "pool": pool,
                    **_view(rating),
                    "rank": rank,
                    "players": self.size(key_id, pool),
                    "history": [json.loads(h) for h in raw],
                }
            )
        return out


def _view(rating: Rating) -> dict[str, Any]:
    return {
        "mu": rating.mu,
        "sigma": rating.sigma,
        "ordinal": rating.ordinal,
        "games": rating.games,
    }
