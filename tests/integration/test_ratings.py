"""Ratings on a real Redis (services/scoring/ratings.py, services/query/ratings.py).

Finished games are appended as the command service appends them (a secrets record naming the
API key and the bots, the moves turn by turn with their feed entries) and scored by a real
`Scorer`; the consumer "ratings" follows the feed. Shown here: each game rated exactly once,
also when its batch is redone after a crash; two games of one player rated at once lose no
update; every rating rebuilt from the games' logs equals the live one, bit for bit; the views
are the API key's own; and the scoring worker, a real Celery process, rates a game played
over HTTP.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore.envelope import MOVES, NewEvent
from eventstore.schemas import to_new
from services.query.app import create_app as create_query
from services.redis_store import RedisEventStore
from services.redis_store.apikeys import ApiKeys
from services.redis_store.changes import positions_key
from services.redis_store.keys import SHARDS, new_game_id, secrets_key
from services.redis_store.ratings import Rating, Ratings, board_key, pool_key
from services.scoring.ratings import Outcome, RatingsConsumer, rate, rebuild, rebuild_all
from services.scoring.scorer import Scorer
from tests.redis_server import private_redis

PLAYERS = ["ana", "ben", "cy", "dee"]


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    with private_redis() as url:
        yield redis.Redis.from_url(url)


def finished_game(
    store: RedisEventStore,
    key_id: str,
    seed: int,
    ids: list[str | None],
    bots: list[dict[str, Any] | None] | None = None,
    ruleset: Ruleset | None = None,
) -> str:
    """A whole random game with seats `ids`, created with API key `key_id`, appended turn by
    turn with its feed entries as the command service does, and scored to its end."""
    rng = random.Random(seed)
    game_id = new_game_id(rng)
    _, events = random_game(rng, len(ids), ruleset or Ruleset())
    turns: list[list[NewEvent]] = [[]]
    for event in map(to_new, events):
        if event.type == "TilePlaced" and turns[-1]:
            turns.append([])
        turns[-1].append(event)
    start = turns[0][0]
    seats = [{"name": f"P{i}", "player_id": who} for i, who in enumerate(ids)]
    turns[0][0] = NewEvent(start.type, start.version, {**start.payload, "players": seats})
    record: dict[str, Any] = {"seed": "s" * 32, "names": [s["name"] for s in seats],
                              "tokens": {}, "key_id": key_id}  # fmt: skip
    if bots:
        record["bots"] = bots
    store.client.set(secrets_key(game_id), json.dumps(record))
    at = 0
    for i, turn in enumerate(turns):
        store.append(game_id, MOVES, turn, expected=at,
                     command_id="create" if i == 0 else uuid.uuid4().hex)  # fmt: skip
        at += len(turn)
    Scorer(store).catch_up(game_id)
    return game_id


def stored(client: redis.Redis, key_id: str, pool: str) -> dict[str, Rating]:
    raw: dict[bytes, bytes] = client.hgetall(pool_key(key_id, pool))  # type: ignore[assignment]
    return {k.decode(): Rating.from_json(v) for k, v in raw.items()}


def test_each_game_is_rated_once_even_when_its_batch_is_redone(client: redis.Redis) -> None:
    store = RedisEventStore(client)
    pairs: list[list[str | None]] = [[PLAYERS[s % 3], PLAYERS[s % 3 + 1]] for s in range(4)]
    games = [finished_game(store, "k1", seed, pair) for seed, pair in enumerate(pairs)]
    consumer = RatingsConsumer(client, store)
    assert consumer.follower.catch_up() > 0
    ratings = stored(client, "k1", "classic")
    assert sum(r.games for r in ratings.values()) == 2 * len(games)
    assert client.hlen("{k:k1}:ratings:games") == len(games)
    # A crash after the ratings and before the position: the whole feed handled again.
    for shard in range(SHARDS):
        client.hdel(positions_key(shard), "ratings")
    assert RatingsConsumer(client, store).follower.catch_up() > 0
    assert stored(client, "k1", "classic") == ratings  # nothing rated twice
    assert client.xlen("{k:k1}:ratings:log") == len(games)


def test_an_imported_game_is_rated_only_when_the_platform_asks(client: redis.Redis) -> None:
    """`POST /games/import` leaves a game unrated (its result was made elsewhere) unless the
    body says `rated: true`; the same record imported both ways, the rated one counts once,
    for the importing key."""
    from carcassonne.record import record_from_events
    from services.command.imports import import_game
    from services.command.records import replay_record
    from services.command.secrets_store import RedisSecrets
    from services.command.service import GameService

    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    _, events = random_game(random.Random(8), 2, Ruleset())
    ids = ["ana", "ben"]
    for rated in (False, True):
        replayed = replay_record(record_from_events(events))
        done = import_game(service, replayed, ["Ana", "Ben"], "k9", f"imp-{rated}", ids,
                           rated=rated)  # fmt: skip
        Scorer(store).catch_up(done.game_id)
    assert RatingsConsumer(client, store).follower.catch_up() > 0
    ratings = stored(client, "k9", "classic")
    assert set(ratings) == {"ana", "ben"}
    assert all(r.games == 1 for r in ratings.values())  # the unrated import counted nothing


def test_two_games_of_one_player_rated_at_once_lose_no_update(client: redis.Redis) -> None:
    ratings = Ratings(client)
    games = [
        Outcome("k1", f"g{i}", "classic", i, ((0, "ana", 1), (1, f"rival{i}", 2))) for i in range(8)
    ]
    barrier = threading.Barrier(len(games))
    results: list[str] = []

    def rate_one(game: Outcome) -> None:
        barrier.wait()
        results.append(rate(Ratings(redis.Redis(connection_pool=client.connection_pool)), game))

    threads = [threading.Thread(target=rate_one, args=(g,)) for g in games]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == ["ok"] * len(games)
    (ana,) = ratings.current("k1", "classic", ["ana"])
    assert ana is not None and ana.games == len(games)  # every win counted, none overwritten


def test_a_game_whose_ratings_keep_changing_is_rated_later_not_dropped(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A game whose players' ratings changed under every one of its tries (a bot in many
    games ending at once) stops its batch, as a Redis failure does: its position is not
    saved, and the batch redone rates it. Skipped instead, it would never be rated."""
    store = RedisEventStore(client)
    game_id = finished_game(store, "k1", 7, ["ana", "ben"])
    busy = RatingsConsumer(client, store)
    monkeypatch.setattr(busy.ratings, "apply", lambda *_, **__: "stale")
    before = busy.follower.positions()
    with pytest.raises(RuntimeError, match="kept changing"):
        busy.follower.catch_up()
    assert busy.follower.positions() == before  # the batch is redone, not skipped
    assert not Ratings(client).rated("k1", game_id)
    assert RatingsConsumer(client, store).follower.catch_up() > 0
    assert Ratings(client).rated("k1", game_id)
    assert set(stored(client, "k1", "classic")) == {"ana", "ben"}


