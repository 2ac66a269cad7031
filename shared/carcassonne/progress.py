"""The one progress line of the project's commands (`carcassonne simulate`/`duel`, the index
backfill, `make demo`): a bar redrawn in place on a terminal; off a terminal either nothing
(a log stays clean) or, when asked, a plain line now and then.

Not part of the rules engine: it writes to a stream and reads the clock, like cli.py.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`update(done)` after each unit of work; the line says done/total, the share, the rate
    and the time left, and an optional note (a running tally, a resume cursor)."""

    def __init__(
        self,
        total: int,
        stream: TextIO | None = sys.stderr,
        *,
        width: int = 30,
        unit: str = "",
        tty: bool | None = None,
        lines: bool = False,
        every_s: float = 0.2,
    ) -> None:
        self.total, self.stream, self.width, self.unit = total, stream, width, unit
        self.tty = stream is not None and (stream.isatty() if tty is None else tty)
        self.lines = lines  # off a terminal: a plain line per update (at most one per every_s)
        self.every_s = every_s
        self.start = time.perf_counter()
        self._shown = float("-inf")
        self._ended = False  # the last line is written

    def line(self, done: int, note: str = "") -> str:
        """The text of the line after `done` units (no control characters)."""
        share = min(1.0, done / self.total) if self.total > 0 else 1.0  # nothing to do: done
        filled = int(self.width * share)
        rate = done / max(1e-9, time.perf_counter() - self.start)
        left = max(0, self.total - done) / rate if rate > 0 else 0.0
        unit = f" {self.unit}" if self.unit else ""
        text = (
            f"[{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{self.total:,}{unit} "
            f"({share:.0%}) {rate:,.3g}/s, {left:,.0f} s left"
        )
        return f"{text}  {note}" if note else text

    def update(self, done: int, note: str = "", *, total: int | None = None) -> None:
        """Show that `done` units are done (at most every `every_s`, and always the last)."""
        if total is not None:
            self.total = total
        if self.stream is None or not (self.tty or self.lines):
            return
        last = done >= self.total
        now = time.perf_counter()
        if not last and now - self._shown < self.every_s:
            return
        self._shown = now
        self._write(self.line(done, note), end=last)

    def finish(self, done: int, note: str = "") -> None:
        """The final line, whatever `done` is (a scan may end short of or past its estimate)."""
        self.total = max(self.total, done)
        if self.stream is not None and (self.tty or self.lines) and not self._ended:
            self._write(self.line(done, note), end=True)

    def _write(self, text: str, end: bool) -> None:
        assert self.stream is not None
        self._ended = end
        if self.tty:  # redrawn in place; the last one ends the line
            self.stream.write(f"\r{text}\x1b[K" + ("\n" if end else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
