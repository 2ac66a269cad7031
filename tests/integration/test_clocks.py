"""Clocks end to end (docs/clocks.md) on real parts: a private Redis, the command service under
gunicorn, a Celery worker with beat running the turn timer, and the query service.

A Fischer bank of 2 s + 1 s: a move keeps what was left plus the increment (its placement's
`bank_ms`; no `BankCharged` in the log),
the next draw's deadline is the mover's bank; an exhausted bank is a timeout
(`TurnTimedOut`, then `PlayerTimedOut` at `max_timeouts`), never before its deadline; the
banks are in `/turn`, the board view and the `turn_started` items, and a fold of the log
gives the same banks. Bad banks are refused with their codes and create nothing.

A vacation (`POST /v1/players/{id}/vacations`) appends `ClockPaused` to each game of the
player: a running turn's deadline moves (in the log, the views, the timer's index), a turn
drawn while away starts its clock at the vacation's end, the others get `player_away`; a
vacation beyond the yearly allowance, a second one while away and bad days are refused and
change nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from carcassonne.game import actions, fold
from eventstore.envelope import SCORES
from eventstore.schemas import to_engine
from services.query.app import create_app as create_query_app
from services.redis_store import RedisEventStore
from services.redis_store.keys import deadlines_key, index_shard
from services.scoring.feed import feed_items
from tests.redis_server import private_redis

from .http_client import api_key, call, gunicorn
from .test_lifecycle import bearer, moves, wait_for
from .workers import beat, celery_env, running, worker

pytestmark = pytest.mark.slow  # banks run out in real time (1-2 s)

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
SKEW_MS = 250  # a deadline is on the service's clock, an append's time on the store's


@pytest.fixture(scope="module")
def suite() -> Iterator[dict[str, Any]]:
    """A private Redis, one worker process with beat ticking every 0.25 s, the command
    service (vacation allowance: 10 days a year) and the query service in process."""
    with private_redis() as url:
        env = celery_env(url, TIMER_SECONDS="0.25")
        with (
            running(worker(env, "clocks", concurrency=2), beat(env)),
            gunicorn(
                *COMMAND, {**env, "NOTIFY_MS": "0", "VACATION_DAYS_PER_YEAR": "10"}, workers=2
            ) as base,  # fmt: skip
        ):
            client = redis.Redis.from_url(url)
            yield {
                "base": base,
                "client": client,
                "store": RedisEventStore(client),
                "query": create_query_app({"REDIS_URL": url}).test_client(),
                "url": url,
            }


def create(base: str, players: list[dict[str, Any]], **rules: Any) -> tuple[int, Any]:
    body = {"players": players, "seat_order": list(range(len(players))), "ruleset": rules}
    return call(base, "POST", "/games", body, api_key(base))


def play_one(base: str, store: RedisEventStore, game_id: str, token: str) -> dict[str, Any]:
    state = fold(to_engine(e) for e in moves(store, game_id))
    x, y, rotation, _ = actions(state)[0]
    turn = {"x": x, "y": y, "rotation": rotation, "meeple": None}
    status, body = call(base, "POST", f"/games/{game_id}/turns", turn, bearer(token))
    assert status == 200, body
    return body


# A bank Ann's first move spends well within even on a loaded machine (2 s ran out once at a
# load of 2.7 on 2 cores), and Bob's runs out soon after.
BANK_MS = 4_000


def test_a_move_keeps_its_bank_and_an_exhausted_bank_times_the_seat_out(suite):
    base, store = suite["base"], suite["store"]
    players = [{"name": "Ann", "player_id": "u-ann"}, {"name": "Bob", "player_id": "u-bob"}]
    status, created = create(base, players, initial_seconds=BANK_MS // 1000, increment_seconds=1,
                             max_timeouts=1)  # fmt: skip
    assert status == 201, created
    game_id = created["game_id"]
    tokens = {p["seat"]: p["token"] for p in created["players"]}
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200 and turn["banks_ms"] == [BANK_MS, BANK_MS]
    drawn = moves(store, game_id)[-1]
    assert drawn.type == "TileDrawn" and turn["deadline_ms"] == drawn.payload["deadline_ms"]
    # the bank after the draw (the service's clock; the append's time is the store's)
    assert abs(drawn.payload["deadline_ms"] - (drawn.time_ms + BANK_MS)) < SKEW_MS
    # Ann plays: she keeps what was left of her bank at the placement, plus the 1 s increment
    play_one(base, store, game_id, tokens[0])
    log = moves(store, game_id)
    (charged,) = [e for e in log if e.type == "TilePlaced"]
    assert charged.version == 3 and not any(e.type == "BankCharged" for e in log)
    left = max(0, drawn.payload["deadline_ms"] - charged.time_ms)
    assert charged.payload["player"] == 0 and charged.payload["bank_ms"] >= 1_000
    assert abs(charged.payload["bank_ms"] - (left + 1_000)) < SKEW_MS
    assert log[-1].type == "TileDrawn"
    assert abs(log[-1].payload["deadline_ms"] - (log[-1].time_ms + BANK_MS)) < SKEW_MS  # Bob's
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert turn["banks_ms"] == [charged.payload["bank_ms"], BANK_MS] and turn["player"] == 1
    # Bob does nothing: his bank runs out, the timer times the turn out, and with
    # max_timeouts 1 he is out and the game ends with final scoring
    wait_for(
        lambda: any(e.type == "GameScored" for e in store.read(game_id, SCORES)),
        20,
        "Bob's exhausted bank to end the game",
    )
    log = moves(store, game_id)
    kinds = [e.type for e in log]
    assert kinds[-3:] == ["TurnTimedOut", "PlayerTimedOut", "GameEnded"]
    timed_out = log[kinds.index("TurnTimedOut")]
    assert timed_out.time_ms >= log[-4].payload["deadline_ms"]  # never before the deadline
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert turn["out"] == [None, "timed_out"] and turn["status"] == "over"
    # the banks: a fold of the log gives what the views show
    replayed = fold(to_engine(e) for e in log)
    # Bob's bank: spent, then the timed-out turn's increment (docs/clocks.md)
    assert turn["banks_ms"] == replayed.banks_ms == [charged.payload["bank_ms"], 1_000]
    board = suite["query"].get(f"/games/{game_id}/board").get_json()
    assert [p["bank_ms"] for p in board["players"]] == replayed.banks_ms
    started = [i for i in feed_items(log, []) if i.kind == "turn_started"]
    assert [(i.data["seat"], i.data["bank_ms"]) for i in started] == [
        (0, BANK_MS),
        (1, BANK_MS),
    ]
    assert started[0].data["player_id"] == "u-ann"


@pytest.mark.parametrize(
    ("rules", "code"),
    [
        ({"initial_seconds": 0}, "bad_initial_seconds"),
        ({"initial_seconds": -60}, "bad_initial_seconds"),
        ({"initial_seconds": 10**9}, "bad_initial_seconds"),
        ({"initial_seconds": 300, "increment_seconds": -5}, "bad_increment_seconds"),
        ({"increment_seconds": 5}, "increment_without_bank"),
        ({"initial_seconds": 300, "turn_seconds": 60}, "bank_with_turn_limit"),
        ({"initial_seconds": 300, "undo": "consent"}, "bank_with_undo"),
        ({"initial_seconds": 300, "hand": 3}, "hand_with_bank"),
    ],
)
def test_a_bad_bank_is_a_422_with_its_code_and_creates_nothing(suite, rules, code):
    base, client = suite["base"], suite["client"]
    before = sorted(client.scan_iter("{g:*}:moves"))
    status, body = create(base, [{"name": "Ann"}, {"name": "Bob"}], **rules)
    assert status == 422 and body["code"] == code, body
    assert sorted(client.scan_iter("{g:*}:moves")) == before


def test_blitz_and_correspondence_banks_both_start(suite):
    base, store = suite["base"], suite["store"]
    for bank, step in ((300, 5), (3 * 86_400, 86_400)):
        status, created = create(base, [{"name": "Ann"}, {"name": "Bob"}],
                                 initial_seconds=bank, increment_seconds=step)  # fmt: skip
        assert status == 201, created
        log = moves(store, created["game_id"])
        assert abs(log[-1].payload["deadline_ms"] - (log[-1].time_ms + bank * 1000)) < SKEW_MS
        recorded = log[0].payload["ruleset"]  # GameStarted: the ruleset is in the log
        assert (recorded["initial_seconds"], recorded["increment_seconds"]) == (bank, step)


# ---------------------------------------------------------------------------- vacations

DAY_MS = 86_400_000


def vacation(base: str, player_id: str, body: Any, headers: Any = None) -> tuple[int, Any]:
    path = f"/v1/players/{player_id}/vacations"
    return call(base, "POST", path, body, api_key(base) if headers is None else headers)


def test_a_vacation_pauses_the_players_clocks_in_every_game_and_the_others_hear_of_it(suite):
    base, store, client = suite["base"], suite["store"], suite["client"]
    away = {"name": "Vic", "player_id": "u-vic"}
    # game A: Vic's turn (seat 0), a 300 s bank; game B: Vic waits (seat 1), a day per move
    status, a = create(base, [away, {"name": "Ann"}], initial_seconds=300)
    assert status == 201, a
    status, b = create(base, [{"name": "Bob"}, away], turn_seconds=86_400)
    assert status == 201, b
    a_id, b_id = a["game_id"], b["game_id"]
    before = moves(store, a_id)[-1].payload["deadline_ms"]
    status, declared = vacation(base, "u-vic", {"days": 3})
    assert status == 201, declared
    span = declared["vacation"]
    assert span["until_ms"] - span["from_ms"] == 3 * DAY_MS and span["days"] == 3
    assert (declared["allowance_days"], declared["used_days"], declared["left_days"]) == (10, 3, 7)
    paused = {p["game_id"]: p for p in declared["paused"]}
    assert set(paused) == {a_id, b_id}
    assert (paused[a_id]["seat"], paused[b_id]["seat"]) == (0, 1)
    # A: the running turn's deadline moved by the rest of the absence (remainder kept)
    moved = paused[a_id]["deadline_ms"]
    assert moved == span["until_ms"] + (before - span["from_ms"])
    assert paused[b_id]["deadline_ms"] is None  # not Vic's turn: nothing to move now
    for game_id, seat in ((a_id, 0), (b_id, 1)):
        last = moves(store, game_id)[-1]
        assert last.type == "ClockPaused" and last.payload["player"] == seat
        sent = (last.payload["from_ms"], last.payload["until_ms"])
        assert sent == (span["from_ms"], span["until_ms"])
        status, turn = call(base, "GET", f"/games/{game_id}/turn")
        assert turn["away_until_ms"][seat] == span["until_ms"]
        # the others are told: a player_away item, from the log alone
        (item,) = [i for i in feed_items(moves(store, game_id), []) if i.kind == "player_away"]
        assert item.data["player_id"] == "u-vic" and item.data["until_ms"] == span["until_ms"]
    status, turn = call(base, "GET", f"/games/{a_id}/turn")
    assert turn["deadline_ms"] == moved
    assert fold(to_engine(e) for e in moves(store, a_id)).deadline_ms == moved  # replay
    board = suite["query"].get(f"/games/{a_id}/board").get_json()
    assert board["turn"]["deadline_ms"] == moved
    assert board["players"][0]["away_until_ms"] == span["until_ms"]
    # B: Bob plays; Vic's turn, drawn while away, starts its day when the vacation ends
    tokens = {p["seat"]: p["token"] for p in b["players"]}
    play_one(base, store, b_id, tokens[0])
    drawn = moves(store, b_id)[-1]
    assert drawn.type == "TileDrawn"
    assert drawn.payload["deadline_ms"] == span["until_ms"] + DAY_MS
    # the turn timer follows the moved deadline (its index, caught up by the worker)
    shard = index_shard(a_id)
    wait_for(lambda: client.zscore(deadlines_key(shard), a_id) == moved, 10, "the moved deadline")
    b_deadline = drawn.payload["deadline_ms"]
    wait_for(
        lambda: client.zscore(deadlines_key(index_shard(b_id)), b_id) == b_deadline,
        10,
        "B's deadline after Vic's draw",
    )
    # a game that starts while Vic is away has Vic's clock paused from its start
    status, c = create(base, [away, {"name": "Cy"}], initial_seconds=300)
    assert status == 201, c
    log = moves(store, c["game_id"])
    assert [e.type for e in log[:3]] == ["GameStarted", "ClockPaused", "TileDrawn"]
    assert log[1].payload["player"] == 0 and log[1].payload["until_ms"] == span["until_ms"]
    assert log[2].payload["deadline_ms"] == span["until_ms"] + 300_000
    # one vacation at a time: a second one while away is refused, and changes nothing
    seq = moves(store, a_id)[-1].seq
    status, again = vacation(base, "u-vic", {"days": 1})
    assert status == 409 and again["code"] == "vacation_overlaps", again
    assert again["details"]["until_ms"] == span["until_ms"]
    assert moves(store, a_id)[-1].seq == seq
    status, listed = call(base, "GET", "/v1/players/u-vic/vacations", None, api_key(base))
    assert status == 200 and listed["used_days"] == 3 and listed["vacations"] == [span]


def end_vacation(base: str, player_id: str, vacation_id: str, key: Any = None) -> tuple[int, Any]:
    path = f"/v1/players/{player_id}/vacations/{vacation_id}"
    return call(base, "DELETE", path, None, api_key(base) if key is None else key)


def test_back_early_the_clocks_run_again_and_the_days_not_begun_go_back(suite):
    base, store, client = suite["base"], suite["store"], suite["client"]
    away = {"name": "Val", "player_id": "u-val"}
    status, a = create(base, [away, {"name": "Ann"}], initial_seconds=300)
    assert status == 201, a
    a_id = a["game_id"]
    before = moves(store, a_id)[-1].payload["deadline_ms"]
    status, declared = vacation(base, "u-val", {"days": 5})
    assert status == 201, declared
    span = declared["vacation"]
    left = before - span["from_ms"]  # what was left of Val's turn when she left
    status, ended = end_vacation(base, "u-val", span["vacation_id"])
    assert status == 200, ended
    back = ended["vacation"]["ended_ms"]
    assert span["from_ms"] <= back < span["until_ms"]
    assert ended["vacation"] == {**span, "until_ms": back, "days": 1, "ended_ms": back}
    assert (ended["used_days"], ended["left_days"]) == (1, 9)  # a day begun counts
    (resumed,) = ended["resumed"]
    assert (resumed["game_id"], resumed["seat"]) == (a_id, 0)
    assert resumed["deadline_ms"] == back + left  # the turn's clock runs from the return
    last = moves(store, a_id)[-1]
    assert last.type == "ClockResumed" and last.seq == resumed["seq"]
    assert last.payload == {"player": 0, "at_ms": back, "deadline_ms": back + left,
                            "vacation": span["vacation_id"]}  # fmt: skip
    status, turn = call(base, "GET", f"/games/{a_id}/turn")
    assert turn["deadline_ms"] == back + left and turn["away_until_ms"][0] == back
    assert fold(to_engine(e) for e in moves(store, a_id)).deadline_ms == back + left  # replay
    (item,) = [i for i in feed_items(moves(store, a_id), []) if i.kind == "player_back"]
    assert item.data["player_id"] == "u-val" and item.data["deadline_ms"] == back + left
    wait_for(
        lambda: client.zscore(deadlines_key(index_shard(a_id)), a_id) == back + left,
        10,
        "the timer's index brought forward",
    )
    # a retry answers the end again and appends nothing more
    seq = last.seq
    status, again = end_vacation(base, "u-val", span["vacation_id"])
    assert status == 200 and again["vacation"] == ended["vacation"] and again["resumed"] == []
    assert moves(store, a_id)[-1].seq == seq
    # the next vacation may start at once: the ended one no longer overlaps
    status, next_one = vacation(base, "u-val", {"days": 2})
    assert status == 201 and next_one["used_days"] == 3, next_one
    status, listed = call(base, "GET", "/v1/players/u-val/vacations", None, api_key(base))
    assert [v["ended_ms"] for v in listed["vacations"]] == [back, None]


def test_ending_a_vacation_that_is_over_unknown_or_another_keys_changes_nothing(suite):
    from services.redis_store.apikeys import ApiKeys

    base, client = suite["base"], suite["client"]
    other_key = {"X-Api-Key": ApiKeys(client).create("another-platform")[1]}
    status, declared = vacation(base, "u-wes", {"days": 1})
    assert status == 201, declared
    vacation_id = declared["vacation"]["vacation_id"]
    for player, wanted, key in [
        ("u-wes", "0" * 32, None),  # no such vacation
        ("u-wes", "not-an-id", None),
        ("u-other", vacation_id, None),  # another player's
        ("u-wes", vacation_id, other_key),  # another platform's player of that id
    ]:
        status, refused = end_vacation(base, player, wanted, key)
        assert status == 404 and refused["code"] == "vacation_not_found", refused
    # one that ran to its end (its record moved into the past, as time would)
    stored = [k for k in client.scan_iter(match="*vacations:u-wes")]
    (record_key,) = stored
    (record,) = json.loads(client.get(record_key))
    record["from_ms"], record["until_ms"] = "1000", "2000"
    client.set(record_key, json.dumps([record]))
    status, refused = end_vacation(base, "u-wes", vacation_id)
    assert status == 409 and refused["code"] == "vacation_over", refused
    assert refused["details"]["until_ms"] == 2000
    assert json.loads(client.get(record_key)) == [record]  # unchanged


def _banked_game_and_key(suite, name: str, player_id: str) -> tuple[dict, dict]:
    """A 2-player game with a 300 s bank, `player_id` in seat 0; and the tests' API key record."""
    from services.redis_store.apikeys import ApiKeys

    base = suite["base"]
    status, game = create(base, [{"name": name, "player_id": player_id}, {"name": "Ann"}],
                          initial_seconds=300)  # fmt: skip
    assert status == 201, game
    key = ApiKeys(suite["client"]).get(api_key(base)["X-Api-Key"])
    assert key is not None
    return game, key


