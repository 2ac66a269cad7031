"""A private nginx for tests and benchmarks, from the repository's templates (deploy/nginx/):
free ports, its own directory, nothing written outside it, stopped and removed afterwards.

nginx comes from the system (the Debian package in CI). When it is missing and we run as root
(as CI does), `find_nginx` (deploy/local/host.py, as `make run`) installs it with apt-get;
otherwise the caller skips, saying why.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from deploy.local.host import find_nginx, free_port
from deploy.local.nginx_conf import nginx_argv, nginx_limits, nginx_servers, render_nginx
from tests.integration.http_client import REDIS_OF


@contextmanager
def nginx(
    upstreams: Mapping[str, str | Sequence[str]],
    access_log: bool = False,
    limits: Mapping[str, str] | None = None,
) -> Iterator[dict[str, str]]:
    """nginx on free loopback ports in front of `upstreams` (service -> gunicorn's host:port,
    or a list of them: its instances, each game routed to one; services "command" and/or
    "query"); yields {"public": the API's one base URL, and with a query service "query": its
    operator port (the query service alone)}. A service left out: its paths answer 502.
    `limits`: per-client limits other than deploy/local/nginx_conf.py's LIMITS."""
    binary, why = find_nginx()
    if binary is None:
        raise RuntimeError(why)
    prefix = Path(tempfile.mkdtemp(prefix="cc-nginx-"))
    public = {"public": free_port()} | ({"query": free_port()} if "query" in upstreams else {})
    nofile, connections = nginx_limits()
    values = {
        "CC_WORKER_PROCESSES": "auto",
        "CC_NOFILE": str(nofile),
        "CC_WORKER_CONNECTIONS": str(connections),
        "CC_ACCESS_LOG": f"{prefix / 'access.log'} timed" if access_log else "off",
    }
    values["CC_LISTEN"] = f"127.0.0.1:{public['public']}"
    values |= dict(limits or {})
    values |= {"CC_QUERY_LISTEN": f"127.0.0.1:{public['query']}"} if "query" in public else {}
    for name, address in upstreams.items():
        servers = [address] if isinstance(address, str) else list(address)
        values[f"CC_{name.upper()}_SERVERS"] = nginx_servers(servers)
    conf = render_nginx(prefix / "conf", values, list(upstreams))
    error_log = prefix / "error.log"
    proc = subprocess.Popen(
        nginx_argv(binary, prefix, conf, str(error_log)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers share its process group: killed with it
    )
    bases = {name: f"http://127.0.0.1:{port}" for name, port in public.items()}
    # The proxy serves what its services' Redis holds: `api_key(base)` finds the tests' key.
    behind = [REDIS_OF.get("http://" + a) for u in upstreams.values()
              for a in ([u] if isinstance(u, str) else u)]  # fmt: skip
    for base in bases.values():
        if any(behind):
            REDIS_OF[base] = next(url for url in behind if url)
    try:
        deadline = time.monotonic() + 15
        while not all(_answers(base + "/healthz") for base in bases.values()):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = error_log.read_text() if error_log.exists() else "(no error log)"
                raise RuntimeError(f"nginx did not start ({conf}):\n{log}")
            time.sleep(0.05)
        yield bases
    finally:
        for base in bases.values():
            REDIS_OF.pop(base, None)
        proc.terminate()  # SIGTERM: nginx's fast shutdown
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # any worker left behind
        shutil.rmtree(prefix, ignore_errors=True)


def _answers(url: str) -> bool:
    """Whether something answers HTTP at `url` (any status: nginx is up even if gunicorn is not)."""
    try:
        with urllib.request.urlopen(url, timeout=2.0):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def ring_server(key: str, servers: Sequence[str]) -> str:
    """The server (as written in the upstream, "host:port") that nginx's `hash <key>
    consistent` picks for `key` while every server is up: the ketama ring of
    ngx_http_upstream_hash_module — 160 points per server, point n being
    crc32(host NUL port prev) where prev is point n-1 as 4 little-endian bytes (0 for the
    first); the key goes to the first point at or above crc32(key), wrapping around."""
    points: dict[int, str] = {}
    for server in servers:
        host, _, port = server.rpartition(":")
        base = host.encode() + b"\0" + port.encode()
        prev = 0
        for _ in range(160):
            prev = zlib.crc32(base + prev.to_bytes(4, "little"))
            points.setdefault(prev, server)  # nginx keeps one point of equal hashes
    ring = sorted(points)
    at = bisect.bisect_left(ring, zlib.crc32(key.encode())) % len(ring)
    return points[ring[at]]
