"""The delivery tasks' share of a worker process: one Redis client (pool ``cc:webhooks``), one
store and one HTTP poster for every webhook and subscription task of the process.

The client's pool holds at most the process's task threads + 2 connections (`pool_bound`),
the store's Wire (``cc:webhooks:wire``, the reads of events) one per task thread
(`wire_bound`): 2 × threads + 2 in all.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis
from celery.signals import worker_init, worker_process_init

from services.redis_store import RedisEventStore
from services.redis_store.connect import shared_client

from .config import from_env
from .posting import HttpPoster

log = logging.getLogger(__name__)
settings = from_env()
ROLE = "webhooks"  # CLIENT LIST shows this process's connections as cc:webhooks
T = TypeVar("T")

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
    """This process's Redis client, store and HTTP poster for delivery tasks: made once."""

    client: redis.Redis
    store: RedisEventStore
    post: HttpPoster
    bound: int  # connections of `client`
    wire: int  # connections of the store's Wire

    @property
    def total(self) -> int:
        """The most Redis connections the delivery tasks of this process may hold."""
        return self.bound + self.wire


class PerProcess(Generic[T]):
    """One `make()` per process: a forked child makes its own (Redis connections are not
    fork-safe), the threads of one process share it."""

    def __init__(self, make: Callable[[], T]) -> None:
        self.make = make
        self._made: dict[int, T] = {}
        self._lock = threading.Lock()

    def get(self) -> T:
        """This process's one."""
        pid = os.getpid()
        made = self._made.get(pid)
        if made is None:
            with self._lock:
                made = self._made.get(pid)
                if made is None:
                    made = self.make()
                    self._made.clear()  # a parent's, inherited across fork: never used here
                    self._made[pid] = made
        return made


def parts() -> Parts:
    """This process's delivery parts."""
    return _parts.get()


def _make_parts() -> Parts:
    bound, wire = pool_bound(), wire_bound()
    client = shared_client(settings["REDIS_URL"], role=ROLE, max_connections=bound)
    made = Parts(
        client=client,
        store=RedisEventStore(client, wire_connections=wire),
        post=HttpPoster(settings["WEBHOOK_TIMEOUT"], settings["WEBHOOK_ALLOW_PRIVATE"]),
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


_parts: PerProcess[Parts] = PerProcess(_make_parts)
