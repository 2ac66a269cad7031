"""Bots take over a seat that leaves (ruleset `on_leave`, docs/takeover.md), end to end on real
parts: a private Redis, the command service under gunicorn, the scoring worker with beat (the
turn timer) and the bot worker as a real prefork Celery process following the change feed.

A 2-player game whose seat 1 resigns goes on to its end with a random bot playing seat 1,
each of its turns under the bot's command id, and is scored with the seat that left ranked
last; a seat that times out is taken over by the timer's append; `skip` ends the game as
before; an unknown bot is a 422 that creates nothing. The takeover's bot time is reserved
against the game's API key by the command service (a resignation) or the scoring worker's
timer, and given back by the bot worker when the game ends; a key that cannot pay gets no bot
(docs/takeover.md, "Who pays").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from eventstore.envelope import MOVES, SCORES, StoredEvent
from services.command.apikeys import ApiKeys
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import in_flight_key, takeover_member
from services.redis_store.keys import secrets_key
from services.scoring.feed import feed_items
from tests.redis_server import private_redis

from .http_client import api_key, call, gunicorn
from .test_lifecycle import bearer, wait_for
from .workers import BOTS_APP, beat, celery_env, running, worker

pytestmark = pytest.mark.slow  # whole games against a real bot worker, a turn limit's wait

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
# The bot worker refuses a visibility timeout shorter than its longest think plus 5 s; a
# random bot's move is paced to MOVE_FLOOR_MS (docs/bots.md, "Paced moves"): short here.
BOT_ENV = {"MAX_THINK_MS": "1000", "VISIBILITY_TIMEOUT": "7", "MOVE_FLOOR_MS": "20",
           "GRACE_SECONDS": "3"}  # fmt: skip
TURN_SECONDS = 3


@pytest.fixture(scope="module")
def suite() -> Iterator[dict[str, Any]]:
    """A private Redis, a scoring worker with beat ticking the turn timer every 0.25 s, a bot
    worker (one prefork child) and the command service."""
    with private_redis() as url:
        env = celery_env(url, TIMER_SECONDS="0.25")
        scorer = worker(env, "takeover-scoring", concurrency=2)
        bots = worker(
            celery_env(url, **BOT_ENV),
            "takeover-bots",
            concurrency=1,
            pool="prefork",
            queues="bots",
            app=BOTS_APP,
        )
        with (
            running(scorer, bots, beat(env)),
            gunicorn(*COMMAND, {**env, "NOTIFY_MS": "0"}, workers=2) as base,
        ):
            client = redis.Redis.from_url(url)
            yield {"base": base, "client": client, "store": RedisEventStore(client), "url": url}


def create(base: str, ruleset: dict[str, Any]) -> tuple[str, dict[int, str]]:
    body = {"players": [{"name": "Ann", "player_id": "u-ann"}, {"name": "Bob"}],
            "seat_order": [0, 1], "ruleset": ruleset}  # fmt: skip
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


def play_first(base: str, game_id: str, token: str) -> dict[str, Any]:
    """Play the first legal placement of the turn view for `token`'s seat."""
    spot = call(base, "GET", f"/games/{game_id}/turn")[1]["placements"][0]
    turn = {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"], "meeple": None}
    status, body = call(base, "POST", f"/games/{game_id}/turns", turn, bearer(token))
    assert status == 200, body
    return dict(body)


def final_score(store: RedisEventStore, game_id: str) -> dict[str, Any]:
    def scored() -> StoredEvent | None:
        return next((e for e in store.read(game_id, SCORES) if e.type == "GameScored"), None)

    return dict(wait_for(scored, 60, f"game {game_id} scored").payload)


def owner(client: redis.Redis, game_id: str) -> str:
    """The API key that created the game (its secrets record)."""
    raw: Any = client.get(secrets_key(game_id))
    return str(json.loads(raw)["key_id"])


def reserved(client: redis.Redis, game_id: str, seat: int) -> float | None:
    """The bot seconds held for the takeover of the game's seat by its key (None: none)."""
    member = takeover_member(game_id, seat)
    score = client.zscore(in_flight_key(owner(client, game_id)), member)
    return None if score is None else float(score)


def test_a_resigned_seat_is_played_to_the_end_by_its_bot_and_still_ranks_last(suite):
    base, store, client = suite["base"], suite["store"], suite["client"]
    game_id, tokens = create(base, {"tileset": "demo", "on_leave": "bot:random"})
    play_first(base, game_id, tokens[0])
    tiles = call(base, "GET", f"/games/{game_id}/turn")[1]["tiles_left"] + 1  # Bob's goes back
    status, resigned = call(base, "POST", f"/games/{game_id}/resign", headers=bearer(tokens[1]))
    assert status == 200, resigned
    kinds = [e["type"] for e in resigned["events"]]
    assert kinds[:2] == ["PlayerResigned", "SeatTakenOver"] and "GameEnded" not in kinds
    assert resigned["events"][1]["payload"] == {"player": 1, "level": "random"}
    left_at = resigned["events"][1]["seq"]
    # The command service reserved the bot's time: a 250 ms move (BOT_MOVE_FLOOR_MS) for the
    # seat's share of the tiles left.
    assert reserved(client, game_id, 1) == 0.25 * -(-tiles // 2)
    turn = call(base, "GET", f"/games/{game_id}/turn")[1]
    assert turn["taken_over"] == [None, "random"] and turn["out"] == [None, "resigned"]
    assert not turn["over"]
    # Ann plays on; the bot worker plays seat 1 whenever it is its turn (the feed sends it).
    refused_once = False
    while not (turn := call(base, "GET", f"/games/{game_id}/turn")[1])["over"]:
        if turn["player"] == 0:
            play_first(base, game_id, tokens[0])
            continue
        if not refused_once:  # Bob's old token may not play the bot's turn
            body = {"x": 0, "y": 1, "rotation": 0, "meeple": None}
            status, refused = call(base, "POST", f"/games/{game_id}/turns", body, bearer(tokens[1]))
            assert status == 409 and refused["code"] == "player_out", refused
            refused_once = True
        seq = turn["seq"]
        wait_for(
            lambda seq=seq: call(base, "GET", f"/games/{game_id}/turn")[1]["seq"] > seq,
            30,
            "the bot's move",
        )
    moves = store.read(game_id, MOVES)
    by_bot = [e for e in moves if e.type == "TilePlaced" and e.payload["player"] == 1]
    assert len(by_bot) >= 15 and all(e.seq > left_at for e in by_bot)
    assert all(e.command_id == f"bot:{game_id}:{e.seq - 1}" for e in by_bot)  # each once
    assert moves[-1].type == "GameEnded" and moves[-1].payload["reason"] == "last tile placed"
    result = final_score(store, game_id)
    assert result["ranks"] == [1, 2] and result["winners"] == [0]  # seats out rank last
    # The bot worker's feed consumer gave the takeover's seconds back at the game's end.
    wait_for(lambda: reserved(client, game_id, 1) is None, 30, "the takeover given back")

    # The views mark the seat as played by a bot from the takeover on.
    query = create_query_app({"REDIS_URL": suite["url"]}).test_client()
    board = query.get(f"/games/{game_id}/board").get_json()
    assert [p["taken_over"] for p in board["players"]] == [None, "random"]
    assert board["players"][1]["out"] == "resigned"
    before = query.get(f"/games/{game_id}/board?at={left_at - 1}").get_json()
    assert [p["taken_over"] for p in before["players"]] == [None, None]
    scores = query.get(f"/games/{game_id}/scores").get_json()
    assert [p["taken_over"] for p in scores["players"]] == [None, "random"]
    assert [p["rank"] for p in scores["players"]] == [1, 2]
    exported = query.get(f"/games/{game_id}/events?format=ndjson").get_data(as_text=True)
    taken = [json.loads(line) for line in exported.splitlines() if "SeatTakenOver" in line]
    assert [(t["seq"], t["payload"]["level"]) for t in taken] == [(left_at, "random")]
    # The feed: player_out, then the takeover notice, at the resignation's move.
    items = feed_items(moves, store.read(game_id, SCORES))
    out = [(i.kind, i.seq, i.data) for i in items if i.kind in ("player_out", "seat_taken_over")]
    assert out == [
        ("player_out", left_at - 1, {"seat": 1, "player_id": None, "reason": "resigned"}),
        ("seat_taken_over", left_at, {"seat": 1, "player_id": None, "level": "random"}),
    ]
    # The record replays exactly: the same ranks, the seat marked as taken over.
    status, record = call(base, "GET", f"/games/{game_id}/record")
    assert status == 200 and record["ruleset"]["on_leave"] == "bot:random"
    assert {"resign": 1} in record["turns"]
    key = {"X-Api-Key": ApiKeys(suite["client"]).create("takeover-tests")[1]}
    status, official = call(base, "POST", "/v1/score", record, key)
    assert status == 200, official
    assert official["taken_over"] == [None, "random"] and official["ranks"] == result["ranks"]
    assert official["final_scores"] == result["final_scores"]


def test_a_seat_that_times_out_is_taken_over_in_the_timers_append(suite):
    base, store = suite["base"], suite["store"]
    rules = {"tileset": "demo", "turn_seconds": TURN_SECONDS, "max_timeouts": 1,
             "on_leave": "bot:greedy"}  # fmt: skip
    game_id, tokens = create(base, rules)
    # Ann (seat 0) never plays: her turn times out, the seat is out and taken over.
    taken = wait_for(
        lambda: [e for e in store.read(game_id, MOVES) if e.type == "SeatTakenOver"],
        TURN_SECONDS + 20,
        "the timeout's takeover",
    )
    appended = [e for e in store.read(game_id, MOVES) if e.command_id == taken[0].command_id]
    assert taken[0].command_id.startswith("timeout:")
    types = [e.type for e in appended]
    assert types[:3] == ["TurnTimedOut", "PlayerTimedOut", "SeatTakenOver"]
    assert taken[0].payload == {"player": 0, "level": "greedy"}
    assert reserved(suite["client"], game_id, 0) == 0.25 * 24  # by the timer: 24 of 47 tiles
    play_first(base, game_id, tokens[1])  # Bob's turn; then the bot plays seat 0's

    def bot_placed() -> list[StoredEvent]:
        return [
            e
            for e in store.read(game_id, MOVES)
            if e.type == "TilePlaced" and e.payload["player"] == 0
        ]

    placed = wait_for(bot_placed, 30, "the bot's move for the seat that timed out")
    assert placed[0].command_id == f"bot:{game_id}:{placed[0].seq - 1}"
    # The last seat still in leaving ends the game (nobody's game is left to play).
    status, body = call(base, "POST", f"/games/{game_id}/resign", headers=bearer(tokens[1]))
    assert status == 200, body
    assert [e["type"] for e in body["events"]] == ["PlayerResigned", "GameEnded"]
    assert call(base, "GET", f"/games/{game_id}/turn")[1]["taken_over"] == ["greedy", None]
    final_score(store, game_id)
    wait_for(lambda: reserved(suite["client"], game_id, 0) is None, 30, "the takeover given back")


def test_a_key_that_cannot_pay_for_the_bot_has_its_timed_out_seat_skipped(suite):
    """The scoring worker's timer finds the key's bot time used up (BOT_SECONDS_IN_FLIGHT,
    7200 s, held by its other games): no bot, `TakeoverRefused` in the timer's append, and
    the 2-player game ends as under `skip`; the platform's feed says why."""
    base, store, client = suite["base"], suite["store"], suite["client"]
    key_id, secret = ApiKeys(client).create("takeover-poor")
    client.zadd(in_flight_key(key_id), {"its other games": 7_200})  # this test's own key
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}], "seat_order": [0, 1],
            "ruleset": {"tileset": "demo", "turn_seconds": TURN_SECONDS, "max_timeouts": 1,
                        "on_leave": "bot:greedy"}}  # fmt: skip
    status, created = call(base, "POST", "/games", body, {"X-Api-Key": secret})
    assert status == 201, created
    game_id = created["game_id"]
    ended = wait_for(
        lambda: [e for e in store.read(game_id, MOVES) if e.type == "GameEnded"],
        TURN_SECONDS + 20,
        "the timeout's end",
    )
    appended = [e for e in store.read(game_id, MOVES) if e.command_id == ended[0].command_id]
    assert [e.type for e in appended][:3] == ["TurnTimedOut", "PlayerTimedOut", "TakeoverRefused"]
    assert ended[0].payload["reason"] == "fewer than two players left"
    assert client.zrange(in_flight_key(key_id), 0, -1) == [b"its other games"]
    items = feed_items(store.read(game_id, MOVES), [])
    refused = [i.data for i in items if i.kind == "takeover_refused"]
    assert refused == [{"seat": 0, "player_id": None, "level": "greedy", "reason": "bot_budget"}]
    query = create_query_app({"REDIS_URL": suite["url"]}).test_client()
    exported = query.get(f"/games/{game_id}/events?format=ndjson").get_data(as_text=True)
    assert [json.loads(line)["type"] for line in exported.splitlines()].count(
        "TakeoverRefused"
    ) == 1
    # A resignation is told in its answer (a game without a turn limit: no timer races it).
    body["ruleset"] = {"tileset": "demo", "on_leave": "bot:greedy"}
    status, created = call(base, "POST", "/games", body, {"X-Api-Key": secret})
    assert status == 201, created
    bob = {p["seat"]: p["token"] for p in created["players"]}[1]
    status, resigned = call(
        base, "POST", f"/games/{created['game_id']}/resign", headers=bearer(bob)
    )
    assert status == 200, resigned
    assert [e["type"] for e in resigned["events"]] == [
        "PlayerResigned",
        "TakeoverRefused",
        "GameEnded",
    ]
    assert resigned["events"][1]["payload"] == {"player": 1, "level": "greedy"}


