"""The suite spread over hosts (tests/hosts/netns.py): a Redis Cluster of 3 primaries and 3
replicas, one node per host, announcing its host's address; the broker; 2 command hosts, each
running one instance with WAIT on (`REDIS_WAIT_REPLICAS=1`) and one with it off, so a run
compares both on the same cluster and the same faults; 2 query hosts; a scoring worker and
its beat on one host; the bot worker and its beat on another; nginx on its own host in front
of the WAIT-on command instances and both query instances (tests/hosts/front.py); and the
tester host the test process joins to play and check, with the delay proxy to nginx on its
loopback.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from deploy.local.cluster import redis_argv
from deploy.local.host import redis_cli_binary, redis_server_binary
from services.redis_store.keys import key_slot
from tests.hosts.delay import DelayProxy
from tests.hosts.front import start_delay, start_nginx
from tests.hosts.netns import Network

ROOT = Path(__file__).resolve().parents[2]
REDIS_PORT = 6379  # the same on every host: each has its own address
WAIT_ON, WAIT_OFF = 8000, 8001  # each command host's two instances
QUERY_PORT = 8000
NODE_TIMEOUT_MS = 1000  # a silent primary is replaced after this (and a vote)
WAIT_MS = 200  # REDIS_WAIT_MS of the WAIT instances
REDIS_HOSTS = [f"r{i}" for i in range(1, 7)]
COMMAND_HOSTS = ["c1", "c2"]
QUERY_HOSTS = ["q1", "q2"]
WORKER_HOSTS = ["w1", "b1"]  # the scoring worker's, the bot worker's (each with its beat)


def node_client(address: str) -> redis.Redis:
    """A plain client of one node (no redirection), quick to give up."""
    return redis.Redis(address, REDIS_PORT, socket_connect_timeout=0.5, socket_timeout=0.5)


@dataclass
class Suite:
    """The running hosts; `net` holds the processes (`net.close()` ends everything)."""

    net: Network
    redis: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    services: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # The games being played now (set by the test): faults aim at the primaries serving them.
    playing: Callable[[], list[str]] = list
    nginx_base: str = ""  # nginx's public URL on its host
    front: DelayProxy | None = None  # the tester's way to nginx, with latency when asked

    @property
    def public_base(self) -> str:
        """nginx as the clients that play through it reach it: via the delay proxy."""
        assert self.front is not None, "the suite's front is not started"
        return f"http://127.0.0.1:{self.front.port}"

    def address(self, host: str) -> str:
        return self.net.hosts[host].address

    @property
    def cluster_url(self) -> str:
        return "redis+cluster://" + ",".join(f"{self.address(h)}:{REDIS_PORT}" for h in REDIS_HOSTS)

    def command_bases(self, wait: bool) -> list[str]:
        """The base URLs of the command instances with WAIT on (or off), one per host."""
        port = WAIT_ON if wait else WAIT_OFF
        return [f"http://{self.address(h)}:{port}" for h in COMMAND_HOSTS]

    @property
    def query_bases(self) -> list[str]:
        """Each query instance's base URL, one per query host."""
        return [self.query_base_of(h) for h in QUERY_HOSTS]

    def query_base_of(self, host: str) -> str:
        return f"http://{self.address(host)}:{QUERY_PORT}"

    def host_of(self, address: str) -> str:
        """The host of `address` ("" for none: a node not yet known by its address)."""
        return next((name for name, h in self.net.hosts.items() if h.address == address), "")

    # -- the cluster's shape, as its nodes see it ---------------------------------------------

    def topology(self) -> dict[str, list[str]]:
        """Each primary host serving slots -> its replica hosts, as the first node that
        answers sees it; {} while none does."""
        for host in REDIS_HOSTS:
            if shape := self.topology_from(host):
                return shape
        return {}

    def topology_from(self, observer: str) -> dict[str, list[str]]:
        """The same, as the node of host `observer` sees it ({} when it does not answer)."""
        if not self.redis_alive(observer):
            return {}
        try:
            raw = node_client(self.address(observer)).execute_command("CLUSTER", "NODES")
        except redis.RedisError:
            return {}
        rows = [line.split() for line in _text(raw).strip().splitlines()]
        ids = {r[0]: self.host_of(r[1].split(":")[0]) for r in rows}
        shape: dict[str, list[str]] = {}
        for r in rows:  # a primary that serves slots has slot ranges after its 8 fields
            if "master" in r[2] and len(r) > 8:
                shape.setdefault(ids[r[0]], [])
        for r in rows:
            if "slave" in r[2] and ids.get(r[3]) in shape:
                shape[ids[r[3]]].append(ids[r[0]])
        return shape

    def owner_of(self, game: str) -> str:
        """The host whose node serves the game's slot now ("" when no node answers)."""
        slot = key_slot("g:" + game)
        for host in REDIS_HOSTS:
            if not self.redis_alive(host):
                continue
            try:
                ranges = node_client(self.address(host)).execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            for first, last, owner, *_ in ranges:
                if int(first) <= slot <= int(last):
                    return self.host_of(_text(owner[0]))
        return ""

    def healthy(self) -> bool:
        """Every node up, all agree on the slot owners, each of the 3 primaries has an online
        replica (so WAIT 1 is answered) and says cluster_state:ok."""
        try:
            views = set()
            for host in REDIS_HOSTS:
                node = node_client(self.address(host))
                info = node.execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text:
                    return False
                slots = node.execute_command("CLUSTER", "SLOTS")
                views.add(tuple(sorted((int(s[0]), int(s[1]), _text(s[2][0])) for s in slots)))
            if len(views) != 1:
                return False
            primaries = {self.host_of(_text(owner)) for _, _, owner in views.pop()}
            for primary in primaries:
                replication = node_client(self.address(primary)).info("replication")
                online = [
                    v
                    for k, v in replication.items()
                    if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
                ]
                if not online:
                    return False
            return len(primaries) == 3
        except redis.RedisError:
            return False

    def wait_healthy(self, timeout: float = 60.0) -> float:
        """Until `healthy()`; the seconds it took."""
        start = time.monotonic()
        while not self.healthy():
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"the cluster is not healthy after {timeout:g} s")
            time.sleep(0.1)
        return time.monotonic() - start

    # -- processes ----------------------------------------------------------------------------

    def start_redis(self, host: str) -> None:
        """Start (again) the cluster node of `host`: it keeps its nodes.conf, so it comes back
        as the node it was (and learns it was replaced, becoming a replica)."""
        address = self.address(host)
        argv = redis_argv(REDIS_PORT, self.net.workdir / host, address, cluster=True,
                          node_timeout_ms=NODE_TIMEOUT_MS)  # fmt: skip
        argv += ["--cluster-announce-ip", address, "--protected-mode", "no"]
        self.redis[host] = self.net.start(host, argv, f"redis-{host}")

    def redis_alive(self, host: str) -> bool:
        proc = self.redis.get(host)
        return proc is not None and proc.poll() is None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def start_suite(net: Network) -> Suite:
    """Make the hosts and start every part; returns once the cluster is healthy and every
    HTTP instance answers /readyz and nginx passes requests on. The calling thread must be
    inside host "t" (`net.enter`): the delay proxy listens there."""
    suite = Suite(net)
    for host in [*REDIS_HOSTS, "broker", *COMMAND_HOSTS, *QUERY_HOSTS, *WORKER_HOSTS, "ng"]:
        net.add_host(host)
    for host in REDIS_HOSTS:
        suite.start_redis(host)
    broker = suite.address("broker")
    suite.services["broker"] = net.start(
        "broker",
        [redis_server_binary(), "--port", str(REDIS_PORT), "--bind", broker, "--save", "",
         "--appendonly", "no", "--protected-mode", "no", "--dir", str(net.workdir)],
        "broker",
    )  # fmt: skip
    nodes = [suite.address(h) for h in REDIS_HOSTS]
    # redis-cli --cluster create takes the first three as primaries; the node of host r<i+3>
    # is likely the replica of r<i> but not sure: the shape is read back, never assumed.
    _form(nodes)
    suite.wait_healthy()
    env = {
        "REDIS_URL": suite.cluster_url,
        "BROKER_URL": f"redis://{broker}:{REDIS_PORT}/0",
        "ANONYMOUS_GAMES": "1",  # the clients create games without an API key
        "TRUST_CACHE": "0",  # a game's conflicting writers go to both instances of a kind
        "NOTIFY_MS": "0",  # scoring follows the change feed; no task needed
        "ADDRESS_WRITE_RATE": "0",
        "API_KEY_RATE": "0",
        "WEB_CONCURRENCY": "1",
        "LOG_LEVEL": "warning",
        "PYTHONUNBUFFERED": "1",
    }
    gunicorn = [sys.executable, "-m", "gunicorn", "-c"]
    for host in COMMAND_HOSTS:
        for port, wait in ((WAIT_ON, "1"), (WAIT_OFF, "0")):
            bind = f"{suite.address(host)}:{port}"
            suite.services[f"{host}-{port}"] = net.start(
                host,
                [*gunicorn, "deploy/gunicorn/command.py", "services.command.wsgi:app"],
                f"command-{host}-{port}",
                {
                    **env,
                    "BIND": bind,
                    "REDIS_WAIT_REPLICAS": wait,
                    "REDIS_WAIT_MS": str(WAIT_MS),
                    "PROMETHEUS_MULTIPROC_DIR": str(net.workdir / f"metrics-{host}-{port}"),
                },
                ROOT,
            )
    for host in QUERY_HOSTS:
        suite.services[host] = net.start(
            host,
            [*gunicorn, "deploy/gunicorn/query.py", "services.query.wsgi:app"],
            f"query-{host}",
            {
                **env,
                "BIND": f"{suite.address(host)}:{QUERY_PORT}",
                "WEB_CONCURRENCY": "2",
                "PROMETHEUS_MULTIPROC_DIR": str(net.workdir / f"metrics-query-{host}"),
            },
            ROOT,
        )
    suite.services["w1"] = net.start(
        "w1",
        [sys.executable, "-m", "celery", "-A", "services.scoring.celery_app", "worker",
         "-Q", "scoring", "-l", "info", "--pool", "threads", "--concurrency", "2",
         "-n", "w1@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        "worker",
        {**env, "LOG_LEVEL": "info"},  # its "ready." line is an info log
        ROOT,
    )  # fmt: skip
    # beat, as every deployment runs it: its sweep follows every shard's feed every
    # SWEEP_SECONDS (10), the backstop of the worker's own watch.
    suite.services["beat"] = net.start(
        "w1",
        [sys.executable, "-m", "celery", "-A", "services.scoring.celery_app", "beat",
         "-s", str(net.workdir / "beat-schedule"), "-l", "info"],
        "beat",
        env,
        ROOT,
    )  # fmt: skip
    _start_bots(suite, env)
    bases = [*suite.command_bases(True), *suite.command_bases(False), *suite.query_bases]
    deadline = time.monotonic() + 120  # the machine is shared: starts can be slow
    for base in bases:
        while not _ready(base):
            dead = [n for n, p in suite.services.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(net.log(n)[-2000:] for n in ("query-q1", "worker", "bots"))
                raise RuntimeError(f"{base} is not ready (exited: {dead})\n{logs}")
            time.sleep(0.1)
    for name, log in (("w1", "worker"), ("b1", "bots")):
        while "ready." not in net.log(log):
            if suite.services[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {log} worker did not start:\n{net.log(log)[-3000:]}")
            time.sleep(0.1)
    instances = [b.removeprefix("http://") for b in suite.command_bases(True)]
    queries = [b.removeprefix("http://") for b in suite.query_bases]
    suite.nginx_base = start_nginx(net, "ng", instances, queries)
    suite.front = start_delay(suite.nginx_base)
    return suite


def _start_bots(suite: Suite, env: dict[str, str]) -> None:
    """The bot worker and its beat on host b1, as `make run` starts them (deploy/local/run.py
    `app_stage`): prefork, here one process (a 2-core machine shared by every host)."""
    suite.services["b1"] = suite.net.start(
        "b1",
        [sys.executable, "-m", "celery", "-A", "services.bots.celery_app", "worker",
         "-Q", "bots", "-l", "info", "--concurrency", "1",
         "-n", "b1@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        "bots",
        # its moves WAIT for a replica, as the WAIT instances' turns: one not confirmed is
        # looked at again by the sweep (services/bots/celery_app.py `play`)
        {**env, "LOG_LEVEL": "info", "REDIS_WAIT_REPLICAS": "1", "REDIS_WAIT_MS": str(WAIT_MS)},
        ROOT,
    )  # fmt: skip
    # its sweep re-sends the turns of bots nobody is playing (a task lost with the broker)
    suite.services["bots-beat"] = suite.net.start(
        "b1",
        [sys.executable, "-m", "celery", "-A", "services.bots.celery_app", "beat",
         "-s", str(suite.net.workdir / "bots-beat-schedule"), "-l", "info"],
        "bots-beat",
        env,
        ROOT,
    )  # fmt: skip


def _form(nodes: list[str]) -> None:
    # deploy/local/cluster.py's form_cluster takes one host and several ports; here every
    # node has its own address and the same port. `wait_healthy` then waits for "ok".
    deadline = time.monotonic() + 30
    for address in nodes:
        while True:
            try:
                node_client(address).ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the node at {address} does not answer") from None
                time.sleep(0.05)
    argv = [redis_cli_binary(), "--cluster", "create", *(f"{a}:{REDIS_PORT}" for a in nodes)]
    done = subprocess.run(
        [*argv, "--cluster-replicas", "1", "--cluster-yes"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError((done.stdout + done.stderr).decode(errors="replace"))


def _ready(base: str) -> bool:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=2)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()
