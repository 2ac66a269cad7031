"""Clients that play games over HTTP and write down everything they were told, Jepsen-style:
one `Op` per request sent (each retry its own), with what came back — 200 with the events
and their seqs, 409, 503, a timeout or a connection error — and when.

Each client plays one game at a time on the command instances of one kind (WAIT on or off),
directly or through nginx: it reads the turn, picks a legal placement, and sends it with a
fresh Idempotency-Key to the game's home instance (through nginx: to nginx, which routes the
game to its instance); a turn not answered (503, nginx's 502 or 504, timeout, refused
connection) is sent again with the same key until it is answered. One turn in five is sent
by two writers at once (to both instances, or twice through nginx), each with its own key: at
most one may be applied. Some clients play against a bot seat: the bot worker plays its turns,
which no client sends or is told about, and the client waits for them (bounded: a bot that
never moves ends the game as "stuck").
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import uuid
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TIMEOUT = 3.0  # seconds a client waits for an answer before it counts a timeout
THINK = 0.1  # seconds between a client's turns: a bounded load on a shared 2-core machine
RETRY_PAUSE = 0.25  # between two attempts of an unanswered turn
RETRY_FOR = 30.0  # an unanswered turn is given up after this long (left indeterminate)
CONFLICT_SHARE = 0.2  # turns sent by two writers at once
# A lone writer refused this many times in a row (409 after reading the turn) gives the game
# up: the server's view of it is stuck (recorded as an op with outcome "stuck").
STUCK_AFTER = 20
# A bot seat that has not moved for this long leaves its game "stuck": longer than the bots'
# own recovery of a lost task (their beat's sweep every 10 s, after GRACE_SECONDS, 30).
BOT_PATIENCE = 90.0
UNANSWERED = {503: "unavailable", 502: "unavailable", 504: "unavailable"}  # nginx's too


@dataclass
class Op:
    """One request of a turn and what it was told."""

    client: str
    wait: bool  # sent to an instance with WAIT on
    game: str
    key: str  # its Idempotency-Key
    base: str
    body: dict[str, Any]
    start: float  # time.monotonic()
    end: float = 0.0
    status: int = 0  # the HTTP status; 0: no answer
    outcome: str = ""  # ok, conflict (409), unavailable (503), timeout, error, other
    events: list[dict[str, Any]] = field(default_factory=list)  # a 200's move events
    replayed: bool = False
    racer: bool = False  # one of two writers of the same turn
    detail: str = ""
    action: str = "turn"  # or "read": GET /turn before it, recorded only when not answered
    route: str = "direct"  # or "nginx": through the delay proxy and nginx


def request(
    base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """One request with the clients' timeout: (status, decoded JSON or text)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    try:
        conn.request(method, path, body=data, headers={**sent, **(headers or {})})
        resp = conn.getresponse()
        payload = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(payload) if payload else None
    except json.JSONDecodeError:
        return resp.status, payload.decode(errors="replace")


@dataclass
class History:
    """Every op of every client, in the order they ended (a lock guards the list)."""

    ops: list[Op] = field(default_factory=list)
    games: dict[str, bool] = field(default_factory=dict)  # game -> played with WAIT on
    bots: dict[str, set[int]] = field(default_factory=dict)  # game -> its bot seats
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)

    def dump(self, path: Path) -> None:
        """Every op as a JSON line (time.monotonic() times), for a post-mortem."""
        with path.open("w") as out:
            for op in sorted(self.ops, key=lambda o: o.start):
                out.write(json.dumps(asdict(op)) + "\n")


