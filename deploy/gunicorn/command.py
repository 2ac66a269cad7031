"""Gunicorn settings of the command service (also used by its benchmark baseline).

Environment: PORT (8000), BIND (overrides PORT), WEB_CONCURRENCY (workers; 2 x cores + 1),
GUNICORN_THREADS (1: sync workers, which suit this CPU-bound Flask app best).
"""

import multiprocessing
import os

bind = os.environ.get("BIND", f"127.0.0.1:{os.environ.get('PORT', '8000')}")
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
worker_class = "gthread" if threads > 1 else "sync"
backlog = 2048
timeout = 30
graceful_timeout = 10
# Clients keep no state on a worker: restarting one now and then bounds memory growth.
max_requests = 100_000
max_requests_jitter = 10_000
accesslog = os.environ.get("ACCESS_LOG")  # "-" for stdout; off by default (it costs ~10%)
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info")
