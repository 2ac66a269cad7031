"""Vacations racing their own end, the game's moves and the caller (docs/clocks.md,
"Vacations"), on real parts in process: a private Redis, the command service's app (Flask's
test client) and its `GameService` and `Vacations`. Each test here stood for a finding of a
review of the vacation code: it failed before its fix.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from carcassonne.game import actions, fold
from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.command.app import create_app
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.command.vacations import Vacations
from services.redis_store import RedisEventStore
from services.redis_store.apikeys import ApiKeys
from services.redis_store.vacations import VacationBook
from services.scoring.feed import feed_items

from .http_client import api_key

DAY_MS = 86_400_000
SETTINGS = {"NOTIFY_MS": 0, "API_KEY_RATE": 10_000.0, "API_KEY_BURST": 10_000,
            "VACATION_DAYS_PER_YEAR": 10}  # fmt: skip


@pytest.fixture(scope="module")
def app(redis_url: str) -> Flask:
    return create_app({"REDIS_URL": redis_url, **SETTINGS})


@pytest.fixture
def http(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def key(redis_url: str) -> dict[str, str]:
    return api_key(redis_url)


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


def now_ms() -> int:
    return int(time.time() * 1000)


def key_record(client: redis.Redis, key: dict[str, str]) -> dict[str, Any]:
    found = ApiKeys(client).get(key["X-Api-Key"])
    assert found is not None
    return found


def banked_game(service: GameService, key_id: str, player_id: str) -> str:
    """A 2-player game with a 300 s bank, `player_id` in seat 0 (to move)."""
    game_id, _ = service.create_game(["P", "Ann"], Ruleset(initial_seconds=300), [0, 1],
                                     [player_id, None], key_id)  # fmt: skip
    return game_id


def log_of(client: redis.Redis, game_id: str) -> list[Any]:
    return RedisEventStore(client).read(game_id, MOVES)


def test_a_declaration_called_off_meanwhile_answers_the_vacation_as_the_book_has_it(
    client: redis.Redis, key: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The platform calls the vacation off while its declaration is still pausing the games:
    the declaration resumes it there (its second look at the book), and its answer says so:
    `ended_ms` set, no day used, an empty window, and the year's books with the days back."""
    record = key_record(client, key)
    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    vacations = Vacations(client, service, 10)
    banked_game(service, record["id"], "u-race-off")
    pause = service.pause_clocks

    def called_off_first(game: str, key_id: str, player: str, now: int, *rest: Any) -> Any:
        assert VacationBook(client).end(key_id, player, rest[-1], now).outcome == "ok"
        return pause(game, key_id, player, now, *rest)

    monkeypatch.setattr(service, "pause_clocks", called_off_first)
    start = now_ms() + 3_600_000
    declared = vacations.declare(record, "u-race-off", 2, start)
    (stands,) = VacationBook(client).listed(record["id"], "u-race-off")
    assert stands["ended_ms"] is not None and stands["days"] == 0
    assert declared["vacation"] == stands
    assert (declared["used_days"], declared["left_days"]) == (0, 10)


def new_game(http: FlaskClient, key: dict[str, str], player_id: str) -> dict[str, Any]:
    """A 2-player game with a 300 s bank made over HTTP, `player_id` in seat 0 (to move)."""
    body = {"players": [{"name": "P", "player_id": player_id}, {"name": "Ann"}],
            "seat_order": [0, 1], "ruleset": {"initial_seconds": 300}}  # fmt: skip
    made = http.post("/games", json=body, headers=key)
    assert made.status_code == 201, made.get_json()
    return dict(made.get_json())


def test_an_end_retried_after_a_game_started_tells_that_game_nothing(
    http: FlaskClient, client: redis.Redis, key: dict[str, str]
) -> None:
    """Back early, then a game starts (no pause: the vacation is over), then the end's
    retry: the new game never had the player away, so its players hear no `player_back`
    and the retry answers `resumed` empty, as a retry does."""
    base = "/v1/players/u-race-back/vacations"
    first = new_game(http, key, "u-race-back")["game_id"]
    declared = http.post(base, json={"days": 3}, headers=key).get_json()
    vacation_id = declared["vacation"]["vacation_id"]
    ended = http.delete(f"{base}/{vacation_id}", headers=key)
    assert ended.status_code == 200 and len(ended.get_json()["resumed"]) == 1
    later = new_game(http, key, "u-race-back")["game_id"]
    assert "ClockPaused" not in [e.type for e in log_of(client, later)]
    again = http.delete(f"{base}/{vacation_id}", headers=key)
    assert again.status_code == 200, again.get_json()
    assert again.get_json()["resumed"] == []
    assert again.get_json()["vacation"] == ended.get_json()["vacation"]
    kinds = [i.kind for i in feed_items(log_of(client, later), [])]
    assert "player_back" not in kinds and "player_away" not in kinds
    # the first game: away, then back, once each
    kinds = [i.kind for i in feed_items(log_of(client, first), [])]
    assert (kinds.count("player_away"), kinds.count("player_back")) == (1, 1)


