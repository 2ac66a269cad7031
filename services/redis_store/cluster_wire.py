"""`ClusterWire`: the event store's hot commands on a Redis Cluster, one `Wire` per node.

`Wire` sends a command down a connection of one server. On a cluster the server is the
primary of the command's key slot, which the cluster client already knows (its slot map,
kept by CLUSTER SLOTS and MOVED replies): each command goes down the `Wire` of that node,
made on first use with that node's pool settings (`cc:<role>:wire` connections, at most the
node pool's size). Measured here (tests/bench/bench_cluster.py prints it): an EVALSHA costs
~9 µs of CPU down a node's `Wire` against ~50 µs through `RedisCluster.evalsha`, an XRANGE
~16 µs against ~100 µs — the cluster client's routing, retry and callback layers.

Anything unusual — a MOVED or ASK reply (a slot moved, or is moving), TRYAGAIN, CLUSTERDOWN,
a lost connection, a slot the map does not cover — is handed to the cluster client itself,
which follows the redirection (ASKING on the importing node), re-reads the topology and
retries with backoff; its reply is given back in Wire's raw form. Only idempotent commands
come here (the append script is idempotent by command id), so sending one again is safe.

While a slot migrates, a command naming several of its keys (the append script) gets
TRYAGAIN whenever some of them have moved and others not yet; the cluster client gives up
after 16 tries (~0.5 s, "TTL exhausted"). A batch of a big slot can take longer, so such a
command is tried again here for up to `scripts.SETTLE_SECONDS` before the error is the caller's.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    NoScriptError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from .scripts import settled
from .wire import Wire

# What the cluster client knows how to handle and a node's Wire does not (MovedError is an
# AskError).
_HAND_OVER = (
    AskError,
    TryAgainError,
    ClusterDownError,
    SlotNotCoveredError,
    ConnectionError,
    TimeoutError,
)


def _raw_entries(parsed: Any) -> list[Any]:
    """A parsed XRANGE reply ([(id, {field: value})]) in raw form ([(id, [f, v, …])])."""
    return [(eid, [x for pair in fields.items() for x in pair]) for eid, fields in parsed or []]


class ClusterWire:
    """`Wire`'s interface (`call`, `evalsha`) on a `RedisCluster`: routed by key slot."""

    def __init__(self, client: RedisCluster, max_connections: int | None = None) -> None:
        self._client = client
        self._size = max_connections
        self._wires: dict[str, tuple[object, Wire]] = {}  # node name -> (its client, wire)
        self._lock = threading.Lock()

    @property
    def max_connections(self) -> int:
        """The most connections the wire of one node may hold."""
        kwargs = self._client.nodes_manager.connection_kwargs
        return self._size or int(kwargs.get("max_connections") or 8)

    def _wire(self, key: str) -> Wire:
        """The wire of the primary that serves `key`'s slot now (as the client knows it)."""
        node = self._client.get_node_from_key(key)
        node_client = self._client.get_redis_connection(node)
        entry = self._wires.get(node.name)
        if entry is None or entry[0] is not node_client:  # new node, or its client replaced
            with self._lock:
                entry = self._wires.get(node.name)
                if entry is None or entry[0] is not node_client:
                    old = entry
                    entry = (node_client, Wire(node_client, self._size))
                    self._wires[node.name] = entry
                    if old is not None:
                        old[1].close()  # the replaced client's sockets are not left open
        return entry[1]

    def call(self, *args: Any) -> Any:
        """Send one command whose key is its second word (XRANGE key …); raw reply."""
        try:
            return self._wire(str(args[1])).call(*args)
        except _HAND_OVER:
            reply = settled(lambda: self._client.execute_command(*args))
            return _raw_entries(reply) if str(args[0]).upper() == "XRANGE" else reply

    def evalsha(self, sha: str, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a script by its hash on the node of its keys (one slot), loading it if needed."""
        try:
            return self._wire(keys[0]).evalsha(sha, script, keys, args)
        except _HAND_OVER:
            return settled(lambda: self._evalsha(sha, script, keys, args))

    def _evalsha(self, sha: str, script: str, keys: list[str], args: list[Any]) -> Any:
        try:
            return self._client.evalsha(sha, len(keys), *keys, *args)
        except NoScriptError:
            # SCRIPT LOAD goes to every primary: a node promoted or added since knows it too.
            self._client.script_load(script)
            return cast(Any, self._client.evalsha(sha, len(keys), *keys, *args))
