"""A seat's clock around its declared absences (docs/clocks.md, "Vacations"): pure interval
arithmetic on Unix ms, no clock read.

A seat's absences are half-open windows ``(from_ms, until_ms)``, sorted and disjoint: its
clock stands still inside them and runs everywhere else. A window may lie in the future (a
vacation declared to start later): a deadline computed before it starts already skips it,
so every deadline the engine decides is final unless a later event of the log moves it.

Each window belongs to its vacation (`Absences`): an end of one vacation cuts its window
alone, whatever the order the pause and the end reach a game in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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


def ended_at(window: Window, at_ms: int) -> list[Window]:
    """`window` ended at `at_ms`: as it was if that is not before its end, gone if that is
    not after its start (called off), else cut there (back early)."""
    w_from, w_until = window
    if at_ms >= w_until:
        return [window]
    return [(w_from, at_ms)] if at_ms > w_from else []


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


@dataclass(frozen=True)
class Absences:
    """A seat's absences as the log declared them: windows logged without a vacation
    (`anonymous`, games logged before events carried one: merged and cut as one list, as
    then), each vacation's own window by its id (`named`), and when each vacation the log
    ended early or called off ended (`back`: a call-off may reach a game before the pause it
    cuts). The clock runs on their union (`windows`); a change never edits one in place."""

    anonymous: tuple[Window, ...] = ()
    named: tuple[tuple[str, Window], ...] = ()
    back: tuple[tuple[str, int], ...] = ()

    def windows(self) -> list[Window]:
        """The union the clock stands still in: sorted disjoint windows (`added`)."""
        windows = list(self.anonymous)
        for _, window in self.named:
            windows = added(windows, window)
        return windows

    def window_of(self, vacation: str) -> Window | None:
        """The window of `vacation` (None: the log has no pause of it)."""
        return next((w for v, w in self.named if v == vacation), None)

    def back_at(self, vacation: str) -> int | None:
        """When `vacation` ended early or was called off (None: the log has no such end)."""
        return next((at for v, at in self.back if v == vacation), None)

    def paused(self, vacation: str | None, window: Window) -> Absences:
        """With the pause of `vacation` (None: anonymous, merged as `added`): its window, cut
        where an end of it logged earlier says (gone if that was before its start); a
        repeated pause of one vacation widens its window to cover both."""
        if vacation is None:
            return replace(self, anonymous=tuple(added(list(self.anonymous), window)))
        known = self.window_of(vacation)
        if known is not None:
            window = (min(known[0], window[0]), max(known[1], window[1]))
        ended = self.back_at(vacation)
        kept = [window] if ended is None else ended_at(window, ended)
        others = tuple((v, w) for v, w in self.named if v != vacation)
        return replace(self, named=others + tuple((vacation, w) for w in kept))

    def resumed(self, vacation: str | None, at_ms: int) -> Absences:
        """With the end of `vacation` at `at_ms` (None: anonymous, `cut` as before ids): its
        window ends then (gone if not begun), and the end is kept for a pause of it that
        comes later. A vacation with no window yet whose end falls in an anonymous window
        cuts that one: its pause was logged before pauses carried their vacation."""
        if vacation is None:
            return replace(self, anonymous=tuple(cut(list(self.anonymous), at_ms)))
        back = (*((v, at) for v, at in self.back if v != vacation), (vacation, at_ms))
        known = self.window_of(vacation)
        if known is None:
            anonymous = tuple(cut(list(self.anonymous), at_ms))
            return replace(self, anonymous=anonymous, back=back)
        others = tuple((v, w) for v, w in self.named if v != vacation)
        kept = tuple((vacation, w) for w in ended_at(known, at_ms))
        return replace(self, named=others + kept, back=back)
