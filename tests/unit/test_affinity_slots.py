"""Slot assignment of the affinity worker (services/common/affinity.py), on stand-ins for
gunicorn's arbiter and workers: which worker owns which games after starts, deaths and reloads."""

from __future__ import annotations

import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from services.common import affinity


@dataclass
class Worker:
    age: int
    slot: int | None = None
    slots: int = 0
    inbox_dir: str = ""


@dataclass
class Config:
    uid: int
    gid: int


@dataclass
class Arbiter:
    num_workers: int
    WORKERS: dict[int, Any] = field(default_factory=dict)  # gunicorn's name
    age: int = 0
    cfg: Any = field(default_factory=lambda: Config(os.geteuid(), os.getegid()))

    def spawn(self) -> Worker:
        self.age += 1
        worker = Worker(self.age)
        affinity.assign_slot(self, worker)  # pre_fork, in the master
        self.WORKERS[1000 + self.age] = worker
        return worker


@pytest.fixture(autouse=True)
def private_inbox_dir(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(affinity, "_INBOX_DIR", None)
    yield
    if affinity._INBOX_DIR is not None:
        shutil.rmtree(affinity._INBOX_DIR, ignore_errors=True)


def test_workers_take_the_lowest_free_slots_and_share_one_private_directory() -> None:
    arbiter = Arbiter(3)
    workers = [arbiter.spawn() for _ in range(3)]
    assert [w.slot for w in workers] == [0, 1, 2]
    assert {w.slots for w in workers} == {3}
    assert len({w.inbox_dir for w in workers}) == 1 and workers[0].inbox_dir


def test_a_restarted_worker_gets_the_slot_of_the_one_that_died() -> None:
    arbiter = Arbiter(3)
    for _ in range(3):
        arbiter.spawn()
    dead = next(pid for pid, w in arbiter.WORKERS.items() if w.slot == 1)
    del arbiter.WORKERS[dead]  # reaped
    assert arbiter.spawn().slot == 1


def test_a_reload_hands_each_new_worker_the_slot_of_the_oldest_old_one() -> None:
    """gunicorn's reload starts the new workers before it stops the old ones."""
    arbiter = Arbiter(3)
    old = [arbiter.spawn() for _ in range(3)]
    new = [arbiter.spawn() for _ in range(3)]
    assert [w.slot for w in new] == [0, 1, 2]
    assert all(w.slot is None for w in old)  # they serve on, but nobody hands them games
    for pid in [p for p, w in arbiter.WORKERS.items() if w in old]:
        del arbiter.WORKERS[pid]  # the old ones stopped
    assert sorted(w.slot for w in arbiter.WORKERS.values()) == [0, 1, 2]


def test_owners_are_stable_and_spread_over_the_slots() -> None:
    ids = [f"{n:032x}".encode() for n in range(3000)]
    owners = [affinity.owner_slot(i, 3) for i in ids]
    assert owners == [affinity.owner_slot(i, 3) for i in ids]
    assert all(900 <= owners.count(s) <= 1100 for s in range(3))


@pytest.mark.parametrize(
    "line, game",
    [
        (b"POST /games/" + b"a" * 32 + b"/turns HTTP/1.1\r\n", b"a" * 32),
        (b"GET /games/" + b"0" * 32 + b" HTTP/1.1\r\n", b"0" * 32),
        (b"GET /games/" + b"0" * 32 + b"?at=3 HTTP/1.1\r\n", b"0" * 32),
        (b"POST /games HTTP/1.1\r\n", None),
        (b"POST /games/" + b"a" * 31, None),  # the request line is not complete yet
        (b"GET /v1/games/" + b"a" * 32 + b" HTTP/1.1", None),
    ],
)
def test_the_game_is_read_from_the_request_line(line: bytes, game: bytes | None) -> None:
    found = affinity.ROUTED.match(line)
    assert (found.group(1) if found else None) == game


@pytest.mark.parametrize(
    "raw, seconds",
    [(None, affinity.DEFAULT_CLIENT_TIMEOUT), ("", affinity.DEFAULT_CLIENT_TIMEOUT),
     ("0.5", 0.5), ("5", 5.0), ("0", None)],
)  # fmt: skip
def test_the_client_timeout_comes_from_the_environment(raw: str | None, seconds: float) -> None:
    environ = {} if raw is None else {"CLIENT_TIMEOUT": raw}
    assert affinity.client_timeout(environ) == seconds


def test_a_client_timeout_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="CLIENT_TIMEOUT='soon'"):
        affinity.client_timeout({"CLIENT_TIMEOUT": "soon"})


def test_a_bounded_connection_reads_what_comes_and_ends_when_nothing_does() -> None:
    """A read (or a peek) that times out answers b"" — for gunicorn, the client's end."""
    ours, theirs = socket.socketpair()
    client = affinity.bounded(ours, 0.05)
    try:
        theirs.sendall(b"GET / HTTP/1.1\r\n")
        assert client.recv(64, socket.MSG_PEEK) == b"GET / HTTP/1.1\r\n"
        assert client.recv(64) == b"GET / HTTP/1.1\r\n"
        started = time.monotonic()
        assert client.recv(64, socket.MSG_PEEK) == b""
        assert client.recv(64) == b""
        assert time.monotonic() - started < 1.0
        assert client.gettimeout() == 0.05  # and the socket is still usable
        theirs.sendall(b"more")
        assert client.recv(64) == b"more"
    finally:
        client.close()
        theirs.close()


def test_without_a_client_timeout_a_connection_blocks_as_gunicorn_expects() -> None:
    ours, theirs = socket.socketpair()
    try:
        client = affinity.bounded(ours, None)
        assert client is ours and client.gettimeout() is None
    finally:
        ours.close()
        theirs.close()
