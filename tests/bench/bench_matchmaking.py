"""Matchmaking, lobby joins and rematches (`make bench`; issue 29), each beside its baseline in
the same run, on a private redis-server.

1. Matching: 10,000 waiting tickets of one API key, of mixed sizes (a game of 2, 3, 4 or 5,
   drawn at random), taken with the inline matcher off, then matched by one
   `Matchmaker.drain` (services/command/matchmaking.py): every matchable ticket matched, in
   at most 2x the time it takes the same `GameService` to create the same games directly
   (`create_game`, the same sizes). Counted too: players in two games (0), games short of a
   seat (0), tickets left matchable (0).
2. Over HTTP (the command service under its gunicorn config, one client): the p99 of a lobby
   join that takes the last seat (and so starts the game) and of `POST /games/{id}/rematch`,
   each beside the p99 of `POST /games` measured alternately with it.

    .venv/bin/python tests/bench/bench_matchmaking.py [--tickets 10000] [--requests 300]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from carcassonne.ruleset import Ruleset  # noqa: E402
from services.command.matchmaking import Matchmaker  # noqa: E402
from services.command.secrets_store import RedisSecrets  # noqa: E402
from services.command.service import GameService  # noqa: E402
from services.redis_store import RedisEventStore, secrets_key  # noqa: E402
from services.redis_store.apikeys import ApiKeys  # noqa: E402
from services.redis_store.keys import queue_key, waiting_key  # noqa: E402
from tests.bench.bench_command import CONFIG  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.integration.http_client import call, gunicorn  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

MAX_MATCH_RATIO = 2.0  # drain time / direct creation of the same games (the issue)
MAX_JOIN_RATIO = 1.5  # join (last seat: starts the game) p99 / POST /games p99
MAX_REMATCH_RATIO = 2.0  # rematch p99 / POST /games p99 (it reads the finished game first)
SIZES = (2, 3, 4, 5)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def matching(redis_url: str, tickets: int) -> None:
    """Part 1: take `tickets` tickets, drain them; create the same games directly."""
    client = redis.Redis.from_url(redis_url)
    store = RedisEventStore(client)
    service = GameService(store, RedisSecrets(client))
    key_id, _ = ApiKeys(client).create("bench-matchmaking")
    rng = random.Random(29)
    wanted = [rng.choice(SIZES) for _ in range(tickets)]
    matcher = Matchmaker(client, service, inline=False)
    started = time.perf_counter()
    for i, players in enumerate(wanted):
        matcher.take(key_id, f"p{i}", None, "classic", players)
    taking = time.perf_counter() - started
    by_size = Counter(wanted)
    games = {n: by_size[n] // n for n in SIZES}
    expected = sum(games.values())

    started = time.perf_counter()
    for players, count in games.items():
        for g in range(count):
            names = [f"d{players}-{g}-{i}" for i in range(players)]
            service.create_game(names, Ruleset(), key_id=key_id)
    direct = time.perf_counter() - started

    started = time.perf_counter()
    made = matcher.drain()
    drained = time.perf_counter() - started

    # Who sits where: every matched ticket's game, from the games' own records.
    size_of = {f"p{i}": players for i, players in enumerate(wanted)}
    records = [
        json.loads(raw)
        for raw in client.mget([secrets_key(g) for g in _match_games(client, key_id)])
        if raw is not None
    ]
    seated = Counter(p for record in records for p in record["player_ids"])
    short = sum(
        1 for r in records if {size_of[p] for p in r["player_ids"]} != {len(r["player_ids"])}
    )
    left = {n: int(client.zcard(queue_key(key_id, "classic", n))) for n in SIZES}
    matchable_left = sum(left[n] // n for n in SIZES)
    print(
        f"{tickets} tickets ({dict(sorted(by_size.items()))} by size) taken in {taking:.2f} s; "
        f"drain made {made} games of {expected} in {drained:.2f} s; creating {expected} games "
        f"directly took {direct:.2f} s; waiting after: {left} "
        f"(players waiting: {client.hlen(waiting_key(key_id))})"
    )
    check("games made by the drain / matchable", made / max(1, expected), at_least=1,
          at_most=1, always=True)  # fmt: skip
    check("players in two games", sum(1 for c in seated.values() if c > 1), at_most=0,
          always=True)  # fmt: skip
    check("matched games short of a seat", short, at_most=0, always=True)
    check("tickets left matchable", matchable_left, at_most=0, always=True)
    judge(f"match {tickets} tickets / create the games directly", drained * 1000,
          direct * 1000, max_ratio=MAX_MATCH_RATIO)  # fmt: skip
    client.close()


def _match_games(client: redis.Redis, key_id: str) -> list[str]:
    """The games of the key's matches (from its match records)."""
    prefix = "{mm:" + key_id + "}:m:"
    return [k.decode()[len(prefix) :] for k in client.scan_iter(match=prefix + "*", count=1000)]


