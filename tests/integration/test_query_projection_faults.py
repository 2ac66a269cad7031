"""The query service's projections where they went wrong, on a real Redis: what a view shows
must be what a fold of the log shows, whatever was asked of the process before."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore.envelope import MOVES
from eventstore.schemas import to_new
from services.query.app import create_app
from services.redis_store import RedisEventStore
from services.redis_store.keys import new_game_id
from tests.redis_server import private_redis

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with private_redis() as found:
        yield found


def tiles(hands: list[list[str | None]]) -> list[str | None]:
    """Every seat's hand tiles, in one list."""
    return [tile for hand in hands for tile in hand]


def test_a_hand_games_past_board_shows_its_hands_once_revealed(url: str) -> None:
    """R10.3: a past board of a hand game shows its hands as secret (null tiles) while the
    game goes on, and every tile once `HandsRevealed` opened them. A past board viewed during
    the game kept its ETag (`m<seq>`) after the end, so the process served its cached body
    with the secret tiles, and a client holding that ETag got 304."""
    store = RedisEventStore(redis.Redis.from_url(url))
    _, events = random_game(random.Random(5), 2, Ruleset(hand=3))
    moves = [to_new(e) for e in events]
    assert moves[-2].type == "HandsRevealed"
    game_id = new_game_id(random.Random("hands"))
    half = len(moves) // 2
    store.append(game_id, MOVES, moves[:half], expected=0, command_id="create")
    web = create_app({"REDIS_URL": url}).test_client()
    during = web.get(f"/games/{game_id}/board?turn=3")
    assert during.status_code == 200
    assert None in tiles(during.get_json()["hands"])  # secret while the game goes on

    store.append(game_id, MOVES, moves[half:], expected=half, command_id="rest")
    fresh: Any = create_app({"REDIS_URL": url}).test_client().get(f"/games/{game_id}/board?turn=3")
    shown = fresh.get_json()["hands"]
    assert None not in tiles(shown)  # a process that never saw it during the game
    after = web.get(f"/games/{game_id}/board?turn=3")
    assert after.get_json()["hands"] == shown
    assert after.headers["ETag"] == fresh.headers["ETag"] != during.headers["ETag"]
    again = web.get(
        f"/games/{game_id}/board?turn=3", headers={"If-None-Match": during.headers["ETag"]}
    )
    assert again.status_code == 200 and again.get_json()["hands"] == shown
