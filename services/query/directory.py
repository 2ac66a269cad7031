"""Which games exist, and their players' names, read from Redis without a global index.

Games are found by SCAN over the move streams (``{g:*}:moves``); a page's cursor is the
SCAN cursor plus the last game id returned from that SCAN batch, so a page that ends inside
a batch resumes right after it. SCAN guarantees that a game present for the whole walk is
listed (rarely twice, if Redis resizes its table meanwhile). A request does at most
`max_steps` SCAN calls: a selective filter may return a short page with a cursor to go on.

Names come from the command service's per-game secrets record; only ``names`` is read from
it: the seed and the token hashes never leave this module.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, cast

import redis

from eventstore.envelope import MOVES, SCORES
from services.redis_store import game_keys, secrets_key

from .projector import BadParameter

IN_PROGRESS, OVER = "in_progress", "over"
_PATTERN = game_keys("*", MOVES)[0]  # "{g:*}:moves"
_PREFIX, _SUFFIX = _PATTERN.split("*")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _names(raw: Any) -> list[str] | None:
    if raw is None:
        return None
    try:
        names = json.loads(raw).get("names")
    except (ValueError, AttributeError):
        return None
    return [str(n) for n in names] if isinstance(names, list) else None


def _encode(scan: int, last: str) -> str:
    return base64.urlsafe_b64encode(f"{scan}:{last}".encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[int, str]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        scan, _, last = text.partition(":")
        return int(scan), last
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadParameter("bad_cursor", "not a cursor of this list", None) from None


class RedisDirectory:
    """Game listing and names on the event store's Redis."""

    def __init__(self, client: redis.Redis, max_steps: int = 50) -> None:
        self.client = client
        self.max_steps = max_steps

    def names(self, game_id: str) -> list[str] | None:
        """The players' names in seat order, if the game has a secrets record."""
        return _names(self.client.get(secrets_key(game_id)))

    def page(
        self, status: str | None, player: str | None, cursor: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Up to `limit` games matching the filters, and the cursor of the next page (None at
        the end). `player` matches a player's name exactly, ignoring case."""
        scan, last = _decode(cursor) if cursor else (0, "")
        wanted = player.casefold() if player is not None else None
        out: list[dict[str, Any]] = []
        for _ in range(self.max_steps):
            next_scan, keys = cast(
                tuple[int, list[Any]],
                self.client.scan(scan, match=_PATTERN, count=max(limit, 100), _type="stream"),
            )
            ids = sorted({_text(k)[len(_PREFIX) : -len(_SUFFIX)] for k in keys})
            ids = [game_id for game_id in ids if game_id > last]
            for game in self._describe(ids):
                if status is not None and game["status"] != status:
                    continue
                if wanted is not None and wanted not in [n.casefold() for n in game["players"]]:
                    continue
                out.append(game)
                if len(out) == limit:
                    return out, _encode(scan, game["game_id"])
            if next_scan == 0:
                return out, None
            scan, last = next_scan, ""
        return out, _encode(scan, last)

    def _describe(self, ids: list[str]) -> list[dict[str, Any]]:
        """Status, players, last move and latest totals of each game: one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for game_id in ids:
            pipe.xrevrange(game_keys(game_id, MOVES)[0], count=1)
            pipe.xrevrange(game_keys(game_id, SCORES)[0], count=1)
            pipe.get(secrets_key(game_id))
        replies = pipe.execute()
        out = []
        for i, game_id in enumerate(ids):
            moves, scores, secret = replies[3 * i : 3 * i + 3]
            if not moves:
                continue  # deleted since the SCAN
            entry_id, fields = moves[0]
            last = {_text(k): _text(v) for k, v in fields.items()}
            totals = None
            if scores:  # the last score event: GameScored has the final totals
                data = {_text(k): _text(v) for k, v in scores[0][1].items()}["data"]
                payload = json.loads(data)
                totals = payload.get("final_scores", payload.get("totals"))
            out.append(
                {
                    "game_id": game_id,
                    "status": OVER if last["type"] == "GameEnded" else IN_PROGRESS,
                    "players": _names(secret) or [],
                    "seq": int(_text(entry_id).split("-", 1)[0]),
                    "updated_ms": int(last["t"]),
                    "scores": totals,
                }
            )
        return out
