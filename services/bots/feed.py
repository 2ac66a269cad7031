"""The change feed's consumer "bots": it sends a game's bot its turn.

Any append to the move stream of a game with a bot seat may hand the turn to a bot: the
game's creation, a human's move, a turn that timed out, an undo, a bot's own move. For each
such game in a batch the consumer sets the game's entry in its shard's due index
(services/redis_store/bot_index.py) to when its bot should have moved at the latest,
recorded with the consumer's feed position in one script; once that is recorded it sends
``bots.play(game)``. The task folds the game and plays if a bot is to move (a human's turn:
it only moves the entry on), so the consumer need not know whose turn it is. A task lost on
the way (a broker outage, a crash just after the record) is sent again by ``bots.sweep``
when the entry falls due; a game that ended leaves the index, and its bot seconds go back to
its API key's budget (services/redis_store/bot_budget.py; given back in the batch's handling,
idempotently, so a batch redone gives nothing back twice; a game archived before the
consumer got to its end was given back by the archiver, which deletes the secrets record this
reads the owner from). The command service knows nothing of bots beyond their seats in the
game's secrets record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import redis

from eventstore.envelope import MOVES
from services.common.kept import Kept
from services.redis_store.bot_budget import release
from services.redis_store.bot_index import plays_bots
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.keys import bots_due_key, secrets_key

CONSUMER = "bots"
ENDED = frozenset({"GameEnded", "GameAbandoned"})  # no bot turn follows these


class BotFeed:
    """The consumer: `follower` follows the feed; `send(game)` sends the bot task."""

    def __init__(
        self,
        client: redis.Redis,
        send: Callable[[str], None],
        grace_ms: int,
        clock: Callable[[], float] = time.time,
        cache_size: int = 100_000,
    ) -> None:
        self.client, self.send, self.grace_ms, self.clock = client, send, grace_ms, clock
        # Whether a game has a bot seat, and its owner key, never change: asked once per game
        # (owner "" : none).
        self._has_bots: Kept[str, tuple[bool, str]] = Kept(cache_size)
        self._to_send: dict[int, list[str]] = {}  # shard -> games of its batch being recorded
        self.follower = Follower(client, CONSUMER, self.handle, after=self.sent)

    def handle(self, shard: int, changes: list[Change]) -> list[Write]:
        """The batch's writes: each bot game due by now + grace, or gone once it ended."""
        ended: dict[str, bool] = {}
        for change in changes:
            if change.stream == MOVES and change.last >= change.first:
                over = ended.get(change.game_id, False) or not ENDED.isdisjoint(change.types)
                ended[change.game_id] = over
        due, at = bots_due_key(shard), int(self.clock() * 1000) + self.grace_ms
        writes, send = [], []
        for game_id in self.with_bots(list(ended)):
            if ended[game_id]:
                writes.append(Write("zrem", due, game_id))
                owner = self._owner(game_id)
                if owner:  # another slot: not in the record's script, but idempotent
                    release(self.client, owner, game_id)
            else:
                writes.append(Write("zadd", due, game_id, at))
                send.append(game_id)
        self._to_send[shard] = send
        return writes

    def sent(self, shard: int, _changes: list[Change]) -> None:
        """The batch is recorded: send each game's bot task (the index covers a lost one)."""
        for game_id in self._to_send.pop(shard, []):
            self.send(game_id)

    def with_bots(self, games: list[str]) -> list[str]:
        """Those of `games` that have a bot seat, or whose ruleset has a bot take over a seat
        that leaves (docs/takeover.md: any append may be the takeover, or hand the turn to a
        seat taken over); their secrets records are read once each."""
        unknown = [g for g in games if self._has_bots.get(g) is None]
        if unknown:
            pipe = self.client.pipeline(transaction=False)
            for game_id in unknown:
                pipe.get(secrets_key(game_id))
            for game_id, raw in zip(unknown, pipe.execute(), strict=True):
                record = json.loads(raw) if raw is not None else {}
                owner = record.get("key_id") if isinstance(record.get("key_id"), str) else ""
                self._has_bots.keep(game_id, (plays_bots(record), owner or ""))
        return [g for g in games if (self._has_bots.get(g) or (False, ""))[0]]

    def _owner(self, game_id: str) -> str:
        """The API key that owns a game (read by `with_bots`; "" for none)."""
        return (self._has_bots.get(game_id) or (False, ""))[1]
