"""Game affinity under gunicorn (services/common/affinity.py): each game's requests are served
by one worker; a worker that dies or restarts costs affinity for a moment, never a request."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.game import placements
from carcassonne.state import GameState
from eventstore.envelope import MOVES, StoredEvent
from eventstore.schemas import to_engine
from services.common.affinity import owner_slot
from services.redis_store import RedisEventStore

from .http_client import call, gunicorn

CONFIG = "deploy/gunicorn/command.py"
GAMES = [uuid.UUID(int=n * 7919).hex for n in range(1, 13)]  # fixed ids: fixed owners


def served(base: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    status, answer = call(base, "POST" if body is not None else "GET", path, body)
    assert status == 200, answer
    return dict(answer)


def settle(base: str, games: list[str], seconds: float = 20) -> dict[str, int]:
    """Wait until every worker is up and owns its games; returns game id -> worker pid."""
    deadline = time.monotonic() + seconds
    while True:
        answers = {g: served(base, f"/games/{g}/turn") for g in games}
        if all(a["owns_game"] is True for a in answers.values()):
            return {g: a["pid"] for g, a in answers.items()}
        assert time.monotonic() < deadline, answers
        time.sleep(0.1)


@pytest.fixture
def server() -> Iterator[str]:
    with gunicorn("tests.integration.affinity_app:app", CONFIG, {}, 3) as base:
        yield base


def test_every_request_of_a_game_is_served_by_the_worker_that_owns_it(server: str) -> None:
    owners = settle(server, GAMES)
    for _ in range(6):
        for game_id, pid in owners.items():
            answer = served(server, f"/games/{game_id}/turns", {"x": 0, "y": 1})
            assert answer == {"pid": pid, "owns_game": True}
    # The 12 games fall on all 3 slots, so all 3 workers serve games.
    assert len({owner_slot(g.encode(), 3) for g in GAMES}) == 3
    assert len(set(owners.values())) == 3
    # Same slot, same worker.
    by_slot: dict[int, set[int]] = {}
    for game_id, pid in owners.items():
        by_slot.setdefault(owner_slot(game_id.encode(), 3), set()).add(pid)
    assert all(len(pids) == 1 for pids in by_slot.values())
    # A path without a game is served where it was accepted, and says so.
    assert served(server, "/healthz")["owns_game"] is False


@pytest.mark.slow
def test_a_killed_workers_games_are_served_at_once_and_owned_again_after_its_restart(
    server: str,
) -> None:
    owners = settle(server, GAMES)
    victim = owners[GAMES[0]]
    its_games = [g for g, pid in owners.items() if pid == victim]
    os.kill(victim, signal.SIGKILL)
    wait_until_dead(victim)  # connections handed to it just before it died die with it
    for game_id in its_games * 3:  # while the master notices and starts a new worker
        answer = served(server, f"/games/{game_id}/turns", {"x": 0, "y": 1})
        assert answer["pid"] != victim
    again = settle(server, GAMES)  # the new worker took the dead one's slot
    assert {g: pid for g, pid in again.items() if g not in its_games} == {
        g: pid for g, pid in owners.items() if g not in its_games
    }
    assert len({again[g] for g in its_games}) == 1 and again[its_games[0]] != victim


def test_once_its_game_is_loaded_a_turn_is_one_append_and_no_stream_read(redis_url: str) -> None:
    """With affinity a worker's cached state of its games is current, so a turn sends one
    append (EVALSHA) and no catch-up read (XRANGE); without it every turn reads the stream."""
    from .test_command_http import auth, new_game

    client = redis.Redis.from_url(redis_url)
    store = RedisEventStore(client)
    started: list[Any] = []
    # NOTIFY_MS=0: no scoring tasks (no worker here; a "drain scheduled" flag would hold back
    # the next test's notification for a moment).
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    with gunicorn("services.command.wsgi:app", CONFIG, env, 3, started) as base:
        wait_for_workers(started[0].pid, 3)
        games = [new_game(base) for _ in range(6)]
        states: dict[str, GameState] = {}
        for game_id, _ in games:
            states[game_id] = state = GameState()
            for stored in store.read(game_id, MOVES):
                state.apply(to_engine(stored))

        def play(game_id: str, tokens: dict[int, str]) -> None:
            state = states[game_id]
            x, y, rotation = placements(state)[0]
            body = {"x": x, "y": y, "rotation": rotation, "meeple": None}
            status, played = call(
                base, "POST", f"/games/{game_id}/turns", body, auth(tokens[state.current])
            )
            assert status == 200, played
            for event in played["events"]:  # follow the game from the replies alone
                state.apply(to_engine(StoredEvent(**event)))

        for game_id, tokens in games:  # each game's first turn loads it in its owner
            play(game_id, tokens)
        client.config_resetstat()
        for _ in range(10):
            for game_id, tokens in games:
                play(game_id, tokens)
        stats = client.info("commandstats")
        status, metrics = call(base, "GET", "/metrics")
        assert status == 200
    assert stats["cmdstat_evalsha"]["calls"] == 60
    assert stats.get("cmdstat_xrange", {"calls": 0})["calls"] == 0
    # /metrics counts where the workers' connections went (merged across the workers).
    counted = {
        line.split('"')[1]: float(line.split()[-1])
        for line in str(metrics).splitlines()
        if line.startswith("carcassonne_affinity_connections_total{")
    }
    assert counted.get("fallback", 0) == 0
    assert counted["owner"] + counted["handed_over"] >= 66 and counted["handed_over"] > 0


def wait_until_dead(pid: int, seconds: float = 10) -> None:
    """Wait until a process has exited (a zombie has closed its sockets too)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # reaped while we looked
            return
        if state in ("Z", "X"):
            return
        assert time.monotonic() < deadline, state
        time.sleep(0.01)


def wait_for_workers(master: int, count: int, seconds: float = 60, inboxes: bool = True) -> None:
    """Wait until gunicorn's master has `count` workers and, with game affinity (`inboxes`),
    each has bound its inbox (after loading the app, just before it accepts): until then a
    game's connection cannot be handed to its owner, and the worker that accepted it serves it
    (and caches the game) itself. A plain sync worker (AFFINITY=0) shows no such sign: it gets
    a moment to boot."""
    deadline = time.monotonic() + seconds
    while True:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if not inboxes and len(children) >= count:
            time.sleep(1.0)
            return
        bound = [pid for pid in children if has_inbox(int(pid))]
        if len(bound) >= count:
            return
        assert time.monotonic() < deadline, (children, bound)
        time.sleep(0.1)


def has_inbox(pid: int) -> bool:
    """Whether process `pid` holds a bound inbox (a Unix socket named ``…/slot-<n>``,
    services/common/affinity.py), as lsof would tell: its socket fds against /proc/net/unix."""
    inboxes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and os.path.basename(fields[7]).startswith("slot-"):
            inboxes.add(f"socket:[{fields[6]}]")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") in inboxes for fd in fds)
    except FileNotFoundError:  # it exited, or an fd closed while we looked
        return False
