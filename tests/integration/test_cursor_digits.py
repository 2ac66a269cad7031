"""The merged log's cursors (`"<move seq>-<score seq>"`) are ASCII digits, as the API document
says (its patterns' `\\d` is [0-9] in JSON Schema); on a real Redis."""

from __future__ import annotations

import uuid

import pytest
import redis

from services.query.app import create_app
from services.redis_store import RedisEventStore
from tests.unit.test_query_games import long_game, store_game

pytestmark = pytest.mark.integration

# Python's \\d took any Unicode digit: these were read as 1-0 and answered 200.
NOT_ASCII = ["\u0661-\u0660", "1-\u0660", "\uff11-0", "\u0967-0"]


@pytest.mark.parametrize("cursor", NOT_ASCII)
def test_a_cursor_of_other_digits_is_refused(
    redis_url: str, redis_client: redis.Redis, cursor: str
) -> None:
    game_id = uuid.uuid4().hex
    store_game(RedisEventStore(redis_client), game_id, long_game()[1][:10])
    web = create_app({"REDIS_URL": redis_url}).test_client()
    for path in (f"/games/{game_id}/events", f"/games/{game_id}/live"):
        reply = web.get(path, query_string={"after": cursor})
        assert reply.status_code == 422, (path, reply.data)
        assert reply.get_json()["code"] == "invalid_query"
    reply = web.get(f"/games/{game_id}/live", headers={"Last-Event-ID": cursor})
    assert reply.status_code == 422, reply.data
    assert reply.get_json()["code"] == "bad_cursor"
    assert web.get(f"/games/{game_id}/events?after=1-0").status_code == 200