HOSTILE_BODIES: list[tuple[Any, int, str]] = [
    ({"days": 10**30}, 422, "bad_vacation"),
    ({"days": -(10**30)}, 422, "bad_vacation"),
    ({"days": 2**64}, 422, "bad_vacation"),
    ({"days": True}, 422, "invalid_body"),
    ({"days": {"a": 1}}, 422, "invalid_body"),
    ({"days": 1, "from_ms": 10**30}, 422, "bad_vacation_start"),
    ({"days": 1, "from_ms": -(10**30)}, 422, "bad_vacation_start"),
    ({"days": 1, "from_ms": 2**63}, 422, "bad_vacation_start"),
    ({"days": 1, "from_ms": 0}, 422, "bad_vacation_start"),
    ({"days": 1, "from_ms": True}, 422, "invalid_body"),
    ({"days": 1, "player_id": "u-someone-else"}, 422, "invalid_body"),
    ([], 422, "invalid_body"),
]


@pytest.mark.parametrize(("body", "status", "code"), HOSTILE_BODIES)
def test_a_hostile_declaration_is_a_4xx_that_changes_nothing(
    http: FlaskClient, client: redis.Redis, key: dict[str, str], body: Any, status: int, code: str
) -> None:
    game_id = new_game(http, key, "u-hostile")["game_id"]
    log = log_of(client, game_id)
    answer = http.post("/v1/players/u-hostile/vacations", json=body, headers=key)
    assert (answer.status_code, answer.get_json()["code"]) == (status, code)
    assert log_of(client, game_id) == log
    listed = http.get("/v1/players/u-hostile/vacations", headers=key).get_json()
    assert listed["vacations"] == []


def test_no_caller_ends_a_vacation_of_another_player_or_platform(
    http: FlaskClient, client: redis.Redis, key: dict[str, str]
) -> None:
    """Someone else's vacation id, a player id of the same platform or another platform's
    key: 404, and nothing changes (the book, the games)."""
    game_id = new_game(http, key, "u-owner")["game_id"]
    declared = http.post("/v1/players/u-owner/vacations", json={"days": 2}, headers=key)
    vacation_id = declared.get_json()["vacation"]["vacation_id"]
    other = {"X-Api-Key": ApiKeys(client).create("another-platform")[1]}
    book, log = VacationBook(client), log_of(client, game_id)
    before = book.listed(key_record(client, key)["id"], "u-owner")
    for player, headers in (("u-intruder", key), ("u-owner", other), ("u-intruder", other)):
        answer = http.delete(f"/v1/players/{player}/vacations/{vacation_id}", headers=headers)
        assert (answer.status_code, answer.get_json()["code"]) == (404, "vacation_not_found")
    for path in ("u-owner/vacations/" + "0" * 31, "%00/vacations/" + vacation_id):
        assert 400 <= http.delete(f"/v1/players/{path}", headers=key).status_code < 500
    assert book.listed(key_record(client, key)["id"], "u-owner") == before
    assert log_of(client, game_id) == log


