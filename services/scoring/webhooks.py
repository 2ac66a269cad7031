"""Webhook delivery: every score event of a game, POSTed as signed JSON to each of its hooks,
at least once and in score order per hook.

Three Celery tasks on the webhook queue (``WEBHOOK_QUEUE``):

- ``webhooks.dispatch(game_id)`` turns score events not yet dispatched into deliveries: for
  each hook, one Lua script checks the hook's progress (last score seq dispatched), writes a
  log entry per new event (``HSETNX``: never twice) and advances the progress — all or
  nothing, conditional on the progress it started from. Then it sends one ``deliver`` task
  per hook that got new deliveries. `catch_up` triggers it after appending score events; the
  sweep and a new registration too.
- ``webhooks.deliver(game_id, hook_id)`` delivers a hook's deliveries **in order**: it takes
  the hook's lease (one task per hook at a time), then always works on the hook's *head*, the
  lowest delivery that is neither delivered nor finally failed, and moves on only when it is
  over. So a receiver never gets seq N+1 before seq N was delivered (or its window ended).
  Each attempt is recorded in the delivery's log entry, conditional on the number of attempts
  recorded so far (a duplicated task finds its attempt taken and stops): one log entry and
  one delivery id per (hook, score event). A failed attempt is retried by Celery itself
  (``self.retry``) after a countdown from Celery's exponential backoff with full jitter
  (``celery.utils.time.get_exponential_backoff_interval``), until the delivery's window
  (``WEBHOOK_RETRY_SECONDS``, one day) ends. Only the head is ever retried: a receiver that
  is down costs one attempt per backoff interval per hook, not one per event.
- ``webhooks.sweep`` (beat) re-sends dispatches for hooks behind their score stream and a
  ``deliver`` for hooks whose head is overdue by ``WEBHOOK_SWEEP_GRACE`` (a lost task or a
  worker killed between two steps); the conditions above make a resent task harmless.

Each worker process has one Redis client and one store for all of this (`parts`): the
client's pool (``cc:webhooks``) holds at most the process's task threads + 2 connections
(`pool_bound`), the store's Wire (``cc:webhooks:wire``, the score-event reads) one per task
thread (`wire_bound`): 2 × threads + 2 in all.

Key layout: see services/command/hooks.py; the names come from `services.redis_store.keys`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import os
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import redis
from celery import shared_task
from celery.signals import worker_init, worker_process_init
from celery.utils.time import get_exponential_backoff_interval

from eventstore.envelope import SCORES, StoredEvent
from eventstore.port import EventStore
from services.common.webhook_url import Address, RefusedUrl, Target, normalise, resolve
from services.redis_store import RedisEventStore, game_keys, hook_keys, hooks_key
from services.redis_store.connect import shared_client
from services.redis_store.indexes import shard_pages
from services.redis_store.keys import (
    hook_member,
    hooks_due_key,
    index_shard,
    shard_of,
    split_hook_member,
)

from .config import from_env

log = logging.getLogger(__name__)
settings = from_env()
QUEUE = settings["WEBHOOK_QUEUE"]
ROLE = "webhooks"  # CLIENT LIST shows this process's connections as cc:webhooks
FINAL = ("delivered", "failed")
KEPT_ATTEMPTS = 50  # a log entry keeps the last attempts (`tries` counts them all)
USER_AGENT = "CarcassonneCloud-Webhooks/1"
# A retry that fires this much before its delivery's `next_ms` still runs (workers' clocks
# differ a little); an earlier one leaves it to the retry its recorder scheduled.
EARLY_MS = 2_000
# A deliver task hands over to a new task after this long, well inside the broker's
# visibility timeout (a task held longer is handed out twice: harmless, but wasted).
TASK_SECONDS = 10.0
READ_AHEAD = 50  # score events read at once by a deliver task


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


# KEYS: hook state, delivery log[, hooks due index (a game on a shard slot)]. ARGV: expected
# progress, new progress, the hook's member in the index, now (ms), then (seq, entry JSON) per
# delivery. Returns {'ok'} or {'conflict', progress}. The new deliveries are due now: the
# index says so in the same step (the sweep re-sends the deliver task if it was lost).
DISPATCH_LUA = """
local progress = redis.call('HGET', KEYS[1], 'progress') or '0'
if progress ~= ARGV[1] then return {'conflict', progress} end
for i = 5, #ARGV, 2 do
  redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
