"""An append that a primary's failover cannot lose: the script, then `WAIT n ms`, on one
connection of the primary that ran it.

Redis replicates asynchronously: a primary answers a write before its replicas have it, so
when it dies and a replica is promoted, writes of the last moments (those not yet sent,
typically well under a millisecond's worth, more under load or a slow link) are gone,
although the client was told "ok". `WAIT n ms` blocks until `n` replicas have acknowledged
every write this *connection* made, or `ms` passed, and answers how many did. So the append
and its WAIT go down the same connection (a pipeline of two commands on the node's own
client); an append that fewer than `n` replicas confirmed raises `NotReplicated`. The append
did happen: a retry with the same command id (Idempotency-Key) is answered from the first
one and appends nothing. WAIT narrows the window; it is not a consensus: a replica that
confirmed can still lose the write if it is not the one promoted (Redis promotes the most
up-to-date replica it can reach), and a failover of both the primary and that replica at
once loses it.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    NoScriptError,
    TimeoutError,
    TryAgainError,
)

from eventstore.envelope import AppendResult

ATTEMPTS = 8  # redirections, a script to load, a node lost: then the error is the caller's
BACKOFF = 0.1  # seconds before trying again after a lost node or CLUSTERDOWN (doubles)
# At most this long asleep between attempts in all (each pause at most MAX_PAUSE): a command
# instance serves its requests one at a time, so an append that waits out a primary cut off
# in the minority (CLUSTERDOWN until its partition heals) holds every game of the instance.
# Doubling eight times was 25 s; tests/hosts' one-way partition showed 22 s with no turn
# answered. Past it the caller answers 503 and the client retries with its key.
PATIENCE = 2.0
MAX_PAUSE = 0.5


class NotReplicated(redis.RedisError):
    """The append happened but fewer replicas than wanted confirmed it in time."""

    def __init__(self, result: AppendResult, acked: int, wanted: int) -> None:
        super().__init__(f"{acked} of {wanted} replicas confirmed the append in time")
        self.result = result
        self.acked = acked
        self.wanted = wanted


def evalsha_wait(
    client: redis.Redis,
    sha: str,
    script: str,
    keys: list[str],
    args: list[Any],
    replicas: int,
    timeout_ms: int,
) -> tuple[Any, int]:
    """(script's reply, replicas that confirmed it) — EVALSHA then WAIT on one connection.

    On a cluster the pair goes to the primary of the keys' slot, following MOVED (slot map
    updated) and ASK (ASKING on the importing node, in the same pipeline); a lost node or
    CLUSTERDOWN re-reads the topology and tries again (the script is idempotent).
    """
    cluster = client if isinstance(client, RedisCluster) else None
    ask: tuple[str, int] | None = None
    pause, slept = BACKOFF, 0.0

    def backoff() -> bool:
        """Sleep before the next attempt (the topology read again); False when patience
        ran out."""
        nonlocal pause, slept
        if cluster is None or slept + pause > PATIENCE:
            return False
        time.sleep(pause)
        slept, pause = slept + pause, min(pause * 2, MAX_PAUSE)
        cluster.nodes_manager.initialize()
        return True

    for attempt in range(1, ATTEMPTS + 1):
        node_client: redis.Redis = client
        if cluster is not None:
            node = (
                cluster.nodes_manager.get_node(host=ask[0], port=ask[1])
                if ask
                else cluster.get_node_from_key(keys[0])
            ) or cluster.get_node_from_key(keys[0])
            node_client = cluster.get_redis_connection(node)
        pipe = node_client.pipeline(transaction=False)
        if ask:
            pipe.execute_command("ASKING")
        pipe.evalsha(sha, len(keys), *keys, *args)
        pipe.execute_command("WAIT", replicas, timeout_ms)
        ask = None
        try:
            replies = pipe.execute(raise_on_error=False)
        except (ConnectionError, TimeoutError, ClusterDownError):
            if attempt == ATTEMPTS or not backoff():
                raise
            continue
        reply, acked = replies[-2], replies[-1]
        if isinstance(reply, NoScriptError):
            node_client.script_load(script)
        elif isinstance(reply, MovedError) and cluster is not None:
            cluster.nodes_manager.move_slot(reply)
        elif isinstance(reply, AskError) and cluster is not None:
            ask = (reply.host, reply.port)
            if cluster.nodes_manager.get_node(host=reply.host, port=reply.port) is None:
                cluster.nodes_manager.initialize()
        elif isinstance(reply, (TryAgainError, ClusterDownError)) and cluster is not None:
            if not backoff():  # a primary in the minority: the others may have replaced it
                raise reply
        elif isinstance(reply, BaseException):
            raise reply
        elif isinstance(acked, BaseException):
            raise acked
        else:
            return reply, int(acked)
        if attempt == ATTEMPTS and isinstance(reply, BaseException):
            raise reply
    raise ConnectionError("the append could not reach its primary")
