"""A WSGI app that tells which worker served a request and whether it owns the request's game
(for tests of the command service's gunicorn worker, services/common/affinity.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from services.common.affinity import OWNS_GAME


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Answers every path with ``{"pid", "owns_game"}``."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    environ["wsgi.input"].read(length)  # a request's body is read whole, as the app does
    body = json.dumps({"pid": os.getpid(), "owns_game": environ.get(OWNS_GAME)}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
