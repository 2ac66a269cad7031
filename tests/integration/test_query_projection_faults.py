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


class MovesThenMore(RedisEventStore):
    """A real store whose next read of a move stream is followed, before the caller reads on,
    by `then()`: a move appended and scored between the projector's two reads, as a busy game
    with a fast worker interleaves them."""

    then: Any = None

    def read(self, game_id: str, stream: str, after: int = 0, limit: int | None = None) -> Any:
        found = super().read(game_id, stream, after, limit)
        then, self.then = (self.then, None) if stream == MOVES else (None, self.then)
        if then is not None:
            then()
        return found


def test_scores_never_count_a_move_the_view_has_not_read(url: str) -> None:
    """The projector reads the moves, then the worker's progress marker: a move appended and
    scored in between gave a score view with `scored_up_to` past its `seq` (`unscored_moves`
    -1) and that move's score events counted in totals beside meeples of the move before."""
    from services.query.service import QueryService
    from services.scoring.scorer import Scorer
    from tests.archive_games import turns

    client = redis.Redis.from_url(url)
    store = MovesThenMore(client)
    played = turns(11)
    game_id = new_game_id(random.Random("race"))
    scorer = Scorer(RedisEventStore(client))
    at = 0
    # Up to (not including) a turn that scores something: the view's totals would move.
    scored_turn = next(
        i
        for i in range(2, len(played))
        if any(e.type == "TilePlaced" for e in played[i]) and scorer_finds_points(played[: i + 1])
    )
    for i, turn in enumerate(played[:scored_turn]):
        store.append(game_id, MOVES, turn, expected=at, command_id=f"c{i}")
        at += len(turn)
    scorer.catch_up(game_id)

    def next_turn() -> None:
        store.append(game_id, MOVES, played[scored_turn], expected=at, command_id="late")
        scorer.catch_up(game_id)

    web = create_app({"QUERY_SERVICE": QueryService(store)}).test_client()
    store.then = next_turn
    view = web.get(f"/games/{game_id}/scores").get_json()
    assert view["seq"] == at  # the moves read before the turn was appended
    assert view["scored_up_to"] <= view["seq"] and view["unscored_moves"] >= 0
    assert all(e["move"] <= view["seq"] for e in view["events"])
    now = web.get(f"/games/{game_id}/scores").get_json()  # the next read has it all
    assert now["seq"] == now["scored_up_to"] > at and now["events"] != view["events"]


def scorer_finds_points(turns: list[list[Any]]) -> bool:
    """Whether the last of `turns` (a game's first turns) causes a score event."""
    from carcassonne.state import GameState
    from eventstore.envelope import StoredEvent
    from eventstore.score_stream import score_events

    moves = [m for turn in turns for m in turn]
    stored = [
        StoredEvent("g", MOVES, i + 1, m.type, m.version, 0, "", m.payload)
        for i, m in enumerate(moves)
    ]
    last = len(moves) - len(turns[-1])
    return any(e.payload["move"] > last for e in score_events(GameState(), stored))