def test_a_pause_that_loses_every_race_in_a_busy_game_is_not_answered_as_done(
    client: redis.Redis, key: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One game's pause loses its conditional append at every attempt (moves of a busy game
    got in first each time): the declaration pauses the player's other games, then answers
    409 `stale_sequence` (retry) instead of 201 without that game, which would leave the
    player's clock running there for the whole vacation. The retry mends it (docs/clocks.md:
    refused as overlapping, after pausing what the first try missed)."""
    from carcassonne.errors import OutOfTurnError
    from eventstore.errors import ConcurrencyError

    record = key_record(client, key)
    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    vacations = Vacations(client, service, 10)
    busy, calm = (banked_game(service, record["id"], "u-busy") for _ in range(2))
    append = store.append

    def busy_game_first(game_id: str, *args: Any, **kwargs: Any) -> Any:
        if game_id == busy and str(kwargs.get("command_id", "")).startswith("vacation"):
            raise ConcurrencyError(kwargs["expected"], kwargs["expected"] + 1)
        return append(game_id, *args, **kwargs)

    monkeypatch.setattr(store, "append", busy_game_first)
    with pytest.raises(OutOfTurnError) as refused:
        vacations.declare(record, "u-busy", 2)
    assert refused.value.code == "stale_sequence"
    assert [e.type for e in log_of(client, calm)][-1] == "ClockPaused"  # the others are done
    assert "ClockPaused" not in [e.type for e in log_of(client, busy)]
    monkeypatch.setattr(store, "append", append)  # the game calms down: the retry mends it
    with pytest.raises(OutOfTurnError) as again:
        vacations.declare(record, "u-busy", 2)
    assert again.value.code == "vacation_overlaps"
    assert [e.type for e in log_of(client, busy)][-1] == "ClockPaused"
    # back early, alike: 409 while the busy game still has the pause, the retry resumes it
    (vacation,) = VacationBook(client).listed(record["id"], "u-busy")
    monkeypatch.setattr(store, "append", busy_game_first)
    with pytest.raises(OutOfTurnError) as refused:
        vacations.end(record, "u-busy", vacation["vacation_id"])
    assert refused.value.code == "stale_sequence"
    assert [e.type for e in log_of(client, calm)][-1] == "ClockResumed"
    assert [e.type for e in log_of(client, busy)][-1] == "ClockPaused"
    monkeypatch.setattr(store, "append", append)
    ended = vacations.end(record, "u-busy", vacation["vacation_id"])
    assert [r["game_id"] for r in ended["resumed"]] == [busy]
    assert [e.type for e in log_of(client, busy)][-1] == "ClockResumed"


def ann_plays_first(
    monkeypatch: pytest.MonkeyPatch,
    client: redis.Redis,
    service: GameService,
    token: str,
    method: str,
) -> None:
    """Ann (seat 0, `token`) plays in each game just before the service's `method` (its
    pause or its resume) reaches it: Lou's turn is drawn while the request walks the games."""
    walk = getattr(service, method)

    def first(game: str, *args: Any) -> Any:
        state = fold(to_engine(e) for e in log_of(client, game))
        x, y, rotation, _ = actions(state)[0]
        service.play_turn(game, token, x, y, rotation, None)
        return walk(game, *args)

    monkeypatch.setattr(service, method, first)


