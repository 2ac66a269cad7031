"""A seat's clock around its declared absences (docs/clocks.md, "Vacations"): pure interval
arithmetic on Unix ms, no clock read.

A seat's absences are half-open windows ``(from_ms, until_ms)``, sorted and disjoint: its
clock stands still inside them and runs everywhere else. A window may lie in the future (a
vacation declared to start later): a deadline computed before it starts already skips it,
so every deadline the engine decides is final unless a later event of the log moves it.
"""

from __future__ import annotations

Window = tuple[int, int]


def added(windows: list[Window], window: Window) -> list[Window]:
    """`windows` with `window` added; windows that overlap it merge into one (the service
    never declares overlapping vacations, but a late or repeated pause may overlap)."""
    start, end = window
    out: list[Window] = []
    for w_from, w_until in windows:
        if w_from < end and start < w_until:  # overlapping: one absence
            start, end = min(start, w_from), max(end, w_until)
        else:
            out.append((w_from, w_until))
    out.append((start, end))
    return sorted(out)


def containing(windows: list[Window], at_ms: int) -> Window | None:
    """The window `at_ms` falls in (its start included, its end not), or None."""
    for w_from, w_until in windows:
        if w_from <= at_ms < w_until:
            return (w_from, w_until)
    return None


def cut(windows: list[Window], at_ms: int) -> list[Window]:
    """`windows` with the one `at_ms` falls in ending at `at_ms` (gone if it had not begun):
    back early, or a vacation called off before its start."""
    out: list[Window] = []
    for w_from, w_until in windows:
        if w_from <= at_ms < w_until:
            w_until = at_ms
        if w_until > w_from:
            out.append((w_from, w_until))
    return out


def running_ms(start_ms: int, end_ms: int, windows: list[Window]) -> int:
    """How long the clock runs from `start_ms` to `end_ms` (0 if the end is not later):
    the span less its overlap with the windows."""
    if end_ms <= start_ms:
        return 0
    paused = sum(
        max(0, min(end_ms, w_until) - max(start_ms, w_from)) for w_from, w_until in windows
    )
    return end_ms - start_ms - paused


def advanced(start_ms: int, clock_ms: int, windows: list[Window]) -> int:
    """When a clock started at `start_ms` with `clock_ms` on it runs out, standing still in
    every window it meets (one it starts inside holds it until that window's end)."""
    at, left = start_ms, clock_ms
    for w_from, w_until in windows:
        if w_until <= at:
            continue
        if w_from > at:
            if at + left <= w_from:  # runs out before this window
                return at + left
            left -= w_from - at
        at = w_until
    return at + left
