"""Subscriptions (worker side): every game an API key created or imported, its notification
feed (services/scoring/feed.py) delivered to each of the key's subscriptions — signed with a
timestamp, at least once, in order per game, retried for a day — and every score event of a
game to each subscription filtered to that game, in the webhook format (per-game webhooks,
services/command/hooks.py: the score stream is their feed, a delivery's position its score
seq, the body and signature services/scoring/webhooks.py's). The one delivery channel.

A subscription within one game is a receiver of the delivery queue (services/scoring/
delivery.py, `SubscriptionChannel`): its state ``{g:G}:sub:S`` holds ``moves`` (the feed
cursor: the last move whose items were dispatched), ``scores`` (the last score event read),
``progress`` (deliveries created), ``head`` and ``key`` (the owner key), its log
``{g:G}:sub:S:log`` one entry per delivery (position -> entry with the item). Its feed goes as
far as the game is scored (the score stream's marker): move M's items wait until the worker
scored M, so a move and the score it caused go out in the game's order.

Four Celery tasks on the webhook queue:

- ``subscriptions.dispatch(game_id)``: for each subscription of the game (its owner key's,
  and those filtered to it in ``{g:G}:subs``), one script writes the deliveries of the items
  past its cursor and advances the cursor — all or nothing, conditional on the cursor it read
  (`DISPATCH_LUA`), the items those of the subscription's kinds appended after it was created
  (a webhook: every score event from the first). Sent by `after_scoring`, which the scoring
  task calls after every catch-up, and by a webhook's registration.
- ``subscriptions.deliver(game_id, sub_id)``: the queue's ordered, leased, retried delivery.
  Each attempt also goes into the subscription's recent log ``{k:K}:sub:S:recent`` (its last
  `RECENT_KEPT` attempts over every game: `GET /v1/subscriptions/{id}/deliveries`); a
  webhook's log is its per-game log (`GET /games/{id}/webhooks/{hook}/deliveries`).
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
from services.common.notifications import RECENT_KEPT, WEBHOOK_FORMAT, live_secrets, owner_key
from services.common.signing import SIGNATURE_HEADER, sign
from services.redis_store import game_keys, secrets_key
from services.redis_store.changes import Change, Follower, Write
from services.redis_store.keys import (
    game_subscriptions_key,
    index_shard,
    subs_due_key,
    subscription_keys,
    subscription_recent_key,
    subscriptions_key,
)
from services.redis_store.scripts import script

from . import delivery, process, webhooks
from .config import from_env
from .delivery import Deliverer, Request, Source, dispatch_args, new_entry, now_ms, text
from .delivery_scripts import DISPATCH_LUA
from .feed import Feed, Item, with_match

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
    """Subscriptions as the delivery queue's receivers (services/scoring/delivery.py): the
    feed of a game goes as far as it is scored (its score stream's marker), a delivery's
    position is its place in the feed; a webhook's feed is the score stream itself, a
    delivery's position its score seq."""

    def __init__(
        self, client: redis.Redis, store: EventStore, owners: Owners | None = None
    ) -> None:
        self.client = client
        self.store = store  # a webhook's body is its score event, read from the stream
        self.owners = owners or Owners(client)

    @staticmethod
    def source(game_id: str, config: dict[str, Any]) -> Source:
        stream, _, marker = game_keys(game_id, SCORES)
        if config.get("format") == WEBHOOK_FORMAT:
            return Source("scores", stream, "xlen")  # every score event
        return Source("moves", marker, "get")  # "moves up to N are scored"

    def config(self, game_id: str, receiver: str) -> dict[str, Any] | None:
        filtered = self.client.hget(game_subscriptions_key(game_id), receiver)
        if filtered is not None:  # filtered to this game (a webhook)
            return dict(json.loads(filtered))
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
        if config.get("format") == WEBHOOK_FORMAT:
            return webhooks.request(self.store, game_id, config, entry, attempt, cache)
        item = entry["item"]
        body = notification_body(game_id, config["id"], entry["delivery"], item)
        headers = signed_headers(config, item["kind"], entry["delivery"], attempt, body)
        return Request(config["url"], body, headers)

    def recorded(
        self, game_id: str, config: dict[str, Any], entry: dict[str, Any], record: dict[str, Any]
    ) -> None:
        if config.get("format") == WEBHOOK_FORMAT:
            return  # a webhook's log is its per-game log: nothing more to write
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
        key_id = owner_key(json.loads(raw) if raw is not None else None) or ""
        if raw is not None:
            self._known.keep(game_id, key_id)
        return key_id or None


class SubscriptionDispatcher:
    """Turns a game's feed into deliveries, one atomic step per subscription."""

    def __init__(
        self,
        client: redis.Redis,
        store: EventStore,
        window_s: float,
        feeds_kept: int = FEEDS_KEPT,
        batch: int = 500,
    ) -> None:
        self.client = client
        self.store = store
        self.owners = Owners(client)
        self.channel = SubscriptionChannel(client, store, self.owners)
        self.window_ms = int(window_s * 1000)
        self.batch = max(1, batch)  # score events per step of a webhook's dispatch
        self._dispatch = script(client, DISPATCH_LUA)
        # Each game's feed folded as far as its last dispatch: the next one reads and folds
        # only the moves since (without it a dispatch re-read and re-folded the game from
        # move 1: O(moves) per move; bench_notify measures both).
        self.feeds: Kept[str, Feed] = Kept(feeds_kept, lambda feed: feed.seq)

    def owner(self, game_id: str) -> str | None:
        """The API key that created or imported the game."""
        return self.owners.get(game_id)

    def subscriptions(self, game_id: str) -> dict[str, dict[str, Any]]:
        """The game's subscriptions by id: its owner key's and those filtered to it."""
        key_id = self.owner(game_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(game_subscriptions_key(game_id))
        if key_id is not None:
            pipe.hgetall(subscriptions_key(key_id))  # another slot: not in one transaction
        found = cast(list[dict[Any, Any]], pipe.execute())
        return {text(k): json.loads(v) for raw in found for k, v in raw.items()}

    def mark_due(self, game_id: str) -> bool:
        """Put each subscription of the game in the subs-due index now (if a dispatch is then
        lost, the sweep finds it behind); False when the game has none."""
        subs = self.subscriptions(game_id)
        if not subs:
            return False
        index = subs_due_key(index_shard(game_id))
        now = now_ms()
        self.client.zadd(index, {delivery.member(game_id, s): now for s in subs}, lt=True)
        # LT keeps an earlier time; a member not there yet is added.
        return True

    def dispatch(self, game_id: str) -> list[tuple[str, int]]:
        """Record the deliveries of every item past each subscription's cursor; returns the
        (subscription, position) pairs this call created."""
        configs = self.subscriptions(game_id)
        created: list[tuple[str, int]] = []
        for sub_id, config in sorted(configs.items()):
            if config.get("format") == WEBHOOK_FORMAT:
                created += self._dispatch_scores(game_id, sub_id, config)
        configs = {s: c for s, c in configs.items() if c.get("format") != WEBHOOK_FORMAT}
        if not configs:
            return created
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
            if any(item.kind == "game_started" for item in items):  # once per game
                raw = self.client.get(secrets_key(game_id))
                items = with_match(items, json.loads(raw) if raw is not None else None)
            last_score = scores[-1].seq if scores else lowest
            lost = False
            for sub_id, st in behind.items():
                config = configs[sub_id]
                mine = self._wanted(config, items, st["moves"])
                first = st["progress"] + 1
                entries = [
                    (first + i, self._entry(delivery_id(sub_id, game_id, first + i), first + i,
                                            item=item.to_dict()))
                    for i, item in enumerate(mine)
                ]  # fmt: skip
                fields = {
                    "moves": upto,
                    "scores": max(last_score, st["scores"]),
                    "progress": st["progress"] + len(mine),
                    "key": config["key_id"],
                }
                if self._write(game_id, sub_id, "moves", st["moves"], fields, entries):
                    created += [(sub_id, position) for position, _ in entries]
                else:
                    lost = True
            if not lost:
                break
        return created

    def _dispatch_scores(
        self, game_id: str, sub_id: str, config: dict[str, Any]
    ) -> list[tuple[str, int]]:
        """A webhook's deliveries: every score event past its ``scores`` cursor, one each at
        the position of its score seq, `batch` at a time, each step conditional on that
        cursor."""
        created: list[tuple[str, int]] = []
        for _ in range(1_000):  # batches and lost races; bounded all the same
            st = self._state(game_id, sub_id)
            events = self.store.read(game_id, SCORES, after=st["scores"], limit=self.batch)
            if not events:
                break
            entries = [
                (e.seq, self._entry(webhooks.delivery_id(sub_id, e.seq), e.seq, event=e.type))
                for e in events
            ]
            last = events[-1].seq
            fields = {"scores": last, "progress": last, "key": config["key_id"]}
            if self._write(game_id, sub_id, "scores", st["scores"], fields, entries):
                created += [(sub_id, position) for position, _ in entries]
                if len(events) < self.batch:
                    break
        return created

    def _entry(self, delivery: str, position: int, **extra: Any) -> dict[str, Any]:
        return new_entry(delivery, position, now_ms(), self.window_ms, **extra)

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
        sub_id: str,
        cursor: str,
        expected: int,
        fields: dict[str, Any],
        entries: list[tuple[int, dict[str, Any]]],
    ) -> bool:
        """One step of a subscription's dispatch (`DISPATCH_LUA`): its entries and `fields`,
        if `cursor` still reads `expected`."""
        state_key, log_key, _ = subscription_keys(game_id, sub_id)
        member = delivery.member(game_id, sub_id)
        args = dispatch_args(cursor, expected, fields, member, now_ms(), entries)
        reply = self._dispatch(keys=[state_key, log_key, *delivery.due_index(game_id)], args=args)
        return text(reply[0]) == "ok"


# ------------------------------------------------------------------------ this process


@dataclass(frozen=True)
class SubscriptionParts:
    """This process's subscription dispatcher and deliverer (on the shared process parts)."""

    dispatcher: SubscriptionDispatcher
    deliverer: Deliverer


def _make_sub_parts() -> SubscriptionParts:
    base = process.parts()
    dispatcher = SubscriptionDispatcher(
        base.client,
        base.store,
        settings["WEBHOOK_RETRY_SECONDS"],
        batch=settings["WEBHOOK_BATCH"],
    )
    deliverer = Deliverer(
        base.client,
        dispatcher.channel,
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
    or only its marker) makes each subscription of its owner key due in the shard's subs-due
    index, new score events also each subscription filtered to the game (a webhook: score
    events are its only items), written with the consumer's position; the sweep then finds
    every subscription with items to dispatch even when `after_scoring`'s task was lost."""
    owners = Owners(client)

    def writes(shard: int, changes: list[Change]) -> list[Write]:
        progressed: dict[str, int] = {}
        scored: dict[str, int] = {}  # with score events: the only items of a webhook
        for change in changes:
            if change.stream == SCORES:
                progressed.setdefault(change.game_id, change.time_ms)
                if change.last >= change.first:
                    scored.setdefault(change.game_id, change.time_ms)
        owned = {g: owners.get(g) for g in progressed}
        keys = sorted({k for k in owned.values() if k is not None})
        pipe = client.pipeline(transaction=False)
        for key_id in keys:
            pipe.hkeys(subscriptions_key(key_id))
        for game_id in scored:
            pipe.hkeys(game_subscriptions_key(game_id))
        found = pipe.execute()
        by_key = {k: sorted(text(s) for s in f) for k, f in zip(keys, found, strict=False)}
        hooks = [sorted(text(s) for s in f) for f in found[len(keys) :]]
        due = subs_due_key(shard)
        out = [
            Write("zadd_lt", due, delivery.member(game_id, sub_id), at)
            for game_id, at in progressed.items()
            for sub_id in by_key.get(owned[game_id] or "", [])
        ]
        for (game_id, at), filtered in zip(scored.items(), hooks, strict=True):
            out += [Write("zadd_lt", due, delivery.member(game_id, h), at) for h in filtered]
        return out

    return Follower(client, "subscriptions", writes)


def after_scoring(game_id: str, moves: int) -> None:
    """Called by the scoring task after each catch-up: if the game has subscriptions (its
    owner key's, or filtered to it), mark them due and (when moves were scored) send the
    dispatch."""
    try:
        if sub_parts().dispatcher.mark_due(game_id) and moves:
            dispatch.apply_async(args=[game_id], queue=QUEUE)
    except Exception:  # the scores are appended; the subscription sweep finds the rest
        log.warning("could not dispatch subscriptions of game %s", game_id, exc_info=True)


def stalled(
    client: redis.Redis, store: EventStore, grace_ms: int, page: int = 500
) -> Iterator[tuple[str, str | None]]:
    """The subscriptions (webhooks too) the sweep re-sends (see `delivery.stalled`)."""
    return delivery.stalled(client, SubscriptionChannel(client, store), grace_ms, page)


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
