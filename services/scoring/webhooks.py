"""Webhook delivery: every score event of a game, POSTed as signed JSON to each of its hooks.

Three Celery tasks on the webhook queue (``WEBHOOK_QUEUE``):

- ``webhooks.dispatch(game_id)`` turns score events not yet dispatched into deliveries: for
  each hook, one Lua script checks the hook's progress (last score seq dispatched), writes a
  log entry per new event (``HSETNX``: never twice) and advances the progress — all or
  nothing, conditional on the progress it started from. Then it sends one ``deliver`` task per
  delivery it created. `catch_up` triggers it after appending score events; the sweep and a
  new registration too.
- ``webhooks.deliver(game_id, hook_id, seq, attempt)`` POSTs one delivery and records the
  attempt in the same entry, conditional on the number of attempts recorded so far: a
  redelivered or duplicated task finds its attempt taken and stops, so there is one log
  entry and one delivery id per (hook, score event). Failures are retried by Celery with
  exponential backoff until the delivery's window (``WEBHOOK_RETRY_SECONDS``) ends.
- ``webhooks.sweep`` (beat) re-sends dispatches for hooks behind their score stream and
  deliveries overdue by ``WEBHOOK_SWEEP_GRACE`` (a lost task or a worker killed between two
  steps); the conditions above make a resent task harmless.

Key layout: see services/command/hooks.py; the names come from `services.redis_store.keys`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import random
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import redis
from celery import shared_task
from celery.signals import worker_process_init

from eventstore.envelope import SCORES, StoredEvent
from eventstore.port import EventStore
from services.redis_store import RedisEventStore, hook_keys, hooks_key, lease_key

from .config import from_env

log = logging.getLogger(__name__)
settings = from_env()
QUEUE = settings["WEBHOOK_QUEUE"]
FINAL = ("delivered", "failed")
KEPT_ATTEMPTS = 50  # a log entry keeps the last attempts (`tries` counts them all)
USER_AGENT = "CarcassonneCloud-Webhooks/1"


def delivery_id(hook_id: str, seq: int) -> str:
    """The stable id of the delivery of score event `seq` to a hook (receivers dedupe on it)."""
    return f"{hook_id}.{seq}"


def signature(secret: str, body: bytes) -> str:
    """The `X-Carcassonne-Signature` header: HMAC-SHA256 of the raw body under the secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


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