if KEYS[3] then redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3]) end
return {'ok'}
"""

# KEYS: hook state, delivery log, lease. ARGV: lease token ("" = only look), lease ms.
# Moves the hook's `head` past deliveries that are over, then returns {'due', entry JSON} for
# the first one that is not, {'idle'} if there is none, {'lost'} if the lease is not ours.
NEXT_LUA = """
if ARGV[1] ~= '' then
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {'lost'} end
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '0')
local progress = tonumber(redis.call('HGET', KEYS[1], 'progress') or '0')
local start, found = head, nil
while head < progress do
  local raw = redis.call('HGET', KEYS[2], tostring(head + 1))
  if raw then
    local outcome = cjson.decode(raw)['outcome']
    if outcome ~= 'delivered' and outcome ~= 'failed' then
      found = raw
      break
    end
  end
  head = head + 1
end
if head ~= start then redis.call('HSET', KEYS[1], 'head', head) end
if found then return {'due', found} end
return {'idle'}
"""

# KEYS: delivery log, hook state[, score stream, hooks due index (a game on a shard slot)].
# ARGV: seq, attempts recorded before this one, new entry JSON, "1" if the delivery is now
# over, the hook's member in the index, now (ms), the retry's time (ms, when not over).
# Returns 'ok', 'stale' (another task recorded this attempt) or 'gone'. A delivery that is
# over at the head moves the head past it. In the same step the index says when the hook
# next has work: at the retry's time, now (the next delivery, or score events to dispatch),
# or never (everything dispatched is over and every score event is dispatched: removed).
RECORD_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 'gone' end
if tonumber(cjson.decode(raw)['tries']) ~= tonumber(ARGV[2]) then return 'stale' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] == '1' then
  if tonumber(redis.call('HGET', KEYS[2], 'head') or '0') == tonumber(ARGV[1]) - 1 then
    redis.call('HSET', KEYS[2], 'head', ARGV[1])
  end
end
if KEYS[4] then
  local head = tonumber(redis.call('HGET', KEYS[2], 'head') or '0')
  local progress = tonumber(redis.call('HGET', KEYS[2], 'progress') or '0')
  local behind = progress < redis.call('XLEN', KEYS[3])
  if head >= progress and not behind then
    redis.call('ZREM', KEYS[4], ARGV[5])
  elseif ARGV[4] == '1' or behind then
    redis.call('ZADD', KEYS[4], ARGV[6], ARGV[5])
  else
    redis.call('ZADD', KEYS[4], ARGV[7], ARGV[5])
  end
end
return 'ok'
"""

# KEYS: hook state, delivery log, score stream, hooks due index. ARGV: the hook's member in
# the index, now (ms). Run by the sweep on a hook it looked at: puts the hook's index entry
# at the time it next has work (now if it is behind its score stream, else its head
# delivery's `next_ms`), or removes it when it has none. Returns 'behind', 'due' or 'idle'.
SETTLE_LUA = """
local progress = tonumber(redis.call('HGET', KEYS[1], 'progress') or '0')
if progress < redis.call('XLEN', KEYS[3]) then
  redis.call('ZADD', KEYS[4], 'LT', ARGV[2], ARGV[1])
  return 'behind'
end
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '0')
while head < progress do
  local raw = redis.call('HGET', KEYS[2], tostring(head + 1))
  if raw then
    local entry = cjson.decode(raw)
    if entry['outcome'] ~= 'delivered' and entry['outcome'] ~= 'failed' then
      local at = tonumber(entry['next_ms']) or tonumber(ARGV[2])
      redis.call('ZADD', KEYS[4], at, ARGV[1])
      return 'due'
    end
  end
  head = head + 1
end
redis.call('ZREM', KEYS[4], ARGV[1])
return 'idle'
"""

# KEYS: lease. ARGV: token. Deletes the lease only if it is still ours.
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
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
            state, log_key, _ = hook_keys(game_id, hook_id)
            for _ in range(1_000):  # batches and lost races; bounded all the same
                progress = int(_text(self.client.hget(state, "progress") or b"0"))
                events = self.store.read(game_id, SCORES, after=progress, limit=self.batch)
                if not events:
                    break
                now = _now_ms()
                due_keys, member = due_index(game_id, hook_id)
                args: list[Any] = [progress, events[-1].seq, member, now]
                for event in events:
                    args += [event.seq, json.dumps(self._entry(hook_id, event, now))]
                reply = self._dispatch(keys=[state, log_key, *due_keys], args=args)
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


