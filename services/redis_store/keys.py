"""Where everything of a game lives in Redis: one hash tag, ``{g:<id>}``, for all its keys, so
a game lives on one Redis Cluster shard and one Lua script may touch any of them. Every
service takes its key names from here (services never import each other).
"""

from __future__ import annotations


def _tag(game_id: str) -> str:
    return "{g:" + game_id + "}"


def game_keys(game_id: str, stream: str) -> tuple[str, str, str, str]:
    """(stream key, command-id hash, marker key, notification flag key) of a game's stream."""
    tag = _tag(game_id)
    return (
        f"{tag}:{stream}",
        f"{tag}:cmd:{stream}",
        f"{tag}:marker:{stream}",
        f"{tag}:notify:{stream}",
    )


def secrets_key(game_id: str) -> str:
    """The command service's secrets record of a game (names, token hashes, draw seed)."""
    return _tag(game_id) + ":secrets"


def hooks_key(game_id: str) -> str:
    """The hash of a game's webhooks."""
    return _tag(game_id) + ":webhooks"


def hook_keys(game_id: str, hook_id: str) -> tuple[str, str, str]:
    """(state hash, delivery log hash, due set) of a webhook."""
    base = _tag(game_id) + ":wh:" + hook_id
    return base, base + ":log", base + ":due"


def lease_key(game_id: str, hook_id: str, seq: int) -> str:
    """Held while one task POSTs a delivery, so a duplicate task does not POST at once too."""
    return _tag(game_id) + ":wh:" + hook_id + f":lease:{seq}"
