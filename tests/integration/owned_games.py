"""Games written straight to a real Redis as the command service would, owned by an API key,
and scored step by step as the scoring worker would (for the subscription tests and
tests/bench/bench_notify.py)."""

from __future__ import annotations

import random

import redis

from carcassonne.events import with_seats
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_new
from eventstore.score_stream import score_events
from services.redis_store import RedisEventStore
from services.redis_store.keys import derived_game_id
from services.redis_store.seats import write_both


def owned_game(client: redis.Redis, store: RedisEventStore, key_id: str, seed: int) -> str:
    """A whole random 3-player game owned by `key_id`, its moves not scored yet."""
    _, events = random_game(random.Random(seed), 3)
    events = with_seats(events, ["A", "B", "C"], ["a", "b", "c"])
    game_id = derived_game_id(f"owned-{key_id}-{seed}".encode())
    write_both(client, game_id, {"names": ["A", "B", "C"], "key_id": key_id})
    store.append(game_id, MOVES, [to_new(e) for e in events], expected=0, command_id="c",
                 marker="$seq")  # fmt: skip
    return game_id


def score_up_to(store: RedisEventStore, game_id: str, upto: int) -> None:
    """What the scoring worker does: the score events of moves ≤ `upto` and its progress."""
    moves = store.read(game_id, MOVES, after=0, limit=upto)
    scored = store.last_seq(game_id, SCORES)
    events = score_events(GameState(), moves)
    done = len(store.read(game_id, SCORES))
    store.append(game_id, SCORES, events[done:], expected=scored, command_id=f"s{upto}",
                 marker=str(upto))  # fmt: skip
