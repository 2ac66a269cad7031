"""Hints: the move a bot would play now for the seat to move, worked out by the bot worker.

An mcts hint searched in the web request held a sync gunicorn worker for HINT_THINK_MS, and a
fresh position costs one `POST /games` (issue 32, finding 4: six client loops of "new game,
hint" moved `GET /turn` p95 from 9 ms to 2.8 s). So the command service only asks
(services/redis_store/hint_store.py): it checks the seat and the game, charges the hint's
fixed duration to the seat's hint budget in the game and to its API key's bot budgets (in
flight, per day, hints at once) in one script, and sends ``bots.hint`` to the bot worker
(services/bots/hints.py). The request answers at once: 202 with `Location` and Retry-After
while the hint is pending, 200 with the hint once it may be shown, 429 over a budget, 503
when the worker did not answer in time (or the task could not be sent).

Each position's hint is worked out once per level and kept (`HintStore.keep_ms`): asking
again costs no search and no budget. A hint is shown its fixed duration after the worker
started it whatever the seat's hand (mcts HINT_THINK_MS, greedy and random HINT_FLOOR_MS:
services/common/pace.py), and a pending answer says nothing of whether the work has ended, so
the time it is answered in tells nothing of the hand (R10.3).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from carcassonne.errors import GameError, OutOfTurnError
from services.common.pace import move_ms
from services.redis_store.hint_store import HintStore, Limits, owner_of

from .cache import Cached
from .errors import Forbidden

HINTS = Counter(
    "carcassonne_hints_total",
    "Hint requests, by level and what they got: asked (sent to the bot worker), pending, "
    "answered, given_up (the worker did not answer in time)",
    ["level", "source"],
)


RETRY_FLOOR_MS = 200  # the soonest a pending hint says to ask again (its poll is cheap, not free)


class HintUnavailable(GameError):
    """The bot worker did not answer the hint in time, or its task could not be sent."""

    status = 503


@dataclass(frozen=True)
class HintReply:
    """A hint request's answer: 200 with the hint, or 202 (pending) with when to ask again."""

    status: int
    body: dict[str, Any]
    retry_after_ms: int = 0


@dataclass
class HintDesk:
    """Where hints are asked for: the store, the task's sender (`send(args) -> sent`), the
    budgets and the hints' durations (HINT_THINK_MS, HINT_FLOOR_MS), and how long past its
    duration a hint may wait for the worker (HINT_WAIT_MS)."""

    store: HintStore
    send: Callable[[list[Any]], bool]
    limits: Limits = field(default_factory=Limits)
    think_ms: int = 500
    floor_ms: int = 150
    wait_ms: int = 10_000
    clock: Callable[[], float] = time.time


def hint(desk: HintDesk | None, game_id: str, cached: Cached, seat: int, level: str) -> HintReply:
    """The move bot `level` would play now for `seat` (only in a game whose ruleset allows
    hints, and only for the seat to move): asked of the bot worker the first time, answered
    once it may be shown (see the module's docstring)."""
    from .service import over_budget  # the one shape of a refused budget

    state = cached.state
    if not state.ruleset.hints:
        raise Forbidden(
            "hints_disabled", "this game's ruleset does not allow hints (ruleset.hints)"
        )
    if state.over:
        raise OutOfTurnError("game_over", "the game is over", "R7.1")
    if seat != state.current:
        raise OutOfTurnError(
            "not_your_turn", f"it is player {state.current}'s turn", "R2.2", current=state.current
        )
    if desk is None:
        raise unavailable("this service has no bot worker to ask for hints")
    owner, seq = owner_of(cached.secrets), cached.seq
    ms = move_ms(level, desk.think_ms, desk.floor_ms)
    now = desk.clock()
    record, new, refused = desk.store.ask(
        owner, game_id, seq, level, seat, ms, desk.wait_ms, desk.limits, now
    )
    if refused is not None:
        raise over_budget(refused, ms / 1000, "this hint")
    assert record is not None
    now_ms = int(now * 1000)
    if new:
        HINTS.labels(level, "asked").inc()
        if not desk.send([owner, game_id, seq, level, record["nonce"], ms, desk.think_ms]):
            desk.store.abandon(owner, game_id, seq, level, record)
            raise unavailable("the hint could not be handed to the bot worker")
    elif record["state"] == "pending" and now_ms > int(record["due_ms"]):
        if desk.store.abandon(owner, game_id, seq, level, record):
            HINTS.labels(level, "given_up").inc()
            raise unavailable("the bot worker did not work the hint out in time")
        record = desk.store.get(owner, game_id, seq, level)  # answered just now (or given up)
        if record is None:
            raise unavailable("the bot worker did not work the hint out in time")
    if record["state"] == "ready" and now_ms >= int(record["ready_ms"]):
        HINTS.labels(level, "answered").inc()
        return HintReply(200, dict(json.loads(record["answer"])))
    HINTS.labels(level, "pending").inc()
    return pending(game_id, seq, level, seat, record, now_ms)


def pending(
    game_id: str, seq: int, level: str, seat: int, record: dict[str, Any], now_ms: int
) -> HintReply:
    """A 202 for a hint not to be shown yet: the same whether the worker is still at it or
    done (only when it was asked and its duration say when to come back)."""
    ms = int(record["ms"])
    left = max(RETRY_FLOOR_MS, int(record["asked_ms"]) + ms - now_ms)
    body = {"status": "pending", "game_id": game_id, "seq": seq, "player": seat,
            "level": level, "think_ms": ms, "retry_after_ms": left}  # fmt: skip
    return HintReply(202, body, left)


def unavailable(message: str) -> HintUnavailable:
    """503 `hint_unavailable`: ask again later (a new ask is sent to the worker again)."""
    return HintUnavailable("hint_unavailable", f"{message}; ask again later", None, retry_after=2)


def retry_after(reply: HintReply) -> str:
    """The Retry-After header of a pending hint (whole seconds, at least 1)."""
    return str(max(1, math.ceil(reply.retry_after_ms / 1000)))
