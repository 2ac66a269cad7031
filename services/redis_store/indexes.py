"""Reading the sharded indexes: the same sorted set of each of the 64 shards at once.

Every reader (the scoring sweep, the webhook sweep, `GET /games`) asks all shards in one
pipelined round trip (redis-py's cluster pipeline splits it per node), so what it costs
follows what it returns, never how many games are stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import redis

from .keys import SHARDS


def text(value: Any) -> str:
    """A reply as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def is_text(value: str) -> bool:
    """Whether UTF-8 can encode `value` (not if it holds a lone UTF-16 surrogate, which a
    JSON escape such as "\\ud800" decodes to): no Redis key or database text can hold it."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def marker_number(value: Any) -> int | None:
    """A stream marker's value as a sequence: 0 when there is none, None when it is not a
    number (not written by our services)."""
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return None


def shard_pages(
    client: redis.Redis,
    key: Callable[[int], str],
    page: int,
    low: float | str = "-inf",
    high: float | str = "+inf",
    max_rounds: int = 10_000,
) -> Iterator[list[str]]:
    """Members of `key(shard)` scored between `low` and `high`, lowest first, for every
    shard: a page of each shard per round trip, then more pages only of the shards that
    filled theirs. A member moved or removed by a writer meanwhile may be missed this time
    or seen twice (callers re-check what they act on and run periodically)."""
    offsets = dict.fromkeys(range(SHARDS), 0)
    for _ in range(max_rounds):
        if not offsets:
            return
        pipe = client.pipeline(transaction=False)
        for shard, offset in offsets.items():
            pipe.zrangebyscore(key(shard), low, high, start=offset, num=page)
        replies = pipe.execute()
        members: list[str] = []
        more: dict[int, int] = {}
        for (shard, offset), reply in zip(offsets.items(), replies, strict=True):
            members += [text(m) for m in reply]
            if len(reply) >= page:
                more[shard] = offset + page
        yield members
        offsets = more
