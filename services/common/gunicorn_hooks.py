"""Gunicorn server hooks shared by the services' configs in `deploy/gunicorn/`.

Prometheus under gunicorn: every worker writes its metrics to files in one directory and
`/metrics` merges them (`prometheus_client` multiprocess mode). Each server needs a
directory of its own: two servers sharing one would wipe each other's files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any


def use_metrics_dir(service: str) -> str:
    """Name the metrics directory (before the workers import prometheus_client)."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=f"cc-metrics-{service}-")
    return os.environ["PROMETHEUS_MULTIPROC_DIR"]


def on_starting(server: Any) -> None:
    """Start from empty metric files (counters restart with the server)."""
    path = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live gauges (its counters stay in the merged totals)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
