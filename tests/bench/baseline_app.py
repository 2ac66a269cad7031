"""The benchmark baseline: a minimal Flask endpoint that does one XADD per request."""

from __future__ import annotations

import os

import redis
from flask import Flask, request

app = Flask(__name__)
client = redis.Redis.from_url(os.environ["REDIS_URL"])


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/xadd")
def xadd() -> dict[str, str]:
    body = request.get_data()
    entry = client.xadd("{bench}:baseline", {"data": body})
    return {"id": entry.decode() if isinstance(entry, bytes) else str(entry)}
