"""Subscriptions per API key (worker side): every game an API key created or imported, its
notification feed (services/scoring/feed.py) delivered to each of the key's subscriptions —
signed with a timestamp, at least once, in order per game, retried for a day.

A subscription within one game is a receiver of the delivery queue (services/scoring/
delivery.py, `SubscriptionChannel`): its state ``{g:G}:sub:S`` holds ``moves`` (the feed
cursor: the last move whose items were dispatched), ``scores`` (the last score event read),
``progress`` (deliveries created), ``head`` and ``key`` (the owner key), its log
``{g:G}:sub:S:log`` one entry per delivery (position -> entry with the item). Its feed goes as
far as the game is scored (the score stream's marker): move M's items wait until the worker
scored M, so a move and the score it caused go out in the game's order.

Four Celery tasks on the webhook queue:

- ``subscriptions.dispatch(game_id)``: for each subscription of the game's owner key, one
  script writes the deliveries of the items past its cursor and advances the cursor — all or
  nothing, conditional on the cursor it read (`DISPATCH_LUA`), the items those of the
  subscription's kinds appended after it was created. Sent by `after_scoring`, which the
  scoring task calls after every catch-up of a game with an owner key.
- ``subscriptions.deliver(game_id, sub_id)``: the queue's ordered, leased, retried delivery.
  Each attempt also goes into the subscription's recent log ``{k:K}:sub:S:recent`` (its last
  `RECENT_KEPT` attempts over every game: `GET /v1/subscriptions/{id}/deliveries`).
- ``subscriptions.ping(key_id, sub_id, delivery)``: one signed `ping`, tried once.
- ``subscriptions.sweep`` (beat): the shards' subs-due indexes (no scan) — a subscription
  behind its game's feed gets a dispatch, an overdue head a deliver.

A subscription's fan-out runs on the webhook queue, never in the scoring task: a slow or
dead receiver holds up only its own deliveries.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import redis
from celery import shared_task

from eventstore.envelope import MOVES, SCORES
from eventstore.port import EventStore
from services.common.kept import Kept
from services.common.notifications import RECENT_KEPT, live_secrets
from services.common.signing import SIGNATURE_HEADER, sign
from services.redis_store import game_keys, secrets_key
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.keys import (
    index_shard,
    shard_of,
    split_hook_member,
    subs_due_key,
    subscription_keys,
    subscription_recent_key,
    subscriptions_key,
)
from services.redis_store.scripts import script

from . import delivery, process
from .config import from_env
from .delivery import Deliverer, Request, dispatch_args, new_entry, now_ms, text
from .delivery_scripts import DISPATCH_LUA
from .feed import Feed, Item

log = logging.getLogger(__name__)
settings = from_env()
QUEUE = settings["WEBHOOK_QUEUE"]
USER_AGENT = "CarcassonneCloud-Notifications/1"
OWNERS_KEPT = 10_000  # games whose owner key a process remembers (it never changes)
FEEDS_KEPT = 2_000  # games whose folded feed a process keeps (as the scorer keeps states)


def delivery_id(sub_id: str, game_id: str, position: int) -> str:
    """The stable id of a subscription's delivery in a game (receivers dedupe on it)."""
    return f"{sub_id}.{game_id}.{position}"


def notification_body(game_id: str, sub_id: str, delivery: str, item: dict[str, Any]) -> bytes:
    """The JSON body of a delivery: the same bytes on every attempt (the signature, with its
    timestamp, is in a header)."""
    body = {"delivery": delivery, "subscription_id": sub_id, "game_id": game_id, **item}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def signed_headers(
    config: dict[str, Any], kind: str, delivery: str, attempt: int, body: bytes
) -> dict[str, str]:
    """The headers of one attempt, signed now by every live secret of the subscription."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Carcassonne-Event": kind,
        "Carcassonne-Delivery": delivery,
        "Carcassonne-Attempt": str(attempt),
        SIGNATURE_HEADER: sign(live_secrets(config, now_ms()), body, int(time.time())),
    }


def remember_attempt(client: redis.Redis, key_id: str, sub_id: str, record: dict[str, Any]) -> None:
    """Put one attempt at the head of the subscription's recent log (bounded)."""
    recent = subscription_recent_key(key_id, sub_id)
    pipe = client.pipeline(transaction=False)  # one slot: the key's tag
    pipe.lpush(recent, json.dumps(record))
    pipe.ltrim(recent, 0, RECENT_KEPT - 1)
    pipe.execute()


