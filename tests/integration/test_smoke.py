"""The thin end-to-end check `make test-fast` keeps: a game played over HTTP through the
command service under gunicorn, scored by a real Celery worker, read back from the query
service — and the scores are the engine's, folded from the stored moves."""

from __future__ import annotations

import random

import pytest
import redis

from carcassonne.game import fold
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.redis_store import RedisEventStore
from tests.stack import Stack, new_game, play, wait_scored

pytestmark = pytest.mark.smoke


def test_a_game_played_over_http_is_scored_by_the_worker(running_suite: Stack) -> None:
    game = new_game(running_suite.command, ["ann", "bob", "cy"])
    last = play(running_suite.command, game, random.Random(25))
    assert last["over"]
    scores = wait_scored(running_suite.query, game.game_id)
    client = redis.Redis.from_url(running_suite.redis_url)
    try:
        moves = RedisEventStore(client).read(game.game_id, MOVES)
    finally:
        client.close()
    engine = fold(to_engine(e) for e in moves)
    assert scores["result"] is not None
    assert [seat["score"] for seat in scores["players"]] == list(engine.scores), scores