def backoff(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before attempt `attempt` + 1: base·2^(attempt-1), capped, plus up to 20% jitter
    (deliveries that failed together do not all come back at the same instant)."""
    delay = min(cap, base * 2 ** min(attempt - 1, 30))
    return delay * (1 + 0.2 * (rng or random).random())


# KEYS: hook state, delivery log, due set. ARGV: expected progress, new progress, now ms,
# then (seq, entry JSON) per delivery. Returns {'ok'} or {'conflict', progress}.
DISPATCH_LUA = """
local progress = redis.call('HGET', KEYS[1], 'progress') or '0'
if progress ~= ARGV[1] then return {'conflict', progress} end
for i = 4, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('ZADD', KEYS[3], ARGV[3], ARGV[i])
  end
end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
return {'ok'}
"""

# KEYS: delivery log, due set. ARGV: seq, attempts recorded before this one, new entry JSON,
# next due ms ("" = final). Returns 'ok', 'stale' (another task recorded it) or 'gone'.
RECORD_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 'gone' end
local entry = cjson.decode(raw)
if tonumber(entry['tries']) ~= tonumber(ARGV[2]) then return 'stale' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
return 'ok'
"""


def _now_ms() -> int:
    return int(time.time() * 1000)


class Dispatcher:
    """Turns new score events into deliveries, one atomic step per hook and batch."""

    def __init__(
        self, client: redis.Redis, store: EventStore, window_s: float, batch: int = 500
    ) -> None:
        self.client = client
        self.store = store
        self.window_ms = int(window_s * 1000)
        self.batch = max(1, batch)
        self._dispatch = client.register_script(DISPATCH_LUA)

    def dispatch(self, game_id: str) -> list[tuple[str, int]]:
        """Record the deliveries of every score event past each hook's progress; returns the
        (hook, seq) pairs this call created (each is created by exactly one call)."""
        hooks = sorted(_text(h) for h in cast(list[Any], self.client.hkeys(hooks_key(game_id))))
        created: list[tuple[str, int]] = []
        for hook_id in hooks:
            state, log_key, due = hook_keys(game_id, hook_id)
            for _ in range(1_000):  # batches and lost races; bounded all the same
                progress = int(_text(self.client.hget(state, "progress") or b"0"))
                events = self.store.read(game_id, SCORES, after=progress, limit=self.batch)
                if not events:
                    break
                now = _now_ms()
                args: list[Any] = [progress, events[-1].seq, now]
                for event in events:
                    args += [event.seq, json.dumps(self._entry(hook_id, event, now))]
                reply = self._dispatch(keys=[state, log_key, due], args=args)
                if _text(reply[0]) == "ok":
                    created += [(hook_id, e.seq) for e in events]
        return created

    def _entry(self, hook_id: str, event: StoredEvent, now: int) -> dict[str, Any]:
        return {
            "delivery": delivery_id(hook_id, event.seq),
            "seq": event.seq,
            "event": event.type,
            "created_ms": now,
            "deadline_ms": now + self.window_ms,
            "outcome": "pending",
            "tries": 0,
            "attempts": [],
            "next_ms": now,
            "status": None,
        }


@dataclass(frozen=True)
class Attempted:
    """What one `Deliverer.attempt` did: `retry_in` seconds when another attempt is due."""

    outcome: str  # delivered, retrying, failed, or skipped (stale, busy, final, gone)
    retry_in: float | None = None
    status: int | None = None


Poster = Callable[[str, bytes, dict[str, str], float], tuple[int | None, str | None]]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is reported as the receiver's answer, never followed (it could point inside
    this network)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxies from the environment: a delivery goes straight to the receiver.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def http_post(
    url: str, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int | None, str | None]:
    """POST with the standard library; (status, None) on an answer, (None, error) otherwise."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        # The status is all we keep: the body is never read, so a receiver that drips it
        # slowly cannot hold the worker.
        with _OPENER.open(request, timeout=timeout) as response:
            return int(response.status), None
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code), None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"{type(reason).__name__}: {reason}"[:300]


def blocked_address(url: str) -> str | None:
    """Why a URL must not be called (it resolves inside this network), or None."""
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return None  # unresolvable now: the POST fails and is retried
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not address.is_global:
            return f"blocked: {host} resolves to a non-public address ({address})"
    return None


class Deliverer:
    """Makes one attempt at one delivery and records it."""

    def __init__(
        self,
        client: redis.Redis,
        store: EventStore,
        timeout: float = 5.0,
        backoff_base: float = 1.0,
        backoff_max: float = 50.0,
        allow_private: bool = False,
        post: Poster = http_post,
    ) -> None:
        self.client = client
        self.store = store
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.allow_private = allow_private
        self.post = post
        self._record = client.register_script(RECORD_LUA)

    def attempt(self, game_id: str, hook_id: str, seq: int, attempt: int) -> Attempted:
        """Attempt number `attempt` of the delivery of score event `seq` to `hook_id`."""
        raw_hook = self.client.hget(hooks_key(game_id), hook_id)
        _, log_key, due = hook_keys(game_id, hook_id)
        raw = self.client.hget(log_key, str(seq))
        if raw_hook is None or raw is None:
            return Attempted("gone")
        entry = json.loads(raw)
        if entry["outcome"] in FINAL:
            return Attempted("final")
        if entry["tries"] != attempt - 1:
            return Attempted("stale")  # a redelivered task whose attempt is already recorded
        lease = lease_key(game_id, hook_id, seq)
        if not self.client.set(lease, attempt, nx=True, px=int(self.timeout * 1000) + 5_000):
            return Attempted("busy")  # a duplicate of this task is POSTing right now
        try:
            return self._attempt(game_id, json.loads(raw_hook), entry, seq, attempt, log_key, due)
        finally:
            self.client.delete(lease)

    def _attempt(
        self,
        game_id: str,
        hook: dict[str, Any],
        entry: dict[str, Any],
        seq: int,
        attempt: int,
        log_key: str,
        due: str,
    ) -> Attempted:
        (event,) = self.store.read(game_id, SCORES, after=seq - 1, limit=1)
        body = delivery_body(game_id, hook["id"], event)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Carcassonne-Event": event.type,
            "X-Carcassonne-Delivery": entry["delivery"],
            "X-Carcassonne-Attempt": str(attempt),
            "X-Carcassonne-Signature": signature(hook["secret"], body),
        }
        started = _now_ms()
        blocked = None if self.allow_private else blocked_address(hook["url"])
        if blocked is None:
            status, error = self.post(hook["url"], body, headers, self.timeout)
        else:
            status, error = None, blocked
        now = _now_ms()
        ok = status is not None and 200 <= status < 300
        if ok:
            outcome, next_ms = "delivered", None
        elif blocked is not None or now >= entry["deadline_ms"]:
            outcome, next_ms = "failed", None
        else:
            # The last attempt is made at the deadline itself: the whole window is used.
            wait = int(backoff(attempt, self.backoff_base, self.backoff_max) * 1000)
            outcome, next_ms = "retrying", min(now + wait, entry["deadline_ms"])
        record: dict[str, Any] = {
            "attempt": attempt,
            "at_ms": started,
            "ms": now - started,
            "status": status,
        }
        if error is not None:
            record["error"] = error
        new = {
            **entry,
            "tries": attempt,
            "outcome": outcome,
            "status": status,
            "next_ms": next_ms,
            "attempts": (entry["attempts"] + [record])[-KEPT_ATTEMPTS:],
        }
        if ok:
            new["delivered_ms"] = now
        reply = self._record(
            keys=[log_key, due], args=[seq, attempt - 1, json.dumps(new), next_ms or ""]
        )
        if _text(reply) != "ok":
            return Attempted("stale", status=status)  # another task recorded this attempt
        retry_in = None if next_ms is None else max(0.0, (next_ms - now) / 1000)
        return Attempted(outcome, retry_in, status)


def overdue(
    client: redis.Redis, store: EventStore, grace_ms: int, page: int = 500
) -> Iterator[tuple[str, str | None, int, int]]:
    """What the sweep re-sends: (game, None, 0, 0) for a game with a hook behind its score
    stream, and (game, hook, seq, attempt) for each delivery overdue by more than `grace_ms`."""
    prefix, suffix = hooks_key("*").split("*")
    now = _now_ms()
    for key in client.scan_iter(match=hooks_key("*"), count=page, _type="hash"):
        game_id = _text(key)[len(prefix) : -len(suffix)]
        last = store.last_seq(game_id, SCORES)
        behind = False
        for hook in cast(list[Any], client.hkeys(_text(key))):
            hook_id = _text(hook)
            state, log_key, due = hook_keys(game_id, hook_id)
            behind = behind or int(_text(client.hget(state, "progress") or b"0")) < last
            late = cast(
                list[Any], client.zrangebyscore(due, "-inf", now - grace_ms, start=0, num=page)
            )
            for member in late:
                raw = client.hget(log_key, _text(member))
                if raw is None:
                    continue
                entry = json.loads(raw)
                # Pushed forward: the resent task gets `grace_ms` before the next sweep looks.
                client.zadd(due, {_text(member): now}, xx=True)
                yield game_id, hook_id, int(entry["seq"]), int(entry["tries"]) + 1
        if behind:
            yield game_id, None, 0, 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ------------------------------------------------------------------------ Celery tasks

_client: redis.Redis | None = None


def client() -> redis.Redis:
    """This process's Redis client (one per worker child: connections are not fork-safe)."""
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings["REDIS_URL"])
    return _client