def test_skip_is_unchanged_and_an_unknown_bot_is_refused_creating_nothing(suite):
    base, client = suite["base"], suite["client"]
    game_id, tokens = create(base, {"on_leave": "skip"})
    status, body = call(base, "POST", f"/games/{game_id}/resign", headers=bearer(tokens[1]))
    assert status == 200 and [e["type"] for e in body["events"]] == ["PlayerResigned", "GameEnded"]
    turn = call(base, "GET", f"/games/{game_id}/turn")[1]
    assert turn["taken_over"] == [None, None] and turn["over"]
    games = sorted(client.scan_iter(match="*secrets*"))
    for bad, code in (
        ("bot:grandmaster", "unknown_on_leave"),
        ("zombie", "unknown_on_leave"),
        (42, "invalid_body"),
    ):
        body = {"players": [{"name": "Ann"}, {"name": "Bob"}], "ruleset": {"on_leave": bad}}
        status, refused = call(base, "POST", "/games", body, api_key(base))
        assert status == 422 and refused["code"] == code, refused
        if code == "unknown_on_leave":
            assert "bot:mcts" in refused["details"]["choices"]
            assert refused["type"].endswith("#unknown_on_leave")
    assert sorted(client.scan_iter(match="*secrets*")) == games  # nothing was created
    # A lobby may name the preset with a takeover (docs/lobby.md).
    lobby = {"ruleset": "classic-async-bots", "seats": 2,
             "host": {"player_id": "u-ann", "name": "Ann"}}  # fmt: skip
    status, made = call(base, "POST", "/lobbies", lobby, api_key(base))
    assert status == 201, made
