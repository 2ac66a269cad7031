"""Per-game secrets kept outside the event log (token hashes, the draw seed): the `Secrets`
port, in a dict (`MemorySecrets`) or in Redis, under the game's hash tag: ``{g:<id>}:secrets``.

The record is one JSON object, written before the game's first append; only a seat's token
hash is ever replaced (a re-issued token, `replace_token`):
``seed`` (the draw seed, revealed once the game is over), ``tokens`` (token hash -> seat),
``names`` (seat order) and, when the request gave any, ``player_ids`` (seat order, null for
a seat without one: the apps' opaque user ids) and, when the creating request sent an API
key, ``key_id`` (that key owns the game: its subscriptions cover it). Its public part
(names, player ids, bots, owner, public) is written beside it, in the same step, as the
game's seats record (services/redis_store/seats.py): the games directory and the
query service read that one, never this (the query role's Redis user may not).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

import redis

from services.redis_store import secrets_key
from services.redis_store.keys import archived_key, seats_key
from services.redis_store.scripts import script
from services.redis_store.seats import PUT_NEW_LUA, public_seats, write_both

# KEYS: the secrets record. ARGV: seat, new token hash. The seat's token hash (whatever it
# was) is replaced; returns 0 for a game without a record.
REPLACE_TOKEN_LUA = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local record = cjson.decode(raw)
local seat = tonumber(ARGV[1])
for hash, owner in pairs(record.tokens) do
  if owner == seat then record.tokens[hash] = nil end
end
record.tokens[ARGV[2]] = seat
redis.call('SET', KEYS[1], cjson.encode(record))
return 1
"""


class Secrets(Protocol):
    """Per-game secrets kept outside the event log: token hashes and the draw seed."""

    def put(self, game_id: str, data: dict[str, Any]) -> None:
        """Store a new game's secrets."""

    def put_new(self, game_id: str, data: dict[str, Any]) -> bool:
        """Store a game's secrets unless it has some already (or was archived); True if
        these were stored."""

    def get(self, game_id: str) -> dict[str, Any] | None:
        """A game's secrets, or None for an unknown game."""

    def replace_token(self, game_id: str, seat: int, token_hash: str) -> bool:
        """Make `token_hash` the seat's only token (the old one stops matching); False if
        the game has no secrets."""

    def archived(self, game_id: str) -> bool:
        """Whether the game was moved to the archive (services/archive): its secrets and
        streams left Redis, its tombstone stayed."""


class MemorySecrets:
    """`Secrets` in a dict (unit tests)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}
        self.archived_ids: set[str] = set()  # tests mark games archived here

    def archived(self, game_id: str) -> bool:
        """See `Secrets.archived`."""
        return game_id in self.archived_ids

    def put(self, game_id: str, data: dict[str, Any]) -> None:
        """See `Secrets.put`."""
        self._data[game_id] = data

    def put_new(self, game_id: str, data: dict[str, Any]) -> bool:
        """See `Secrets.put_new`."""
        return self._data.setdefault(game_id, data) is data

    def get(self, game_id: str) -> dict[str, Any] | None:
        """See `Secrets.get`."""
        return self._data.get(game_id)

    def replace_token(self, game_id: str, seat: int, token_hash: str) -> bool:
        """See `Secrets.replace_token`."""
        record = self._data.get(game_id)
        if record is None:
            return False
        tokens = {h: s for h, s in record["tokens"].items() if s != seat}
        self._data[game_id] = {**record, "tokens": {**tokens, token_hash: seat}}
        return True


def token_hash(token: str) -> str:
    """Tokens are stored hashed: a leaked secrets record does not let anyone play."""
    return hashlib.sha256(token.encode()).hexdigest()


class RedisSecrets:
    """`Secrets` in a Redis string per game."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._replace = script(client, REPLACE_TOKEN_LUA)
        self._put_new = script(client, PUT_NEW_LUA)

    @staticmethod
    def key(game_id: str) -> str:
        """The key of a game's secrets."""
        return secrets_key(game_id)

    def put(self, game_id: str, data: dict[str, Any]) -> None:
        """See `Secrets.put`; the game's public seats record is written with it (one MULTI:
        services/redis_store/seats.py)."""
        write_both(self.client, game_id, data)

    def put_new(self, game_id: str, data: dict[str, Any]) -> bool:
        """See `Secrets.put_new` (SET NX in a script that writes the seats record too:
        atomic, so two racing requests cannot both win; an archived game's is not written
        again)."""
        seats = json.dumps(public_seats(data))
        keys = [self.key(game_id), seats_key(game_id), archived_key(game_id)]
        return bool(self._put_new(keys=keys, args=[json.dumps(data), seats]))

    def get(self, game_id: str) -> dict[str, Any] | None:
        """See `Secrets.get`."""
        raw = self.client.get(self.key(game_id))
        return None if raw is None else dict(json.loads(raw))

    def archived(self, game_id: str) -> bool:
        """See `Secrets.archived`: one EXISTS of the tombstone ``{g:<id>}:archived``."""
        return bool(self.client.exists(archived_key(game_id)))

    def replace_token(self, game_id: str, seat: int, token_hash: str) -> bool:
        """See `Secrets.replace_token` (one script: two re-issues at once cannot both win
        half-way, and the record's other keys are left as they are)."""
        return bool(self._replace(keys=[self.key(game_id)], args=[seat, token_hash]))