def requests(redis_url: str, count: int) -> None:
    """Part 2: join (last seat) and rematch p99, each beside POST /games p99."""
    client = redis.Redis.from_url(redis_url)
    _, secret = ApiKeys(client).create("bench-requests")
    key = {"X-Api-Key": secret}
    game_body = {"players": [{"name": "Ann"}, {"name": "Bob"}]}
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    with gunicorn("services.command.wsgi:app", CONFIG, env, 1) as base:
        lobbies = []
        for i in range(count):
            opening = {"ruleset": "classic", "seats": 2, "host": {"player_id": f"h{i}"}}
            status, opened = call(base, "POST", "/lobbies", opening, key)
            assert status == 201, opened
            lobbies.append(opened["lobby_id"])
        finished = []
        for _ in range(count):
            status, created = call(base, "POST", "/games", game_body, key)
            token = created["players"][0]["token"]
            call(base, "POST", f"/games/{created['game_id']}/resign", None,
                 {"Authorization": f"Bearer {token}"})  # fmt: skip
            finished.append(created["game_id"])
        times: dict[str, list[float]] = {"create": [], "join": [], "create2": [], "rematch": []}
        for lobby_id, game_id in zip(lobbies, finished, strict=True):
            steps: tuple[tuple[str, str, str, object], ...] = (
                ("create", "POST", "/games", game_body),
                ("join", "POST", f"/lobbies/{lobby_id}/join", {"player_id": "joiner"}),
                ("create2", "POST", "/games", game_body),
                ("rematch", "POST", f"/games/{game_id}/rematch", None),
            )
            for name, method, path, body in steps:
                started = time.perf_counter()
                status, answer = call(base, method, path, body, key)
                times[name].append((time.perf_counter() - started) * 1000)
                assert status in (200, 201), (name, answer)
                if name == "join":
                    assert answer["lobby"]["state"] == "started", answer
    client.close()
    shown = {name: f"p50 {statistics.median(t):.2f} p99 {p99(t):.2f}" for name, t in times.items()}
    print(f"{count} requests each, one client, alternating (ms): {shown}")
    judge("lobby join (starts the game) p99 / POST /games p99", p99(times["join"]),
          p99(times["create"]), max_ratio=MAX_JOIN_RATIO)  # fmt: skip
    judge("rematch p99 / POST /games p99", p99(times["rematch"]), p99(times["create2"]),
          max_ratio=MAX_REMATCH_RATIO)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description="matchmaking, lobby joins and rematches")
    parser.add_argument("--tickets", type=int, default=size(10_000, 200))
    parser.add_argument("--requests", type=int, default=size(300, 10))
    args = parser.parse_args()
    redis_proc, redis_url, workdir = start_redis()
    try:
        matching(redis_url, args.tickets)
        requests(redis_url, args.requests)
    finally:
        redis_proc.terminate()
        redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