# ------------------------------------------------------------------------ HTTP


@dataclass(frozen=True)
class Answer:
    """What one POST got: a status, or an error; `blocked` when the address was refused."""

    status: int | None
    error: str | None = None
    blocked: bool = False


Poster = Callable[[str, bytes, dict[str, str]], Answer]


def _connect_checked(addresses: list[Address], port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to the first of `addresses` that answers: every one of them was
    checked, and no name is looked up again (no DNS-rebinding window)."""
    error: OSError | None = None
    for address in addresses:
        try:
            sock = socket.create_connection((str(address), port), timeout)
        except OSError as exc:
            error = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error or OSError("no address to connect to")


class PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to `host` (its Host header) over a connection to a checked address."""

    def __init__(self, host: str, port: int, addresses: list[Address], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses

    def connect(self) -> None:
        self.sock = _connect_checked(self.addresses, self.port, self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to `host` over a connection to a checked address: SNI and the certificate check
    are still on the host name."""

    def __init__(
        self,
        host: str,
        port: int,
        addresses: list[Address],
        timeout: float,
        context: ssl.SSLContext,
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.addresses = addresses
        self.tls = context

    def connect(self) -> None:
        sock = _connect_checked(self.addresses, self.port, self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def _cut(conn: http.client.HTTPConnection) -> None:
    """End a connection's blocked reads and writes (from the watchdog's thread)."""
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # closed already
            sock.shutdown(socket.SHUT_RDWR)


class HttpPoster:
    """POSTs a delivery: the URL's host is resolved once, every address checked (unless
    `allow_private`), and the connection made to a checked address. No proxy from the
    environment, no redirect followed (a 3xx is the receiver's answer: it could point inside
    this network), and the response body is never read (a receiver that drips it slowly
    cannot hold the worker)."""

    def __init__(
        self, timeout: float, allow_private: bool = False, tls: ssl.SSLContext | None = None
    ) -> None:
        self.timeout = timeout
        self.allow_private = allow_private
        self.tls = tls or ssl.create_default_context()  # verifies the certificate and its name

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        try:
            target = normalise(url)  # what registration stored: canonical already
            addresses = resolve(target, self.allow_private)
        except RefusedUrl as refused:
            return Answer(None, f"blocked: {refused.message}"[:300], blocked=True)
        except OSError as exc:  # the name does not resolve now: retried
            return Answer(None, f"resolve: {type(exc).__name__}: {exc}"[:300])
        conn = self.connection(target, addresses)
        # The socket timeout bounds each read, not the attempt: a receiver that drips its
        # status line a byte at a time would hold the thread (and its hook's lease) for
        # minutes. A watchdog cuts the connection once the whole attempt has had `timeout`.
        watchdog = threading.Timer(self.timeout, _cut, args=(conn,))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request("POST", target.path, body=body, headers=headers)
            response = conn.getresponse()
            return Answer(int(response.status))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            cut = " (attempt cut at its deadline)" if not watchdog.is_alive() else ""
            return Answer(None, f"{type(exc).__name__}: {exc}{cut}"[:300])
        finally:
            watchdog.cancel()
            conn.close()

    def connection(self, target: Target, addresses: list[Address]) -> http.client.HTTPConnection:
        """A connection to `target` that will connect to one of `addresses` only."""
        if target.scheme == "https":
            return PinnedHTTPSConnection(
                target.host, target.port, addresses, self.timeout, self.tls
            )
        return PinnedHTTPConnection(target.host, target.port, addresses, self.timeout)


# ------------------------------------------------------------------------ delivery


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
    scheduled), ``busy`` (another task holds the hook), ``lost`` (the lease expired under
    us), ``stale`` (another task recorded our attempt), ``gone`` (no such hook).
    """

    outcome: str
    retry_in: float | None = None
    delivered: int = 0  # deliveries that ended (delivered or finally failed)
    attempts: int = 0


class Deliverer:
    """Delivers a hook's deliveries in order, one attempt at a time, and records them."""

    def __init__(
        self,
        client: redis.Redis,
        store: EventStore,
        post: Poster,
        backoff_base: float = 1.0,
        backoff_max: float = 45.0,
        timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.store = store
        self.post = post
        self.backoff_base_ms = int(backoff_base * 1000)
        self.backoff_max_ms = int(backoff_max * 1000)
        # Longer than an attempt can take (connect, send, read the status line: each up to
        # the timeout) and renewed before each attempt. Should it still run out, another task
        # may POST the same delivery again: at least once, same delivery id.
        self.lease_ms = int(max(30.0, 4 * timeout) * 1000)
        self._next = client.register_script(NEXT_LUA)
        self._record = client.register_script(RECORD_LUA)
        self._release = client.register_script(RELEASE_LUA)

    def run(
        self,
        game_id: str,
        hook_id: str,
        max_deliveries: int = 100,
        max_seconds: float = TASK_SECONDS,
    ) -> Ran:
        """Work through the hook's due deliveries in seq order, holding the hook's lease."""
        state, log_key, _ = hook_keys(game_id, hook_id)
        lease = hook_lease_key(game_id, hook_id)
        token = secrets.token_hex(8)
        if not self.client.set(lease, token, nx=True, px=self.lease_ms):
            return Ran("busy")  # the holder delivers what we came for (see below)
        started = time.monotonic()
        ended = attempts = 0
        hook: dict[str, Any] | None = None
        events: dict[int, StoredEvent] = {}
        retry_in: float | None = None
        outcome = "idle"
        try:
            while True:
                reply = self._next(keys=[state, log_key, lease], args=[token, self.lease_ms])
                outcome = _text(reply[0])
                if outcome != "due":
                    break
                entry = json.loads(reply[1])
                if entry["next_ms"] is not None and entry["next_ms"] > _now_ms() + EARLY_MS:
                    outcome = "waiting"  # its recorder scheduled the retry
                    break
                if ended >= max_deliveries or time.monotonic() - started >= max_seconds:
                    outcome = "more"
                    break
                if hook is None:
                    raw_hook = self.client.hget(hooks_key(game_id), hook_id)
                    if raw_hook is None:
                        outcome = "gone"
                        break
                    hook = json.loads(raw_hook)
                event = self._event(game_id, int(entry["seq"]), events)
                done = self.attempt(game_id, hook, entry, event, log_key, state)
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
        if outcome == "idle" and self.due(game_id, hook_id):
            outcome = "more"
        return Ran(outcome, retry_in, ended, attempts)

    def due(self, game_id: str, hook_id: str) -> bool:
        """Whether the hook's head delivery is waiting and due now."""
        entry = self.head(game_id, hook_id)
        return entry is not None and (entry["next_ms"] or 0) <= _now_ms() + EARLY_MS

    def head(self, game_id: str, hook_id: str) -> dict[str, Any] | None:
        """The log entry of the hook's head delivery (the lowest not over), if any."""
        state, log_key, _ = hook_keys(game_id, hook_id)
        lease = hook_lease_key(game_id, hook_id)
        reply = self._next(keys=[state, log_key, lease], args=["", self.lease_ms])
        return json.loads(reply[1]) if _text(reply[0]) == "due" else None

    def _event(self, game_id: str, seq: int, events: dict[int, StoredEvent]) -> StoredEvent:
        event = events.pop(seq, None)
        if event is None:
            events.clear()
            read = self.store.read(game_id, SCORES, after=seq - 1, limit=READ_AHEAD)
            events.update((e.seq, e) for e in read)
            event = events.pop(seq)
        return event

    def attempt(
        self,
        game_id: str,
        hook: dict[str, Any],
        entry: dict[str, Any],
        event: StoredEvent,
        log_key: str,
        state: str,
    ) -> Attempted:
        """One attempt at one delivery, recorded if no other task recorded it first."""
        seq, attempt = int(entry["seq"]), int(entry["tries"]) + 1
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
        answer = self.post(hook["url"], body, headers)
        now = _now_ms()
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
        due_keys, member = due_index(game_id, hook["id"], with_scores=True)
        reply = self._record(
            keys=[log_key, state, *due_keys],
            args=[seq, attempt - 1, json.dumps(new), final, member, now, next_ms or now],
        )
        if _text(reply) != "ok":
            return Attempted("stale", status=answer.status)
        if outcome == "failed":
            log.warning("webhook %s of game %s: delivery of %d failed (%s)", hook["id"], game_id,
                        seq, answer.error or answer.status)  # fmt: skip
        retry_in = None if next_ms is None else max(0.0, (next_ms - now) / 1000)
        return Attempted(outcome, retry_in, answer.status)


def stalled(
    client: redis.Redis, store: EventStore, grace_ms: int, page: int = 500
) -> Iterator[tuple[str, str | None]]:
    """What the sweep re-sends: (game, None) for a game with a hook behind its score stream,
    (game, hook) for a hook whose head delivery is overdue by more than `grace_ms` and that no
    task holds.

    Reads the 64 shards' hooks-due indexes (one pipelined round trip, more pages only for a
    shard with more than `page` hooks due) instead of scanning the keyspace: it costs the
    hooks with work due, not the hooks ever registered. Each hook looked at is then settled:
    its entry moves to when it next has work, or leaves the index when it has none.
    """
    look = client.register_script(NEXT_LUA)
    settle = client.register_script(SETTLE_LUA)
    now = _now_ms()
    for members in shard_pages(client, hooks_due_key, page, high=now - grace_ms):
        games: dict[str, list[str]] = {}
        for member in members:
            game_id, hook_id = split_hook_member(member)
            games.setdefault(game_id, []).append(hook_id)
        for game_id, hook_ids in games.items():
            last = store.last_seq(game_id, SCORES)
            behind = False
            for hook_id in hook_ids:
                state, log_key, _ = hook_keys(game_id, hook_id)
                lease = hook_lease_key(game_id, hook_id)
                behind = behind or int(_text(client.hget(state, "progress") or b"0")) < last
                reply = look(keys=[state, log_key, lease], args=["", 0])
                due = json.loads(reply[1]) if _text(reply[0]) == "due" else None
                overdue = due is not None and (due["next_ms"] or 0) < now - grace_ms
                if overdue and not client.exists(lease):
                    yield game_id, hook_id
                _settle(client, settle, game_id, hook_id, due, now)
            if behind:
                yield game_id, None


def _settle(
    client: redis.Redis,
    settle: Any,
    game_id: str,
    hook_id: str,
    due: dict[str, Any] | None,
    now: int,
) -> None:
    """Move a hook's index entry to when it next has work, or remove it (see SETTLE_LUA)."""
    member = hook_member(game_id, hook_id)
    state, log_key, _ = hook_keys(game_id, hook_id)
    shard = shard_of(game_id)
    if not client.hexists(hooks_key(game_id), hook_id):
        client.zrem(hooks_due_key(index_shard(game_id)), member)  # no such hook (any more)
    elif shard is not None:
        scores = game_keys(game_id, SCORES)[0]
        settle(keys=[state, log_key, scores, hooks_due_key(shard)], args=[member, now])
    else:
        # A game from before the indexes, put in a shard by the backfill: its entry is in
        # another slot than its keys, so this is not atomic with the game's writes (a
        # concurrent change is seen by the next sweep at the latest).
        progress = int(_text(client.hget(state, "progress") or b"0"))
        index = hooks_due_key(index_shard(game_id))
        if progress < store_len(client, game_id):
            return
        if due is not None:
            client.zadd(index, {member: due["next_ms"] or now})
        else:
            client.zrem(index, member)


def store_len(client: redis.Redis, game_id: str) -> int:
    """The last score seq of a game (its score stream is never trimmed)."""
    return int(cast(Any, client.xlen(game_keys(game_id, SCORES)[0])))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ------------------------------------------------------------------------ this process

DEFAULT_TASK_THREADS = 2  # outside a Celery worker (a shell, a unit test): deploy's value
_worker: Any = None  # this process's Celery WorkController, once `worker_init` ran
_prefork_child = False


@worker_init.connect
def _remember_worker(sender: Any = None, **_: Any) -> None:
    # The worker's concurrency is read when the pool is made (first task), by then resolved
    # even when it was given as "auto".
    global _worker
    _worker = sender


@worker_process_init.connect
def _fresh_client(**_: Any) -> None:
    # A prefork child runs one task at a time. It never uses its parent's client: `parts`
    # and `shared_client` are keyed by process id, so it makes its own on first use.
    global _prefork_child
    _prefork_child = True


def task_threads() -> int:
    """Tasks this process runs at once: the worker's --concurrency for a thread pool, 1 in a
    prefork child."""
    if _prefork_child:
        return 1
    concurrency = getattr(_worker, "concurrency", None)
    if isinstance(concurrency, int) and concurrency > 0:
        return concurrency
    return DEFAULT_TASK_THREADS


def pool_bound() -> int:
    """The most connections the webhook client of this process may hold (pool `cc:webhooks`).

    ``WEBHOOK_REDIS_CONNECTIONS``, or derived: task threads + 2. A task runs on one thread
    and holds at most one connection at a time (every command takes one from the pool and
    gives it back; nothing pins one); the 2 spare keep a thread from waiting while a broken
    connection is replaced, or while `after_scoring` (called from scoring tasks) sends its
    EXISTS.
    """
    return int(settings["WEBHOOK_REDIS_CONNECTIONS"]) or task_threads() + 2


def wire_bound() -> int:
    """The most connections the store's `Wire` may hold for the webhook tasks (pool
    `cc:webhooks:wire`): one per task thread. Only the reads of score events go through it
    (a deliver task reads them 50 at a time), never more at once than there are tasks."""
    return task_threads()


@dataclass(frozen=True)
class Parts:
    """This process's Redis client, store, dispatcher and deliverer: made once."""

    client: redis.Redis
    store: RedisEventStore
    dispatcher: Dispatcher
    deliverer: Deliverer
    bound: int  # connections of `client`
    wire: int  # connections of the store's Wire

    @property
    def total(self) -> int:
        """The most Redis connections the webhook tasks of this process may hold."""
        return self.bound + self.wire


_parts: dict[int, Parts] = {}
_parts_lock = threading.Lock()


def parts() -> Parts:
    """This process's webhook parts (a forked child makes its own: connections are not
    fork-safe)."""
    pid = os.getpid()
    made = _parts.get(pid)
    if made is None:
        with _parts_lock:
            made = _parts.get(pid)
            if made is None:
                made = _make_parts()
                _parts.clear()  # a parent's parts, inherited across fork: never used here
                _parts[pid] = made
    return made


def _make_parts() -> Parts:
    bound, wire = pool_bound(), wire_bound()
    client = shared_client(settings["REDIS_URL"], role=ROLE, max_connections=bound)
    store = RedisEventStore(client, wire_connections=wire)
    post = HttpPoster(settings["WEBHOOK_TIMEOUT"], settings["WEBHOOK_ALLOW_PRIVATE"])
    made = Parts(
        client=client,
        store=store,
        dispatcher=Dispatcher(
            client, store, settings["WEBHOOK_RETRY_SECONDS"], settings["WEBHOOK_BATCH"]
        ),
        deliverer=Deliverer(
            client,
            store,
            post,
            backoff_base=settings["WEBHOOK_BACKOFF_BASE"],
            backoff_max=settings["WEBHOOK_BACKOFF_MAX"],
            timeout=settings["WEBHOOK_TIMEOUT"],
        ),
        bound=bound,
        wire=wire,
    )
    log.info(
        "webhook Redis pool: max_connections=%d (pid %d, %d task threads: cc:webhooks %d"
        " = threads + 2, cc:webhooks:wire %d = threads)",
        made.total,
        os.getpid(),
        task_threads(),
        bound,
        wire,
    )
    return made


def client() -> redis.Redis:
    """This process's Redis client for webhooks."""
    return parts().client


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
    created = parts().dispatcher.dispatch(game_id)
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
    ran = parts().deliverer.run(game_id, hook_id, settings["WEBHOOK_TASK_DELIVERIES"])
    if ran.outcome == "more":
        deliver.apply_async(args=[game_id, hook_id], queue=QUEUE)
    elif ran.outcome == "retrying" and ran.retry_in is not None:
        raise self.retry(args=[game_id, hook_id], countdown=ran.retry_in)
    return ran.outcome


@shared_task(name="webhooks.sweep", ignore_result=True)
def sweep() -> int:
    """Re-send dispatches and deliveries that were lost; returns how many."""
    grace = int(settings["WEBHOOK_SWEEP_GRACE"] * 1000)
    made = parts()
    count = 0
    for game_id, hook_id in stalled(made.client, made.store, grace):
        if hook_id is None:
            dispatch.apply_async(args=[game_id], queue=QUEUE)
        else:
            deliver.apply_async(args=[game_id, hook_id], queue=QUEUE)
        count += 1
    if count:
        log.info("webhook sweep: %d tasks re-sent", count)
    return count