def test_a_game_is_due_for_the_archive_only_once_it_is_rated(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive removes a game's secrets record, which says whose it is: a game archived
    before the consumer "ratings" got to it was never rated. The scoring worker's followers
    run ratings before the archive's due index, so a ratings batch that stops (its game's
    ratings kept changing, Redis failed) leaves that game not yet due."""
    from services.redis_store.changes import follow
    from services.redis_store.keys import archive_due_key, shard_of
    from services.scoring import celery_app
    from services.scoring import ratings as ratings_module
    from services.scoring.ratings import RatingsChanging

    store = RedisEventStore(client)
    game_id = finished_game(store, "k1", 11, ["ana", "ben"])
    monkeypatch.setattr(celery_app, "_scorer", Scorer(store))
    monkeypatch.setattr(celery_app, "_timer", None)

    def changing(*_: Any) -> str:
        raise RatingsChanging("kept changing")

    monkeypatch.setattr(ratings_module, "rate", changing)
    followers = celery_app.followers()
    with pytest.raises(RatingsChanging):
        follow(followers)
    due = archive_due_key(shard_of(game_id) or 0)
    assert client.zscore(due, game_id) is None  # not due: not rated yet
    monkeypatch.undo()
    monkeypatch.setattr(celery_app, "_scorer", Scorer(store))
    follow(followers)
    assert Ratings(client).rated("k1", game_id) and client.zscore(due, game_id) is not None


def test_every_rating_rebuilt_from_the_logs_equals_the_live_one(client: redis.Redis) -> None:
    store = RedisEventStore(client)
    rng = random.Random(5)
    greedy = {"level": "greedy", "think_ms": 100}
    for seed in range(10):
        seats = rng.sample(PLAYERS, rng.choice([2, 3]))
        if seed % 3 == 0:  # a bot seat: rated as bot:greedy
            finished_game(store, "k1", seed, [*seats, None], [None] * len(seats) + [greedy])
        else:
            finished_game(store, "k1", seed, list(seats))
    finished_game(store, "k1", 99, ["ana", "ben"], ruleset=Ruleset(tileset="demo"))
    finished_game(store, "k2", 98, ["ana", "ben"])  # another platform's ana: apart
    # Two games between newcomers: their winners (and their losers) tie in ordinal, so the
    # leaderboard's order of equal ordinals is compared too.
    finished_game(store, "k1", 20, ["eve", "fay"])
    finished_game(store, "k1", 21, ["gil", "hal"])
    finished_game(store, "k1", 22, [None, "ivy", "jo"])  # a seat left out: ranks among two
    RatingsConsumer(client, store).follower.catch_up()
    live = {
        (pool, p): r for pool in ("classic", "demo") for p, r in stored(client, "k1", pool).items()
    }
    assert ("classic", "bot:greedy") in live and ("demo", "ana") in live
    assert rebuild(client, store, "k1") == live  # the same floats, not nearly the same
    # Not only the ratings: every history entry and each leaderboard's order.
    snapshot, rebuilt = Ratings(client).snapshot("k1"), rebuild_all(client, store, "k1")
    assert rebuilt.ratings == snapshot.ratings and set(snapshot.boards) == {"classic", "demo"}
    ordinals = [o for _, o in snapshot.boards["classic"]]
    assert len(set(ordinals)) < len(ordinals)  # a tie, ordered as Redis orders it
    assert rebuilt.boards == snapshot.boards
    assert len(snapshot.history[("classic", "ana")]) == snapshot.ratings[("classic", "ana")].games
    assert rebuilt.history == snapshot.history
    assert set(stored(client, "k2", "classic")) == {"ana", "ben"}
    assert stored(client, "k2", "classic")["ana"].games == 1


def test_ratings_rebuilt_with_some_games_archived_equal_the_live_ones(
    client: redis.Redis, tmp_path: Path
) -> None:
    """Games that left Redis for the archive (issue 28) are read from it by the rebuild,
    through the query service's fall-through reads; from Redis alone the rebuild refuses
    rather than answer with games missing."""
    from services.archive.archiver import Archiver
    from services.archive.fallthrough import FallThroughStore
    from services.archive.sqlite import SqliteArchive
    from services.redis_store.keys import archived_key, shard_of

    store = RedisEventStore(client)
    pairs: list[list[str | None]] = [[PLAYERS[s % 4], PLAYERS[(s + 1) % 4]] for s in range(6)]
    games = [finished_game(store, "k1", 40 + seed, pair) for seed, pair in enumerate(pairs)]
    RatingsConsumer(client, store).follower.catch_up()
    live = {
        ("classic", player): rating for player, rating in stored(client, "k1", "classic").items()
    }
    archive = SqliteArchive(tmp_path / "archive.sqlite3")
    archiver = Archiver(client, archive, after_ms=0)
    for game_id in games[::2]:
        assert archiver.archive_game(shard_of(game_id) or 0, game_id) == "archived"
        assert client.exists(secrets_key(game_id)) == 0
    with pytest.raises(ValueError, match="its log says otherwise"):
        rebuild(client, store, "k1")
    reads = FallThroughStore(
        store, lambda game_id: bool(client.exists(archived_key(game_id))), lambda: archive
    )
    assert rebuild(client, reads, "k1") == live
    assert rebuild_all(client, reads, "k1") == Ratings(client).snapshot("k1")


def test_the_views_belong_to_the_key(client: redis.Redis) -> None:
    store = RedisEventStore(client)
    keys = ApiKeys(client)
    key1_id, key1 = keys.create("platform one")
    _, key2 = keys.create("platform two")
    for seed in range(5):
        finished_game(store, key1_id, seed, ["ana", "ben", "cy"])
    RatingsConsumer(client, store).follower.catch_up()
    url = client.connection_pool.connection_kwargs
    app = create_query({"REDIS_URL": f"redis://{url['host']}:{url['port']}/0"})
    web = app.test_client()

    board = web.get("/v1/ratings/classic?limit=2", headers={"X-Api-Key": key1})
    assert board.status_code == 200, board.get_json()
    page = board.get_json()
    assert page["players"] == 3 and page["next_offset"] == 2 and len(page["items"]) == 2
    rest = web.get("/v1/ratings/classic?offset=2", headers={"X-Api-Key": key1}).get_json()
    rows = page["items"] + rest["items"]
    assert [r["rank"] for r in rows] == [1, 2, 3] and rest["next_offset"] is None
    assert rows == sorted(rows, key=lambda r: -r["ordinal"])
    assert client.zcard(board_key(key1_id, "classic")) == 3

    ana = web.get("/v1/ratings?player_id=ana&history=2", headers={"X-Api-Key": key1}).get_json()
    (classic,) = ana["pools"]
    assert classic["games"] == 5 and len(classic["history"]) == 2
    newest = classic["history"][0]
    assert newest["after"]["mu"] == classic["mu"] and newest["of"] == 3

    # Another platform's key sees none of it; no key is told what to send.
    other = web.get("/v1/ratings/classic", headers={"X-Api-Key": key2}).get_json()
    assert other["players"] == 0 and other["items"] == []
    stranger = web.get("/v1/ratings?player_id=ana", headers={"X-Api-Key": key2})
    assert stranger.status_code == 404 and stranger.get_json()["code"] == "player_not_rated"
    assert web.get("/v1/ratings/classic").get_json()["code"] == "missing_api_key"
    bad = web.get("/v1/ratings/classic", headers={"X-Api-Key": "nope"})
    assert bad.status_code == 403 and bad.get_json()["code"] == "bad_api_key"
    unknown = web.get("/v1/ratings/chess", headers={"X-Api-Key": key1})
    assert unknown.status_code == 404 and unknown.get_json()["code"] == "pool_not_found"
    for query in ("limit=0", "limit=101", "offset=-1", "limit=x"):
        refused = web.get(f"/v1/ratings/classic?{query}", headers={"X-Api-Key": key1})
        assert refused.status_code == 422, query
    assert web.get("/v1/ratings", headers={"X-Api-Key": key1}).status_code == 422


def query_app(client: redis.Redis) -> Any:
    url = client.connection_pool.connection_kwargs
    return create_query({"REDIS_URL": f"redis://{url['host']}:{url['port']}/0"}).test_client()


def tied_board(client: redis.Redis, key_id: str) -> None:
    """Two games between newcomers, won by eve and gil: the winners tie in ordinal, as do
    the losers (fay, hal); then ana beats ben twice, alone at the top."""
    ratings = Ratings(client)
    pairs = [("eve", "fay"), ("gil", "hal"), ("ana", "ben"), ("ana", "ben")]
    for i, (winner, loser) in enumerate(pairs):
        game = Outcome(key_id, f"g{i}", "classic", i, ((0, winner, 1), (1, loser, 2)))
        assert rate(ratings, game) == "ok"


def test_players_tied_in_ordinal_share_their_leaderboard_rank(client: redis.Redis) -> None:
    """Equal ordinals share a rank (as R7.5's ties share a place), on every page and in a
    player's own view, whichever way Redis orders their names."""
    key_id, key = ApiKeys(client).create("ties")
    tied_board(client, key_id)
    web = query_app(client)
    head = {"X-Api-Key": key}
    rows = web.get("/v1/ratings/classic", headers=head).get_json()["items"]
    assert [r["player"] for r in rows][1:3] == ["gil", "eve"]  # equal: by name, descending
    assert [r["rank"] for r in rows] == [1, 2, 2, 4, 4, 6]
    assert rows[1]["ordinal"] == rows[2]["ordinal"] and rows[3]["ordinal"] == rows[4]["ordinal"]
    paged = [
        web.get(f"/v1/ratings/classic?offset={i}&limit=1", headers=head).get_json()["items"][0]
        for i in range(len(rows))
    ]
    assert paged == rows  # a page that starts inside a tie shares its rank too
    for row in rows:
        mine = web.get(f"/v1/ratings?player_id={row['player']}", headers=head).get_json()
        assert mine["pools"][0]["rank"] == row["rank"], row["player"]


def test_history_zero_shows_no_games(client: redis.Redis) -> None:
    """`history=0` asks for the rating without its games (LRANGE 0 -1 would be all)."""
    key_id, key = ApiKeys(client).create("history")
    tied_board(client, key_id)
    web, head = query_app(client), {"X-Api-Key": key}
    for wanted, shown in ((0, 0), (1, 1), (2, 2), (200, 2)):
        body = web.get(f"/v1/ratings?player_id=ana&history={wanted}", headers=head).get_json()
        assert len(body["pools"][0]["history"]) == shown, (wanted, body)


def board_pages(web: Any, head: dict[str, str], limit: int, between: Any = None) -> list[str]:
    """Every row's player of the classic leaderboard, a page of `limit` at a time following
    `next_cursor`; `between()` runs after the first page."""
    seen: list[str] = []
    url = f"/v1/ratings/classic?limit={limit}"
    for _ in range(50):  # a cursor that does not move on would page for ever
        page = web.get(url, headers=head)
        assert page.status_code == 200, page.get_json()
        body = page.get_json()
        seen += [row["player"] for row in body["items"]]
        if body["next_cursor"] is None:
            assert body["next_offset"] is None
            return seen
        assert body["next_offset"] is not None
        if between is not None and len(seen) == limit:
            between()
        url = f"/v1/ratings/classic?limit={limit}&cursor={body['next_cursor']}"
    raise AssertionError(f"no last page: {seen}")


def test_a_cursor_shows_every_unmoved_player_once_while_ratings_change(
    client: redis.Redis,
) -> None:
    """Paging by offsets, a rating that changes between two pages shows a player twice or
    skips one that did not move; after a cursor, each player whose rating did not change is
    shown once, in order — ties and the cursor's own player moving included."""
    key_id, key = ApiKeys(client).create("cursors")
    tied_board(client, key_id)
    web, head = query_app(client), {"X-Api-Key": key}
    ratings, games = Ratings(client), iter(range(100, 1_000))
    order = [r["player"] for r in web.get("/v1/ratings/classic", headers=head).get_json()["items"]]
    for limit in (1, 2, 4, 6):
        assert board_pages(web, head, limit) == order  # ties split across pages included

    def win(winner: str, loser: str) -> None:
        game = Outcome(key_id, f"g{next(games)}", "classic", 0, ((0, winner, 1), (1, loser, 2)))
        assert rate(ratings, game) == "ok"

    # Page 1 is ana, gil, eve; then ben (last) climbs above them all twice over.
    first = order[:3]

    def climb() -> None:
        for _ in range(3):
            win("ben", "zed")

    seen = board_pages(web, head, 3, climb)
    assert seen[:3] == first and len(seen) == len(set(seen)), seen
    unmoved = [p for p in order if p != "ben"]
    assert [p for p in seen if p in unmoved] == unmoved  # none skipped, none twice
    # The last row of a page falls to the bottom before the next page: the cursor still
    # stands where that row stood.
    order = [r["player"] for r in web.get("/v1/ratings/classic", headers=head).get_json()["items"]]
    edge = order[1]

    def fall() -> None:
        for _ in range(4):
            win("zed", edge)

    seen = board_pages(web, head, 2, fall)
    rest = [p for p in order if p not in (edge, "zed")]  # zed won: it moved too
    assert [p for p in seen if p not in (edge, "zed")] == rest, (order, seen)
    # By offsets the same change shows a row twice: what the cursor is for.
    by_offset = web.get("/v1/ratings/classic?limit=2", headers=head).get_json()["items"]
    win("hal", "zed")
    win("hal", "zed")
    again = web.get("/v1/ratings/classic?limit=2&offset=2", headers=head).get_json()["items"]
    assert {r["player"] for r in by_offset} & {r["player"] for r in again}


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!",
        "a" * 513,
        "bm90IGpzb24",  # base64 of "not json"
        "WzEsMiwzXQ",  # [1,2,3]
        "eyJhIjoxfQ",  # {"a":1}
        "WyJ4IiwiYW5hIl0",  # ["x","ana"]
        "W3RydWUsImFuYSJd",  # [true,"ana"]
        "W05hTiwiYW5hIl0",  # [NaN,"ana"]
        "WzFlOTk5LCJhbmEiXQ",  # [1e999,"ana"]: not finite
        "WzEsImEgYiJd",  # [1,"a b"]: not a player id
        "WzEsIiJd",  # [1,""]
        "WzEsbnVsbF0",  # [1,null]
        "__4",  # not UTF-8 once decoded
    ],
)
def test_a_hostile_cursor_is_a_422(client: redis.Redis, cursor: str) -> None:
    key_id, key = ApiKeys(client).create("hostile")
    tied_board(client, key_id)
    answer = query_app(client).get(
        f"/v1/ratings/classic?cursor={cursor}", headers={"X-Api-Key": key}
    )
    assert answer.status_code == 422, answer.get_json()
    # its length is in the document (invalid_query); its form is the service's (bad_cursor)
    sized = 1 <= len(cursor) <= 512
    assert answer.get_json()["code"] == ("bad_cursor" if sized else "invalid_query")


