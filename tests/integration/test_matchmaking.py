"""Matchmaking tickets (`/tickets`, docs/lobby.md) against a real Redis: the oldest tickets
of a queue are matched first into a game whose seats play with the tokens the tickets
answered; a second ticket of a waiting player, an unknown ruleset, another key's ticket and a
matched ticket's cancel are 4xx that change nothing; a match cut short is finished by a poll;
and over real HTTP (two gunicorn instances) hundreds of tickets of mixed sizes taken at once
put no player in two games and no game short of a seat."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from eventstore.envelope import MOVES
from services.archive.archiver import Archiver
from services.archive.sqlite import SqliteArchive
from services.command.apikeys import ApiKeys
from services.command.app import create_app
from services.command.matchmaking import Matchmaker
from services.command.secrets_store import token_hash
from services.redis_store import RedisEventStore, secrets_key
from services.redis_store.keys import index_shard, mm_pending_key, queue_key, waiting_key
from services.scoring.scorer import Scorer

from .http_client import call


@pytest.fixture(scope="module")
def app(redis_url: str) -> Flask:
    return create_app({"REDIS_URL": redis_url, "NOTIFY_MS": 0,
                       "API_KEY_RATE": 10_000.0, "API_KEY_BURST": 10_000})  # fmt: skip


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def new_key(redis_url: str) -> tuple[str, dict[str, str]]:
    key_id, secret = ApiKeys(redis.Redis.from_url(redis_url)).create("tickets")
    return key_id, {"X-Api-Key": secret}


def take(client: FlaskClient, headers: dict[str, str], player: str, players: int = 2,
         ruleset: str = "classic", **extra: Any) -> tuple[int, Any]:  # fmt: skip
    body = {"player_id": player, "ruleset": ruleset, "players": players, **extra}
    reply = client.post("/tickets", json=body, headers=headers)
    return reply.status_code, reply.get_json()


def record_of(redis_client: redis.Redis, game_id: str) -> dict[str, Any]:
    return dict(json.loads(redis_client.get(secrets_key(game_id)) or "{}"))


def test_the_oldest_tickets_are_matched_first_and_play_with_their_tokens(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    key_id, headers = new_key(redis_url)
    taken = {}
    for player in ("u-1", "u-2", "u-3", "u-4"):
        status, ticket = take(client, headers, player, players=3)
        assert status == 201, ticket
        taken[player] = ticket
    assert taken["u-1"]["state"] == "waiting" and taken["u-3"]["state"] == "matched"
    game_id = taken["u-3"]["game_id"]
    record = record_of(redis_client, game_id)
    assert sorted(record["player_ids"]) == ["u-1", "u-2", "u-3"] and record["key_id"] == key_id
    for player in ("u-1", "u-2", "u-3"):
        polled = client.get(f"/tickets/{taken[player]['ticket_id']}", headers=headers).get_json()
        assert polled["state"] == "matched" and polled["game_id"] == game_id
        assert record["player_ids"][polled["seat"]] == player
        assert record["tokens"][token_hash(taken[player]["token"])] == polled["seat"]
    assert [t["player_id"] for t in client.get("/tickets", headers=headers).get_json()[
        "tickets"]] == ["u-4"]  # fmt: skip
    turn = client.get(f"/games/{game_id}/turn").get_json()
    mover = record["player_ids"][turn["player"]]
    place = {k: turn["placements"][0][k] for k in ("x", "y", "rotation")} | {"meeple": None}
    played = client.post(f"/games/{game_id}/turns", json=place,
                         headers={"Authorization": f"Bearer {taken[mover]['token']}"})  # fmt: skip
    assert played.status_code == 200, played.get_json()


def test_bad_tickets_get_a_stable_code_and_change_nothing(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    key_id, headers = new_key(redis_url)
    _, other = new_key(redis_url)
    status, first = take(client, headers, "u-1")
    waiting_before = redis_client.hgetall(waiting_key(key_id))
    refusals: list[tuple[dict[str, Any], int, str]] = [
        ({"player_id": "u-1", "ruleset": "classic", "players": 2}, 409, "already_waiting"),
        ({"player_id": "u-1", "ruleset": "demo", "players": 4}, 409, "already_waiting"),
        ({"player_id": "u-2", "ruleset": "go", "players": 2}, 422, "unknown_ruleset"),
        ({"player_id": "u-2", "ruleset": "classic", "players": 6}, 422, "invalid_body"),
        ({"player_id": "u-2", "ruleset": "classic", "players": 1}, 422, "invalid_body"),
        ({"player_id": "u-2", "ruleset": "classic", "players": "2"}, 422, "invalid_body"),
        ({"player_id": "u-2", "ruleset": "classic"}, 422, "invalid_body"),
        ({"player_id": "", "ruleset": "classic", "players": 2}, 422, "invalid_body"),
        ({"player_id": "u-2", "ruleset": "classic", "players": 2, "game_id": "x"}, 422,
         "invalid_body"),
    ]  # fmt: skip
    for body, status, code in refusals:
        reply = client.post("/tickets", json=body, headers=headers)
        assert (reply.status_code, reply.get_json()["code"]) == (status, code), body
    assert redis_client.hgetall(waiting_key(key_id)) == waiting_before
    assert redis_client.zcard(queue_key(key_id, "classic", 2)) == 1
    ticket = first["ticket_id"]
    for method in ("get", "delete"):
        reply = getattr(client, method)(f"/tickets/{ticket}", headers=other)
        assert (reply.status_code, reply.get_json()["code"]) == (404, "ticket_not_found")
    assert client.get("/tickets", headers=other).get_json() == {"tickets": []}
    reply = client.post("/tickets", json={"player_id": "u-2", "ruleset": "classic",
                                          "players": 2}, headers={})  # fmt: skip
    assert (reply.status_code, reply.get_json()["code"]) == (401, "missing_api_key")
    assert client.get(f"/tickets/{ticket}", headers=headers).get_json()["state"] == "waiting"


def test_a_cancelled_ticket_is_never_matched_and_a_matched_one_stays(
    client: FlaskClient, redis_url: str
) -> None:
    _, headers = new_key(redis_url)
    _, gone = take(client, headers, "u-1")
    cancelled = client.delete(f"/tickets/{gone['ticket_id']}", headers=headers).get_json()
    assert cancelled["state"] == "cancelled"
    again = client.delete(f"/tickets/{gone['ticket_id']}", headers=headers)
    assert again.status_code == 200 and again.get_json()["state"] == "cancelled"
    _, a = take(client, headers, "u-2")
    _, b = take(client, headers, "u-3")
    assert b["state"] == "matched"
    polled = client.get(f"/tickets/{gone['ticket_id']}", headers=headers).get_json()
    assert polled["state"] == "cancelled" and polled["game_id"] is None
    refused = client.delete(f"/tickets/{a['ticket_id']}", headers=headers)
    assert (refused.status_code, refused.get_json()["code"]) == (409, "ticket_matched")
    # Matched, the player may wait again; cancelled, too.
    assert take(client, headers, "u-2")[0] == 201 and take(client, headers, "u-1")[0] == 201


def test_names_that_clash_are_not_seated_together(client: FlaskClient, redis_url: str) -> None:
    _, headers = new_key(redis_url)
    _, first = take(client, headers, "u-1", name="Ann")
    _, clash = take(client, headers, "u-2", name=" ann")
    assert clash["state"] == "waiting"
    _, third = take(client, headers, "u-3", name="Bob")
    assert third["state"] == "matched"
    polled = client.get(f"/tickets/{first['ticket_id']}", headers=headers).get_json()
    assert polled["game_id"] == third["game_id"]  # the oldest with another name
    assert client.get(f"/tickets/{clash['ticket_id']}", headers=headers).get_json()[
        "state"] == "waiting"  # fmt: skip


def test_many_old_tickets_of_one_name_do_not_stall_their_queue(
    client: FlaskClient, redis_url: str
) -> None:
    """A match looks at a bounded number of the oldest tickets (SCAN). When more than that
    many of the oldest share a name (an app's default "Player"), none of them can sit with
    another, and a ticket of another name behind them must still be matched: with one of
    them, at once."""
    from services.command.matchmaking import SCAN

    _, headers = new_key(redis_url)
    players = [take(client, headers, f"p-{i}", name="Player")[1] for i in range(SCAN + 1)]
    assert {t["state"] for t in players} == {"waiting"}
    _, ann = take(client, headers, "u-ann", name="Ann")
    assert ann["state"] == "matched", ann
    oldest = client.get(f"/tickets/{players[0]['ticket_id']}", headers=headers).get_json()
    assert oldest["game_id"] == ann["game_id"]  # the oldest ticket that can sit with Ann
    assert len(client.get("/tickets?limit=1000", headers=headers).get_json()["tickets"]) == SCAN


def test_a_request_makes_a_bounded_number_of_games_and_a_drain_the_rest(
    app: Flask, client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    """A backlog of matchable tickets (taken while inline matching was off or cut short, or
    windows that widened together) is not all made into games by the one request that
    happens to poll: each request makes at most INLINE_GAMES of them (its own answer stays
    quick); a drain makes the rest."""
    from services.command.matchmaking import INLINE_GAMES

    key_id, headers = new_key(redis_url)
    service = app.extensions["game_service"]
    offline = Matchmaker(redis_client, service, inline=False)
    tickets = [offline.take(key_id, f"b-{i}", None, "classic", 2) for i in range(60)]
    assert {t["state"] for t in tickets} == {"waiting"}
    polled = client.get(f"/tickets/{tickets[0]['ticket_id']}", headers=headers).get_json()
    assert polled["state"] == "matched"  # the oldest first: the poller's own game is made
    left = len(client.get("/tickets?limit=1000", headers=headers).get_json()["tickets"])
    assert left == 60 - 2 * INLINE_GAMES, left
    assert offline.drain() == left // 2
    assert client.get("/tickets", headers=headers).get_json()["tickets"] == []


def test_an_abandoned_ticket_expires_and_is_never_matched(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A ticket waits `expires_seconds` at most (default a week): a player who left the app
    is not matched, days later, into a game the others play against an empty seat. Expired,
    it is polled as `expired`, leaves the list and the queue, frees its player for a new
    ticket, and a cancel leaves it as it is."""
    from services.command import matchmaking

    key_id, headers = new_key(redis_url)
    status, gone = take(client, headers, "u-gone", expires_seconds=60)
    assert status == 201 and gone["expires_ms"] == gone["created_ms"] + 60_000, gone
    _, default = take(client, headers, "u-week", players=3)
    assert default["expires_ms"] == default["created_ms"] + 7 * 86_400_000
    for bad in (59, 30 * 86_400 + 1, "60", 60.5):
        status, refused = take(client, headers, "u-bad", expires_seconds=bad)
        assert status == 422 and refused["code"] == "invalid_body", bad
    later = gone["expires_ms"]
    monkeypatch.setattr(matchmaking, "now_ms", lambda: later)
    _, fresh = take(client, headers, "u-new")
    assert fresh["state"] == "waiting", fresh  # not matched with the expired ticket
    polled = client.get(f"/tickets/{gone['ticket_id']}", headers=headers).get_json()
    assert polled["state"] == "expired" and polled["game_id"] is None, polled
    listed = client.get("/tickets", headers=headers).get_json()["tickets"]
    assert {t["player_id"] for t in listed} == {"u-week", "u-new"}
    assert redis_client.zcard(queue_key(key_id, "classic", 2)) == 1
    cancel = client.delete(f"/tickets/{gone['ticket_id']}", headers=headers)
    assert cancel.status_code == 200 and cancel.get_json()["state"] == "expired"
    status, again = take(client, headers, "u-gone")  # its player may wait again
    assert status == 201 and again["state"] == "matched", again


def test_a_ticket_expired_unseen_frees_its_player(
    client: FlaskClient, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody polled the expired ticket and no match looked at it: its player's next ticket
    is taken all the same (not 409 already_waiting)."""
    from services.command import matchmaking

    _, headers = new_key(redis_url)
    _, gone = take(client, headers, "u-1", players=4, expires_seconds=60)
    monkeypatch.setattr(matchmaking, "now_ms", lambda: gone["expires_ms"] + 1)
    status, again = take(client, headers, "u-1", players=2)
    assert status == 201 and again["state"] == "waiting", again
    polled = client.get(f"/tickets/{gone['ticket_id']}", headers=headers).get_json()
    assert polled["state"] == "expired"


def test_listing_waiting_tickets_reads_a_bounded_number(
    app: Flask, client: FlaskClient, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`GET /tickets?limit=n` reads about n tickets, not every waiting ticket of the key (a
    key with ten thousand waiting paid for all of them on every list), and still answers the
    oldest first across queues."""
    _, headers = new_key(redis_url)
    for i in range(30):  # one name: none can sit together, all wait
        assert take(client, headers, f"p-{i}", players=2 + i % 3, name="Player")[0] == 201
    matcher: Matchmaker = app.extensions["matchmaker"]
    read: list[int] = []
    real = matcher.client.mget

    def counted(keys: Any, *more: Any) -> Any:
        read.append(len(keys))
        return real(keys, *more)

    monkeypatch.setattr(matcher.client, "mget", counted)
    listed = client.get("/tickets?limit=5", headers=headers).get_json()["tickets"]
    assert [t["player_id"] for t in listed] == [f"p-{i}" for i in range(5)]
    assert sum(read) <= 2 * 5, read
    everyone = client.get("/tickets?limit=1000", headers=headers).get_json()["tickets"]
    assert [t["player_id"] for t in everyone] == [f"p-{i}" for i in range(30)]


def test_a_ticket_finishes_a_bounded_number_of_pending_matches(
    app: Flask, client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    """Matches cut short while the store was away are finished by the key's next tickets,
    INLINE_GAMES a request (each makes a game), not all by the first; a drain finishes the
    rest."""
    from services.command.matchmaking import INLINE_GAMES

    key_id, headers = new_key(redis_url)
    service = app.extensions["game_service"]
    offline = Matchmaker(redis_client, service, inline=False)

    def down(*_: Any) -> Any:
        raise redis.ConnectionError("the store went away")

    for i in range(12):
        offline.take(key_id, f"c-{i}", None, "classic", 2)
    offline.service = type("Down", (), {"start_prepared": staticmethod(down)})()
    for _ in range(6):
        with pytest.raises(redis.ConnectionError):
            offline.match_queue(key_id, "classic", 2)
    assert redis_client.scard(mm_pending_key(key_id)) == 6
    assert take(client, headers, "u-next", ruleset="demo")[0] == 201
    assert redis_client.scard(mm_pending_key(key_id)) == 6 - INLINE_GAMES
    offline.service = service
    offline.drain()
    assert redis_client.scard(mm_pending_key(key_id)) == 0


def test_a_match_cut_short_is_finished_by_the_next_poll(
    app: Flask, client: FlaskClient, redis_url: str, redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    key_id, headers = new_key(redis_url)
    _, first = take(client, headers, "u-1")
    service = app.extensions["game_service"]

    def down(*_: Any) -> Any:
        raise redis.ConnectionError("the store went away")

    monkeypatch.setattr(service, "start_prepared", down)
    reply = client.post("/tickets", json={"player_id": "u-2", "ruleset": "classic",
                                          "players": 2}, headers=headers)  # fmt: skip
    # The ticket is taken and matched, its token answered; its game is not made yet.
    assert reply.status_code == 201 and reply.get_json()["token"]
    assert reply.get_json()["state"] == "matched" and reply.get_json()["seat"] is None
    assert len(redis_client.smembers(mm_pending_key(key_id))) == 1
    monkeypatch.undo()
    polled = client.get(f"/tickets/{first['ticket_id']}", headers=headers).get_json()
    assert polled["state"] == "matched" and polled["seat"] in (0, 1)
    assert record_of(redis_client, polled["game_id"])["player_ids"]
    assert not redis_client.smembers(mm_pending_key(key_id))
    assert Matchmaker(redis_client, service).drain() == 0  # nothing left to match or make
    # Cut short again, nobody polls: the key's next ticket makes the pending game.
    monkeypatch.setattr(service, "start_prepared", down)
    take(client, headers, "u-3")
    _, cut = take(client, headers, "u-4")
    assert cut["state"] == "matched" and redis_client.smembers(mm_pending_key(key_id))
    monkeypatch.undo()
    take(client, headers, "u-5", players=3)
    assert not redis_client.smembers(mm_pending_key(key_id))
    assert record_of(redis_client, cut["game_id"])["player_ids"]


def test_tickets_taken_at_once_put_no_player_in_two_games(
    two_commands: list[str], redis_url: str, redis_client: redis.Redis
) -> None:
    key_id, headers = new_key(redis_url)
    rng = random.Random(29)
    wanted = [(f"p{i}", rng.randint(2, 5)) for i in range(300)]

    def take_one(i: int) -> tuple[int, Any]:
        player, size = wanted[i]
        body = {"player_id": player, "ruleset": "classic", "players": size}
        return call(two_commands[i % 2], "POST", "/tickets", body, headers)

    with ThreadPoolExecutor(max_workers=24) as pool:
        answers = list(pool.map(take_one, range(len(wanted))))
    assert [status for status, _ in answers] == [201] * len(wanted), answers[:3]
    # A second ticket of every player, whether waiting or matched by now: at most the
    # waiting ones are refused, none makes a second seat.
    tickets = {answer["player_id"]: answer for _, answer in answers}
    polled = {p: call(two_commands[0], "GET", f"/tickets/{t['ticket_id']}", None, headers)[1]
              for p, t in tickets.items()}  # fmt: skip
    games: dict[str, list[str]] = {}
    for player, ticket in polled.items():
        if ticket["state"] == "matched":
            games.setdefault(ticket["game_id"], []).append(player)
    seats = Counter(p for players in games.values() for p in players)
    assert seats and max(seats.values()) == 1  # no player in two games
    for game_id, players in games.items():
        record = record_of(redis_client, game_id)
        assert sorted(record["player_ids"]) == sorted(players)  # every seat, each once
        assert {dict(wanted)[p] for p in players} == {len(players)}  # the size they asked
    waiting = Counter(dict(wanted)[p] for p, t in polled.items() if t["state"] == "waiting")
    assert all(count < size for size, count in waiting.items()), waiting  # none matchable
    assert redis_client.hlen(waiting_key(key_id)) == sum(waiting.values())


def rate(redis_client: redis.Redis, key_id: str, player: str, ordinal: float) -> None:
    """Give a player of the key a classic-pool rating with this ordinal (mu - 3 sigma)."""
    from services.redis_store.ratings import Rating, Ratings, Update

    rating = Rating(ordinal + 3 * 2.0, 2.0, 10)
    done = Ratings(redis_client).apply(
        key_id, f"seeded-{player}", "classic", 0, [Update(player, None, rating, 1, 0)]
    )
    assert done == "ok"


def test_a_rating_window_matches_near_players_and_widens_while_waiting(
    app: Flask, client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    """docs/lobby.md, "A rating window": a strong player asking for opponents within 5 of
    its ordinal passes over a weak one who waits (any opponent would do for the weak one:
    both windows must hold), is matched with the next near player, and a far pair meets once
    the windows have widened enough with waiting."""
    key_id, headers = new_key(redis_url)
    for player, ordinal in (("strong", 30.0), ("weak", 0.0), ("near", 27.0), ("far", 60.0)):
        rate(redis_client, key_id, player, ordinal)
    status, strong = take(client, headers, "strong", rating_window=5)
    assert status == 201 and strong["rating"] == pytest.approx(30.0), strong
    assert strong["rating_window"] == 5
    status, weak = take(client, headers, "weak")  # no window: anyone, but not for `strong`
    assert weak["state"] == "waiting" and weak["rating_window"] is None
    status, near = take(client, headers, "near", rating_window=5)
    assert near["state"] == "matched", near
    polled = client.get(f"/tickets/{strong['ticket_id']}", headers=headers).get_json()
    assert polled["state"] == "matched" and polled["game_id"] == near["game_id"]
    assert client.get(f"/tickets/{weak['ticket_id']}", headers=headers).get_json()[
        "state"] == "waiting"  # fmt: skip
    # 60 apart: `far` (window 1) and `weak` (none) meet when far's window has grown by 59.
    status, far = take(client, headers, "far", rating_window=1)
    assert far["state"] == "waiting", far
    matcher: Matchmaker = app.extensions["matchmaker"]
    before = matcher.window_growth
    try:
        matcher.window_growth = 59 * 60_000 / 100  # 59 more in 100 ms of waiting
        deadline = time.monotonic() + 10
        while (polled := client.get(f"/tickets/{far['ticket_id']}", headers=headers)
               .get_json())["state"] == "waiting":  # fmt: skip
            assert time.monotonic() < deadline, "the window never widened"
        assert polled["state"] == "matched"
        weak_now = client.get(f"/tickets/{weak['ticket_id']}", headers=headers).get_json()
        assert weak_now["game_id"] == polled["game_id"]
    finally:
        matcher.window_growth = before


def test_a_rating_window_out_of_range_is_refused_and_takes_no_ticket(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    key_id, headers = new_key(redis_url)
    for bad in (-1, 1001, "wide", True):
        status, refused = take(client, headers, "picky", rating_window=bad)
        assert status == 422 and refused["code"] == "invalid_body", (bad, refused)
    assert redis_client.hlen(waiting_key(key_id)) == 0


def test_polling_a_matched_ticket_after_its_game_was_archived_makes_no_second_game(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A matched ticket is kept a week for its polls, and each poll makes the match's game if
    it has no secrets record (a match cut short). A game played and archived an hour after
    its end (ARCHIVE_AFTER) has none either: a poll then must answer the ticket as matched,
    not start the game again under its id (the same tokens, a fresh log, a second
    `game_started`)."""
    _, headers = new_key(redis_url)
    first = take(client, headers, "u-1")[1]
    matched = take(client, headers, "u-2")[1]
    game_id = matched["game_id"]
    assert matched["state"] == "matched"
    resigned = client.post(f"/games/{game_id}/resign",
                           headers={"Authorization": f"Bearer {first['token']}"})  # fmt: skip
    assert resigned.status_code == 200 and resigned.get_json()["next"]["over"]
    store = RedisEventStore(redis_client)
    Scorer(store).catch_up(game_id)
    archiver = Archiver(redis_client, SqliteArchive(tmp_path / "a.sqlite3"), after_ms=0)
    assert archiver.archive_game(index_shard(game_id), game_id) == "archived"

    for ticket in (first, matched):
        polled = client.get(f"/tickets/{ticket['ticket_id']}", headers=headers)
        assert polled.status_code == 200, polled.get_json()
        assert (polled.get_json()["state"], polled.get_json()["game_id"]) == ("matched", game_id)
    assert not redis_client.exists(secrets_key(game_id))
    assert store.last_seq(game_id, MOVES) == 0


def test_a_player_id_with_a_trailing_newline_is_refused_everywhere(
    client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    """A player_id is 1-128 visible ASCII characters (docs): Python's `$` also matches before
    a final newline, so "u-1\\n" passed as a second, invisible twin of "u-1" (a second
    waiting ticket of one user, a vacation booked for nobody's games)."""
    key_id, headers = new_key(redis_url)
    for player in ("u-nl\n", "u-nl\r\n"):
        status, body = take(client, headers, player)
        assert (status, body["code"]) == (422, "invalid_body"), body
    assert redis_client.hgetall(waiting_key(key_id)) == {}
    game = {"players": [{"name": "Ann", "player_id": "u-nl\n"}, {"name": "Bob"}]}
    reply = client.post("/games", json=game, headers=headers)
    assert (reply.status_code, reply.get_json()["code"]) == (422, "invalid_body")
    reply = client.post("/v1/players/u-nl%0A/vacations", json={"days": 1}, headers=headers)
    assert (reply.status_code, reply.get_json()["code"]) == (422, "bad_player_id")


def test_a_pending_match_that_cannot_be_made_holds_up_no_ticket_and_no_drain(
    app: Flask, client: FlaskClient, redis_url: str, redis_client: redis.Redis
) -> None:
    """A match cut short whose game can no longer be made (its ruleset was withdrawn from
    the service before anything finished it) failed every later step that finishes pending
    matches: the key's every POST /tickets was a 422 unknown_ruleset after its ticket was
    taken (its token, answered only there, lost), and `drain` stopped at that key, leaving
    every key after it unmatched, on every run. It is left pending (logged) and passed over."""
    from services.redis_store.keys import match_key, new_game_id

    key_id, headers = new_key(redis_url)
    stuck = new_game_id()
    ticket = {
        "id": "t_withdrawn",
        "player_id": "u-old",
        "name": "old",
        "fold": "old",
        "ruleset": "withdrawn",
        "players": 2,
        "token_hash": "x",
        "state": "matched",
    }
    redis_client.set(
        match_key(key_id, stuck),
        json.dumps({"game_id": stuck, "seed": "00", "tickets": [ticket, {**ticket, "id": "t_2"}]}),
    )
    redis_client.sadd(mm_pending_key(key_id), stuck)
    status, taken = take(client, headers, "u-new")
    assert status == 201 and taken["token"] and taken["state"] == "waiting", taken
    later = "~later-" + key_id  # sorts after every key: the drain reaches it last
    offline = Matchmaker(redis_client, app.extensions["game_service"], inline=False)
    for player in ("u-1", "u-2"):
        offline.take(later, player, None, "classic", 2)
    assert offline.drain() >= 1
    assert redis_client.zcard(queue_key(later, "classic", 2)) == 0
    assert redis_client.smembers(mm_pending_key(key_id)) == {stuck.encode()}