def test_a_declaration_that_failed_after_its_record_is_completed_by_the_retry(suite):
    """Redis lost mid-way (the request's 503): the vacation was recorded, no game paused.
    The retry is refused as overlapping, and first pauses every game the record missed,
    each once (its command id is the vacation's)."""
    from services.command.vacations import DAY_MS as DAY
    from services.command.vacations import year_of
    from services.redis_store.vacations import VacationBook

    base, store, client = suite["base"], suite["store"], suite["client"]
    game, key = _banked_game_and_key(suite, "Rae", "u-rae")
    now = int(time.time() * 1000)
    book = VacationBook(client)  # the record the failed request made, and nothing else
    done = book.declare(
        key["id"], "u-rae", "v-lost", now, now + 2 * DAY, 2, year_of(now), 10, now_ms=now
    )
    assert done.outcome == "ok"
    assert moves(store, game["game_id"])[-1].type != "ClockPaused"
    for _ in range(2):  # a second retry appends nothing more
        status, again = vacation(base, "u-rae", {"days": 2})
        assert status == 409 and again["code"] == "vacation_overlaps", again
        paused = [e for e in moves(store, game["game_id"]) if e.type == "ClockPaused"]
        assert [(e.payload["from_ms"], e.payload["until_ms"]) for e in paused] == [
            (now, now + 2 * DAY)
        ]


