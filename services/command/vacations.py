"""Vacations (docs/clocks.md): a player, by player id under a platform's API key, declares
days away, from now or from a later start; every clock of theirs in the key's games in
progress stands still for them.

A declaration is recorded first, within the player's yearly allowance (the service's
`VACATION_DAYS_PER_YEAR`; the days count in the calendar year, UTC, the vacation starts in)
and overlapping no other vacation of the player, in one script that refuses what does not
fit and writes nothing then (services/redis_store/vacations.py). Then each game of the player
(the games directory's index of the key's games by player id, caught up with the change feed
first) gets a `ClockPaused` per seat of the player still in, at once even for a later start:
a fact of that game's log, so every deadline decided after it skips the window and a replay
gives the same deadlines, and a ``player_away`` item for the other players' notifications. A
game that starts before the player is back gets its pauses with its start (`GameService`'s
`away`). Each pause and end names its vacation (the book's id), so an end cuts its own
vacation's window alone in whatever order the two reach a game; and a declaration reads the
book again after its pauses, resuming the vacation again if it was ended meanwhile.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis

from carcassonne.errors import MalformedError, OutOfTurnError
from services.common.moves import STALE_SEQUENCE
from services.redis_store.directory_index import DirectoryIndex
from services.redis_store.keys import IN_PROGRESS, SHARDS, key_player_id_key, status_key
from services.redis_store.vacations import DAY_MS, MAX_CALLED_OFF, MAX_PENDING, VacationBook

from .errors import NotFound
from .service import GameService

MAX_DAYS = 366  # a declaration's days: 1 to a year
MAX_AHEAD_MS = MAX_DAYS * DAY_MS  # a vacation starts now to a year ahead


def year_of(at_ms: int) -> int:
    """The calendar year (UTC) of a Unix time in ms: the allowance's period."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).year


class Busy:
    """A walk over a player's games that goes on past a game whose pause or end lost its
    append at every attempt (`stale_sequence`: that game's moves got in first each time),
    then raises it (`raise_lost`): the answer must not say done, and a retry of the request
    does that game (each append under its command id: nothing twice)."""

    def __init__(self) -> None:
        self.lost: OutOfTurnError | None = None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> bool:
        if isinstance(exc, OutOfTurnError) and exc.code == STALE_SEQUENCE:
            self.lost = exc
            return True
        return False

    def raise_lost(self) -> None:
        """Raise the `stale_sequence` a game of the walk gave, if any."""
        if self.lost is not None:
            raise self.lost


