"""Gunicorn settings of the command service (also used by its benchmark baseline).

Environment: PORT (8000), BIND (overrides PORT), WEB_CONCURRENCY (workers; cores + 1),
GUNICORN_THREADS (1: sync workers, which suit this CPU-bound Flask app best), AFFINITY (1),
CLIENT_TIMEOUT (2 s: the longest a sync worker waits for a client's next bytes).

Sync workers serve one connection at a time: in production they sit behind a buffering proxy
(deploy/nginx/) that hands them only complete requests. CLIENT_TIMEOUT is the backstop for a
client that reaches them directly and idles (services/common/affinity.py).
"""

import multiprocessing
import os

from services.common.affinity import assign_slot, remove_inboxes
from services.common.gunicorn_hooks import child_exit, on_starting, use_metrics_dir

bind = os.environ.get("BIND", f"127.0.0.1:{os.environ.get('PORT', '8000')}")
# A turn is CPU-bound Python with two short Redis round trips: one worker per core plus one
# to use the waits. More workers only add context switches and make each worker's cached
# game states staler (measured on 2 cores: 3 workers ~35% more turns/s than 5).
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
# Sync workers that pass each game's requests to one worker, whose cached state of the game is
# then current (services/common/affinity.py); AFFINITY=0 gives gunicorn's sync worker without
# handovers. Both bound every read from a client by CLIENT_TIMEOUT.
affinity = os.environ.get("AFFINITY", "1") not in ("0", "false", "no")
if threads > 1:
    worker_class = "gthread"
elif affinity:
    worker_class = "services.common.affinity.GameAffinityWorker"
else:
    worker_class = "services.common.affinity.BoundedSyncWorker"
pre_fork = assign_slot
on_exit = remove_inboxes
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
__all__ = ["child_exit", "on_exit", "on_starting", "pre_fork"]