def test_a_vacation_beyond_the_allowance_is_a_409_that_changes_nothing(suite):
    base, store = suite["base"], suite["store"]
    status, game = create(base, [{"name": "Pat", "player_id": "u-pat"}, {"name": "Ann"}],
                          initial_seconds=60)  # fmt: skip
    assert status == 201, game
    log = moves(store, game["game_id"])
    status, refused = vacation(base, "u-pat", {"days": 11})  # the allowance is 10
    assert status == 409 and refused["code"] == "vacation_allowance_exceeded", refused
    details = refused["details"]
    assert (details["allowance_days"], details["used_days"], details["asked_days"]) == (10, 0, 11)
    assert moves(store, game["game_id"]) == log
    status, listed = call(base, "GET", "/v1/players/u-pat/vacations", None, api_key(base))
    assert listed["used_days"] == 0 and listed["left_days"] == 10 and listed["vacations"] == []


def test_a_platform_gets_its_own_allowance_from_the_keys_cli(suite, capsys):
    """The operator sets one key's yearly vacation days (`apikeys set --vacation-days`):
    that key's players get it, other keys keep the service's; `default` gives it back."""
    from services.command import apikeys

    url, base = suite["url"], suite["base"]
    assert apikeys.main(["--redis-url", url, "create", "--name", "short-breaks", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    own = {"X-Api-Key": made["key"]}
    assert apikeys.main(["--redis-url", url, "set", made["id"], "--vacation-days", "2"]) == 0
    status, refused = vacation(base, "u-kai", {"days": 3}, headers=own)
    assert status == 409 and refused["code"] == "vacation_allowance_exceeded", refused
    assert refused["details"]["allowance_days"] == 2
    status, listed = call(base, "GET", "/v1/players/u-kai/vacations", None, own)
    assert (listed["allowance_days"], listed["vacations"]) == (2, [])
    status, other = call(base, "GET", "/v1/players/u-kai/vacations", None, api_key(base))
    assert other["allowance_days"] == 10  # another platform's players: the service's days
    # A player id is the platform's own: another key's player of the same id is another one.
    assert vacation(base, "u-kai", {"days": 1})[0] == 201  # under the suite's key
    status, listed = call(base, "GET", "/v1/players/u-kai/vacations", None, own)
    assert status == 200 and listed["vacations"] == [] and listed["used_days"] == 0
    assert apikeys.main(["--redis-url", url, "set", made["id"], "--vacation-days", "x"]) == 2
    assert apikeys.main(["--redis-url", url, "set", "k_nobody", "--vacation-days", "3"]) == 1
    assert apikeys.main(["--redis-url", url, "set", made["id"], "--vacation-days", "default"]) == 0
    status, listed = call(base, "GET", "/v1/players/u-kai/vacations", None, own)
    assert listed["allowance_days"] == 10


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"days": 0}, "bad_vacation"),
        ({"days": -3}, "bad_vacation"),
        ({"days": 367}, "bad_vacation"),
        ({"days": "7"}, "invalid_body"),
        ({}, "invalid_body"),
    ],
)
def test_bad_vacation_days_are_a_422_that_changes_nothing(suite, body, code):
    base = suite["base"]
    status, refused = vacation(base, "u-bad", body)
    assert status == 422 and refused["code"] == code, refused
    status, listed = call(base, "GET", "/v1/players/u-bad/vacations", None, api_key(base))
    assert listed["vacations"] == []


