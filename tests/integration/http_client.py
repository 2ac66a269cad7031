"""A tiny HTTP client for tests and benchmarks (standard library only) and a gunicorn launcher."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["ROOT", "api_key", "call", "free_port", "gunicorn"]
# Set by tests/integration/conftest.py: every answer is checked against docs/openapi.json
# (benchmarks, which import this module without it, pay nothing for it).
VALIDATE = False
SERVICES: set[str] = set()  # base URLs of the services' own apps (not test doubles)
REDIS_OF: dict[str, str] = {}  # base URL of a service `gunicorn` started -> its REDIS_URL
_KEYS: dict[str, str] = {}  # REDIS_URL -> the tests' API key there


def api_key(where: str) -> dict[str, str]:
    """Headers with the tests' API key (`X-Api-Key`) on the Redis at `where` (its URL, or the
    base URL of a service `gunicorn` started): a key made on first use with the key CLI's own
    code, and again if that Redis lost it. Games need one (POST /games)."""
    from services.redis_store.apikeys import ApiKeys  # benchmarks without keys import none
    from services.redis_store.connect import connect

    url = REDIS_OF.get(where, where)
    client = connect(url, role="tests-keys", max_connections=1)
    try:
        keys = ApiKeys(client)
        if url not in _KEYS or keys.get(_KEYS[url]) is None:
            _KEYS[url] = keys.create("tests")[1]
    finally:
        client.close()
    return {"X-Api-Key": _KEYS[url]}


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any]:
    """One request; returns (status, decoded JSON or None)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    try:
        conn.request(method, path, body=data, headers=sent)
        resp = conn.getresponse()
        payload = resp.read()
    finally:
        conn.close()
    if VALIDATE and base in SERVICES:
        from tests.integration.openapi_client import check_raw

        check_raw(base, method, path, sent, data, resp.status, resp.getheaders(), payload)
    try:
        return resp.status, json.loads(payload) if payload else None
    except json.JSONDecodeError:
        return resp.status, payload.decode(errors="replace")


@contextmanager
def gunicorn(
    app: str,
    config: str,
    env: dict[str, str],
    workers: int = 3,
    started: list[subprocess.Popen[bytes]] | None = None,
) -> Iterator[str]:
    """Run `app` under gunicorn with `config` on a free port; yields its base URL.

    The master process is appended to `started` if given (benchmarks read its CPU time).
    """
    port = free_port()
    full_env = {
        # Tests and benchmarks write from one loopback address far faster than any client:
        # no rate limits unless the caller's environment or `env` sets them (tests/conftest.py).
        "ADDRESS_WRITE_RATE": "0",
        "API_KEY_RATE": "0",
        **os.environ,
        **env,
        "BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": str(workers),
        "LOG_LEVEL": "warning",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", config, app], cwd=ROOT, env=full_env
    )
    if started is not None:
        started.append(proc)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if call(base, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn for {app} did not start")
            time.sleep(0.1)
        if app.startswith("services."):
            SERVICES.add(base)
        if "REDIS_URL" in full_env:
            REDIS_OF[base] = full_env["REDIS_URL"]
        yield base
    finally:
        SERVICES.discard(base)
        REDIS_OF.pop(base, None)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
