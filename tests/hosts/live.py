"""`/live` watchers: one per playing client, following that client's game on a query
instance (or through nginx) as an app would — an SSE stream, resumed with Last-Event-ID
whenever it ends, breaks or times out — and writing down every event it was sent (and when).
Checked afterwards: each event once and in order per stream (across reconnects), and each
the same as the final log's event at its seq.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eventstore.envelope import StoredEvent

READ_TIMEOUT = 5.0  # a stream silent this long is dropped and resumed (as a browser would)


@dataclass
class Seen:
    """What one watcher was sent: per game, the events in arrival order (and a `restart`
    mark where it was told its cursor is beyond the log and began afresh), its reconnects
    and refusals (a status other than 200)."""

    events: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    reconnects: int = 0
    refused: list[str] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # when each event came (monotonic)


class Watcher:
    """Follows `game()` (the game its client plays now) on `base` until stopped."""

    def __init__(self, base: str, game: Callable[[], str]) -> None:
        self.base, self.game = base, game
        self.seen = Seen()
        self.cursors: dict[str, str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            game = self.game()
            if not game:
                self.stop.wait(0.1)
                continue
            # a broken or silent stream is resumed from its last id
            with contextlib.suppress(OSError, http.client.HTTPException):
                self._follow(game)
            self.seen.reconnects += 1
            self.stop.wait(0.1)

    def _follow(self, game: str) -> None:
        host, port = self.base.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=READ_TIMEOUT)
        headers = {"Accept": "text/event-stream"}
        if game in self.cursors:
            headers["Last-Event-ID"] = self.cursors[game]
        try:
            conn.request("GET", f"/games/{game}/live", headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                body = resp.read().decode(errors="replace")[:200]
                self.seen.refused.append(f"{game} {resp.status} {body}")
                if "cursor_beyond_log" in body:  # told the log is shorter now: start afresh
                    self.cursors.pop(game, None)
                    self.seen.events[game].append({"restart": True})
                return
            kind, data, ident = "", "", ""
            while not self.stop.is_set() and self.game() == game:
                line = resp.readline().decode()
                if not line:
                    return  # the server ended the stream
                line = line.rstrip("\n")
                if line.startswith("id: "):
                    ident = line[4:]
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif not line and data:
                    if kind in ("move", "score"):
                        self.seen.events[game].append(json.loads(data))
                        self.seen.arrivals.append(time.monotonic())
                    self.cursors[game] = ident
                    if kind == "end":
                        return
                    kind, data = "", ""
        finally:
            conn.close()


@dataclass
class LiveVerdict:
    """Events sent, and those sent twice, out of order, or unlike the final log."""

    events: int = 0
    repeated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unlike_log: list[str] = field(default_factory=list)


def check_live(
    watchers: list[Watcher], logs: dict[tuple[str, str], list[StoredEvent]]
) -> LiveVerdict:
    """Hold every watcher's events against the final logs, `logs[(game, stream)]`."""
    verdict = LiveVerdict()
    index = {key: {e.seq: e for e in events} for key, events in logs.items()}
    for watcher in watchers:
        for game, events in watcher.seen.events.items():
            last: dict[str, int] = {}
            for event in events:
                if event.get("restart"):  # told to reconnect from scratch: a new sequence
                    last.clear()
                    continue
                verdict.events += 1
                stream, seq = event["stream"], event["seq"]
                before = last.get(stream)
                if before is not None and seq <= before:
                    verdict.repeated.append(f"{game} {stream} {seq} after {before}")
                elif before is not None and seq > before + 1:
                    verdict.skipped.append(f"{game} {stream} {seq} after {before}")
                last[stream] = seq
                stored = index.get((game, stream), {}).get(seq)
                if stored is None or (stored.type, stored.payload) != (
                    event["type"],
                    event["payload"],
                ):
                    verdict.unlike_log.append(f"{game} {stream} {seq} {event['type']}")
    return verdict


def sent_between(watchers: list[Watcher], base: str, start: float, end: float) -> int:
    """The events the watchers on `base` were sent from `start` to `end`."""
    return sum(start <= at < end for w in watchers if w.base == base for at in w.seen.arrivals)