def test_vacations_need_the_platforms_api_key(suite):
    status, refused = vacation(suite["base"], "u-vic", {"days": 1}, headers={})
    assert status == 401 and refused["code"] == "missing_api_key"
    status, refused = vacation(suite["base"], "u-vic", {"days": 1}, {"X-Api-Key": "nope"})
    assert status == 403 and refused["code"] == "bad_api_key"


# ------------------------------------------------------ a vacation that starts later


def now_ms() -> int:
    return int(time.time() * 1000)


def test_a_later_vacation_pauses_exactly_its_window_and_a_replay_agrees(suite):
    """Declared for 100 s from now: the pause is in each game's log at once, with its
    future start; a running turn whose deadline crosses the start keeps its clock (the
    deadline moves by the vacation's length), a turn drawn before the start whose deadline
    crosses it is extended in its draw, one that ends before it is not, and a game created
    before the start gets the pause with its future start."""
    base, store, client = suite["base"], suite["store"], suite["client"]
    away = {"name": "Lea", "player_id": "u-lea"}
    status, a = create(base, [away, {"name": "Ann"}], initial_seconds=300)  # Lea's turn
    assert status == 201, a
    status, b = create(base, [{"name": "Bob"}, away], turn_seconds=86_400)  # Bob's turn
    assert status == 201, b
    a_id, b_id = a["game_id"], b["game_id"]
    before = moves(store, a_id)[-1].payload["deadline_ms"]
    start = now_ms() + 100_000
    status, declared = vacation(base, "u-lea", {"days": 2, "from_ms": start})
    assert status == 201, declared
    span = declared["vacation"]
    assert (span["from_ms"], span["until_ms"], span["days"]) == (start, start + 2 * DAY_MS, 2)
    assert declared["used_days"] == 2 and span["ended_ms"] is None
    paused = {p["game_id"]: p for p in declared["paused"]}
    assert set(paused) == {a_id, b_id}
    # A: Lea's running turn ends after the start: its deadline moves by the whole absence
    moved = before + 2 * DAY_MS
    assert paused[a_id]["deadline_ms"] == moved
    assert paused[b_id]["deadline_ms"] is None
    for game_id, seat in ((a_id, 0), (b_id, 1)):
        last = moves(store, game_id)[-1]
        assert last.type == "ClockPaused" and last.payload["player"] == seat
        assert (last.payload["from_ms"], last.payload["until_ms"]) == (start, span["until_ms"])
        # the others hear of it at once, with the future start
        (item,) = [i for i in feed_items(moves(store, game_id), []) if i.kind == "player_away"]
        assert item.data["from_ms"] == start and item.data["until_ms"] == span["until_ms"]
        # before the start, /turn shows the declared end already
        status, turn = call(base, "GET", f"/games/{game_id}/turn")
        assert turn["away_until_ms"][seat] == span["until_ms"]
    assert call(base, "GET", f"/games/{a_id}/turn")[1]["deadline_ms"] == moved
    wait_for(
        lambda: client.zscore(deadlines_key(index_shard(a_id)), a_id) == moved,
        10,
        "the timer's index to follow the moved deadline",
    )
    # B: Bob plays; Lea's day-long turn is drawn before the start and crosses it: the
    # draw's deadline is a day of her clock, the two days away left out
    tokens = {p["seat"]: p["token"] for p in b["players"]}
    play_one(base, store, b_id, tokens[0])
    drawn = moves(store, b_id)[-1]
    assert drawn.type == "TileDrawn" and drawn.time_ms < start
    assert abs(drawn.payload["deadline_ms"] - (drawn.time_ms + 3 * DAY_MS)) < SKEW_MS
    # C: created before the start, a minute per turn: Lea's first turn ends before the
    # start, on its normal clock; the pause is in the log with its future start
    status, c = create(base, [away, {"name": "Cy"}], turn_seconds=60)
    assert status == 201, c
    log = moves(store, c["game_id"])
    assert [e.type for e in log[:3]] == ["GameStarted", "ClockPaused", "TileDrawn"]
    assert (log[1].payload["from_ms"], log[1].payload["until_ms"]) == (start, span["until_ms"])
    assert abs(log[2].payload["deadline_ms"] - (log[2].time_ms + 60_000)) < SKEW_MS
    # a replay of each log gives the deadlines the service decided
    for game_id in (a_id, b_id, c["game_id"]):
        status, turn = call(base, "GET", f"/games/{game_id}/turn")
        assert fold(to_engine(e) for e in moves(store, game_id)).deadline_ms == turn["deadline_ms"]
    assert turn["deadline_ms"] == log[2].payload["deadline_ms"]
    # one right after it is no overlap: it is declared, counted, and paused too
    status, after = vacation(base, "u-lea", {"days": 1, "from_ms": span["until_ms"]})
    assert status == 201 and after["used_days"] == 3, after
    status, listed = call(base, "GET", "/v1/players/u-lea/vacations", None, api_key(base))
    assert [v["from_ms"] for v in listed["vacations"]] == [start, span["until_ms"]]