class Vacations:
    """Declares players' vacations and pauses their clocks (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        service: GameService,
        allowance_days: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.book = VacationBook(client)
        self.directory = DirectoryIndex(client)
        self.service = service
        self.allowance = allowance_days
        self.clock = clock

    def allowance_of(self, key: dict[str, Any]) -> int:
        """The yearly days of an API key's players: its own `vacation_days` when its
        platform has one set (`python -m services.command.apikeys set`), else the
        service's `VACATION_DAYS_PER_YEAR`."""
        own = key.get("vacation_days")
        return own if isinstance(own, int) and not isinstance(own, bool) else self.allowance

    def declare(
        self, key: dict[str, Any], player_id: str, days: Any, from_ms: Any = None
    ) -> dict[str, Any]:
        """Record `days` of vacation from `from_ms` (Unix ms, now to a year ahead; None:
        now) for a player of API `key` (its record) and pause the player's clocks then:
        201's body; 422 `bad_vacation` / `bad_vacation_start`, 409
        `vacation_allowance_exceeded` / `vacation_overlaps` / `too_many_vacations`."""
        key_id, allowance = str(key["id"]), self.allowance_of(key)
        if type(days) is not int or not 1 <= days <= MAX_DAYS:
            raise MalformedError("bad_vacation", f"days must be an integer 1-{MAX_DAYS}")
        now = int(self.clock() * 1000)
        start = self._start(from_ms, now)
        until, year = start + days * DAY_MS, year_of(start)
        vacation_id = uuid.uuid4().hex
        found = self.book.declare(
            key_id, player_id, vacation_id, start, until, days, year, allowance, now_ms=now
        )
        if found.outcome == "overlaps":
            # A retry of a declaration that failed after its record (Redis down mid-way, a
            # 503) overlaps that record: its pauses are made first, each under its own
            # command id, so what the failure left undone is done and nothing twice.
            self._pause_declared(key_id, player_id, now, found.other_id)
            raise OutOfTurnError(
                "vacation_overlaps",
                "this player has a vacation then already; declare one that starts after it",
                None,
                from_ms=found.other_from_ms,
                until_ms=found.other_until_ms,
            )
        if found.outcome == "too_many":
            raise OutOfTurnError(
                "too_many_vacations",
                f"this player has {MAX_PENDING} vacations running or to come already; "
                "declare more once some are over",
                None,
                max_vacations=MAX_PENDING,
            )
        if found.outcome == "called_off":
            raise OutOfTurnError(
                "too_many_vacations",
                f"this player called off {MAX_CALLED_OFF} vacations within a day already; "
                "declare again once a day has passed since the oldest of them",
                None,
                max_vacations=MAX_PENDING,
                max_called_off=MAX_CALLED_OFF,
            )
        if found.outcome != "ok":
            raise OutOfTurnError(
                "vacation_allowance_exceeded",
                f"{days} more days would pass this player's {allowance} vacation days "
                f"in {year} ({found.used_days} used)",
                None,
                allowance_days=allowance,
                used_days=found.used_days,
                asked_days=days,
                year=year,
            )
        paused: list[dict[str, Any]] = []
        busy = Busy()
        for game_id in self.games_of(key_id, player_id):
            with busy:
                paused += self.service.pause_clocks(
                    game_id, key_id, player_id, now, (start, until), vacation_id
                )
        ended = self._resume_if_ended(key_id, player_id, vacation_id)
        if ended is not None:
            # Ended or called off meanwhile: the answer is the vacation as it now stands (its
            # end, the days it still counts) and the books with the days it gave back, not
            # the declaration as first recorded (the caller would think it still holds). A
            # game a pause lost at every attempt is the end's to mend, not a retry of this
            # declaration's (which would now record a new vacation): no stale_sequence here.
            vacation, listed = ended
            books = self._books_of(player_id, year, listed, allowance)
            return {**books, "vacation": vacation, "paused": paused}
        busy.raise_lost()
        return {
            **self._books(player_id, year, found.used_days, allowance),
            "vacation": {
                "vacation_id": vacation_id,
                "from_ms": start,
                "until_ms": until,
                "days": days,
                "year": year,
                "ended_ms": None,
            },
            "paused": paused,
        }

    @staticmethod
    def _start(from_ms: Any, now: int) -> int:
        """When a declared vacation starts: `from_ms`, now to a year ahead (None: now);
        422 `bad_vacation_start` otherwise (a start in the past would pause time already
        run). A code of its own: the range depends on the clock, which the API document
        cannot state (the days' range it can: `bad_vacation`)."""
        if from_ms is None:
            return now
        if type(from_ms) is not int:
            raise MalformedError("bad_vacation_start", "from_ms must be an integer (Unix ms)")
        if from_ms < now:
            raise MalformedError(
                "bad_vacation_start",
                "from_ms is in the past: leave it out to start now",
                None,
                now_ms=now,
            )
        if from_ms > now + MAX_AHEAD_MS:
            raise MalformedError(
                "bad_vacation_start",
                f"from_ms is more than {MAX_DAYS} days ahead",
                None,
                now_ms=now,
            )
        return from_ms

    def end(self, key: dict[str, Any], player_id: str, vacation_id: str) -> dict[str, Any]:
        """End a player's running vacation now (back early): its days not begun go back to
        the year's allowance and the player's clocks run again in every game of the key
        (`ClockResumed`; the other players get ``player_back``). 200's body; 404
        `vacation_not_found`, 409 `vacation_over` (it ran to its end). A retry answers
        200 with the vacation as ended (`resumed` empty: nothing appended again), after
        resuming what a failure mid-way left paused."""
        key_id = str(key["id"])
        now = int(self.clock() * 1000)
        ended = self.book.end(key_id, player_id, vacation_id, now)
        if ended.vacation is None:
            raise NotFound("vacation_not_found", f"this player has no vacation {vacation_id}")
        vacation = ended.vacation
        if ended.outcome == "over":
            raise OutOfTurnError(
                "vacation_over",
                "this vacation has ended already; the player's clocks run",
                None,
                until_ms=vacation["until_ms"],
            )
        resumed = self._resume(key_id, player_id, vacation)
        # the books of the year the vacation counts in: the days it gave back show there
        vacations = self.book.listed(key_id, player_id)
        books = self._books_of(player_id, vacation["year"], vacations, self.allowance_of(key))
        return {**books, "vacation": vacation, "resumed": resumed}

    def _resume(
        self, key_id: str, player_id: str, vacation: dict[str, Any], own: bool = True
    ) -> list[dict[str, Any]]:
        """Resume the player's clocks in each of their games from `vacation`, ended (or
        called off) at its `ended_ms`: a retry resumes at the first end's time, and each
        append is under its command id, so what was appended already is not again. `own`:
        the end's own request, whose retry mends a game lost at every attempt (it raises
        `stale_sequence` then); a declaration's second look leaves that to the end."""
        back, which = vacation["ended_ms"], (vacation["vacation_id"], vacation["from_ms"])
        resumed: list[dict[str, Any]] = []
        busy = Busy()
        for game_id in self.games_of(key_id, player_id):
            with busy:
                resumed += self.service.resume_clocks(game_id, key_id, player_id, back, which)
        if own:
            busy.raise_lost()
        return resumed

    def _resume_if_ended(
        self, key_id: str, player_id: str, vacation_id: str
    ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """After a declaration's pauses: if the vacation was ended or called off meanwhile
        (an edit: the platform calls it off as soon as it is declared), resume it again in
        each of the player's games, so a game its pause reached after its end's request had
        passed, or one that request did not list yet, does not keep it (each end appended
        once: its command id). Returns the vacation as the book has it and the player's
        vacations then, if it was ended; None if it holds."""
        listed = self.book.listed(key_id, player_id)
        for vacation in listed:
            if vacation["vacation_id"] == vacation_id and vacation["ended_ms"] is not None:
                self._resume(key_id, player_id, vacation, own=False)
                return vacation, listed
        return None

    def _pause_declared(
        self, key_id: str, player_id: str, now: int, vacation_id: str | None
    ) -> None:
        """Pause the player's clocks for their vacation `vacation_id` (the one a retry
        overlaps), if it is not over at `now`, in each of their games that lacks its pause
        (an append made already is a duplicate: nothing)."""
        for vacation in self.book.listed(key_id, player_id):
            span = (vacation["from_ms"], vacation["until_ms"])
            if vacation["vacation_id"] != vacation_id or span[1] <= max(now, span[0]):
                continue  # another one, over, or called off
            busy = Busy()
            for game_id in self.games_of(key_id, player_id):
                with busy:
                    self.service.pause_clocks(
                        game_id, key_id, player_id, now, span, vacation["vacation_id"]
                    )
            busy.raise_lost()

    def listed(self, key: dict[str, Any], player_id: str) -> dict[str, Any]:
        """The player's vacations and this year's allowance: GET's body."""
        year = year_of(int(self.clock() * 1000))
        vacations = self.book.listed(str(key["id"]), player_id)
        books = self._books_of(player_id, year, vacations, self.allowance_of(key))
        return {**books, "vacations": vacations}

    @classmethod
    def _books_of(
        cls, player_id: str, year: int, vacations: list[dict[str, Any]], allowance: int
    ) -> dict[str, Any]:
        """The allowance's books of `year`, from the player's `vacations`."""
        used = sum(v["days"] for v in vacations if v["year"] == year)
        return cls._books(player_id, year, used, allowance)

    @staticmethod
    def _books(player_id: str, year: int, used: int, allowance: int) -> dict[str, Any]:
        return {
            "player_id": player_id,
            "year": year,
            "allowance_days": allowance,
            "used_days": used,
            "left_days": max(0, allowance - used),
        }

    def games_of(self, key_id: str, player_id: str) -> list[str]:
        """The key's games in progress with the player in a seat, from the games directory
        caught up with the change feed (services/redis_store/directory_index.py)."""
        self.directory.catch_up()
        pipe = self.client.pipeline(transaction=False)
        for shard in range(SHARDS):
            pipe.zrange(key_player_id_key(shard, key_id, player_id), 0, -1)
        listed = [
            (shard, m.decode() if isinstance(m, bytes) else str(m))
            for shard, members in enumerate(pipe.execute())
            for m in members
        ]
        pipe = self.client.pipeline(transaction=False)
        for shard, game in listed:
            pipe.zscore(status_key(shard, IN_PROGRESS), game)
        going = pipe.execute() if listed else []
        return sorted({game for (_, game), at in zip(listed, going, strict=True) if at is not None})
