"""Vacations (docs/clocks.md): a player, by player id under a platform's API key, declares
days away; every clock of theirs in the key's games in progress pauses until they are back.

A declaration is recorded first, within the player's yearly allowance (the service's
`VACATION_DAYS_PER_YEAR`; the days count in the calendar year, UTC, the vacation starts in),
in one script that refuses what does not fit and writes nothing then
(services/redis_store/vacations.py). Then each game of the player (the games directory's
index of the key's games by player id, caught up with the change feed first) gets a
`ClockPaused` per seat of the player still in: a fact of that game's log, so its replay moves
the same deadlines, and a ``player_away`` item for the other players' notifications. A game
that starts while the player is away gets its pause with its start (`GameService`'s `away`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis

from carcassonne.errors import MalformedError, OutOfTurnError
from services.redis_store.directory_index import DirectoryIndex
from services.redis_store.keys import IN_PROGRESS, SHARDS, key_player_id_key, status_key
from services.redis_store.vacations import DAY_MS, VacationBook

from .errors import NotFound
from .service import GameService

MAX_DAYS = 366  # a declaration's days: 1 to a year


def year_of(at_ms: int) -> int:
    """The calendar year (UTC) of a Unix time in ms: the allowance's period."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).year


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

    def declare(self, key: dict[str, Any], player_id: str, days: Any) -> dict[str, Any]:
        """Record `days` of vacation from now for a player of API `key` (its record) and
        pause the player's clocks: 201's body; 422 `bad_vacation`, 409
        `vacation_allowance_exceeded` / `vacation_overlaps`."""
        key_id, allowance = str(key["id"]), self.allowance_of(key)
        if type(days) is not int or not 1 <= days <= MAX_DAYS:
            raise MalformedError("bad_vacation", f"days must be an integer 1-{MAX_DAYS}")
        now = int(self.clock() * 1000)
        until, year = now + days * DAY_MS, year_of(now)
        vacation_id = uuid.uuid4().hex
        found = self.book.declare(key_id, player_id, vacation_id, now, until, days, year, allowance)
        if found.outcome == "overlaps":
            # A retry of a declaration that failed after its record (Redis down mid-way, a
            # 503): the running vacation's pauses are made first, each under its own
            # command id, so what the failure left undone is done and nothing twice.
            self._pause_running(key_id, player_id, now)
            raise OutOfTurnError(
                "vacation_overlaps",
                "this player is on vacation already; declare the next one once back",
                None,
                until_ms=found.running_until_ms,
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
        for game_id in self.games_of(key_id, player_id):
            paused += self.service.pause_clocks(
                game_id, key_id, player_id, (now, until), vacation_id
            )
        return {
            **self._books(player_id, year, found.used_days, allowance),
            "vacation": {
                "vacation_id": vacation_id,
                "from_ms": now,
                "until_ms": until,
                "days": days,
                "year": year,
                "ended_ms": None,
            },
            "paused": paused,
        }

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
        back = vacation["ended_ms"]  # a retry resumes at the first end's time
        resumed: list[dict[str, Any]] = []
        for game_id in self.games_of(key_id, player_id):
            resumed += self.service.resume_clocks(game_id, key_id, player_id, back, vacation_id)
        listed = self.listed(key, player_id)
        books = {k: v for k, v in listed.items() if k != "vacations"}
        return {**books, "vacation": vacation, "resumed": resumed}

    def _pause_running(self, key_id: str, player_id: str, now: int) -> None:
        """Pause the player's clocks for the vacation running at `now` in each of their
        games that lacks its pause (an append already made is a duplicate: nothing)."""
        for vacation in self.book.listed(key_id, player_id):
            if vacation["from_ms"] <= now < vacation["until_ms"]:
                span = (vacation["from_ms"], vacation["until_ms"])
                for game_id in self.games_of(key_id, player_id):
                    self.service.pause_clocks(
                        game_id, key_id, player_id, span, vacation["vacation_id"]
                    )

    def listed(self, key: dict[str, Any], player_id: str) -> dict[str, Any]:
        """The player's vacations and this year's allowance: GET's body."""
        year = year_of(int(self.clock() * 1000))
        vacations = self.book.listed(str(key["id"]), player_id)
        used = sum(v["days"] for v in vacations if v["year"] == year)
        books = self._books(player_id, year, used, self.allowance_of(key))
        return {**books, "vacations": vacations}

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