def test_vacations_that_overlap_are_refused_with_when_the_other_runs(suite):
    base, store = suite["base"], suite["store"]
    status, game = create(base, [{"name": "Mo", "player_id": "u-mo"}, {"name": "Ann"}],
                          initial_seconds=300)  # fmt: skip
    assert status == 201, game
    start = now_ms() + 2 * DAY_MS
    status, declared = vacation(base, "u-mo", {"days": 3, "from_ms": start})
    assert status == 201, declared
    span = declared["vacation"]
    log = moves(store, game["game_id"])
    for body in (
        {"days": 3},  # from now: ends after its start
        {"days": 1, "from_ms": start + DAY_MS},  # inside it
        {"days": 5, "from_ms": start - DAY_MS // 2},  # around its start
    ):
        status, refused = vacation(base, "u-mo", body)
        assert status == 409 and refused["code"] == "vacation_overlaps", refused
        assert refused["details"] == {"from_ms": span["from_ms"], "until_ms": span["until_ms"]}
    assert moves(store, game["game_id"]) == log  # nothing appended
    status, listed = call(base, "GET", "/v1/players/u-mo/vacations", None, api_key(base))
    assert listed["vacations"] == [span] and listed["used_days"] == 3
    # one that ends as the declared one starts fits
    status, before = vacation(base, "u-mo", {"days": 1, "from_ms": start - DAY_MS})
    assert status == 201, before


def test_two_declarations_at_once_never_overlap(suite):
    from concurrent.futures import ThreadPoolExecutor

    base = suite["base"]
    start = now_ms() + DAY_MS
    bodies = [{"days": 2, "from_ms": start + i * 3_600_000} for i in range(6)]
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda body: vacation(base, "u-duo", body), bodies))
    assert sorted(status for status, _ in answers) == [201] + [409] * 5, answers
    assert {refused["code"] for status, refused in answers if status == 409} == {
        "vacation_overlaps"
    }
    status, listed = call(base, "GET", "/v1/players/u-duo/vacations", None, api_key(base))
    assert status == 200 and len(listed["vacations"]) == 1


