"""The front of the suite on its hosts: nginx on a host of its own, configured from
deploy/nginx/ as `make run` does (deploy/local/run.py `proxy_stage`: the API's one public
port routing each path to its service, each game hashed to one instance of each), in front
of the command instances with WAIT on and both query instances; and the delay proxy
(tests/hosts/delay.py) on the tester host, through which the clients that play via nginx
reach it, so a fault can be run with latency on that link.
"""

from __future__ import annotations

import http.client
import time

from deploy.local.host import find_nginx
from deploy.local.nginx_conf import nginx_argv, nginx_limits, nginx_servers, render_nginx
from tests.hosts.delay import DelayProxy
from tests.hosts.netns import Network

PUBLIC_PORT, QUERY_ALONE_PORT = 8080, 8081


def start_nginx(
    net: Network, host: str, command: list[str], query: list[str], timeout: float = 60.0
) -> str:
    """nginx in `host` in front of `command` and `query` (host:port of the instances); its
    public base URL once it passes /healthz on to both services."""
    binary, why = find_nginx()
    if binary is None:
        raise RuntimeError(f"nginx is needed on the nginx host: {why}")
    address = net.hosts[host].address
    prefix = net.workdir / "nginx"
    nofile, connections = nginx_limits()
    values = {
        "CC_WORKER_PROCESSES": "1",  # a 2-core machine shared by every host
        "CC_NOFILE": str(nofile),
        "CC_WORKER_CONNECTIONS": str(connections),
        "CC_ACCESS_LOG": f"{net.workdir / 'nginx-access.log'} timed",
        "CC_LISTEN": f"{address}:{PUBLIC_PORT}",
        "CC_QUERY_LISTEN": f"{address}:{QUERY_ALONE_PORT}",
        "CC_COMMAND_SERVERS": nginx_servers(command),
        "CC_QUERY_SERVERS": nginx_servers(query),
    }
    conf = render_nginx(prefix / "conf", values, ["command", "query"])
    proc = net.start(host, nginx_argv(binary, prefix, conf), "nginx")
    base = f"http://{address}:{PUBLIC_PORT}"
    deadline = time.monotonic() + timeout
    # /healthz goes to the command service, /tilesets to the query service: both answer.
    while not (_status(base, "/healthz") == 200 and _status(base, "/tilesets") == 200):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"nginx does not serve ({conf}):\n{net.log('nginx')[-2000:]}")
        time.sleep(0.1)
    return base


def start_delay(target: str) -> DelayProxy:
    """A delay proxy (no delay yet) on the calling thread's loopback, relaying to `target`
    (a base URL): it listens in the namespace of the calling thread."""
    host, port = target.removeprefix("http://").split(":")
    proxy = DelayProxy(("127.0.0.1", 0), (host, int(port)))
    proxy.start()
    return proxy


def _status(base: str, path: str) -> int:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    except OSError:
        return 0
    finally:
        conn.close()
