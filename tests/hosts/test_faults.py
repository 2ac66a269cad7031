"""Faults on a real network while games are played (issue 31): the suite spread over hosts
(tests/hosts/suite.py), clients playing on instances with WAIT on and off at once, directly
and (WAIT on) through nginx, some of them against a bot seat (tests/hosts/history.py), each
fault of tests/hosts/faults.py done HOSTS_REPS times (5) in rotation over the primaries, every
other repetition with LATENCY_MS each way between the clients and nginx (the delay proxy,
tests/hosts/delay.py), then the final logs checked against what the clients were told
(tests/hosts/checker.py). The figures are printed as a table per fault (and written to
HOSTS_REPORT when set).

What is asserted is what the runs showed to hold; a figure that is only measured (acknowledged
turns lost with WAIT off) is printed, never asserted either way.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

import pytest

from eventstore.envelope import MOVES, SCORES
from services.redis_store import RedisEventStore
from services.redis_store.connect import connect
from tests.hosts.checker import check, dump_logs
from tests.hosts.faults import FAULTS, Window
from tests.hosts.history import Client, History, start_clients, stop_clients
from tests.hosts.live import READ_TIMEOUT, Watcher, check_live, sent_between
from tests.hosts.netns import Network, leftover_namespaces
from tests.hosts.report import render, rows
from tests.hosts.suite import QUERY_HOSTS, Suite, start_suite

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPS = int(os.environ.get("HOSTS_REPS", "5"))
# HOSTS_FAULTS: a comma-separated choice of faults by function name (default: all).
CHOSEN = [f for f in FAULTS if f.__name__ in os.environ.get("HOSTS_FAULTS", f.__name__)]
CLIENTS = 3  # per kind of instance (WAIT on, WAIT off), directly
NGINX_CLIENTS = 2  # through the delay proxy and nginx (to the WAIT-on instances)
BOT_CLIENTS = 1  # of each of those three groups, playing against a greedy bot seat
SETTLE_TURNS = 10  # turns of each group answered 200 after a fault's healing, before the next
LATENCY_MS = 100.0  # each way between the clients and nginx, in the odd repetitions


def _wait_for_turns(
    history: History, clients: list[Client], since: float, count: int, timeout: float = 30.0
) -> None:
    """Until `count` turns of each group (WAIT on, off, through nginx) sent after `since` were
    answered 200 and no client is being refused a game (a stuck one is given up first): the
    suite serves again before the next fault, whose window would otherwise count this one's
    aftermath. Bounded: a group that never recovers shows in the table."""
    deadline = time.monotonic() + timeout
    groups = [(True, "direct"), (False, "direct"), (True, "nginx")]
    while time.monotonic() < deadline:
        with history.lock:
            served = [
                (op.wait, op.route)
                for op in history.ops
                if op.start >= since and op.outcome == "ok"
            ]
        refused = any(c.refused for c in clients)
        if min(served.count(g) for g in groups) >= count and not refused:
            return
        time.sleep(0.1)


def _game_of(client: Client) -> str:
    return client.game


def _play_through_faults(
    suite: Suite, history: History, watchers: list[Watcher]
) -> tuple[list[Window], float]:
    clients = start_clients(CLIENTS, suite.command_bases(True), True, history, 100,
                            bots=BOT_CLIENTS)  # fmt: skip
    clients += start_clients(CLIENTS, suite.command_bases(False), False, history, 200,
                             bots=BOT_CLIENTS)  # fmt: skip
    direct = len(clients)
    clients += start_clients(NGINX_CLIENTS, [suite.public_base], True, history, 300,
                             route="nginx", bots=BOT_CLIENTS)  # fmt: skip
    windows: list[Window] = []
    suite.playing = lambda: [c.game for c in clients if c.game]
    # each client's game followed live, as its player's app would: the direct clients' on
    # each query instance in turn, the others' through nginx
    for index, client in enumerate(clients):
        queries = suite.query_bases
        base = queries[index % len(queries)] if index < direct else suite.public_base
        watchers.append(Watcher(base, partial(_game_of, client)))
        watchers[-1].thread.start()
    assert suite.front is not None
    try:
        _wait_for_turns(history, clients, 0.0, 2 * SETTLE_TURNS)
        for rep in range(REPS):
            latency = LATENCY_MS if rep % 2 else 0.0
            suite.front.delay_ms = latency  # before the fault, for its whole window
            for fault in CHOSEN:
                window = fault(suite, rep)
                window.latency_ms = latency
                windows.append(window)
                _wait_for_turns(history, clients, window.whole, SETTLE_TURNS)
        end = time.monotonic()
    finally:
        stop_clients(clients)
        for watcher in watchers:
            watcher.stop.set()
        for watcher in watchers:
            watcher.thread.join(timeout=2 * READ_TIMEOUT)
    return windows, end


def _served_during_query_cuts(
    suite: Suite, windows: list[Window], watchers: list[Watcher]
) -> list[tuple[int, int]]:
    """Per cut of a query instance: the /live events its watchers and the other instance's
    were sent while it was cut."""
    served = []
    for window in windows:
        if window.target not in QUERY_HOSTS:
            continue
        other = next(h for h in QUERY_HOSTS if h != window.target)
        cut, kept = (suite.query_base_of(h) for h in (window.target, other))
        served.append(
            (
                sent_between(watchers, cut, window.start, window.heal),
                sent_between(watchers, kept, window.start, window.heal),
            )
        )
    return served


def test_acknowledged_turns_through_partitions_kills_and_pauses(hosts_possible: None) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="cc-hosts-"))
    net = Network(workdir)
    suite: Suite | None = None
    try:
        net.add_host("t")  # the tester: this thread plays and checks from here
        with net.enter("t"):
            suite = start_suite(net)
            history, watchers = History(), list[Watcher]()
            windows, end = _play_through_faults(suite, history, watchers)
            client = connect(suite.cluster_url, role="hosts-check", max_connections=4)
            store = RedisEventStore(client)
            verdict = check(store, history, suite.query_bases)
            dump_logs(store, list(history.games), workdir / "logs.jsonl")
            watched = {g for w in watchers for g in w.seen.events}
            logs = {(g, s): store.read(g, s) for g in watched for s in (MOVES, SCORES)}
            live = check_live(watchers, logs)
            client.close()
        history.dump(workdir / "history.jsonl")
        (workdir / "faults.json").write_text(json.dumps([asdict(w) for w in windows]))
        table = rows(windows, history.ops, verdict.lost, end)
        text = render(table)
        served = _served_during_query_cuts(suite, windows, watchers)
        lost_games = {op.game for op in verdict.lost}
        unlike_lost = [u for u in live.unlike_log if u.split()[0] in lost_games]
        summary = (
            f"{len(history.ops)} turn requests, {verdict.games} games ({verdict.finished} "
            f"finished and scored; {sum(1 for b in history.bots.values() if b)} with a bot "
            f"seat, whose {verdict.bot_turns} turns the bot worker played), {REPS} "
            f"repetitions of each fault, {LATENCY_MS:g} ms each way between the clients and "
            f"nginx in repetitions {[r for r in range(REPS) if r % 2]}; logs in {workdir}\n"
            f"games left unscored a minute after the load: {len(verdict.late())} "
            f"({len(verdict.unscored_after_loss)} of them lost acknowledged turns); other "
            f"broken invariants: {len(verdict.problems())}\n"
            f"/live: {live.events} events sent to {len(watchers)} watchers "
            f"({sum(w.seen.reconnects for w in watchers)} resumptions, "
            f"{sum(len(w.seen.refused) for w in watchers)} refused); sent twice or out of "
            f"order: {len(live.repeated)}; skipped: {len(live.skipped)}; unlike the final log: "
            f"{len(live.unlike_log)} ({len(unlike_lost)} in games that lost acknowledged turns)\n"
            f"/live while a query instance was cut from Redis, events sent by (the cut one, "
            f"the other) per repetition: {served}"
        )
        print(f"\n{text}\n{summary}")
        if report := os.environ.get("HOSTS_REPORT"):
            Path(report).write_text(f"{text}\n{summary}\n")
        for line in [*live.repeated, *live.skipped, *live.unlike_log][:20]:
            print(f"live: {line}")
        for refusal in [r for w in watchers for r in w.seen.refused][:10]:
            print(f"live refused: {refusal}")
        for late in verdict.late():
            print(f"unscored: {late}")
        for op in {op.key: op for op in verdict.lost}.values():
            print(f"lost: {op.client} WAIT={int(op.wait)} {op.game} key {op.key} "
                  f"seqs {[e['seq'] for e in op.events]}")  # fmt: skip
        broken = [op.detail for op in history.ops if op.action == "client-error"]
        assert not broken, f"the clients failed: {broken[:3]}"
        assert not verdict.problems(), verdict.problems()
        # Each /live event once and in order, or the watcher was told to start afresh (an
        # event later lost in a failover may have been sent: measured above, not asserted).
        assert not live.repeated and not live.skipped, (live.repeated[:5], live.skipped[:5])
        assert all(w.promoted for w in windows if "primary" in w.kind or w.kind == "split brain")
        # Since the command and scoring caches fold a game again when a failover rewound
        # its log (tests/integration/test_lost_suffix.py), no game is stuck or left unscored.
        assert not [r for r in table if r.stuck], f"games stuck after a failover:\n{text}"
        # Nor on a bot's turn: a bot's move no replica confirmed is looked at again after
        # GRACE_SECONDS, so one a failover lost is played again (deploy/README, "A bot's move
        # lost in a failover"; counted in the table's "bot stuck" column).
        bot_stuck = sum(r.bot_stuck for r in table)
        assert not bot_stuck, f"{bot_stuck} games left waiting on a bot:\n{text}"
        assert not verdict.late(), f"games left unscored: {verdict.late()[:5]}"
        lost_with_wait = [r for r in table if r.wait and r.lost]
        assert not lost_with_wait, f"acknowledged turns lost with WAIT 1:\n{text}"
        # The query instance that was not cut kept serving /live through each cut.
        assert all(other for _, other in served), served
    finally:
        if suite is not None and suite.front is not None:
            suite.front.stop()
        net.close()
    assert not leftover_namespaces(net.prefix)
