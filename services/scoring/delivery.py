"""The delivery queue of one receiver of one game: ordered, leased, retried, recorded.

A receiver is a subscription within one game (services/scoring/subscriptions.py; a per-game
webhook is one too) with a state hash (``progress``: deliveries created, ``head``: the last
one over, and the cursor of its feed), a delivery log hash (position -> entry) and a lease,
all under the game's hash tag. Where the configuration lives and what the body and headers
are is the subscriptions' (`SubscriptionChannel`); how far the feed goes is the receiver's
`Source`; the rules below are this module's:

- a `Deliverer` takes the receiver's lease (one task per receiver at a time), then always
  works on the *head*, the lowest delivery neither delivered nor finally failed, and moves on
  only when it is over: a receiver never gets position N+1 before N was delivered (or its
  window ended);
- each attempt is recorded in the delivery's log entry, conditional on the number of attempts
  recorded so far (a duplicated task finds its attempt taken and stops);
- a failed attempt is retried after Celery's exponential backoff with full jitter until the
  delivery's window ends; only the head is retried, so a receiver that is down costs one
  attempt per backoff interval, not one per event;
- a receiver with work due is in its shard's due index (a sorted set: when it next has work),
  written by the same scripts; `stalled` reads those indexes (no scan) for the sweep.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import redis
from celery.utils.time import get_exponential_backoff_interval

from services.redis_store.indexes import shard_pages
from services.redis_store.keys import (
    index_shard,
    shard_of,
    split_member,
    subs_due_key,
    subscription_keys,
)
from services.redis_store.scripts import script

from .delivery_scripts import NEXT_LUA, RECORD_LUA, RELEASE_LUA, SETTLE_LUA
from .posting import Poster

if TYPE_CHECKING:  # the one kind of receiver (it imports this module)
    from .subscriptions import SubscriptionChannel

log = logging.getLogger(__name__)
FINAL = ("delivered", "failed")
KEPT_ATTEMPTS = 50  # a log entry keeps the last attempts (`tries` counts them all)
# A retry that fires this much before its delivery's `next_ms` still runs (workers' clocks
# differ a little); an earlier one leaves it to the retry its recorder scheduled.
EARLY_MS = 2_000
# A deliver task hands over to a new task after this long, well inside the broker's
# visibility timeout (a task held longer is handed out twice: harmless, but wasted).
TASK_SECONDS = 10.0


def now_ms() -> int:
    """Wall-clock milliseconds (deliveries' times are compared across workers)."""
    return int(time.time() * 1000)


def text(value: Any) -> str:
    """A Redis reply as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def backoff_ms(tries: int, base_ms: int, cap_ms: int) -> int:
    """Milliseconds to wait after the `tries`-th failed attempt: Celery's exponential backoff
    (base·2^(tries-1), at most the cap) with full jitter (a uniform draw from 0 to that), so
    deliveries that failed together do not all come back at the same instant."""
    return int(
        get_exponential_backoff_interval(
            factor=max(0, base_ms),
            retries=min(max(0, tries - 1), 40),
            maximum=cap_ms,
            full_jitter=True,
        )
    )


def dispatch_args(
    cursor: str,
    expected: int,
    fields: dict[str, Any],
    member: str,
    now: int,
    entries: list[tuple[int, dict[str, Any]]],
) -> list[Any]:
    """The ARGV of `DISPATCH_LUA`."""
    args: list[Any] = [cursor, expected, member, now, len(fields)]
    for name, value in fields.items():
        args += [name, value]
    for position, entry in entries:
        args += [position, json.dumps(entry)]
    return args


def new_entry(
    delivery: str, position: int, now: int, window_ms: int, **extra: Any
) -> dict[str, Any]:
    """A fresh log entry at `position`, due now, retried until `window_ms` from now."""
    return {
        "delivery": delivery,
        "seq": position,
        **extra,
        "created_ms": now,
        "deadline_ms": now + window_ms,
        "outcome": "pending",
        "tries": 0,
        "attempts": [],
        "next_ms": now,
        "status": None,
    }


@dataclass(frozen=True)
class Request:
    """What one attempt POSTs."""

    url: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Source:
    """How far a receiver's feed goes in a game, against how far it was dispatched: its
    state's `cursor` field below the number in `key` (`kind` "get": a number in a string key,
    such as the score stream's marker; "xlen": a stream's length) means "behind"."""

    cursor: str
    key: str
    kind: str


def member(game_id: str, receiver: str) -> str:
    """A receiver's member in its shard's subs-due index."""
    return game_id + ":" + receiver


def due_index(game_id: str) -> list[str]:
    """The due index key for the scripts that keep a receiver's entry, or none for a game
    off the shard slots (another slot's key would fail on a cluster)."""
    shard = shard_of(game_id)
    return [] if shard is None else [subs_due_key(shard)]


@dataclass(frozen=True)
class Attempted:
    """What one attempt did: `retry_in` seconds when another attempt is due."""

    outcome: str  # delivered, retrying, failed, or stale (another task recorded it)
    retry_in: float | None = None
    status: int | None = None


@dataclass(frozen=True)
class Ran:
    """What one `Deliverer.run` did.

    `outcome`: ``idle`` (nothing left), ``more`` (work left: send another task),
    ``retrying`` (retry in `retry_in` s), ``waiting`` (the head's retry is already
    scheduled), ``busy`` (another task holds the receiver), ``lost`` (the lease expired under
    us), ``stale`` (another task recorded our attempt), ``gone`` (no such receiver).
    """

    outcome: str
    retry_in: float | None = None
    delivered: int = 0  # deliveries that ended (delivered or finally failed)
    attempts: int = 0


class Deliverer:
    """Delivers a receiver's deliveries in order, one attempt at a time, and records them."""

    def __init__(
        self,
        client: redis.Redis,
        channel: SubscriptionChannel,
        post: Poster,
        backoff_base: float = 1.0,
        backoff_max: float = 45.0,
        timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.channel = channel
        self.post = post
        self.backoff_base_ms = int(backoff_base * 1000)
        self.backoff_max_ms = int(backoff_max * 1000)
        # Longer than an attempt can take (connect, send, read the status line: each up to
        # the timeout) and renewed before each attempt. Should it still run out, another task
        # may POST the same delivery again: at least once, same delivery id.
        self.lease_ms = int(max(30.0, 4 * timeout) * 1000)
        self._next = script(client, NEXT_LUA)
        self._record = script(client, RECORD_LUA)
        self._release = script(client, RELEASE_LUA)

    def run(
        self,
        game_id: str,
        receiver: str,
        max_deliveries: int = 100,
        max_seconds: float = TASK_SECONDS,
    ) -> Ran:
        """Work through the receiver's due deliveries in order, holding its lease."""
        state, log_key, lease = subscription_keys(game_id, receiver)
        token = secrets.token_hex(8)
        if not self.client.set(lease, token, nx=True, px=self.lease_ms):
            return Ran("busy")  # the holder delivers what we came for (see below)
        started = time.monotonic()
        ended = attempts = 0
        config: dict[str, Any] | None = None
        cache: dict[Any, Any] = {}
        retry_in: float | None = None
        outcome = "idle"
        try:
            while True:
                reply = self._next(keys=[state, log_key, lease], args=[token, self.lease_ms])
                outcome = text(reply[0])
                if outcome != "due":
                    break
                entry = json.loads(reply[1])
                if entry["next_ms"] is not None and entry["next_ms"] > now_ms() + EARLY_MS:
                    outcome = "waiting"  # its recorder scheduled the retry
                    break
                if ended >= max_deliveries or time.monotonic() - started >= max_seconds:
                    outcome = "more"
                    break
                if config is None:
                    config = self.channel.config(game_id, receiver)
                    if config is None:
                        outcome = "gone"
                        break
                done = self.attempt(game_id, receiver, config, entry, cache)
                attempts += 1
                if done.outcome in FINAL:
                    ended += 1
                    continue
                outcome, retry_in = done.outcome, done.retry_in
                break
        finally:
            self._release(keys=[lease], args=[token])
        # A dispatch that came while we held the lease found us busy; if what it created is
        # due now, nobody else will deliver it: say so (the task sends another deliver).
        if outcome == "idle" and self.due(game_id, receiver):
            outcome = "more"
        return Ran(outcome, retry_in, ended, attempts)

    def due(self, game_id: str, receiver: str) -> bool:
        """Whether the receiver's head delivery is waiting and due now."""
        entry = self.head(game_id, receiver)
        return entry is not None and (entry["next_ms"] or 0) <= now_ms() + EARLY_MS

    def head(self, game_id: str, receiver: str) -> dict[str, Any] | None:
        """The log entry of the receiver's head delivery (the lowest not over), if any."""
        state, log_key, lease = subscription_keys(game_id, receiver)
        reply = self._next(keys=[state, log_key, lease], args=["", self.lease_ms])
        return json.loads(reply[1]) if text(reply[0]) == "due" else None

    def attempt(
        self,
        game_id: str,
        receiver: str,
        config: dict[str, Any],
        entry: dict[str, Any],
        cache: dict[Any, Any],
    ) -> Attempted:
        """One attempt at one delivery, recorded if no other task recorded it first."""
        position, attempt = int(entry["seq"]), int(entry["tries"]) + 1
        request = self.channel.request(game_id, config, entry, attempt, cache)
        started = now_ms()
        answer = self.post(request.url, request.body, request.headers)
        now = now_ms()
        ok = answer.status is not None and 200 <= answer.status < 300
        next_ms: int | None
        if ok:
            outcome, next_ms = "delivered", None
        elif answer.blocked or now >= entry["deadline_ms"]:
            outcome, next_ms = "failed", None
        else:
            # The last attempt is made at the deadline itself: the whole window is used.
            wait = backoff_ms(attempt, self.backoff_base_ms, self.backoff_max_ms)
            outcome, next_ms = "retrying", min(now + wait, entry["deadline_ms"])
        record: dict[str, Any] = {
            "attempt": attempt,
            "at_ms": started,
            "ms": now - started,
            "status": answer.status,
        }
        if answer.error is not None:
            record["error"] = answer.error
        new = {
            **entry,
            "tries": attempt,
            "outcome": outcome,
            "status": answer.status,
            "next_ms": next_ms,
            "attempts": (entry["attempts"] + [record])[-KEPT_ATTEMPTS:],
        }
        if ok:
            new["delivered_ms"] = now
        final = "1" if next_ms is None else ""
        state, log_key, _ = subscription_keys(game_id, receiver)
        source = self.channel.source(game_id, config)
        index = due_index(game_id)
        args: list[Any] = [position, attempt - 1, json.dumps(new), final]
        reply = self._record(
            keys=[log_key, state, *([source.key, *index] if index else [])],
            args=[*args, member(game_id, receiver), now, next_ms or now, source.cursor,
                  source.kind],
        )  # fmt: skip
        if text(reply) != "ok":
            return Attempted("stale", status=answer.status)
        self.channel.recorded(game_id, config, new, record)
        if outcome == "failed":
            why = answer.error or answer.status
            log.warning("subscription %s of game %s: delivery %s failed (%s)", receiver,
                        game_id, entry["delivery"], why)  # fmt: skip
        retry_in = None if next_ms is None else max(0.0, (next_ms - now) / 1000)
        return Attempted(outcome, retry_in, answer.status)


def stalled(
    client: redis.Redis, channel: SubscriptionChannel, grace_ms: int, page: int = 500
) -> Iterator[tuple[str, str | None]]:
    """What the sweep re-sends: (game, None) for a game with a receiver behind its feed,
    (game, receiver) for one whose head delivery is overdue by more than `grace_ms` and that
    no task holds.

    Reads the 64 shards' due indexes (one pipelined round trip, more pages only for a shard
    with more than `page` receivers due) instead of scanning the keyspace: it costs the
    receivers with work due, not the ones ever registered. Each receiver looked at is then
    settled: its entry moves to when it next has work, or leaves the index when it has none.
    """
    look = script(client, NEXT_LUA)
    settle = script(client, SETTLE_LUA)
    now = now_ms()
    for members in shard_pages(client, subs_due_key, page, high=now - grace_ms):
        games: dict[str, list[str]] = {}
        for entry in members:
            game_id, receiver = split_member(entry)
            games.setdefault(game_id, []).append(receiver)
        for game_id, receivers in games.items():
            behind = False
            for receiver in receivers:
                config = channel.config(game_id, receiver)
                if config is None:  # no such receiver (any more)
                    client.zrem(subs_due_key(index_shard(game_id)), member(game_id, receiver))
                    continue
                source = channel.source(game_id, config)
                state, log_key, lease = subscription_keys(game_id, receiver)
                behind = behind or _behind(client, source, state)
                reply = look(keys=[state, log_key, lease], args=["", 0])
                due = json.loads(reply[1]) if text(reply[0]) == "due" else None
                overdue = due is not None and (due["next_ms"] or 0) < now - grace_ms
                if overdue and not client.exists(lease):
                    yield game_id, receiver
                _settle(client, settle, game_id, receiver, source, due, now)
            if behind:
                yield game_id, None


def _behind(client: redis.Redis, source: Source, state: str) -> bool:
    cursor = int(text(client.hget(state, source.cursor) or b"0"))
    if source.kind == "get":
        return cursor < int(text(client.get(source.key) or b"0") or 0)
    return cursor < int(cast(Any, client.xlen(source.key)))


def _settle(
    client: redis.Redis,
    settle: Any,
    game_id: str,
    receiver: str,
    source: Source,
    due: dict[str, Any] | None,
    now: int,
) -> None:
    """Move a receiver's index entry to when it next has work, or remove it (SETTLE_LUA)."""
    state, log_key, _ = subscription_keys(game_id, receiver)
    index = due_index(game_id)
    if index:
        settle(
            keys=[state, log_key, source.key, *index],
            args=[member(game_id, receiver), now, source.cursor, source.kind],
        )
        return
    # A game from before the indexes, put in a shard by the backfill: its entry is in
    # another slot than its keys, so this is not atomic with the game's writes (a
    # concurrent change is seen by the next sweep at the latest).
    legacy = subs_due_key(index_shard(game_id))
    if _behind(client, source, state):
        return
    if due is not None:
        client.zadd(legacy, {member(game_id, receiver): due["next_ms"] or now})
    else:
        client.zrem(legacy, member(game_id, receiver))


def run_deliver(
    task: Any, deliverer: Deliverer, game_id: str, receiver: str, most: int, queue: str
) -> str:
    """The body of a deliver task (`task` bound): deliver, then send the next task when work
    is left, or have Celery retry after the backoff the failed attempt asked for."""
    ran = deliverer.run(game_id, receiver, most)
    if ran.outcome == "more":
        task.apply_async(args=[game_id, receiver], queue=queue)
    elif ran.outcome == "retrying" and ran.retry_in is not None:
        raise task.retry(args=[game_id, receiver], countdown=ran.retry_in)
    return ran.outcome


def resend(found: Iterator[tuple[str, str | None]], dispatch: Any, deliver: Any, queue: str) -> int:
    """The body of a sweep task: a dispatch per game behind its feed, a deliver per overdue
    receiver (what `stalled` found); returns how many tasks were sent."""
    count = 0
    for game_id, receiver in found:
        if receiver is None:
            dispatch.apply_async(args=[game_id], queue=queue)
        else:
            deliver.apply_async(args=[game_id, receiver], queue=queue)
        count += 1
    return count
