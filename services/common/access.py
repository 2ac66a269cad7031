"""Who is calling, and may they: the API key (`X-Api-Key`), the client's address, and the
rate limits on both (the buckets: services/redis_store/ratelimit.py). Both services use it:
the command service for every write, the query service for the lists that need a key.

The client's address is the TCP peer's, unless the peer is one of ``TRUSTED_PROXIES``
(addresses or networks, comma-separated; none by default): then it is read from the
``X-Forwarded-For`` the proxy appends to, from the right, skipping trusted proxies, so the
first address no trusted proxy vouches for is the client (``X-Real-IP`` when there is no
``X-Forwarded-For``). A header a client sends itself straight to a service is never believed:
unlike werkzeug's ProxyFix (whose default trusts the last ``X-Forwarded-For`` entry of any
peer) or gunicorn's ``forwarded_allow_ips`` (which changes only the URL scheme, never
``REMOTE_ADDR``), the trust is in who sent the header, not in the header. So every address in
``TRUSTED_PROXIES`` must be a proxy that appends the peer it saw (nginx's
``$proxy_add_x_forwarded_for`` does), and a client inside a trusted network (`make run`: this
machine) can name any address it likes; keep the setting to the proxies' own addresses.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from typing import Any

from flask import Response
from werkzeug.wrappers import Request

from carcassonne.errors import GameError
from services.redis_store.apikeys import ApiKeys
from services.redis_store.ratelimit import AddressLimiter, Decision, RateLimiter

API_KEY = "X-Api-Key"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class MissingKey(GameError):
    """No API key where one is needed: 401."""

    status = 401


class BadKey(GameError):
    """An unknown or revoked API key: 403."""

    status = 403


class RateLimited(GameError):
    """A bucket used up; `Retry-After` (``details.retry_after``) says when to call again."""

    status = 429


def trusted_proxies(setting: str) -> tuple[Network, ...]:
    """The networks of ``TRUSTED_PROXIES`` ("127.0.0.1, 10.0.0.0/8"); a bad entry fails at
    start-up with the setting's name."""
    out = []
    for part in setting.replace(" ", ",").split(","):
        if part:
            try:
                out.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise SystemExit(
                    f"TRUSTED_PROXIES: {part!r} is not an address or network"
                ) from None
    return tuple(out)


def _trusted(address: str, proxies: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in proxies)


def client_address(request: Request, proxies: tuple[Network, ...]) -> str:
    """The address the request came from (see the module's docstring)."""
    peer = request.environ.get("REMOTE_ADDR") or ""
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded = ",".join(request.headers.getlist("X-Forwarded-For"))
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    if not hops and request.headers.get("X-Real-IP", "").strip():
        hops = [request.headers["X-Real-IP"].strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer  # every hop is a trusted proxy: the first one


def _refused(decision: Decision, what: str) -> None:
    if not decision.allowed:
        seconds = max(1, math.ceil(decision.retry_after_ms / 1000))
        raise RateLimited(
            "rate_limited",
            f"{what} rate limit is used up; retry in {seconds} s",
            None,
            retry_after=seconds,
        )


def check_address(limiter: AddressLimiter, address: str) -> None:
    """Take a token from the address's bucket, or 429 `rate_limited` (nothing written)."""
    _refused(limiter.check(address), "this address's")


def request_key(request: Request) -> str | None:
    """The `X-Api-Key` the request sends (None: none)."""
    return request.headers.get(API_KEY, "").strip() or None


def checked_key(limiter: RateLimiter, key: str) -> dict[str, Any]:
    """The record of a live `key` within its rate limit: 403 `bad_api_key` for an unknown or
    revoked key, 429 `rate_limited`."""
    decision = limiter.check(key) if len(key) <= 200 else None
    if decision is None or decision.record is None:
        raise BadKey("bad_api_key", "this API key is unknown or revoked")
    _refused(decision, "this API key's")
    return decision.record


def known_key(keys: ApiKeys, key: str) -> dict[str, Any]:
    """The record of a live `key` (no rate limit: for reads), else 403 `bad_api_key`."""
    record = keys.get(key) if len(key) <= 200 else None
    if record is None:
        raise BadKey("bad_api_key", "this API key is unknown or revoked")
    return record


def missing_key(what: str) -> MissingKey:
    """401 `missing_api_key`: `what` needs a key."""
    return MissingKey("missing_api_key", f"{what} needs your API key: send it as {API_KEY}")


def with_retry_after(response: Response, exc: GameError) -> Response:
    """`response` with the ``Retry-After`` a refusal names (``details.retry_after``)."""
    retry = (exc.details or {}).get("retry_after")
    if retry is not None:
        response.headers["Retry-After"] = str(retry)
    return response