class SubscriptionChannel:
    """Subscriptions as a delivery channel: the feed of a game goes as far as it is scored
    (its score stream's marker), a delivery's position is its place in the feed."""

    name = "subscription"
    cursor = "moves"
    source_kind = "get"

    def __init__(self, client: redis.Redis, owners: Owners | None = None) -> None:
        self.client = client
        self.owners = owners or Owners(client)

    def keys(self, game_id: str, receiver: str) -> tuple[str, str, str]:
        return subscription_keys(game_id, receiver)

    def source(self, game_id: str) -> str:
        return game_keys(game_id, SCORES)[2]  # "moves up to N are scored"

    def due_key(self, shard: int) -> str:
        return subs_due_key(shard)

    def member(self, game_id: str, receiver: str) -> str:
        return game_id + ":" + receiver

    def split(self, member: str) -> tuple[str, str]:
        return split_hook_member(member)

    def shard(self, game_id: str) -> int | None:
        return shard_of(game_id)

    def legacy_shard(self, game_id: str) -> int:
        return index_shard(game_id)

    def config(self, game_id: str, receiver: str) -> dict[str, Any] | None:
        # The owner key, as the first dispatch wrote it (or, before one, from the game).
        key_id = self.client.hget(subscription_keys(game_id, receiver)[0], "key")
        owner = text(key_id) if key_id is not None else self.owners.get(game_id)
        if owner is None:
            return None
        raw = self.client.hget(subscriptions_key(owner), receiver)
        return None if raw is None else dict(json.loads(raw))

    def request(
        self,
        game_id: str,
        config: dict[str, Any],
        entry: dict[str, Any],
        attempt: int,
        cache: dict[Any, Any],
    ) -> Request:
        item = entry["item"]
        body = notification_body(game_id, config["id"], entry["delivery"], item)
        headers = signed_headers(config, item["kind"], entry["delivery"], attempt, body)
        return Request(config["url"], body, headers)

    def recorded(
        self, game_id: str, config: dict[str, Any], entry: dict[str, Any], record: dict[str, Any]
    ) -> None:
        attempt = {
            "delivery": entry["delivery"],
            "game_id": game_id,
            "kind": entry["item"]["kind"],
            "seq": entry["item"]["seq"],
            **record,
            "outcome": entry["outcome"],
        }
        try:  # the log of record is the game's; this one is for people: never fail for it
            remember_attempt(self.client, config["key_id"], config["id"], attempt)
        except redis.RedisError:
            log.warning("could not log an attempt of subscription %s", config["id"])


class Owners:
    """The API key that created or imported each game: written before the game's first event
    and never changed, so a process remembers it."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._known: Kept[str, str] = Kept(OWNERS_KEPT)  # "" for a game no key created

    def get(self, game_id: str) -> str | None:
        """The game's owner key, or None (no key created it, or no such game)."""
        known = self._known.get(game_id)
        if known is not None:
            return known or None
        raw = self.client.get(secrets_key(game_id))
        record = json.loads(raw) if raw is not None else {}
        key_id = record.get("key_id") or (record.get("imported") or {}).get("key_id") or ""
        if raw is not None:
            self._known.keep(game_id, key_id)
        return key_id or None


