"""Gunicorn settings of the command service (also used by its benchmark baseline).

Environment: PORT (8000), BIND (overrides PORT), WEB_CONCURRENCY (workers; 1),
GUNICORN_THREADS (1: sync workers, which suit this CPU-bound Flask app best),
CLIENT_TIMEOUT (2 s: the longest a sync worker waits for a client's next bytes).

Sync workers serve one connection at a time: in production they sit behind a buffering proxy
(deploy/nginx/) that hands them only complete requests. CLIENT_TIMEOUT is the backstop for a
client that reaches them directly and idles (services/common/gunicorn_worker.py).
"""

import os

from services.common.gunicorn_hooks import (
    child_exit,
    on_starting,
    post_worker_init,
    use_metrics_dir,
)

bind = os.environ.get("BIND", f"127.0.0.1:{os.environ.get('PORT', '8000')}")
# One worker per instance: the proxy routes each game to one instance by a consistent hash of
# its id (deploy/nginx/), so with one worker there the game's cached state is current and a turn
# trusts it (TRUST_CACHE, on by default): one Redis round trip, no catch-up read. Scale by
# instances (about one per core), not by workers: the proxy cannot pick a worker inside an
# instance, and each worker would then catch up on what its siblings appended
# (tests/bench/bench_instances.py has the figures).
workers = int(os.environ.get("WEB_CONCURRENCY", "1"))
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
# gthread for request threads; otherwise gunicorn's sync worker with every read from a client
# bounded by CLIENT_TIMEOUT.
worker_class = "gthread" if threads > 1 else "services.common.gunicorn_worker.BoundedSyncWorker"
backlog = 2048
timeout = 30
graceful_timeout = 10
# Clients keep no state on a worker: restarting one now and then bounds memory growth.
max_requests = 100_000
max_requests_jitter = 10_000
# gunicorn 27's control socket defaults to one path per user (~/.gunicorn/gunicorn.ctl): the
# command and query servers of one `make run` (or of parallel tests) would take it from each
# other. Not used here.
control_socket_disable = True
accesslog = os.environ.get("ACCESS_LOG")  # "-" for stdout; off by default (it costs ~10%)
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info")

# Prometheus metrics of all workers, merged (see services/common/gunicorn_hooks.py).
use_metrics_dir("command")
# Server hooks: gunicorn looks them up by name.
__all__ = ["child_exit", "on_starting", "post_worker_init"]
