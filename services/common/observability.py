"""Health, metrics and structured logs, the same way in every service.

- `/healthz` answers while the process runs; `/readyz` also checks its dependencies (Redis)
  and answers 503 while one is unreachable, so a load balancer stops sending traffic.
- `/metrics` in the Prometheus text format. Under gunicorn with several workers the metrics
  of all workers are merged when ``PROMETHEUS_MULTIPROC_DIR`` is set (the gunicorn configs
  in `deploy/gunicorn/` set it up).
- One JSON object per log line, with the request id: taken from ``X-Request-Id`` when the
  caller sends a sane one, else made here; echoed in the response and passed on to the
  scoring worker with the notification, so one id follows a move into its score events.
"""

from __future__ import annotations

import contextvars
import glob
import json
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST as METRICS_TYPE
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUEST_ID = contextvars.ContextVar("request_id", default="")
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

HTTP_REQUESTS = Counter(
    "carcassonne_http_requests_total",
    "HTTP requests by service, route, method and status",
    ["service", "route", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "carcassonne_http_request_seconds",
    "HTTP request latency by service, route and method",
    ["service", "route", "method"],
    buckets=_LATENCY_BUCKETS,
)


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object: time, level, service, logger, message, request id
    and any `extra={...}` fields."""

    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message"}

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        """See `logging.Formatter.format`."""
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            out["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in self._STANDARD and key not in out and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(service: str, level: str | None = None) -> None:
    """JSON lines on stderr for the whole process (idempotent)."""
    root = logging.getLogger()
    level_name = (level or os.environ.get("LOG_LEVEL", "info")).upper()
    root.setLevel(getattr(logging, level_name, logging.INFO))
    for handler in root.handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root.handlers = [handler]


def request_id_from(value: str | None) -> str:
    """The caller's request id if it is sane, else a new one."""
    if value and _SANE_ID.fullmatch(value):
        return value
    # 32 hex digits, as uuid4().hex gave, for under half its CPU (1.0 µs against 2.5)
    return secrets.token_hex(16)


class SettledFilesCollector(multiprocess.MultiProcessCollector):
    """prometheus_client's multiprocess collector, skipping a worker's file that is still being
    created: the library creates it empty, then sizes it, and a `/metrics` that read it in
    between raised struct.error (a 500, seen while a worker booted beside a busy one). A file
    that is not sized yet holds no sample."""

    def collect(self) -> Any:
        files = [f for f in glob.glob(os.path.join(self._path, "*.db")) if _sized(f)]
        return self.merge(files, accumulate=True)


def _sized(path: str) -> bool:
    try:
        return os.path.getsize(path) >= 8  # the used-bytes header and the padding after it
    except OSError:  # removed meanwhile (a dead worker's live gauges)
        return False


def metrics_response() -> Response:
    """The Prometheus exposition of this process (all gunicorn workers in multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        SettledFilesCollector(registry)
        data = generate_latest(registry)
    else:
        data = generate_latest()
    return Response(data, mimetype=METRICS_TYPE)


def instrument(app: Flask, service: str, ready_checks: dict[str, Callable[[], object]]) -> None:
    """Add request ids, access logs, request metrics, `/readyz` and `/metrics` to `app`.

    `ready_checks` maps a dependency's name to a call that raises while it is unreachable.
    The request id and start time are set around the whole WSGI call (so they also cover
    Flask's own work, and cost no request hooks); one `after_request` hook, which knows the
    matched route, records the metrics and the access log line.
    """
    log = logging.getLogger(f"{service}.access")
    log_requests = os.environ.get("LOG_REQUESTS", "1") not in ("0", "false", "no")
    children: dict[tuple[str, str, str], tuple[Any, Any]] = {}  # labelled metrics, looked up once
    inner = app.wsgi_app

    def observed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request_id = request_id_from(environ.get("HTTP_X_REQUEST_ID"))
        environ["carcassonne.request"] = (time.perf_counter(), request_id)
        token = REQUEST_ID.set(request_id)
        try:
            return inner(environ, start_response)
        finally:
            REQUEST_ID.reset(token)

    app.wsgi_app = observed  # type: ignore[method-assign]

    @app.after_request
    def _finish(response: Response) -> Response:
        req = request._get_current_object()  # type: ignore[attr-defined]
        started, request_id = req.environ.get("carcassonne.request", (time.perf_counter(), ""))
        elapsed = time.perf_counter() - started
        route = req.url_rule.rule if req.url_rule is not None else "unmatched"
        status = response.status_code
        key = (route, req.method, str(status))
        found = children.get(key)
        if found is None:
            found = children[key] = (
                HTTP_REQUESTS.labels(service, route, req.method, key[2]),
                HTTP_SECONDS.labels(service, route, req.method),
            )
        found[0].inc()
        found[1].observe(elapsed)
        response.headers["X-Request-Id"] = request_id
        if log_requests and route not in ("/metrics", "/healthz", "/readyz"):
            log.info(
                "%s %s %s",
                req.method,
                req.path,
                status,
                extra={"route": route, "status": status, "ms": elapsed * 1000},
            )
        return response

    @app.get("/readyz")
    def readyz() -> tuple[dict[str, Any], int]:
        failed = dict(_failures(ready_checks))
        status = 503 if failed else 200
        return {"status": "unready" if failed else "ready", "failed": failed}, status

    @app.get("/metrics")
    def metrics() -> Response:
        return metrics_response()


def _failures(checks: dict[str, Callable[[], object]]) -> Iterator[tuple[str, str]]:
    for name, check in checks.items():
        try:
            check()
        except Exception as exc:  # any failure means "not ready"; the reason is reported
            yield name, f"{type(exc).__name__}: {exc}"[:200]