@worker_process_init.connect
def _fresh_client(**_: Any) -> None:
    global _client
    _client = None


def dispatcher() -> Dispatcher:
    """A dispatcher on this process's client, with the worker's settings."""
    store = RedisEventStore(client())
    return Dispatcher(client(), store, settings["WEBHOOK_RETRY_SECONDS"], settings["WEBHOOK_BATCH"])


def deliverer() -> Deliverer:
    """A deliverer on this process's client, with the worker's settings."""
    return Deliverer(
        client(),
        RedisEventStore(client()),
        timeout=settings["WEBHOOK_TIMEOUT"],
        backoff_base=settings["WEBHOOK_BACKOFF_BASE"],
        backoff_max=settings["WEBHOOK_BACKOFF_MAX"],
        allow_private=settings["WEBHOOK_ALLOW_PRIVATE"],
    )


def after_scoring(game_id: str) -> None:
    """Called by `catch_up` after it appended score events: dispatch them if the game has
    hooks (one EXISTS, so games without hooks cost no broker message)."""
    try:
        if client().exists(hooks_key(game_id)):
            dispatch.apply_async(args=[game_id], queue=QUEUE)
    except Exception:  # the scores are appended; the webhook sweep finds the hook behind
        log.warning("could not dispatch webhooks of game %s", game_id, exc_info=True)


@shared_task(name="webhooks.dispatch", ignore_result=True)
def dispatch(game_id: str) -> int:
    """Create the deliveries of a game's new score events and send one task per delivery."""
    created = dispatcher().dispatch(game_id)
    for hook_id, seq in created:
        deliver.apply_async(args=[game_id, hook_id, seq, 1], queue=QUEUE)
    if created:
        log.info("game %s: %d webhook deliveries created", game_id, len(created))
    return len(created)


# max_retries=None: the delivery's window bounds the retries, not a count.
@shared_task(name="webhooks.deliver", bind=True, ignore_result=True, max_retries=None)
def deliver(self: Any, game_id: str, hook_id: str, seq: int, attempt: int = 1) -> str:
    """One attempt at a delivery; a failure inside its window is retried by Celery."""
    done = deliverer().attempt(game_id, hook_id, seq, attempt)
    if done.outcome == "retrying" and done.retry_in is not None:
        raise self.retry(args=[game_id, hook_id, seq, attempt + 1], countdown=done.retry_in)
    if done.outcome == "failed":
        log.warning("webhook %s of game %s: delivery of %d failed", hook_id, game_id, seq)
    return done.outcome


@shared_task(name="webhooks.sweep", ignore_result=True)
def sweep() -> int:
    """Re-send dispatches and overdue deliveries that were lost; returns how many."""
    grace = int(settings["WEBHOOK_SWEEP_GRACE"] * 1000)
    count = 0
    for game_id, hook_id, seq, attempt in overdue(client(), RedisEventStore(client()), grace):
        if hook_id is None:
            dispatch.apply_async(args=[game_id], queue=QUEUE)
        else:
            deliver.apply_async(args=[game_id, hook_id, seq, attempt], queue=QUEUE)
        count += 1
    if count:
        log.info("webhook sweep: %d tasks re-sent", count)
    return count