def test_a_cursor_with_an_offset_is_a_422(client: redis.Redis) -> None:
    key_id, key = ApiKeys(client).create("both")
    tied_board(client, key_id)
    web, head = query_app(client), {"X-Api-Key": key}
    cursor = web.get("/v1/ratings/classic?limit=2", headers=head).get_json()["next_cursor"]
    both = web.get(f"/v1/ratings/classic?offset=2&cursor={cursor}", headers=head)
    assert both.status_code == 422 and both.get_json()["code"] == "cursor_and_offset"
    # A cursor of a player no longer rated still starts where that row would stand.
    gone = web.get("/v1/ratings/classic?cursor=WzEwMDAsIn56Il0", headers=head).get_json()
    assert [r["rank"] for r in gone["items"]][:1] == [1]  # [1000,"~z"]: above everyone
    # The longest cursor a board can give (128 quotes, each escaped in it) is taken.
    from services.query.ratings import encode_cursor

    longest = encode_cursor(-1.2345678901234567e-3, '"' * 128)
    assert web.get(f"/v1/ratings/classic?cursor={longest}", headers=head).status_code == 200


def test_the_scoring_worker_rates_a_game_played_over_http() -> None:
    from services.command.app import create_app as create_command
    from tests.integration.games import play
    from tests.integration.workers import celery_env, running, worker

    with private_redis() as url:
        client = redis.Redis.from_url(url)
        key_id, key = ApiKeys(client).create("platform")
        command = create_command({"REDIS_URL": url, "ADDRESS_WRITE_RATE": 0, "API_KEY_RATE": 0})
        players = [{"name": "Ana", "player_id": "ana"}, {"name": "Ben", "player_id": "ben"}]
        body = {"players": players, "seat_order": [0, 1], "ruleset": {"tileset": "demo"}}
        created = command.test_client().post("/games", json=body, headers={"X-Api-Key": key})
        assert created.status_code == 201, created.get_json()
        game = created.get_json()
        tokens = {p["seat"]: p["token"] for p in game["players"]}
        with running(worker(celery_env(url), name="ratings")):
            play(command, game["game_id"], tokens, random.Random(3))
            deadline = time.monotonic() + 60
            while not Ratings(client).rated(key_id, game["game_id"]):
                assert time.monotonic() < deadline, "the worker did not rate the game"
                time.sleep(0.05)
        ana, ben = Ratings(client).current(key_id, "demo", ["ana", "ben"])
        assert ana is not None and ben is not None and ana.games == ben.games == 1
        assert ana.mu != ben.mu or ana.sigma == ben.sigma  # a winner, or a tie
