"""Rate limits: a token bucket per API key, checked together with the key itself in one Lua
script, and a token bucket per client address, checked before anything else of a write.

One round trip per request answers "is this key live, and may it call now?": the script
reads the key's record and takes a token from its bucket atomically, with Redis's clock
(every gunicorn worker shares the same bucket and the same time). A bucket holds `burst`
tokens and refills at `rate` per second; an empty one answers how long until a token.

A refused request writes nothing: the bucket is written only when a token is taken (a refill
is linear in time, so leaving the bucket as it was gives the next check the same answer), and
an unknown key has no bucket. A bucket expires once it would be full again, so Redis holds at
most one small hash per key or address that called within the last `burst / rate` seconds:
a flood of refused or unauthenticated requests from one address leaves memory unchanged.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

import redis

from .apikeys import KEYS, bucket_key, key_hash
from .scripts import script

# Take `cost` tokens from the bucket at KEYS[n] if it holds them (rate, burst, cost: the
# three ARGV after `first`); sets `allowed` and `wait` (ms until the tokens are there).
_BUCKET = """
local function take(bucket_key, first)
  local rate, burst, cost = tonumber(ARGV[first]), tonumber(ARGV[first + 1]),
    tonumber(ARGV[first + 2])
  if rate <= 0 then return 1, 0 end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local bucket = redis.call('HMGET', bucket_key, 'tokens', 'ms')
  local tokens, last = tonumber(bucket[1]), tonumber(bucket[2])
  if tokens == nil or last == nil then tokens, last = burst, now end
  tokens = math.min(burst, tokens + math.max(0, now - last) * rate / 1000)
  if tokens < cost then return 0, math.ceil((cost - tokens) * 1000 / rate) end
  redis.call('HSET', bucket_key, 'tokens', tostring(tokens - cost), 'ms', tostring(now))
  redis.call('PEXPIRE', bucket_key, math.ceil(burst * 1000 / rate) + 1000)
  return 1, 0
end
"""

# KEYS: the keys hash, the key's bucket. ARGV: key hash, rate per second, burst, cost.
# Returns {0} for an unknown key, else {1, record JSON, allowed (0/1), wait ms}.
GATE_LUA = (
    _BUCKET
    + """
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return {0} end
local allowed, wait = take(KEYS[2], 2)
return {1, record, allowed, wait}
"""
)

# KEYS: the address's bucket. ARGV: rate per second, burst, cost. Returns {allowed, wait ms}.
ADDRESS_LUA = (
    _BUCKET
    + """
local allowed, wait = take(KEYS[1], 1)
return {allowed, wait}
"""
)


@dataclass(frozen=True)
class Decision:
    """The outcome of a gate check: the key's record (None: unknown), and whether it may call."""

    record: dict[str, Any] | None
    allowed: bool = False
    retry_after_ms: int = 0


class RateLimiter:
    """Checks a key and takes one token from its bucket (`rate` <= 0: no limit)."""

    def __init__(self, client: redis.Redis, rate: float, burst: int) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._gate = script(client, GATE_LUA)

    def check(self, key: str, cost: int = 1) -> Decision:
        """Look the key up and charge it `cost` tokens, in one atomic step."""
        hashed = key_hash(key)
        reply: Any = self._gate(
            keys=[KEYS, bucket_key(hashed)], args=[hashed, repr(self.rate), self.burst, cost]
        )
        if not reply or int(reply[0]) == 0:
            return Decision(None)
        return Decision(json.loads(reply[1]), bool(int(reply[2])), int(reply[3]))


def address_bucket(address: str) -> str:
    """The bucket of a client address: an IPv4 address, or an IPv6 address's /64 (what one
    subscriber gets, so that walking through it is no way around the limit). Anything else
    (a unix socket's peer) is one bucket of its own name."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "{rl:other}:bucket"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # ::ffff:192.0.2.1 is 192.0.2.1
            return "{rl:" + str(ip.ipv4_mapped) + "}:bucket"
        return "{rl:" + str(ipaddress.ip_network(f"{ip}/64", strict=False)) + "}:bucket"
    return "{rl:" + str(ip) + "}:bucket"


class AddressLimiter:
    """Takes one token from a client address's bucket (`rate` <= 0: no limit, no round trip)."""

    def __init__(self, client: redis.Redis, rate: float, burst: int) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._gate = script(client, ADDRESS_LUA)

    def check(self, address: str, cost: int = 1) -> Decision:
        """Charge the address `cost` tokens if its bucket holds them (record: always None)."""
        if self.rate <= 0:
            return Decision(None, True)
        reply: Any = self._gate(
            keys=[address_bucket(address)], args=[repr(self.rate), self.burst, cost]
        )
        return Decision(None, bool(int(reply[0])), int(reply[1]))
