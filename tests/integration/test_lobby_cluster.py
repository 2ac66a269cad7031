"""Lobbies, matchmaking and rematches on a real Redis Cluster (3 primaries): the command
service under gunicorn with REDIS_URL=redis+cluster://… Lobbies land on every primary (their
ids are game ids, spread over the index shards) and are listed from all of them; a lobby's
scripts touch its key and its listing entry on one slot; a key's matchmaking scripts touch
only its own tag's keys (tickets named from the queue included); a rematch is one game."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from redis.crc import key_slot

from services.redis_store.keys import lobby_key
from tests.integration.http_client import api_key, call, gunicorn
from tests.redis_cluster import Cluster, redis_cluster, redis_cluster_url  # noqa: F401


@pytest.fixture(scope="module")
def command(redis_cluster_url: str, redis_url: str) -> Iterator[str]:  # noqa: F811
    broker = redis_url.rsplit("/", 1)[0] + "/1"  # the broker stays a single Redis
    env = {"REDIS_URL": redis_cluster_url, "BROKER_URL": broker, "NOTIFY_MS": "0"}
    with gunicorn("services.command.wsgi:app", "deploy/gunicorn/command.py", env, 2) as base:
        yield base


def test_lobbies_on_every_primary_are_listed_and_a_last_seat_goes_to_one_player(
    command: str,
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    key = api_key(command)
    opened = []
    for i in range(12):
        body = {"ruleset": "river", "seats": 2, "host": {"player_id": f"h{i}"}}
        status, lobby = call(command, "POST", "/lobbies", body, key)
        assert status == 201, lobby
        opened.append(lobby["lobby_id"])
    slots = {key_slot(lobby_key(i).encode()) * 3 // 16384 for i in opened}
    assert len(slots) > 1  # spread over the primaries (3 ranges of slots)
    status, listed = call(command, "GET", "/lobbies?ruleset=river&seats=2&limit=200", None, key)
    assert status == 200 and {x["lobby_id"] for x in listed["lobbies"]} >= set(opened)
    target = opened[0]

    def join(i: int) -> tuple[int, Any]:
        return call(command, "POST", f"/lobbies/{target}/join", {"player_id": f"p{i}"}, key)

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(join, range(200)))
    assert sum(status == 200 for status, _ in answers) == 1
    assert {a["code"] for s, a in answers if s != 200} <= {"lobby_full", "lobby_started"}
    status, view = call(command, "GET", f"/lobbies/{target}", None, key)
    assert view["state"] == "started" and len(view["players"]) == 2
    status, turn = call(command, "GET", f"/games/{target}/turn")
    assert status == 200 and turn["seq"] >= 2


def test_tickets_and_a_rematch_on_the_cluster(command: str) -> None:
    key = api_key(command)
    rng = random.Random(7)
    wanted = {f"c{i}": rng.randint(2, 4) for i in range(90)}

    def take(player: str) -> tuple[int, Any]:
        body = {"player_id": player, "ruleset": "demo", "players": wanted[player]}
        return call(command, "POST", "/tickets", body, key)

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(take, sorted(wanted)))
    assert all(status == 201 for status, _ in answers), answers[:2]
    polled = [call(command, "GET", f"/tickets/{a['ticket_id']}", None, key)[1] for _, a in answers]
    matched = [t for t in polled if t["state"] == "matched"]
    games = Counter(t["game_id"] for t in matched)  # seats taken in each game
    assert matched and all(games[t["game_id"]] == wanted[t["player_id"]] for t in matched)
    waiting = Counter(wanted[t["player_id"]] for t in polled if t["state"] == "waiting")
    assert all(count < size for size, count in waiting.items())
    # A rematch of a finished game: one game, however many requests.
    status, created = call(command, "POST", "/games",
                           {"players": [{"name": "A"}, {"name": "B"}]}, key)  # fmt: skip
    assert status == 201, created
    token = created["players"][0]["token"]
    call(command, "POST", f"/games/{created['game_id']}/resign", None,
         {"Authorization": f"Bearer {token}"})  # fmt: skip
    first = call(command, "POST", f"/games/{created['game_id']}/rematch", None, key)
    second = call(command, "POST", f"/games/{created['game_id']}/rematch", None, key)
    assert (first[0], second[0]) == (201, 200)
    assert first[1]["game_id"] == second[1]["game_id"]
    assert call(command, "GET", f"/games/{first[1]['game_id']}/turn")[0] == 200