def test_a_later_vacation_called_off_before_its_start_gives_everything_back(suite):
    base, store, client = suite["base"], suite["store"], suite["client"]
    status, a = create(base, [{"name": "Uma", "player_id": "u-uma"}, {"name": "Ann"}],
                       initial_seconds=300)  # fmt: skip
    assert status == 201, a
    a_id = a["game_id"]
    before = moves(store, a_id)[-1].payload["deadline_ms"]
    start = now_ms() + 200_000
    status, declared = vacation(base, "u-uma", {"days": 4, "from_ms": start})
    assert status == 201 and declared["paused"][0]["deadline_ms"] == before + 4 * DAY_MS
    span = declared["vacation"]
    status, ended = end_vacation(base, "u-uma", span["vacation_id"])
    assert status == 200, ended
    called_off = ended["vacation"]
    assert called_off["days"] == 0 and called_off["until_ms"] == start  # an empty window
    assert now_ms() - 60_000 < called_off["ended_ms"] < start
    assert (ended["used_days"], ended["left_days"]) == (0, 10)  # every day back
    (resumed,) = ended["resumed"]
    assert resumed["deadline_ms"] == before  # the deadline as if it was never declared
    last = moves(store, a_id)[-1]
    assert last.type == "ClockResumed"
    vacation_id = span["vacation_id"]
    assert last.payload == {"player": 0, "at_ms": start, "deadline_ms": before,
                            "vacation": vacation_id}  # fmt: skip
    (item,) = [i for i in feed_items(moves(store, a_id), []) if i.kind == "player_back"]
    assert item.data["at_ms"] == start and item.data["deadline_ms"] == before
    status, turn = call(base, "GET", f"/games/{a_id}/turn")
    assert turn["deadline_ms"] == before and "away_until_ms" not in turn  # none left
    assert fold(to_engine(e) for e in moves(store, a_id)).deadline_ms == before  # replay
    wait_for(
        lambda: client.zscore(deadlines_key(index_shard(a_id)), a_id) == before,
        10,
        "the timer's index back at the first deadline",
    )
    # a retry answers alike and appends nothing; the window is free again
    status, again = end_vacation(base, "u-uma", span["vacation_id"])
    assert status == 200 and again["vacation"] == called_off and again["resumed"] == []
    assert moves(store, a_id)[-1].seq == last.seq
    # (one around the called-off start: its empty window overlaps nothing)
    status, redeclared = vacation(base, "u-uma", {"days": 4, "from_ms": start - 100_000})
    assert status == 201 and redeclared["used_days"] == 4, redeclared


def test_a_retried_later_declaration_pauses_the_games_it_missed_once(suite):
    """The record made, the games not reached (a 503 mid-way): the same request again is
    refused as overlapping, after pausing every game, with the vacation's own start."""
    from services.command.vacations import year_of
    from services.redis_store.vacations import VacationBook

    base, store, client = suite["base"], suite["store"], suite["client"]
    game, key = _banked_game_and_key(suite, "Ida", "u-ida")
    start = now_ms() + 3_600_000
    until = start + DAY_MS
    done = VacationBook(client).declare(
        key["id"], "u-ida", "v-lost", start, until, 1, year_of(start), 10, now_ms=now_ms()
    )
    assert done.outcome == "ok"
    for _ in range(2):
        status, again = vacation(base, "u-ida", {"days": 1, "from_ms": start})
        assert status == 409 and again["code"] == "vacation_overlaps", again
        paused = [e for e in moves(store, game["game_id"]) if e.type == "ClockPaused"]
        assert [(e.payload["from_ms"], e.payload["until_ms"]) for e in paused] == [(start, until)]