class SubscriptionDispatcher:
    """Turns a game's feed into deliveries, one atomic step per subscription."""

    def __init__(
        self, client: redis.Redis, store: EventStore, window_s: float, feeds_kept: int = FEEDS_KEPT
    ) -> None:
        self.client = client
        self.store = store
        self.owners = Owners(client)
        self.channel = SubscriptionChannel(client, self.owners)
        self.window_ms = int(window_s * 1000)
        self._dispatch = script(client, DISPATCH_LUA)
        # Each game's feed folded as far as its last dispatch: the next one reads and folds
        # only the moves since (without it a dispatch re-read and re-folded the game from
        # move 1: O(moves) per move; bench_notify measures both).
        self.feeds: Kept[str, Feed] = Kept(feeds_kept, lambda feed: feed.seq)

    def owner(self, game_id: str) -> str | None:
        """The API key that created or imported the game."""
        return self.owners.get(game_id)

    def subscriptions(self, game_id: str) -> tuple[str | None, dict[str, dict[str, Any]]]:
        """(owner key, its subscriptions by id) of a game."""
        key_id = self.owner(game_id)
        if key_id is None:
            return None, {}
        raw = cast(dict[Any, Any], self.client.hgetall(subscriptions_key(key_id)))
        return key_id, {text(k): json.loads(v) for k, v in raw.items()}

    def mark_due(self, game_id: str) -> bool:
        """Put each subscription of the game in the subs-due index now (if a dispatch is then
        lost, the sweep finds it behind); False when the game has none."""
        key_id = self.owner(game_id)
        if key_id is None:
            return False
        subs = [text(s) for s in cast(list[Any], self.client.hkeys(subscriptions_key(key_id)))]
        if not subs:
            return False
        index = subs_due_key(index_shard(game_id))
        now = now_ms()
        self.client.zadd(index, {self.channel.member(game_id, s): now for s in subs}, lt=True)
        # LT keeps an earlier time; a member not there yet is added.
        return True

    def dispatch(self, game_id: str) -> list[tuple[str, int]]:
        """Record the deliveries of every item past each subscription's cursor; returns the
        (subscription, position) pairs this call created."""
        key_id, configs = self.subscriptions(game_id)
        if key_id is None or not configs:
            return []
        created: list[tuple[str, int]] = []
        for _ in range(5):  # lost races with another dispatch: bounded
            upto = int(self.store.marker(game_id, SCORES) or 0)
            states = {s: self._state(game_id, s) for s in sorted(configs)}
            behind = {s: st for s, st in states.items() if st["moves"] < upto}
            if not behind:
                break
            lowest = min(st["scores"] for st in behind.values())
            feed = self._feed(game_id, min(st["moves"] for st in behind.values()))
            moves = self.store.read(game_id, MOVES, after=feed.seq, limit=upto - feed.seq)
            scores = [
                e
                for e in self.store.read(game_id, SCORES, after=lowest)
                if int(e.payload["move"]) <= upto
            ]
            items = feed.advance(moves, scores)
            self.feeds.keep(game_id, feed)
            last_score = scores[-1].seq if scores else lowest
            lost = False
            for sub_id, st in behind.items():
                mine = self._wanted(configs[sub_id], items, st["moves"])
                if self._write(game_id, key_id, sub_id, st, upto, last_score, mine):
                    created += [(sub_id, st["progress"] + i + 1) for i in range(len(mine))]
                else:
                    lost = True
            if not lost:
                break
        return created

    def _feed(self, game_id: str, cursor: int) -> Feed:
        """The game's kept feed if it stands at or before `cursor` (the lowest cursor of the
        subscriptions behind), else a new one from move 1 (a subscription behind the kept
        fold: a new one, or this process never saw the game)."""
        feed = self.feeds.take(game_id)
        return feed if feed is not None and feed.seq <= cursor else Feed()

    def _state(self, game_id: str, sub_id: str) -> dict[str, int]:
        raw = self.client.hmget(
            subscription_keys(game_id, sub_id)[0], ["moves", "scores", "progress"]
        )
        moves, scores, progress = (int(text(v)) if v is not None else 0 for v in raw)
        return {"moves": moves, "scores": scores, "progress": progress}

    @staticmethod
    def _wanted(config: dict[str, Any], items: list[Item], after: int) -> list[Item]:
        kinds = set(config["kinds"])
        since = int(config["created_ms"])
        return [i for i in items if i.seq > after and i.kind in kinds and i.time_ms >= since]

    def _write(
        self,
        game_id: str,
        key_id: str,
        sub_id: str,
        state: dict[str, int],
        upto: int,
        last_score: int,
        items: list[Item],
    ) -> bool:
        now = now_ms()
        first = state["progress"] + 1
        entries = [
            (
                first + i,
                new_entry(
                    delivery_id(sub_id, game_id, first + i),
                    first + i,
                    now,
                    self.window_ms,
                    item=item.to_dict(),
                ),
            )
            for i, item in enumerate(items)
        ]
        fields = {
            "moves": upto,
            "scores": max(last_score, state["scores"]),
            "progress": state["progress"] + len(items),
            "key": key_id,
        }
        due_keys, member = delivery.index_keys(self.channel, game_id, sub_id)
        index = due_keys[1:]  # the script takes the index only
        state_key, log_key, _ = subscription_keys(game_id, sub_id)
        args = dispatch_args("moves", state["moves"], fields, member, now, entries)
        reply = self._dispatch(keys=[state_key, log_key, *index], args=args)
        return text(reply[0]) == "ok"


# ------------------------------------------------------------------------ this process


@dataclass(frozen=True)
class SubscriptionParts:
    """This process's subscription dispatcher and deliverer (on the shared process parts)."""

    dispatcher: SubscriptionDispatcher
    deliverer: Deliverer


def _make_sub_parts() -> SubscriptionParts:
    base = process.parts()
    dispatcher = SubscriptionDispatcher(base.client, base.store, settings["WEBHOOK_RETRY_SECONDS"])
    deliverer = Deliverer(
        base.client,
        SubscriptionChannel(base.client, dispatcher.owners),
        base.post,
        backoff_base=settings["WEBHOOK_BACKOFF_BASE"],
        backoff_max=settings["WEBHOOK_BACKOFF_MAX"],
        timeout=settings["WEBHOOK_TIMEOUT"],
    )
    return SubscriptionParts(dispatcher, deliverer)


_sub_parts = process.PerProcess(_make_sub_parts)


def sub_parts() -> SubscriptionParts:
    """This process's subscription dispatcher and deliverer."""
    return _sub_parts.get()


