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
from eventstore.envelope import MOVES, SCORES
from eventstore.schemas import to_engine, to_new
from services.query.app import create_app
from services.redis_store import RedisEventStore
from services.redis_store.keys import game_keys, new_game_id
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


def test_views_follow_a_log_a_failover_cut_back_and_grew_again(url: str) -> None:
    """A failover (or a restart from an AOF a second behind) leaves a game's streams cut back
    to a prefix of what the process folded (tests/integration/test_lost_suffix.py). The
    projector read only after its cached seq: it went on showing the lost moves (a board at
    a seq the log no longer reaches, a game Redis no longer holds), and once the log grew
    back it folded the new moves on the lost ones, its cached views kept under their ETags."""
    from tests.integration.test_lost_suffix import lose_suffix

    client = redis.Redis.from_url(url)
    store = RedisEventStore(client)
    _, events = random_game(random.Random(8), 2, Ruleset())
    moves = [to_new(e) for e in events]
    whole = next(i for i in range(40, len(moves)) if moves[i].type == "TileDrawn") + 1
    game_id = new_game_id(random.Random("failover"))
    for seq, move in enumerate(moves[:whole]):
        store.append(game_id, MOVES, [move], expected=seq, command_id=f"c{seq}", marker="$seq")
    web = create_app({"REDIS_URL": url}).test_client()
    board = web.get(f"/games/{game_id}/board").get_json()
    assert board["seq"] == whole and board["turn"]["deadline_ms"] is None

    keep = whole - 5
    lose_suffix(client, game_id, MOVES, keep)
    cut = web.get(f"/games/{game_id}/board").get_json()
    assert cut["seq"] == keep and len(cut["tiles"]) == len(fold_of(store, game_id).board.tiles)

    # Grown back to the very length cached, the last draw with a deadline this time.
    again = [to_new(to_engine(e)) for e in store.read(game_id, MOVES)]  # the kept prefix
    again += [to_new(to_engine(e)) for e in stored_moves(moves[keep:whole], keep)]
    again[-1].payload["deadline_ms"] = 1_900_000_000_000
    lose_suffix(client, game_id, MOVES, 0)
    store.append(game_id, MOVES, again, expected=0, command_id="again", marker="$seq")
    grown = web.get(f"/games/{game_id}/board").get_json()
    assert grown["seq"] == whole and grown["turn"]["deadline_ms"] == 1_900_000_000_000

    lose_suffix(client, game_id, MOVES, 0)  # a restart that lost the whole game
    assert web.get(f"/games/{game_id}/board").status_code == 404


def fold_of(store: RedisEventStore, game_id: str) -> Any:
    """The game folded from its stored moves (no cache)."""
    from carcassonne.state import GameState

    state = GameState()
    for stored in store.read(game_id, MOVES):
        state.apply(to_engine(stored))
    return state


def stored_moves(moves: list[Any], after: int) -> list[Any]:
    """New events as stored events numbered from `after` + 1 (to upcast them as read)."""
    from eventstore.envelope import StoredEvent

    return [
        StoredEvent("g", MOVES, after + i + 1, m.type, m.version, 0, "", m.payload)
        for i, m in enumerate(moves)
    ]


def test_scores_follow_a_score_stream_a_failover_cut_back(url: str) -> None:
    """The score stream and its progress marker cut back (the moves kept): the view showed
    the lost score events and progress until the worker's progress passed it again."""
    from services.scoring.scorer import Scorer
    from tests.integration.test_lost_suffix import lose_suffix

    client = redis.Redis.from_url(url)
    store = RedisEventStore(client)
    _, events = random_game(random.Random(9), 2, Ruleset())
    moves = [to_new(e) for e in events]
    game_id = new_game_id(random.Random("scores cut"))
    store.append(game_id, MOVES, moves, expected=0, command_id="all", marker="$seq")
    Scorer(store, batch=20).catch_up(game_id)
    web = create_app({"REDIS_URL": url}).test_client()
    before = web.get(f"/games/{game_id}/scores").get_json()
    assert before["scored_up_to"] == len(moves) and before["result"] is not None

    keep = len(moves) // 2
    kept = [e for e in store.read(game_id, SCORES) if e.payload["move"] <= keep]
    lose_suffix(client, game_id, SCORES, len(kept))
    client.set(game_keys(game_id, SCORES)[2], keep)  # the marker as it stood then
    cut = web.get(f"/games/{game_id}/scores").get_json()
    assert cut["scored_up_to"] == keep and cut["score_seq"] == len(kept)
    assert [e["seq"] for e in cut["events"]] == [e.seq for e in kept if e.type == "FeatureScored"]
    assert cut["result"] is None

    Scorer(store, batch=7).catch_up(game_id)  # scored again, in other batches
    again = web.get(f"/games/{game_id}/scores").get_json()
    assert again["players"] == before["players"] and again["result"] == before["result"]


def test_an_events_cursor_beyond_the_log_is_refused_as_on_live(url: str) -> None:
    """`/events?after=` past the end of the game's log (made up, another game's, or from
    before a failover cut the log back) answered 200: an empty page whose `next` was that
    cursor for ever, or, with only its score position beyond, the moves with cursors naming
    score events the game does not have (its real ones never sent). As `/live` does: 422
    `cursor_beyond_log`, with the log's end."""
    client = redis.Redis.from_url(url)
    store = RedisEventStore(client)
    from tests.archive_games import play

    game_id = play(store, 4)
    ends = f"{store.last_seq(game_id, MOVES)}-{store.last_seq(game_id, SCORES)}"
    web = create_app({"REDIS_URL": url}).test_client()
    moves, scores = (int(n) for n in ends.split("-"))
    for after in (f"{moves + 1}-0", f"0-{scores + 1}", "999999999999999-999999999999999"):
        for fmt in ("json", "ndjson"):
            reply = web.get(f"/games/{game_id}/events?after={after}&format={fmt}")
            assert reply.status_code == 422, (after, fmt, reply.data[:200])
            body = reply.get_json()
            assert body["code"] == "cursor_beyond_log"
            assert body["details"] == {"cursor": after, "last": ends}
    at_end = web.get(f"/games/{game_id}/events?after={ends}").get_json()
    assert at_end["items"] == [] and at_end["next"] == ends
    whole = web.get(f"/games/{game_id}/events?after=0-0&limit=1000").get_json()
    assert whole["next"] == ends and len(whole["items"]) == moves + scores