def test_the_allowance_counts_in_the_year_the_vacation_starts(suite):
    from datetime import UTC, datetime

    base = suite["base"]
    this_year = datetime.now(UTC).year
    january = int(datetime(this_year + 1, 1, 5, tzinfo=UTC).timestamp() * 1000)
    status, next_year = vacation(base, "u-nye", {"days": 10, "from_ms": january})
    assert status == 201, next_year
    assert (next_year["vacation"]["year"], next_year["year"]) == (this_year + 1,) * 2
    assert (next_year["used_days"], next_year["left_days"]) == (10, 0)
    status, refused = vacation(base, "u-nye", {"days": 1, "from_ms": january + 20 * DAY_MS})
    assert status == 409 and refused["code"] == "vacation_allowance_exceeded", refused
    assert refused["details"]["year"] == this_year + 1
    status, listed = call(base, "GET", "/v1/players/u-nye/vacations", None, api_key(base))
    assert listed["year"] == this_year and listed["used_days"] == 0  # this year's untouched


@pytest.mark.parametrize(
    ("start", "code"),
    [
        (-60_000, "bad_vacation_start"),  # a minute ago
        (367 * DAY_MS, "bad_vacation_start"),  # more than a year ahead
        ("tomorrow", "invalid_body"),
        (1.5, "invalid_body"),
    ],
)
def test_a_bad_start_is_a_422_that_changes_nothing(suite, start, code):
    base, store = suite["base"], suite["store"]
    status, game = create(base, [{"name": "Zed", "player_id": "u-zed"}, {"name": "Ann"}],
                          initial_seconds=300)  # fmt: skip
    assert status == 201, game
    log = moves(store, game["game_id"])
    from_ms = now_ms() + start if isinstance(start, int) else start
    status, refused = vacation(base, "u-zed", {"days": 2, "from_ms": from_ms})
    assert status == 422 and refused["code"] == code, refused
    if code == "bad_vacation_start":  # the service's clock, to set a start against
        assert abs(refused["details"]["now_ms"] - now_ms()) < 60_000
    status, listed = call(base, "GET", "/v1/players/u-zed/vacations", None, api_key(base))
    assert listed["vacations"] == [] and listed["used_days"] == 0
    assert moves(store, game["game_id"]) == log


def test_a_vacation_called_off_while_its_declaration_pauses_the_games_is_resumed_there(suite):
    """The platform calls a vacation off (an edit) while its declaration is still pausing
    the games: the call-off is recorded, but its request reaches no game (it listed the
    games before this one had the pause, or failed mid-way). The declaration reads the book
    again at its end and resumes the vacation in each game: no pause stays."""
    from services.command.secrets_store import RedisSecrets
    from services.command.service import GameService
    from services.command.vacations import Vacations
    from services.redis_store.vacations import VacationBook

    store, client = suite["store"], suite["client"]
    game, key = _banked_game_and_key(suite, "Eve", "u-eve")
    game_id = game["game_id"]
    before = moves(store, game_id)[-1].payload["deadline_ms"]
    service = GameService(store, RedisSecrets(client))
    vacations = Vacations(client, service, 10)
    pause = service.pause_clocks

    def called_off_first(game: str, key_id: str, player: str, now: int, *rest: Any) -> Any:
        vacation_id = rest[-1]  # the call-off's record, made before this game's pause
        assert VacationBook(client).end(key_id, player, vacation_id, now).outcome == "ok"
        return pause(game, key_id, player, now, *rest)

    service.pause_clocks = called_off_first
    start = now_ms() + 3_600_000
    declared = vacations.declare(key, "u-eve", 2, start)
    vacation_id = declared["vacation"]["vacation_id"]
    log = moves(store, game_id)
    assert [e.type for e in log[-2:]] == ["ClockPaused", "ClockResumed"]
    assert {e.payload["vacation"] for e in log[-2:]} == {vacation_id}
    assert log[-1].command_id == f"vacation-end:{vacation_id}:0"
    state = fold(to_engine(e) for e in log)
    assert state.pauses_ms[0] == [] and state.deadline_ms == before  # as never declared
    status, turn = call(suite["base"], "GET", f"/games/{game_id}/turn")
    assert status == 200 and turn["deadline_ms"] == before and "away_until_ms" not in turn


def test_calling_off_next_years_vacation_answers_that_years_books(suite):
    """Its days go back to the year it starts in: the answer's books are that year's."""
    from datetime import UTC, datetime

    base = suite["base"]
    this_year = datetime.now(UTC).year
    january = int(datetime(this_year + 1, 1, 5, tzinfo=UTC).timestamp() * 1000)
    status, now = vacation(base, "u-jan", {"days": 3})  # this year's books differ
    assert status == 201, now
    status, later = vacation(base, "u-jan", {"days": 4, "from_ms": january})
    assert status == 201 and (later["year"], later["left_days"]) == (this_year + 1, 6), later
    status, ended = end_vacation(base, "u-jan", later["vacation"]["vacation_id"])
    assert status == 200, ended
    assert (ended["year"], ended["used_days"], ended["left_days"]) == (this_year + 1, 0, 10)