def test_a_turn_drawn_while_the_declaration_walks_the_games_keeps_its_whole_clock(
    client: redis.Redis, key: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vacation declared to start later: the declaration reads its clock, records, then
    walks the player's games; in one of them the player's turn is drawn meanwhile. The pause
    moves that turn's deadline by the window it crosses, and by nothing else: the turn's
    clock started at its draw, not at the declaration's clock (it lost the time between)."""
    record = key_record(client, key)
    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    game_id, seats = service.create_game(["Ann", "Lou"], Ruleset(initial_seconds=300), [0, 1],
                                         [None, "u-late"], record["id"])  # fmt: skip
    declared_at = now_ms() - 10_000  # the declaration read its clock 10 s before the draw
    readings = iter([declared_at / 1000])
    vacations = Vacations(client, service, 10, clock=lambda: next(readings, time.time()))
    ann_plays_first(monkeypatch, client, service, seats[0]["token"], "pause_clocks")
    start = declared_at + 100_000
    declared = vacations.declare(record, "u-late", 1, start)
    drawn = [e for e in log_of(client, game_id) if e.type == "TileDrawn"][-1]
    assert fold(to_engine(e) for e in log_of(client, game_id)).current == 1
    (paused,) = declared["paused"]
    assert paused["deadline_ms"] == drawn.payload["deadline_ms"] + DAY_MS


def test_a_declaration_called_off_meanwhile_is_answered_even_if_a_game_was_busy(
    client: redis.Redis, key: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Called off while declared, and one game lost every append: the declaration answers
    the vacation as called off, not 409 `stale_sequence` (a retry of the declaration would
    record a new vacation; the busy game is the call-off's to mend, and has no pause)."""
    from eventstore.errors import ConcurrencyError

    record = key_record(client, key)
    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    vacations = Vacations(client, service, 10)
    busy = banked_game(service, record["id"], "u-edit")
    append, pause = store.append, service.pause_clocks

    def busy_game(game_id: str, *args: Any, **kwargs: Any) -> Any:
        if game_id == busy and str(kwargs.get("command_id", "")).startswith("vacation"):
            raise ConcurrencyError(kwargs["expected"], kwargs["expected"] + 1)
        return append(game_id, *args, **kwargs)

    def called_off_first(game: str, key_id: str, player: str, now: int, *rest: Any) -> Any:
        assert VacationBook(client).end(key_id, player, rest[-1], now).outcome == "ok"
        return pause(game, key_id, player, now, *rest)

    monkeypatch.setattr(store, "append", busy_game)
    monkeypatch.setattr(service, "pause_clocks", called_off_first)
    declared = vacations.declare(record, "u-edit", 2, now_ms() + 3_600_000)
    assert declared["vacation"]["ended_ms"] is not None and declared["vacation"]["days"] == 0
    assert "ClockPaused" not in [e.type for e in log_of(client, busy)]


def test_an_end_at_the_very_start_is_a_call_off_in_the_book_as_in_the_games(
    client: redis.Redis,
) -> None:
    """Ended at its start's millisecond, nothing of the vacation ran: every game drops its
    window (a call-off, `pauses.ended_at`), so the book gives every day back too (it counted
    one day begun, for an absence that never was)."""
    book, now = VacationBook(client), now_ms()
    start = now + 60_000
    assert book.declare("k-edge", "u-edge", "v", start, start + DAY_MS, 1, 2026, 10,
                        now_ms=now).outcome == "ok"  # fmt: skip
    ended = book.end("k-edge", "u-edge", "v", start)
    assert ended.vacation is not None
    assert (ended.vacation["days"], ended.vacation["until_ms"]) == (0, start)


def test_a_turn_drawn_while_a_call_off_walks_the_games_gets_its_whole_clock_back(
    client: redis.Redis, key: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vacation to come is called off; in one game the player's turn is drawn after the
    call-off read its clock but before its walk reached the game (the draw skipped the
    window, still in the log). Without the window the turn's deadline is its draw plus its
    clock: the call-off gives back the window alone, not the time before the draw too."""
    record = key_record(client, key)
    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    game_id, seats = service.create_game(["Ann", "Lou"], Ruleset(initial_seconds=300), [0, 1],
                                         [None, "u-calloff"], record["id"])  # fmt: skip
    declared = Vacations(client, service, 10).declare(record, "u-calloff", 1, now_ms() + 100_000)
    called_off_at = now_ms() - 10_000  # the call-off read its clock 10 s before the draw
    readings = iter([called_off_at / 1000])
    vacations = Vacations(client, service, 10, clock=lambda: next(readings, time.time()))
    ann_plays_first(monkeypatch, client, service, seats[0]["token"], "resume_clocks")
    ended = vacations.end(record, "u-calloff", declared["vacation"]["vacation_id"])
    assert ended["vacation"]["days"] == 0  # called off
    drawn = [e for e in log_of(client, game_id) if e.type == "TileDrawn"][-1]
    (resumed,) = ended["resumed"]
    assert resumed["deadline_ms"] == drawn.payload["deadline_ms"] - DAY_MS


def test_declaring_and_calling_off_in_a_loop_keeps_the_book_bounded(
    http: FlaskClient, client: redis.Redis, key: dict[str, str]
) -> None:
    """A call-off costs no day and is kept a day, so a caller looping "declare a later
    vacation, call it off" grew the player's list by one entry a loop, without bound: every
    declaration, end and list then decoded, scanned and rewrote all of it. Past
    `MAX_CALLED_OFF` call-offs kept, a declaration is 409 too_many_vacations, writing nothing."""
    from services.redis_store.keys import vacations_key
    from services.redis_store.vacations import MAX_CALLED_OFF

    url, start = "/v1/players/u-loop/vacations", now_ms() + DAY_MS
    for _ in range(MAX_CALLED_OFF):
        declared = http.post(url, json={"days": 1, "from_ms": start}, headers=key)
        assert declared.status_code == 201, declared.get_json()
        vacation_id = declared.get_json()["vacation"]["vacation_id"]
        assert http.delete(f"{url}/{vacation_id}", headers=key).status_code == 200
    stored = client.get(vacations_key(key_record(client, key)["id"], "u-loop"))
    refused = http.post(url, json={"days": 1, "from_ms": start}, headers=key)
    assert (refused.status_code, refused.get_json()["code"]) == (409, "too_many_vacations")
    assert refused.get_json()["details"]["max_called_off"] == MAX_CALLED_OFF
    assert client.get(vacations_key(key_record(client, key)["id"], "u-loop")) == stored
    assert len(http.get(url, headers=key).get_json()["vacations"]) == MAX_CALLED_OFF
