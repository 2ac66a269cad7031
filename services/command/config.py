"""The command service's settings: environment variables with development defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.settings import from_env as _from_env

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6390/0",  # the embedded Redis of `make run`
    "BROKER_URL": "",  # Celery broker for score notifications ("" = REDIS_URL)
    # Redis connections one worker process may hold (its pool; a request waits for a free one).
    # 0 = derived: the process's request threads (GUNICORN_THREADS, 1 for sync workers) + 2.
    "REDIS_MAX_CONNECTIONS": 0,
    # Failover safety (deploy/README.md, "Redis Cluster"): after each append, WAIT for this many
    # replicas (0 = off) at most REDIS_WAIT_MS; fewer confirmations answer 503 not_replicated.
    "REDIS_WAIT_REPLICAS": 0,
    "REDIS_WAIT_MS": 100,
    "MAX_CONTENT_LENGTH": 16 * 1024,  # bytes; a turn is ~100 bytes, a new game < 1 KiB
    "STATE_CACHE_SIZE": 10_000,  # games whose folded state a worker process keeps
    # How much a matchmaking ticket's rating window widens for each minute it waits (rating
    # ordinal, docs/ratings.md): a picky player still finds a game in the end (docs/lobby.md).
    "MATCH_WINDOW_GROWTH": 1.0,
    # A turn takes the worker's cached state of its game as current, without reading the stream
    # first: one sync worker per instance behind the proxy's hash of the game id serves all of
    # the game's commands. The append is conditional on the cached sequence, so a stale state
    # (another process appended) costs a refused append and a catch-up, never a wrong move;
    # 0 where requests of one game are spread over several workers (deploy/README.md).
    "TRUST_CACHE": True,
    # "0" = send the worker no task at all (a webhook's first dispatch, a subscription's
    # ping): its sweeps find the work. Scoring needs no task: the worker follows the change
    # feed. Other values are kept for the bot worker's and deployments' settings.
    "NOTIFY_MS": 2_000,
    # Third-party integration (services/command/integration.py, docs/integration.md).
    # POST /v1/score and /games/import take whole records: a 72-tile record is ~6 KiB, one of
    # the 1000 turns a record may hold ~100 KiB; more is refused (413) before it is read.
    "RECORD_MAX_BYTES": 256 * 1024,
    "API_KEY_RATE": 10.0,  # requests per second per API key (token bucket refill; 0 = no limit)
    "API_KEY_BURST": 20,  # requests a key may make at once after a quiet spell
    # Every write (any POST/PUT/PATCH/DELETE, refused ones too) per client address
    # (services/common/access.py; behind a proxy: TRUSTED_PROXIES): a token bucket that
    # refills at this rate (per second; 0 = no limit) and holds the burst.
    "ADDRESS_WRITE_RATE": 20.0,
    "ADDRESS_WRITE_BURST": 100,
    # POST /games without an API key (development only: `make run` turns it on and says so).
    "ANONYMOUS_GAMES": False,
    "WEBHOOK_QUEUE": "webhooks",  # where the scoring worker's webhook tasks are sent
    "WEBHOOK_ALLOW_PRIVATE": False,  # accept hook URLs on loopback/private addresses (dev, tests)
    # Hints (docs/bots.md) are worked out by the bot worker and take a fixed time whatever
    # the seat's hand: an mcts hint HINT_THINK_MS, a greedy or random one HINT_FLOOR_MS
    # (never less; above a greedy hint's work, ~60 ms at most). One the worker has not
    # answered HINT_WAIT_MS past its duration answers 503 hint_unavailable (worker down).
    "HINT_THINK_MS": 500,
    "HINT_FLOOR_MS": 150,
    "HINT_WAIT_MS": 10_000,
    # A seat's searched hints may take this many seconds in one game (429
    # hint_budget_exceeded beyond; 0: no limit), and an API key's games this many hints at
    # once (429 bot_budget_exceeded beyond; 0: no limit).
    "HINT_SECONDS_PER_SEAT": 60.0,
    "HINTS_IN_FLIGHT": 4,
    "HINT_KEEP_SECONDS": 3_600,  # how long a worked-out hint is kept (asked again: no search)
    # The most think_ms a bot seat may ask for in a game with no human seat (POST /games
    # answers 422 bot_only_think_ms above it): such a game is bot CPU nobody watches.
    "BOT_ONLY_MAX_THINK_MS": 1_000,
    # Bot CPU per API key (issue 32): the bot seconds its games in progress may still take,
    # reserved at creation (429 bot_budget_exceeded beyond it) and given back when a game ends
    # (0: no limit). A move takes at least BOT_MOVE_FLOOR_MS: the bot worker's MOVE_FLOOR_MS.
    "BOT_SECONDS_IN_FLIGHT": 7_200.0,
    # ... and the bot seconds charged to a key per UTC day: a game's whole reservation at its
    # creation, a hint's duration when asked (429 bot_day_budget_exceeded beyond; 0: none).
    "BOT_SECONDS_PER_DAY": 28_800.0,
    "BOT_MOVE_FLOOR_MS": 250,
    "UNDO_SECONDS": 120.0,  # how long the others have to answer an undo request (consent)
    # Vacation days a player (by player id, per API key) may declare per calendar year (UTC):
    # their clocks pause meanwhile (docs/clocks.md). 0: no vacations.
    "VACATION_DAYS_PER_YEAR": 30,
    # The archive finished games move to (the scoring worker's setting; services/archive):
    # read only here, for GET /games/{id}/record and imports of an archived game.
    "ARCHIVE_URL": "",
}


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The service's settings (see `DEFAULTS`)."""
    return _from_env(DEFAULTS, environ)
