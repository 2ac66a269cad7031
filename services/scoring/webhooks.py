"""Webhook delivery: every score event of a game, POSTed as signed JSON to each of its hooks,
at least once and in score order per hook.

Three Celery tasks on the webhook queue (``WEBHOOK_QUEUE``):

- ``webhooks.dispatch(game_id)`` turns score events not yet dispatched into deliveries: for
  each hook, one Lua script checks the hook's progress (last score seq dispatched), writes a
  log entry per new event (``HSETNX``: never twice) and advances the progress — all or
  nothing, conditional on the progress it started from. Then it sends one ``deliver`` task
  per hook that got new deliveries. `catch_up` triggers it after appending score events; the
  sweep and a new registration too.
- ``webhooks.deliver(game_id, hook_id)`` delivers a hook's deliveries **in order**, leased,
  each attempt recorded, a failure retried with full-jitter backoff until the delivery's
  window (``WEBHOOK_RETRY_SECONDS``, one day) ends: the delivery queue of
  services/scoring/delivery.py, with a hook as its channel (`HookChannel`: the feed is the
  game's score stream, a delivery's position its score seq). One log entry and one delivery
  id per (hook, score event).
- ``webhooks.sweep`` (beat) re-sends dispatches for hooks behind their score stream and a
  ``deliver`` for hooks whose head is overdue by ``WEBHOOK_SWEEP_GRACE`` (a lost task or a
  worker killed between two steps); the conditions above make a resent task harmless.

The HTTP POST is services/scoring/posting.py, the process's Redis client and store
services/scoring/process.py (shared with subscriptions).

Key layout: see services/command/hooks.py; the names come from `services.redis_store.keys`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import redis
from celery import shared_task

from eventstore.envelope import SCORES, StoredEvent
from eventstore.port import EventStore
from services.common.signing import hook_signature
from services.redis_store import game_keys, hook_keys, hooks_key
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.keys import (
    hook_member,
    hooks_due_key,
    index_shard,
    shard_of,
    split_hook_member,
)
from services.redis_store.scripts import script

from . import delivery, process
from .config import from_env
from .delivery import (
    Deliverer,
    Request,
    dispatch_args,
    new_entry,
    now_ms,
    text,
)
from .delivery_scripts import DISPATCH_LUA
from .posting import Poster

log = logging.getLogger(__name__)
settings = from_env()
QUEUE = settings["WEBHOOK_QUEUE"]
USER_AGENT = "CarcassonneCloud-Webhooks/1"
READ_AHEAD = 50  # score events read at once by a deliver task


def delivery_id(hook_id: str, seq: int) -> str:
    """The stable id of the delivery of score event `seq` to a hook (receivers dedupe on it)."""
    return f"{hook_id}.{seq}"


def delivery_body(game_id: str, hook_id: str, event: StoredEvent) -> bytes:
    """The JSON body of a delivery: the same bytes on every attempt."""
    body = {
        "delivery": delivery_id(hook_id, event.seq),
        "hook_id": hook_id,
        "game_id": game_id,
        "seq": event.seq,
        "event": event.type,
        "time_ms": event.time_ms,
        "payload": event.payload,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def due_index(game_id: str, hook_id: str, with_scores: bool = False) -> tuple[list[str], str]:
    """(extra script keys, index member) that keep a hook's entry in its shard's hooks-due
    index: the index key (after the game's score stream with `with_scores`), or no keys for
    a game off the shard slots (another slot's key would fail on a cluster)."""
    member = hook_member(game_id, hook_id)
    shard = shard_of(game_id)
    if shard is None:
        return [], member
    scores = [game_keys(game_id, SCORES)[0]] if with_scores else []
    return [*scores, hooks_due_key(shard)], member


def hook_lease_key(game_id: str, hook_id: str) -> str:
    """Held (with a random token) by the one task delivering a hook's deliveries right now."""
    return hook_keys(game_id, hook_id)[0] + ":lease"


class Dispatcher:
    """Turns new score events into deliveries, one atomic step per hook and batch."""

    def __init__(
        self, client: redis.Redis, store: EventStore, window_s: float, batch: int = 500
    ) -> None:
        self.client = client
        self.store = store
        self.window_ms = int(window_s * 1000)
        self.batch = max(1, batch)
        self._dispatch = script(client, DISPATCH_LUA)

    def dispatch(self, game_id: str) -> list[tuple[str, int]]:
        """Record the deliveries of every score event past each hook's progress; returns the
        (hook, seq) pairs this call created (each is created by exactly one call)."""
        hooks = sorted(text(h) for h in cast(list[Any], self.client.hkeys(hooks_key(game_id))))
        created: list[tuple[str, int]] = []
        for hook_id in hooks:
            state, log_key, _ = hook_keys(game_id, hook_id)
            for _ in range(1_000):  # batches and lost races; bounded all the same
                progress = int(text(self.client.hget(state, "progress") or b"0"))
                events = self.store.read(game_id, SCORES, after=progress, limit=self.batch)
                if not events:
                    break
                now = now_ms()
                due_keys, member = due_index(game_id, hook_id)
                entries = [(e.seq, self._entry(hook_id, e, now)) for e in events]
                fields = {"progress": events[-1].seq}
                args = dispatch_args("progress", progress, fields, member, now, entries)
                reply = self._dispatch(keys=[state, log_key, *due_keys], args=args)
                if text(reply[0]) == "ok":
                    created += [(hook_id, e.seq) for e in events]
        return created

    def _entry(self, hook_id: str, event: StoredEvent, now: int) -> dict[str, Any]:
        return new_entry(
            delivery_id(hook_id, event.seq), event.seq, now, self.window_ms, event=event.type
        )


# ------------------------------------------------------------------------ the channel


class HookChannel:
    """Per-game webhooks as a delivery channel (services/scoring/delivery.py): a hook's feed
    is its game's score stream, its position is the score seq."""

    name = "webhook"
    cursor = "progress"  # the last score seq dispatched (= deliveries created)
    source_kind = "xlen"

    def __init__(self, client: redis.Redis, store: EventStore) -> None:
        self.client = client
        self.store = store

    def keys(self, game_id: str, receiver: str) -> tuple[str, str, str]:
        state, log_key, _ = hook_keys(game_id, receiver)
        return state, log_key, hook_lease_key(game_id, receiver)

    def source(self, game_id: str) -> str:
        return game_keys(game_id, SCORES)[0]

    def due_key(self, shard: int) -> str:
        return hooks_due_key(shard)

    def member(self, game_id: str, receiver: str) -> str:
        return hook_member(game_id, receiver)

    def split(self, member: str) -> tuple[str, str]:
        return split_hook_member(member)

    def shard(self, game_id: str) -> int | None:
        return shard_of(game_id)

    def legacy_shard(self, game_id: str) -> int:
        return index_shard(game_id)

    def config(self, game_id: str, receiver: str) -> dict[str, Any] | None:
        raw = self.client.hget(hooks_key(game_id), receiver)
        return None if raw is None else dict(json.loads(raw))

    def request(
        self,
        game_id: str,
        config: dict[str, Any],
        entry: dict[str, Any],
        attempt: int,
        cache: dict[Any, Any],
    ) -> Request:
        event = self._event(game_id, int(entry["seq"]), cache)
        body = delivery_body(game_id, config["id"], event)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Carcassonne-Event": event.type,
            "X-Carcassonne-Delivery": entry["delivery"],
            "X-Carcassonne-Attempt": str(attempt),
            "X-Carcassonne-Signature": hook_signature(config["secret"], body),
        }
        return Request(config["url"], body, headers)

    def recorded(
        self, game_id: str, config: dict[str, Any], entry: dict[str, Any], record: dict[str, Any]
    ) -> None:
        """A hook's log is its per-game delivery log: nothing more to write."""

    def _event(self, game_id: str, seq: int, cache: dict[Any, Any]) -> StoredEvent:
        """Score event `seq`, read `READ_AHEAD` at a time for one task run."""
        event = cache.pop(seq, None)
        if event is None:
            cache.clear()
            read = self.store.read(game_id, SCORES, after=seq - 1, limit=READ_AHEAD)
            cache.update((e.seq, e) for e in read)
            event = cache.pop(seq)
        return cast(StoredEvent, event)


def stalled(
    client: redis.Redis, store: EventStore, grace_ms: int, page: int = 500
) -> Iterator[tuple[str, str | None]]:
    """The hooks the webhook sweep re-sends (see `delivery.stalled`)."""
    return delivery.stalled(client, HookChannel(client, store), grace_ms, page)


# ------------------------------------------------------------------------ this process


@dataclass(frozen=True)
class HookParts:
    """This process's webhook dispatcher and deliverer (on the process's shared parts)."""

    dispatcher: Dispatcher
    deliverer: Deliverer


def _make_hook_parts() -> HookParts:
    base = process.parts()
    return HookParts(
        dispatcher=Dispatcher(
            base.client,
            base.store,
            settings["WEBHOOK_RETRY_SECONDS"],
            settings["WEBHOOK_BATCH"],
        ),
        deliverer=Deliverer(
            base.client,
            HookChannel(base.client, base.store),
            base.post,
            backoff_base=settings["WEBHOOK_BACKOFF_BASE"],
            backoff_max=settings["WEBHOOK_BACKOFF_MAX"],
            timeout=settings["WEBHOOK_TIMEOUT"],
        ),
    )


_hook_parts = process.PerProcess(_make_hook_parts)


def hook_parts() -> HookParts:
    """This process's webhook dispatcher and deliverer."""
    return _hook_parts.get()


def client() -> redis.Redis:
    """This process's Redis client for webhooks."""
    return process.parts().client


def due_follower(client: redis.Redis) -> Follower:
    """The change feed's consumer "webhooks": new score events of a game make each of its
    hooks due in the shard's hooks-due index (written with the consumer's position), so the
    sweep finds every hook with dispatching to do even when `after_scoring`'s task is lost."""

    def writes(shard: int, changes: list[Change]) -> list[Write]:
        scored: dict[str, int] = {}
        for change in changes:
            if change.stream == SCORES and change.last >= change.first:  # score events
                scored.setdefault(change.game_id, change.time_ms)
        pipe = client.pipeline(transaction=False)
        for game_id in scored:
            pipe.hkeys(hooks_key(game_id))
        out: list[Write] = []
        for (game_id, at), hooks in zip(scored.items(), pipe.execute(), strict=True):
            due = hooks_due_key(shard)
            out += [Write("zadd_lt", due, hook_member(game_id, text(h)), at) for h in sorted(hooks)]
        return out

    return Follower(client, "webhooks", writes)


def after_scoring(game_id: str) -> None:
    """Called by `catch_up` after it appended score events: dispatch them if the game has
    hooks (one EXISTS, so games without hooks cost no broker message)."""
    try:
        if client().exists(hooks_key(game_id)):
            dispatch.apply_async(args=[game_id], queue=QUEUE)
    except Exception:  # the scores are appended; the webhook sweep finds the hook behind
        log.warning("could not dispatch webhooks of game %s", game_id, exc_info=True)


# ------------------------------------------------------------------------ Celery tasks


@shared_task(name="webhooks.dispatch", ignore_result=True)
def dispatch(game_id: str) -> int:
    """Create the deliveries of a game's new score events; one deliver task per hook."""
    created = hook_parts().dispatcher.dispatch(game_id)
    for hook_id in sorted({hook_id for hook_id, _ in created}):
        deliver.apply_async(args=[game_id, hook_id], queue=QUEUE)
    if created:
        log.info("game %s: %d webhook deliveries created", game_id, len(created))
    return len(created)


# max_retries=None: the delivery's window bounds the retries, not a count.
@shared_task(name="webhooks.deliver", bind=True, ignore_result=True, max_retries=None)
def deliver(self: Any, game_id: str, hook_id: str, seq: int = 0, attempt: int = 0) -> str:
    """Deliver a hook's due deliveries in order; a failure is retried by Celery after a
    backoff. (`seq` and `attempt` are ignored: tasks sent by earlier versions carry them.)"""
    most = settings["WEBHOOK_TASK_DELIVERIES"]
    return delivery.run_deliver(self, hook_parts().deliverer, game_id, hook_id, most, QUEUE)


@shared_task(name="webhooks.sweep", ignore_result=True)
def sweep() -> int:
    """Re-send dispatches and deliveries that were lost; returns how many."""
    grace = int(settings["WEBHOOK_SWEEP_GRACE"] * 1000)
    made = process.parts()
    count = delivery.resend(stalled(made.client, made.store, grace), dispatch, deliver, QUEUE)
    if count:
        log.info("webhook sweep: %d tasks re-sent", count)
    return count


def hook_deliverer(
    client: redis.Redis, store: EventStore, post: Poster, **options: Any
) -> Deliverer:
    """A `Deliverer` of per-game webhooks (`options`: backoff and timeout, as `Deliverer`)."""
    return Deliverer(client, HookChannel(client, store), post, **options)
