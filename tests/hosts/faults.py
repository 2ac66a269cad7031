"""The faults, each done to a running suite while the clients play, then healed: each returns
its `Window` (when it began, when it was healed, when the cluster was whole again).

- `partition_primary`: a primary cut (both ways) from every other Redis node, its replica
  and the majority, while the command hosts still reach it: the majority promotes its
  replica; clients on the old primary's side may still write to it until it sees it is in
  the minority (cluster-node-timeout).
- `mute_primary`: a one-way partition: nothing a primary sends reaches the other Redis
  nodes, while it still hears them and the command hosts reach it both ways. The majority
  stops hearing it and promotes its replica; its replication stream reaches nobody, so a
  write on it waits for a WAIT that never comes; the cut lasts until it says it is in the
  minority, as a two-way one.
- `cut_command`: a command host cut from every Redis node (both ways) while it appends.
- `kill_primary`: SIGKILL of a primary; started again once its replica is promoted (it comes
  back as a replica).
- `pause_primary`: SIGSTOP of a primary for longer than cluster-node-timeout, then SIGCONT.
- `split_brain`: a primary and one command host on one side, everything else on the other:
  the majority promotes the replica and the other command host writes there, while the
  first still writes to the old primary (until it sees it is in the minority).
- `cut_query`: one query instance (q1 and q2 in turn) cut from every Redis node for 3 s
  while it serves `/live` (tests/hosts/live.py watches every game in play, on both instances
  and through nginx); the other keeps serving.
- `cut_broker`: the scoring worker and the bot worker cut from the broker (both ways):
  scoring follows the change feed on the cluster, so the scores must come out right all the
  same; a bot's turn whose task was lost is sent again by the bots' beat sweep.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import redis

from tests.hosts.suite import (
    COMMAND_HOSTS,
    QUERY_HOSTS,
    REDIS_HOSTS,
    WORKER_HOSTS,
    Suite,
    node_client,
)

PROMOTION_TIMEOUT = 20.0  # seconds a replica may take to be promoted (node timeout + vote)
CUT_SECONDS = 3.0  # how long a command host stays cut from Redis


@dataclass
class Window:
    """One fault: its kind, the host it hit, and its times (time.monotonic())."""

    kind: str
    target: str
    start: float
    heal: float
    whole: float  # the cluster healthy again (every primary with an online replica)
    promoted: bool = False  # a replica took over
    latency_ms: float = 0.0  # the delay each way between the clients and nginx (set by the test)


def _promoted(suite: Suite, old: str, observer: str) -> bool:
    """Whether the node on `observer` sees `old` serve no slots any more."""
    shape = suite.topology_from(observer)
    return bool(shape) and old not in shape


def _wait_promoted(suite: Suite, old: str, observers: list[str]) -> bool:
    deadline = time.monotonic() + PROMOTION_TIMEOUT
    while time.monotonic() < deadline:
        if any(_promoted(suite, old, o) for o in observers):
            return True
        time.sleep(0.05)
    return False


def _wait_minority(suite: Suite, old: str) -> None:
    """Until the cut-off primary itself says cluster_state:fail (it saw it is in the
    minority and refuses writes); bounded, as a node that never says so shows in the lost
    turns."""
    deadline = time.monotonic() + PROMOTION_TIMEOUT
    while time.monotonic() < deadline:
        try:
            info = node_client(suite.address(old)).execute_command("CLUSTER", "INFO")
        except redis.RedisError:
            info = b""
        if b"cluster_state:fail" in (info if isinstance(info, bytes) else str(info).encode()):
            return
        time.sleep(0.05)


def pick_primary(suite: Suite, turn: int) -> str:
    """The primary serving most of the games played now (a fault nobody's game meets
    measures nothing); among equals, one per `turn` in rotation."""
    primaries = sorted(suite.topology())
    served = Counter(suite.owner_of(game) for game in suite.playing())
    most = max(served[p] for p in primaries)
    busiest = [p for p in primaries if served[p] == most]
    return busiest[turn % len(busiest)]


def _cut_primary(suite: Suite, turn: int, kind: str, both: bool) -> Window:
    """The busiest primary cut from every other Redis node (`both` ways, or only what it
    sends) until it says it is in the minority and stops taking writes, then healed. (One
    way, it does not hear of its replacement either: its peers' bus links to it are TCP,
    and with its replies dropped they break.)"""
    old = pick_primary(suite, turn)
    others = [h for h in REDIS_HOSTS if h != old]
    start = time.monotonic()
    suite.net.block([old], others, both=both)
    promoted = _wait_promoted(suite, old, others)
    _wait_minority(suite, old)
    heal = time.monotonic()
    suite.net.heal()
    whole = heal + suite.wait_healthy()
    return Window(kind, old, start, heal, whole, promoted)


def partition_primary(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    return _cut_primary(suite, turn, "partition primary", both=True)


def mute_primary(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    return _cut_primary(suite, turn, "mute primary (one-way)", both=False)


def _cut(suite: Suite, kind: str, target: str, hosts: list[str], others: list[str]) -> Window:
    """`hosts` cut from `others` (both ways) for CUT_SECONDS, then healed."""
    start = time.monotonic()
    suite.net.block(hosts, others, both=True)
    time.sleep(CUT_SECONDS)  # the fault's duration is the thing being done, not awaited
    heal = time.monotonic()
    suite.net.heal()
    whole = heal + suite.wait_healthy()
    return Window(kind, target, start, heal, whole)


def cut_command(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    host = COMMAND_HOSTS[turn % len(COMMAND_HOSTS)]
    return _cut(suite, "cut command from redis", host, [host], REDIS_HOSTS)


def kill_primary(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    old = pick_primary(suite, turn)
    start = time.monotonic()
    proc = suite.redis[old]
    proc.kill()
    proc.wait(timeout=10)
    promoted = _wait_promoted(suite, old, [h for h in REDIS_HOSTS if h != old])
    heal = time.monotonic()
    suite.start_redis(old)
    whole = heal + suite.wait_healthy()
    return Window("kill primary", old, start, heal, whole, promoted)


def pause_primary(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    old = pick_primary(suite, turn)
    pid = suite.redis[old].pid
    start = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        promoted = _wait_promoted(suite, old, [h for h in REDIS_HOSTS if h != old])
    finally:
        heal = time.monotonic()
        os.kill(pid, signal.SIGCONT)
    whole = heal + suite.wait_healthy()
    return Window("pause primary", old, start, heal, whole, promoted)


def split_brain(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    old = pick_primary(suite, turn)
    client = COMMAND_HOSTS[turn % len(COMMAND_HOSTS)]
    minority = [old, client]
    majority = [h for h in [*REDIS_HOSTS, *COMMAND_HOSTS] if h not in minority]
    start = time.monotonic()
    suite.net.block(minority, majority, both=True)
    promoted = _wait_promoted(suite, old, [h for h in REDIS_HOSTS if h != old])
    _wait_minority(suite, old)  # as in partition_primary
    heal = time.monotonic()
    suite.net.heal()
    whole = heal + suite.wait_healthy()
    return Window("split brain", f"{old}+{client}", start, heal, whole, promoted)


def cut_query(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    host = QUERY_HOSTS[turn % len(QUERY_HOSTS)]
    return _cut(suite, "cut query from redis", host, [host], REDIS_HOSTS)


def cut_broker(suite: Suite, turn: int) -> Window:
    """See the module's docstring."""
    workers = "+".join(WORKER_HOSTS)
    return _cut(suite, "cut broker from workers", workers, WORKER_HOSTS, ["broker"])


FAULTS: list[Callable[[Suite, int], Window]] = [
    partition_primary,
    mute_primary,
    cut_command,
    kill_primary,
    pause_primary,
    split_brain,
    cut_query,
    cut_broker,
]
