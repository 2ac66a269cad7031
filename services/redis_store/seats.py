"""A game's public seats record, ``{g:<id>}:seats``: the part of its secrets record anyone
may see, kept beside it so that the query role never reads the secrets (issue 32, finding 11:
its Redis user is refused every secrets key, services/redis_store/acl.py).

One JSON object: ``names`` (seat order), and when the secrets record has them ``player_ids``
(seat order, null where not given), ``bots`` (seat order: ``{"level", "think_ms"}`` or null),
``key_id`` (the API key that created or imported the game: the key whose lists show it) and
``public`` (listed without a key). Never a seed, a token hash or an import's fingerprint.

It is written with the secrets record, in the same atomic step (`write_both`, `PUT_NEW_LUA`),
and nothing changes a game's names, ids, bots or owner afterwards (a re-issued token changes
the secrets only), so the two never disagree. Games from before it get theirs from the
one-off `python -m services.redis_store.migrate_seats` (run it before the new query service).
"""

from __future__ import annotations

import json
from typing import Any

from .keys import seats_key, secrets_key

# KEYS: secrets record, seats record[, the game's tombstone]. ARGV: their JSON. Both written
# if the game has no secrets record yet (SET NX: two racing imports of one Idempotency-Key
# cannot both win) and was not archived (its records left Redis with it: not written again
# beside its tombstone); returns 1 if they were.
PUT_NEW_LUA = """
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""


def public_seats(record: dict[str, Any]) -> dict[str, Any]:
    """The seats record of a secrets record: names, player ids, bots, owner, public."""
    names = record.get("names")
    out: dict[str, Any] = {"names": [str(n) for n in names] if isinstance(names, list) else []}
    ids = record.get("player_ids")
    if isinstance(ids, list):
        out["player_ids"] = [None if i is None else str(i) for i in ids]
    bots = record.get("bots")
    if isinstance(bots, list):
        out["bots"] = [
            {"level": str(b["level"]), "think_ms": int(b["think_ms"])}
            if isinstance(b, dict) and "level" in b and "think_ms" in b
            else None
            for b in bots
        ]
    imported = record.get("imported")
    key_id = record.get("key_id") or (
        imported.get("key_id") if isinstance(imported, dict) else None
    )
    if key_id:
        out["key_id"] = str(key_id)
    if record.get("public") is True:
        out["public"] = True
    return out


def write_both(client: Any, game_id: str, record: dict[str, Any]) -> None:
    """Write a game's secrets and seats records in one MULTI (one slot: the game's tag)."""
    pipe = client.pipeline(transaction=True)
    pipe.set(secrets_key(game_id), json.dumps(record))
    pipe.set(seats_key(game_id), json.dumps(public_seats(record)))
    pipe.execute()
