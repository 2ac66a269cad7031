"""Per-key rate limit: a token bucket, checked together with the key itself in one Lua script.

One round trip per request answers "is this key live, and may it call now?": the script
reads the key's record and takes a token from its bucket atomically, with Redis's clock
(every gunicorn worker shares the same bucket and the same time). A bucket holds `burst`
tokens and refills at `rate` per second; an empty one answers how long until a token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from services.redis_store.scripts import script

from .apikeys import KEYS, bucket_key, key_hash

# KEYS: the keys hash, the key's bucket. ARGV: key hash, rate per second, burst, cost.
# Returns {0} for an unknown key, else {1, record JSON, allowed (0/1), wait ms}.
GATE_LUA = """
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return {0} end
local rate, burst, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if rate <= 0 then return {1, record, 1, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bucket = redis.call('HMGET', KEYS[2], 'tokens', 'ms')
local tokens, last = tonumber(bucket[1]), tonumber(bucket[2])
if tokens == nil or last == nil then tokens, last = burst, now end
tokens = math.min(burst, tokens + math.max(0, now - last) * rate / 1000)
local allowed, wait = 0, 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  wait = math.ceil((cost - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'ms', tostring(now))
redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
return {1, record, allowed, wait}
"""


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
