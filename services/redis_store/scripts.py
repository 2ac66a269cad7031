"""Lua scripts that ride out a slot migration on a Redis Cluster.

Every script here names several keys of one game (or one API key): one hash tag, one slot.
While that slot migrates, a script whose keys are partly moved gets TRYAGAIN (Redis runs
nothing), and redis-py's cluster client gives up after 16 tries, about 0.5 s ("TTL
exhausted"), so a webhook registration or a rate-limit check during a resharding would have
answered 503. `script()` tries such a call again for up to `SETTLE_SECONDS`, as the event
store's append does (cluster_wire.py). Only refusals that ran nothing are retried, so any
script may be retried; a lost connection is the caller's, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.exceptions import ClusterDownError, ClusterError, TryAgainError

from .connect import is_cluster

SETTLE_SECONDS = 5.0  # how long a call is retried while its slot is split by a migration


def settled(send: Callable[[], Any], seconds: float = SETTLE_SECONDS) -> Any:
    """`send()`, tried again while the cluster answers TRYAGAIN/CLUSTERDOWN or gives up on
    them (ClusterError "TTL exhausted"), for up to `seconds`."""
    deadline, pause = time.monotonic() + seconds, 0.02
    while True:
        try:
            return send()
        except (TryAgainError, ClusterDownError, ClusterError):
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(0.25, pause * 2)


Script = Callable[..., Any]  # called as script(keys=[…], args=[…])


def script(client: redis.Redis, lua: str) -> Script:
    """`client.register_script(lua)`; on a cluster, a call rides out a slot migration."""
    registered = client.register_script(lua)
    if not is_cluster(client):
        return registered

    def call(keys: Sequence[Any] = (), args: Sequence[Any] = (), client: Any = None) -> Any:
        return settled(lambda: registered(keys=keys, args=args, client=client))

    return call