class Client:
    """A player of games, one at a time, on `bases` (a kind's instances, one per host, or
    nginx alone: `route`), against a bot of level `bot` when given."""

    def __init__(
        self,
        name: str,
        bases: list[str],
        wait: bool,
        history: History,
        seed: int,
        route: str = "direct",
        bot: str = "",
    ) -> None:
        self.name, self.bases, self.wait, self.history = name, bases, wait, history
        self.route, self.bot = route, bot
        self.bot_turn = (0, 0.0)  # (seq, since when) of the bot's turn being waited for
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.game = ""
        self.tokens: dict[int, str] = {}
        self.refused: list[Op] = []  # the lone writer's 409s in a row on this game

    def home(self) -> str:
        """The instance the game's turns go to, by a hash of its id (as the proxy routes)."""
        return self.bases[zlib.crc32(self.game.encode()) % len(self.bases)]

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                if not self.game and not self._create():
                    self.stop.wait(RETRY_PAUSE)
                    continue
                self._turn()
            except Exception as exc:  # a client bug must not pass as a quiet test
                failed = self._op({}, "", self.home(), detail=f"client error {exc!r}")
                failed.action = "client-error"
                self.history.add(failed)
                self.game = ""
            self.stop.wait(THINK)

    def _create(self) -> bool:
        base = self.rng.choice(self.bases)
        other = {"name": "robo", "bot": self.bot} if self.bot else {"name": "bob"}
        body = {"players": [{"name": "ann"}, other], "seat_order": [0, 1]}
        try:
            status, created = request(base, "POST", "/games", body)
        except OSError:
            return False
        if status != 201:
            return False
        self.game, self.refused = created["game_id"], []
        self.tokens = {p["seat"]: p["token"] for p in created["players"]}
        with self.history.lock:
            self.history.games[self.game] = self.wait
            self.history.bots[self.game] = {p["seat"] for p in created["players"] if p.get("bot")}
        return True

    def _turn(self) -> None:
        read = self._op({}, "", self.home())
        read.action = "read"  # a turn that cannot be read cannot be played: it counts too
        try:
            status, view = request(read.base, "GET", f"/games/{self.game}/turn")
        except TimeoutError:
            status, view, read.outcome = 0, None, "timeout"
        except OSError as exc:
            status, view, read.outcome, read.detail = 0, None, "error", type(exc).__name__
        if status == 404:  # its creation was lost in a failover: start another
            self.game = ""
            return
        if status != 200:
            read.status, read.end = status, time.monotonic()
            read.outcome = read.outcome or ("unavailable" if status == 503 else "other")
            self.history.add(read)
            self.stop.wait(RETRY_PAUSE)
            return
        if view["over"]:
            self.game = ""
            return
        if self.tokens.get(view["player"]) is None:  # a bot's turn: the bot worker's
            self._await_bot(int(view["seq"]))
            return
        spot = self.rng.choice(view["placements"])
        meeples = spot["meeples"]
        meeple = self.rng.choice(meeples) if meeples and self.rng.random() < 0.5 else None
        body = {"x": spot["x"], "y": spot["y"], "rotation": spot["rotation"], "meeple": meeple}
        auth = {"Authorization": f"Bearer {self.tokens[view['player']]}"}
        if self.rng.random() < CONFLICT_SHARE:
            racers = [
                threading.Thread(target=self._send, args=(body, auth, base, True))
                for base in (self.bases if len(self.bases) > 1 else self.bases * 2)
            ]
            for racer in racers:
                racer.start()
            for racer in racers:
                racer.join()
        else:
            self._send(body, auth, self.home(), False)
        if len(self.refused) >= STUCK_AFTER:
            op = self._op({}, "", self.home(), detail=f"{len(self.refused)} refusals in a row")
            op.start, op.outcome, op.action = self.refused[0].start, "stuck", "stuck"
            self.history.add(op)
            self.game = ""

    def _await_bot(self, seq: int) -> None:
        """Wait a little for the bot to move; give the game up when it has not for
        BOT_PATIENCE."""
        now = time.monotonic()
        if self.bot_turn[0] != seq:
            self.bot_turn = (seq, now)
        elif now - self.bot_turn[1] > BOT_PATIENCE:
            op = self._op({}, "", self.home(), detail=f"the bot did not move after seq {seq}")
            op.start, op.outcome, op.action = self.bot_turn[1], "bot_stuck", "stuck"
            self.history.add(op)
            self.game = ""
            return
        self.stop.wait(RETRY_PAUSE)

    def _send(self, body: dict[str, Any], auth: dict[str, str], base: str, racer: bool) -> None:
        """Send the turn with a new key until it is answered (or RETRY_FOR passes)."""
        key, first = uuid.uuid4().hex, time.monotonic()
        headers = {**auth, "Idempotency-Key": key}
        while True:
            op = self._op(body, key, base, racer=racer)
            try:
                op.status, reply = request(base, "POST", f"/games/{self.game}/turns", body, headers)
            except TimeoutError:
                op.outcome = "timeout"
            except OSError as exc:
                op.outcome, op.detail = "error", type(exc).__name__
            else:
                op.outcome = {200: "ok", 409: "conflict", **UNANSWERED}.get(op.status, "other")
                if op.status == 200:
                    op.events = [e for e in reply["events"] if e["stream"] == "moves"]
                    op.replayed = bool(reply["replayed"])
                elif isinstance(reply, dict):
                    op.detail = str(reply.get("code", ""))
            op.end = time.monotonic()
            self.history.add(op)
            if not racer:
                self.refused = [*self.refused, op] if op.outcome == "conflict" else []
            if op.outcome not in ("timeout", "error", "unavailable"):
                return
            if time.monotonic() - first > RETRY_FOR:
                return
            time.sleep(RETRY_PAUSE)

    def _op(
        self, body: dict[str, Any], key: str, base: str, racer: bool = False, detail: str = ""
    ) -> Op:
        now = time.monotonic()
        return Op(self.name, self.wait, self.game, key, base, body, now, now, racer=racer,
                  detail=detail, outcome="other" if detail else "", route=self.route)  # fmt: skip


def start_clients(
    count: int,
    bases: list[str],
    wait: bool,
    history: History,
    seed: int,
    route: str = "direct",
    bots: int = 0,
) -> list[Client]:
    """`count` clients on `bases`, started; the first `bots` of them play against a greedy
    bot."""
    kind = ("wait" if wait else "nowait") + ("-nginx" if route == "nginx" else "")
    clients = [
        Client(f"{kind}-{i}", bases, wait, history, seed + i, route, "greedy" if i < bots else "")
        for i in range(count)
    ]
    for client in clients:
        client.thread.start()
    return clients


def stop_clients(clients: list[Client], timeout: float = 60.0) -> None:
    """Ask every client to stop and wait for their last turn (its retries end by RETRY_FOR)."""
    for client in clients:
        client.stop.set()
    deadline = time.monotonic() + timeout
    for client in clients:
        client.thread.join(max(0.1, deadline - time.monotonic()))
