"""Gunicorn settings of the query service.

Environment: PORT (8001), BIND (overrides PORT), WEB_CONCURRENCY (workers; cores + 1),
GUNICORN_CONNECTIONS (open connections per worker, 10000), ACCESS_LOG, LOG_LEVEL;
SSE_MAX_STREAMS (live streams per worker, default: the connections minus a reserve for views).
"""

import multiprocessing
import os
import resource

from services.common.gunicorn_hooks import (
    child_exit,
    on_starting,
    post_worker_init,
    use_metrics_dir,
)

bind = os.environ.get("BIND", f"127.0.0.1:{os.environ.get('PORT', '8001')}")
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() + 1))
# gevent: every connection is a greenlet. A live (SSE) stream waits on an Event of its own,
# woken by the process's one Redis reader (services/query/live.py), so it costs a greenlet
# and a socket — no thread, no Redis connection. Views are short and CPU-bound: one worker
# runs one at a time whatever the worker class; their Redis use is bounded by the view
# client's pool (REDIS_POOL_SIZE), and a view waiting for Redis lets the others run.
worker_class = "gevent"
worker_connections = max(10, int(os.environ.get("GUNICORN_CONNECTIONS", "10000")))
# Live streams may take all connections but a reserve, so views always get in: a stream
# beyond that gets 503 too_many_streams with Retry-After. The app reads this at start-up.
_reserve = max(5, min(1_000, worker_connections // 10))
os.environ.setdefault("SSE_MAX_STREAMS", str(max(1, worker_connections - _reserve)))

# Every connection is a file descriptor: raise the soft limit towards the hard one (workers
# inherit it), so worker_connections is reachable where the default soft limit is 1024.
_wanted = workers * worker_connections + 1_024
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft != resource.RLIM_INFINITY and _soft < _wanted:
    _new = _wanted if _hard == resource.RLIM_INFINITY else min(_wanted, _hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(_soft, _new), _hard))

backlog = 2048
# Request lines up to 8 KB, as nginx in front takes them (its 8k header buffers): a long query
# string (repeated parameters, cache busters) then gets the service's JSON 4xx or its view,
# not gunicorn's HTML 414 at 4 KB, which no client of the API is told about.
limit_request_line = 8190
keepalive = 5
timeout = 30  # the gevent worker's heartbeat runs in its own greenlet: a long stream is no hang
# On shutdown, open streams are cut after this long; clients reconnect with Last-Event-ID.
graceful_timeout = 5
max_requests = 100_000  # a restart bounds memory growth; streams reconnect
max_requests_jitter = 10_000
# gunicorn 27's control socket defaults to one path per user (~/.gunicorn/gunicorn.ctl):
# several servers on one host would take it from each other. Not used here.
control_socket_disable = True
accesslog = os.environ.get("ACCESS_LOG")  # "-" for stdout; off by default
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info")

# Prometheus metrics of all workers, merged (see services/common/gunicorn_hooks.py).
use_metrics_dir("query")
# Server hooks: gunicorn looks them up by name.
__all__ = ["child_exit", "on_starting", "post_worker_init"]