def due_follower(client: redis.Redis) -> Follower:
    """The change feed's consumer "subscriptions": scoring progress in a game (score events
    or only its marker) makes each subscription of the game's owner key due in the shard's
    subs-due index, written with the consumer's position; the sweep then finds every
    subscription with items to dispatch even when `after_scoring`'s task was lost."""
    owners = Owners(client)
    channel = SubscriptionChannel(client, owners)

    def writes(shard: int, changes: list[Change]) -> list[Write]:
        progressed: dict[str, int] = {}
        for change in changes:
            if change.stream == SCORES:
                progressed.setdefault(change.game_id, change.time_ms)
        owned = {g: owners.get(g) for g in progressed}
        keys = sorted({k for k in owned.values() if k is not None})
        pipe = client.pipeline(transaction=False)
        for key_id in keys:
            pipe.hkeys(subscriptions_key(key_id))
        found = pipe.execute()
        subs = {k: sorted(text(s) for s in f) for k, f in zip(keys, found, strict=True)}
        due = subs_due_key(shard)
        return [
            Write("zadd_lt", due, channel.member(game_id, sub_id), at)
            for game_id, at in progressed.items()
            for sub_id in subs.get(owned[game_id] or "", [])
        ]

    return Follower(client, "subscriptions", writes)


def after_scoring(game_id: str, moves: int) -> None:
    """Called by the scoring task after each catch-up: if the game's owner key has
    subscriptions, mark them due and (when moves were scored) send the dispatch."""
    try:
        if sub_parts().dispatcher.mark_due(game_id) and moves:
            dispatch.apply_async(args=[game_id], queue=QUEUE)
    except Exception:  # the scores are appended; the subscription sweep finds the rest
        log.warning("could not dispatch subscriptions of game %s", game_id, exc_info=True)


def stalled(
    client: redis.Redis, grace_ms: int, page: int = 500
) -> Iterator[tuple[str, str | None]]:
    """The subscriptions the sweep re-sends (see `delivery.stalled`)."""
    return delivery.stalled(client, SubscriptionChannel(client), grace_ms, page)


# ------------------------------------------------------------------------ Celery tasks


@shared_task(name="subscriptions.dispatch", ignore_result=True)
def dispatch(game_id: str) -> int:
    """Create the deliveries of a game's new feed items; one deliver task per subscription."""
    created = sub_parts().dispatcher.dispatch(game_id)
    for sub_id in sorted({sub_id for sub_id, _ in created}):
        deliver.apply_async(args=[game_id, sub_id], queue=QUEUE)
    return len(created)


@shared_task(name="subscriptions.deliver", bind=True, ignore_result=True, max_retries=None)
def deliver(self: Any, game_id: str, sub_id: str) -> str:
    """Deliver a subscription's due deliveries in one game, in order; a failure is retried by
    Celery after a backoff."""
    most = settings["WEBHOOK_TASK_DELIVERIES"]
    return delivery.run_deliver(self, sub_parts().deliverer, game_id, sub_id, most, QUEUE)


@shared_task(name="subscriptions.ping", ignore_result=True)
def ping(key_id: str, sub_id: str, delivery_id: str) -> str:
    """POST one signed `ping` to the subscription's URL (tried once) and log the attempt."""
    base = process.parts()
    raw = base.client.hget(subscriptions_key(key_id), sub_id)
    if raw is None:
        return "gone"
    config = json.loads(raw)
    item: dict[str, Any] = {"kind": "ping", "seq": None, "time_ms": now_ms(), "data": {}}
    body = notification_body("", sub_id, delivery_id, item)
    started = now_ms()
    answer = base.post(config["url"], body, signed_headers(config, "ping", delivery_id, 1, body))
    ok = answer.status is not None and 200 <= answer.status < 300
    record: dict[str, Any] = {
        "delivery": delivery_id,
        "game_id": None,
        "kind": "ping",
        "seq": None,
        "attempt": 1,
        "at_ms": started,
        "ms": now_ms() - started,
        "status": answer.status,
        "outcome": "delivered" if ok else "failed",
    }
    if answer.error is not None:
        record["error"] = answer.error
    remember_attempt(base.client, key_id, sub_id, record)
    return str(record["outcome"])


@shared_task(name="subscriptions.sweep", ignore_result=True)
def sweep() -> int:
    """Re-send dispatches and deliveries that were lost; returns how many."""
    grace = int(settings["WEBHOOK_SWEEP_GRACE"] * 1000)
    channel = sub_parts().dispatcher.channel
    found = delivery.stalled(channel.client, channel, grace)
    count = delivery.resend(found, dispatch, deliver, QUEUE)
    if count:
        log.info("subscription sweep: %d tasks re-sent", count)
    return count