def test_the_book_prunes_call_offs_once_retries_are_done_and_vacations_a_year_over(suite):
    """A declaration recorded writes the player's list without the vacations called off a
    day ago or more and those over for more than a year (the book's time is data)."""
    from services.redis_store.vacations import KEEP_CALLED_OFF_MS, PRUNED_AFTER_MS, VacationBook

    book, key_id, now = VacationBook(suite["client"]), "k-prune", now_ms()

    def declare(vacation_id: str, start: int, at: int) -> str:
        done = book.declare(key_id, "u-pru", vacation_id, start, start + DAY_MS, 1, 1, 99,
                            now_ms=at)  # fmt: skip
        return done.outcome

    assert declare("a", now + DAY_MS, now) == "ok"
    assert book.end(key_id, "u-pru", "a", now).outcome == "ok"  # called off: 0 days
    assert declare("b", now, now) == "ok"
    ids = [v["vacation_id"] for v in book.listed(key_id, "u-pru")]
    assert ids == ["a", "b"]  # a retry of a's end still finds it
    later = now + KEEP_CALLED_OFF_MS
    assert declare("c", later + 2 * DAY_MS, later) == "ok"
    assert [v["vacation_id"] for v in book.listed(key_id, "u-pru")] == ["b", "c"]
    years_on = now + DAY_MS + PRUNED_AFTER_MS + 1  # b ended more than a year before
    assert declare("d", years_on, years_on) == "ok"
    assert [v["vacation_id"] for v in book.listed(key_id, "u-pru")] == ["c", "d"]


def test_a_player_has_at_most_so_many_vacations_running_or_to_come(suite):
    """Beyond `MAX_PENDING` not over: 409 too_many_vacations, recording nothing; a call-off
    makes room (it is not one to come any more)."""
    from services.command.vacations import year_of
    from services.redis_store.vacations import MAX_PENDING, VacationBook

    base, client = suite["base"], suite["client"]
    _, key = _banked_game_and_key(suite, "Max", "u-max")
    book, now = VacationBook(client), now_ms()
    starts = [now + DAY_MS * (1 + 2 * i) // 10 for i in range(MAX_PENDING)]  # 1/10 day apart
    for i, start in enumerate(starts):
        done = book.declare(key["id"], "u-max", f"{i:032x}", start, start + DAY_MS // 10, 1,
                            year_of(start), 10 * MAX_PENDING, now_ms=now)  # fmt: skip
        assert done.outcome == "ok", (i, done)
    listed = book.listed(key["id"], "u-max")
    later = starts[-1] + DAY_MS
    status, refused = vacation(base, "u-max", {"days": 1, "from_ms": later})
    assert status == 409 and refused["code"] == "too_many_vacations", refused
    assert refused["details"]["max_vacations"] == MAX_PENDING
    assert book.listed(key["id"], "u-max") == listed
    status, ended = end_vacation(base, "u-max", f"{0:032x}")
    assert status == 200, ended
    status, declared = vacation(base, "u-max", {"days": 1, "from_ms": later})
    # room again: now only the allowance (10 days, 50 used) may refuse it
    assert status == 201 or declared["code"] == "vacation_allowance_exceeded", declared


def test_a_retry_refused_as_overlapping_mends_only_the_vacation_it_overlaps(suite):
    """Two vacations recorded and no game paused: a retry of the first pauses the first
    alone (the second's own retry mends the second)."""
    from services.command.vacations import year_of
    from services.redis_store.vacations import VacationBook

    base, store, client = suite["base"], suite["store"], suite["client"]
    game, key = _banked_game_and_key(suite, "Mel", "u-mel")
    book, now = VacationBook(client), now_ms()
    first, second = now + 3_600_000, now + 4 * DAY_MS
    for vacation_id, start in (("v-first", first), ("v-second", second)):
        done = book.declare(key["id"], "u-mel", vacation_id, start, start + DAY_MS, 1,
                            year_of(start), 10, now_ms=now)  # fmt: skip
        assert done.outcome == "ok"
    status, again = vacation(base, "u-mel", {"days": 1, "from_ms": first})
    assert status == 409 and again["code"] == "vacation_overlaps", again
    paused = [e.payload for e in moves(store, game["game_id"]) if e.type == "ClockPaused"]
    assert [(p["vacation"], p["from_ms"]) for p in paused] == [("v-first", first)]


def test_a_game_started_while_a_vacation_is_called_off_does_not_keep_its_pause(suite):
    """A game starts as its player's vacation is called off: the start read the book before
    the call-off (the pause is in the start's append), the call-off's request listed the
    player's games before this one. The start reads the book again once appended, and
    resumes the vacation there under the call-off's own command id."""
    from carcassonne.ruleset import Ruleset
    from services.command.secrets_store import RedisSecrets
    from services.command.service import GameService
    from services.command.vacations import year_of
    from services.redis_store.vacations import VacationBook

    store, client = suite["store"], suite["client"]
    book, key_id, now = VacationBook(client), "k-start", now_ms()
    start = now + 3_600_000
    done = book.declare(key_id, "u-gil", "v-off", start, start + DAY_MS, 1, year_of(start), 10,
                        now_ms=now)  # fmt: skip
    assert done.outcome == "ok"

    def away_then_called_off(key: str, ids: list[str], at: int) -> Any:
        found = book.away_until(key, ids, at)
        assert book.end(key_id, "u-gil", "v-off", at).outcome == "ok"  # the call-off's record
        return found

    service = GameService(store, RedisSecrets(client), away=away_then_called_off, ends=book.ends)
    game_id, _ = service.create_game(["Gil", "Ann"], Ruleset(initial_seconds=300), [0, 1],
                                     ["u-gil", None], key_id)  # fmt: skip
    log = moves(store, game_id)
    assert [e.type for e in log[:3]] == ["GameStarted", "ClockPaused", "TileDrawn"]
    (resumed,) = [e for e in log if e.type == "ClockResumed"]
    assert resumed.command_id == "vacation-end:v-off:0" and resumed.payload["at_ms"] == start
    assert fold(to_engine(e) for e in log).pauses_ms == [[], []]
