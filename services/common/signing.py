"""Signatures of outgoing deliveries: what the worker sends and what a receiver checks.

Two schemes, both HMAC-SHA256 (standard library only, so a receiver may copy `verify`):

- per-game webhooks (`X-Carcassonne-Signature: sha256=<hex>`): the raw body under the hook's
  secret, as registered (kept for the receivers written against it);
- subscriptions (`Carcassonne-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`): the bytes
  ``t + "." + body`` under each live secret. The timestamp is signed, so a receiver can refuse
  a delivery older than its replay window; during a secret rotation's overlap there is one
  ``v1`` per live secret (newest first) and a receiver accepts the request if any of them
  matches one of the secrets it knows. Each attempt is signed afresh (a new `t`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

SIGNATURE_HEADER = "Carcassonne-Signature"
REPLAY_WINDOW = 300  # seconds a receiver should accept a timestamp away from its clock


def hook_signature(secret: str, body: bytes) -> str:
    """The `X-Carcassonne-Signature` header of a per-game webhook: HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(
        secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256
    ).hexdigest()


def sign(secrets: Iterable[str], body: bytes, timestamp: int) -> str:
    """The `Carcassonne-Signature` header: `t=<timestamp>` then one `v1=` per secret."""
    return ",".join([f"t={timestamp}", *(f"v1={_mac(s, timestamp, body)}" for s in secrets)])


def verify(header: str, body: bytes, secret: str, now: float, window: int = REPLAY_WINDOW) -> bool:
    """Whether `header` signs `body` with `secret` and its timestamp is within `window`
    seconds of `now` (a receiver's check; the docs show the same code)."""
    fields = [part.strip().split("=", 1) for part in header.split(",")]
    stamps = [value for name, value in (f for f in fields if len(f) == 2) if name == "t"]
    macs = [value for name, value in (f for f in fields if len(f) == 2) if name == "v1"]
    # A few ASCII digits, and ASCII macs: int() raises on other Unicode digits ("²") and on
    # over 4,300 digits, compare_digest on non-ASCII text; a forged header is refused instead.
    if len(stamps) != 1 or not re.fullmatch(r"[0-9]{1,12}", stamps[0]):
        return False
    if abs(now - int(stamps[0])) > window:
        return False
    expected = _mac(secret, int(stamps[0]), body)
    return any(mac.isascii() and hmac.compare_digest(expected, mac) for mac in macs)
