"""Gunicorn settings of the query service.

Environment: PORT (8001), BIND (overrides PORT), WEB_CONCURRENCY (workers; cores + 1),
GUNICORN_THREADS (64), ACCESS_LOG, LOG_LEVEL; SSE_MAX_STREAMS (live streams per worker,
default: threads minus a reserve, see below).
"""

import multiprocessing
import os

from services.common.gunicorn_hooks import child_exit, on_starting, use_metrics_dir

bind = os.environ.get("BIND", f"127.0.0.1:{os.environ.get('PORT', '8001')}")
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() + 1))
# A live (SSE) stream holds a thread while it waits in XREAD BLOCK (no CPU), so gthread
# workers with many threads: idle keep-alive connections wait in the worker's poller, not in
# a thread. Views are short and CPU-bound; the GIL serialises them whatever the thread count.
threads = max(2, int(os.environ.get("GUNICORN_THREADS", "64")))
worker_class = "gthread"
worker_connections = 2_000  # open client connections per worker (streams and keep-alive)
# Live streams may take all threads but a reserve, so views never queue behind them: a
# stream beyond that gets 503 with Retry-After. The app reads this setting at start-up.
_reserve = max(1, min(16, threads // 4))
os.environ.setdefault("SSE_MAX_STREAMS", str(max(1, threads - _reserve)))
backlog = 2048
keepalive = 5
timeout = 30  # gthread: the heartbeat comes from the main thread, a long stream is no hang
# On shutdown, open streams are cut after this long; clients reconnect with Last-Event-ID.
graceful_timeout = 5
max_requests = 100_000  # a restart bounds memory growth; streams reconnect
max_requests_jitter = 10_000
accesslog = os.environ.get("ACCESS_LOG")  # "-" for stdout; off by default
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info")

# Prometheus metrics of all workers, merged (see services/common/gunicorn_hooks.py).
use_metrics_dir("query")
__all__ = ["child_exit", "on_starting"]  # server hooks: gunicorn looks them up by name
