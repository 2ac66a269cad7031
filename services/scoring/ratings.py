"""Ratings: the change feed's consumer "ratings" rates each finished game once (OpenSkill's
Plackett-Luce model: multiplayer, by rank), for the API key that created it (docs/ratings.md).

A game is rated when its final score event (`GameScored`) is appended: its ranks (R7.5; seats
out by resignation or timeouts rank after every seat still in, `carcassonne.scoring.ranks`)
order its rated seats. A seat is rated as its `player_id` (given at creation) or, played by a
bot, as ``bot:<level>``; a seat with neither, or an identity twice in one game (two greedy bots),
is left out, and a game with fewer than two rated seats is not rated. Imported games, games
without an API key and abandoned ones (no final scoring) are not rated. Each ruleset family is
its own pool (`pool_of`).

Exactly once: the update is one script under the key's hash tag, refused for a game already
rated (a batch redone after a crash) and for ratings that changed since they were read (two
games of one player rated at once: computed again). So the consumer writes nothing beside its
feed position, as the scoring consumer does. `rebuild` computes every rating again from the
games' own logs, in the order the key's ratings log applied them; a test holds it equal to the
live values.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from openskill.models import PlackettLuce
from prometheus_client import Counter, Histogram

from eventstore.envelope import MOVES, SCORES
from eventstore.port import EventStore
from eventstore.score_stream import GAME_SCORED
from services.redis_store.bot_index import bot_seats, secrets_of
from services.redis_store.changes import Change, Follower
from services.redis_store.ratings import (
    HISTORY,
    Projection,
    Rating,
    Ratings,
    Update,
    history_entry,
    pool_of,
)

log = logging.getLogger(__name__)
MODEL = PlackettLuce()  # openskill's defaults: mu 25, sigma 25/3, beta 25/6
BOT_PREFIX = "bot:"  # a bot seat's rated identity is bot:<level>
TRIES = 20  # 'stale' answers in a row before the batch stops (and is redone later)

RATED = Counter("carcassonne_games_rated_total", "Finished games rated (once each)")
UNRATED = Counter("carcassonne_games_unrated_total", "Finished games with nothing to rate")
RATING_LAG = Histogram(
    "carcassonne_rating_lag_seconds",
    "From a game's final score event to its ratings",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class RatingsChanging(RuntimeError):
    """A game's players' ratings changed under every try: its batch is redone later."""


@dataclass(frozen=True)
class Outcome:
    """What rating a game needs: whose it is, its pool, and each rated seat's identity and
    rank (1 = best; equal ranks tie)."""

    key_id: str
    game_id: str
    pool: str
    time_ms: int
    seats: tuple[tuple[int, str, int], ...]  # (seat, player, rank)


def outcome(store: EventStore, record: dict[str, Any] | None, game_id: str) -> Outcome | None:
    """The game's outcome for rating, from its log and its secrets record (key, bot seats);
    None when it is not rated (see the module's rules) or not finished."""
    if record is None:
        return None
    imported = record.get("imported")
    if imported and not imported.get("rated"):  # unless the platform asked (docs/ratings.md)
        return None
    key_id = imported["key_id"] if imported else record.get("key_id")
    if not key_id:
        return None
    started = store.read(game_id, MOVES, 0, 1)
    if not started or started[0].type != "GameStarted":
        return None
    scored = next((e for e in reversed(store.read(game_id, SCORES)) if e.type == GAME_SCORED), None)
    if scored is None:
        return None
    payload = started[0].payload
    bots = bot_seats(record)
    identities: list[str | None] = []
    for seat, info in enumerate(payload["players"]):
        bot = bots[seat] if seat < len(bots) else None
        who = info.get("player_id")
        if bot is not None:
            who = f"bot:{bot['level']}"
        elif isinstance(who, str) and who.startswith(BOT_PREFIX):
            # A person whose app id spells a bot's rating name: rated as it, it would move
            # the bot's rating (and beside the real bot, leave both seats unrated).
            who = None
        identities.append(who)
    ranks = scored.payload["ranks"]
    kept = [
        (seat, who, int(ranks[seat]))
        for seat, who in enumerate(identities)
        if who is not None and identities.count(who) == 1
    ]
    if len(kept) < 2:
        return None
    # Ranked again among the rated seats alone (competition ranks, ties shared: R7.5): the
    # history shows `rank` `of` them, and a winner left out must not make them 2nd and 3rd
    # of 2. OpenSkill reads only the ranks' order, so the ratings are the same either way.
    seats = tuple(
        (seat, who, 1 + sum(other < rank for _, _, other in kept)) for seat, who, rank in kept
    )
    pool = pool_of(payload["ruleset"])
    return Outcome(str(key_id), game_id, pool, scored.time_ms, seats)


def updates(game: Outcome, current: Sequence[Rating | None]) -> list[Update]:
    """The game's rating changes from the players' `current` ratings (None: a new player)."""
    teams = [
        [MODEL.rating() if c is None else MODEL.rating(mu=c.mu, sigma=c.sigma)] for c in current
    ]
    rated = MODEL.rate(teams, ranks=[rank for _, _, rank in game.seats])
    return [
        Update(
            player,
            before,
            Rating(team[0].mu, team[0].sigma, (0 if before is None else before.games) + 1),
            rank,
            seat,
        )
        for (seat, player, rank), before, team in zip(game.seats, current, rated, strict=True)
    ]


def rate(ratings: Ratings, game: Outcome) -> str:
    """Apply the game's ratings once: 'ok', or 'dup' when they were applied before."""
    players = [player for _, player, _ in game.seats]
    for _ in range(TRIES):
        current = ratings.current(game.key_id, game.pool, players)
        done = ratings.apply(game.key_id, game.game_id, game.pool, game.time_ms,
                             updates(game, current))  # fmt: skip
        if done != "stale":
            return done
    raise RatingsChanging(f"game {game.game_id}: its players' ratings kept changing")


class RatingsConsumer:
    """The consumer "ratings" of the change feed (`follower`)."""

    def __init__(
        self,
        client: redis.Redis,
        store: EventStore,
        batch: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.store = store
        self.ratings = Ratings(client)
        self.clock = clock
        self.follower = Follower(client, "ratings", self.handle, batch=batch)

    def handle(self, shard: int, changes: list[Change]) -> list[Any]:
        """Rate each game whose final score event is in the batch. Its output is the key's
        ratings, written once per game by `rate` (so a redone batch rates nothing twice):
        nothing to write beside the position. A game that cannot be rated is logged and
        skipped, not retried for ever; a Redis failure, or ratings that kept changing under
        every try, stops the batch (it is redone: skipped, the game would never be rated)."""
        for change in changes:
            if change.stream != SCORES or GAME_SCORED not in change.types:
                continue
            try:
                self.rate_game(change.game_id)
            except (redis.RedisError, RatingsChanging):
                raise
            except Exception:
                log.exception("game %s: rating failed", change.game_id,
                              extra={"game_id": change.game_id})  # fmt: skip
        return []

    def rate_game(self, game_id: str) -> str:
        """Rate one finished game (if it is rated at all): 'ok', 'dup' or 'unrated'."""
        game = outcome(self.store, secrets_of(self.client, game_id), game_id)
        if game is None:
            UNRATED.inc()
            return "unrated"
        done = rate(self.ratings, game)
        if done == "ok":
            RATED.inc()
            RATING_LAG.observe(max(0.0, self.clock() - game.time_ms / 1000))
            log.info("game %s: rated in pool %s", game_id, game.pool,
                     extra={"game_id": game_id, "pool": game.pool})  # fmt: skip
        return done


def rebuild(
    client: redis.Redis, store: EventStore, key_id: str, page: int = 1_000
) -> dict[tuple[str, str], Rating]:
    """Every rating of the key computed again from the rated games' logs, in the order its
    ratings log applied them: (pool, player) -> rating (`rebuild_all`'s ratings)."""
    return rebuild_all(client, store, key_id, page).ratings


def rebuild_all(
    client: redis.Redis, store: EventStore, key_id: str, page: int = 1_000
) -> Projection:
    """The key's ratings, leaderboards and histories computed again from the rated games'
    logs, in the order its ratings log applied them: to compare with `Ratings.snapshot`.
    Bounded by the log's length. Archived games are read from the archive when `store`
    falls through to it (services.archive.fallthrough.FallThroughStore: the query
    service's reads)."""
    ratings = Ratings(client)
    built = Projection()
    for game_id, pool in _rated_games(ratings, key_id, page):
        game = outcome(store, _record(client, store, game_id), game_id)
        if game is None or game.pool != pool:
            raise ValueError(f"game {game_id}: rated in {pool}, its log says otherwise")
        current = [built.ratings.get((pool, player)) for _, player, _ in game.seats]
        changes = updates(game, current)
        for update in changes:
            built.ratings[(pool, update.player)] = update.after
            entries = built.history.setdefault((pool, update.player), [])
            entries.insert(0, history_entry(game_id, game.time_ms, update, len(changes)))
            del entries[HISTORY:]
    for pool in sorted({pool for pool, _ in built.ratings}):
        board = [(p, r.ordinal) for (q, p), r in built.ratings.items() if q == pool]
        # Best first; equal ordinals by player descending, as ZREVRANGE orders equal scores.
        built.boards[pool] = sorted(board, key=lambda row: (row[1], row[0].encode()),
                                    reverse=True)  # fmt: skip
    return built


def _record(client: redis.Redis, store: EventStore, game_id: str) -> dict[str, Any] | None:
    """The game's secrets record; an archived game's (its keys gone from Redis) is the one
    its copy keeps, when `store` reads the archive (its `record`)."""
    found = secrets_of(client, game_id)
    archived = getattr(store, "record", None)
    if found is None and archived is not None:
        store.last_seq(game_id, MOVES)  # an archived game's copy is read on its first read
        found = archived(game_id)
    return found


def _rated_games(ratings: Ratings, key_id: str, page: int) -> Iterator[tuple[str, str]]:
    after = "-"
    while True:
        entries = ratings.log_ids(key_id, page, after)
        yield from ((game_id, pool) for _, game_id, pool in entries)
        if len(entries) < page:
            return
        after = entries[-1][0]
