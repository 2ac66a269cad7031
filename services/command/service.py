"""The command side's service layer: create games, play turns, describe the turn to play.

`GameService` is the composition of the command side: the fold cache (cache.py), the
seat's commands as handlers (handlers.py) run by the one write path
(`services.common.moves.run_command`: decide, draw, one conditional and idempotent append,
retry on conflict from the cached sequence), hints (hints.py) and views (views.py). A
rejected command appends nothing. What follows an append (scoring, a bot seat's turn,
deliveries) is for the consumers of the change feed: the service only appends.
"""

from __future__ import annotations

import random
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from carcassonne.errors import GameError, MalformedError, OutOfTurnError
from carcassonne.events import (
    AnswerUndo,
    ClockPaused,
    Event,
    PauseClock,
    RequestUndo,
    ResumeClock,
    StartGame,
    TurnUndone,
    UndoRequested,
    with_seats,
)
from carcassonne.game import decide, fold
from carcassonne.ruleset import Ruleset
from carcassonne.state import OVER, GameState
from carcassonne.tiles import Meeple
from carcassonne.undo import undo_voters
from eventstore.envelope import MOVES
from eventstore.errors import CommandReused, ConcurrencyError, GameArchived
from eventstore.port import EventStore
from eventstore.schemas import to_engine
from services.archive.fallthrough import FallThroughStore
from services.common.access import RateLimited
from services.common.draws import draw_until_placeable
from services.common.moves import (
    STALE_SEQUENCE,
    Committed,
    Handler,
    append_moves,
    now_ms,
    run_command,
)
from services.common.pace import move_ms
from services.common.takeover import TakeoverBudget, TakeoverPayer
from services.redis_store.bot_budget import Refused, seconds_to_midnight
from services.redis_store.bot_index import is_bot
from services.redis_store.keys import derived_game_id, new_game_id

from . import hints, views
from .cache import Cached, FoldCache, Taken
from .errors import Forbidden, IdempotencyKeyReused, NotFound
from .handlers import (
    Asked,
    Command,
    Decide,
    Pause,
    Reissue,
    Resignation,
    Turn,
    TurnResult,
    seat_of,
)
from .hints import HintDesk, HintReply
from .secrets_store import Secrets, token_hash

# Which of an API key's player ids are away at a time (Unix ms): each vacation's (from, until,
# vacation id).
Away = Callable[[str, list[str], int], dict[str, list[tuple[int, int, str]]]]
# The vacations of an API key's player ids ended early or called off: each one's (vacation id,
# from, ended), by player id.
Ends = Callable[[str, list[str]], dict[str, list[tuple[str, int, int]]]]


class GameService:
    """Validates commands against the rules and appends their events."""

    def __init__(
        self,
        store: EventStore,
        secrets_store: Secrets,
        cache_size: int = 10_000,
        in_place: bool = True,
        undo_seconds: float = 120,
        clock: Callable[[], float] = time.time,
        bot_budget: BotBudget | None = None,
        move_floor_ms: int = 250,
        archive_reads: FallThroughStore | None = None,
        hint_desk: HintDesk | None = None,
        away: Away | None = None,
        ends: Ends | None = None,
    ) -> None:
        """`in_place`: a turn changes the cached state itself (no copy per turn), which is only
        safe when one thread serves this process's requests (gunicorn's sync worker, the
        default): a view on another thread could be reading the state meanwhile. With
        request threads (`GUNICORN_THREADS` > 1) pass False: a turn then works on a copy.

        `undo_seconds`: how long the other players have to answer an undo request (ruleset
        `undo: consent`); `clock` gives the time (seconds) undo deadlines are set and checked by.

        `bot_budget`: each API key's bot seconds in flight (services/redis_store/bot_budget.py;
        None: no limit); a bot move takes at least `move_floor_ms` (the bot worker's
        MOVE_FLOOR_MS: its pace, services/common/pace.py).

        `archive_reads`: the store's reads falling through to the archive for archived games
        (services/archive/fallthrough.py; None: archived games read as unknown), used by the
        views that read a whole log (GET /games/{id}/record) and by imports.

        `hint_desk`: where hints are asked of the bot worker (services/command/hints.py;
        None: every hint answers 503 hint_unavailable).

        `away`: which of an API key's player ids are on vacation at a time or have one
        declared to start later, each one's (from, until, id) (services/redis_store/
        vacations.py; None: nobody): a game starting before a player is back has their
        clock paused for each, from its start at the earliest (docs/clocks.md). `ends`:
        which of those were ended early or called off (the same book), read again once such
        a start is appended: one ended meanwhile is resumed in the new game (its end's
        request may have listed the player's games before this one).
        """
        self.away = away
        self.ends = ends
        self.archive_reads = archive_reads
        self.bot_budget = bot_budget
        self.move_floor_ms = move_floor_ms
        self.in_place = in_place
        self.undo_seconds = undo_seconds
        self.clock = clock
        self.store = store
        self.secrets = secrets_store
        self.games = FoldCache(store, secrets_store, cache_size, in_place)
        self.hint_desk = hint_desk

    # -- loading ----------------------------------------------------------------------
    def load(self, game_id: str, take: bool = False) -> Cached:
        """The game's state caught up to the end of its move stream (`FoldCache.load`)."""
        return self.games.load(game_id, take)

    # -- commands ---------------------------------------------------------------------
    def create_game(
        self,
        names: list[str],
        ruleset: Ruleset,
        seat_order: list[int] | None = None,
        player_ids: list[str | None] | None = None,
        key_id: str | None = None,
        bots: list[dict[str, Any] | None] | None = None,
        seed: str | None = None,
        public: bool = False,
        bot_only_max_think_ms: int | None = None,
    ) -> tuple[str, list[dict[str, Any]]]:
        """Start a game; returns its id and each seat's name, secret token, the index of the
        request's player in that seat (`player_index`) and its `player_id` if given (R2.2).

        Two players whose names are the same once trimmed and compared without case are
        refused (422 `duplicate_player_name`): an app could not tell their seats apart.
        A game with no human seat whose bots would think longer than `bot_only_max_think_ms`
        a move is refused (422 `bot_only_think_ms`; None: no such ceiling).
        `seed` (tests and tools only; never taken from a request) fixes the draws; a `public`
        game is listed to everyone (GET /games without a key), any other only to `key_id`."""
        ids, kinds = checked_players(names, player_ids, bots)
        checked_bot_only(kinds, bot_only_max_think_ms)
        game_id = new_game_id()  # on an index shard's slot (services/redis_store/keys.py)
        seed = seed or secrets.token_hex(16)
        order = seats_in_order(len(names), seat_order, seed)
        seats = [names[i] for i in order]
        seat_ids = [ids[i] for i in order]
        seat_bots = [kinds[i] for i in order]
        # A bot seat has no token: nobody may play its turns but the bot worker.
        tokens = [None if b else secrets.token_urlsafe(24) for b in seat_bots]
        record = with_takeover(
            secrets_record(seed, seats, tokens, seat_ids, key_id, seat_bots, public), ruleset
        )
        self._reserve_bots(key_id, game_id, seat_bots, ruleset)
        # Before the first append: the bot worker reads the seats when the feed shows it.
        self.secrets.put(game_id, record)
        self._append_start(game_id, record, ruleset)
        return game_id, seated_players(names, order, tokens, ids, kinds)

    def _append_start(self, game_id: str, record: dict[str, Any], ruleset: Ruleset) -> None:
        """Append the start of a game whose secrets `record` is stored: `GameStarted` naming
        the seats and the first draws (from the record's seed), conditional on an empty move
        stream with the command id ``create`` — so a retry, or a second process finishing
        the same start, appends nothing twice (the store answers the first append)."""
        state = GameState()
        events = decide(state, StartGame(ruleset, len(record["names"])))
        for event in events:
            state.apply(event)
        # The log itself says who sits where.
        events = with_seats(events, record["names"], record.get("player_ids"))
        now = now_ms()
        events += self._away_at_start(state, record, now)
        events += draw_until_placeable(state, record["seed"], now)
        # The worker learns of the game from the change feed, as of every move: a game with
        # an owner key's subscriptions hears of its first turn once the worker has passed it.
        try:
            append_moves(self.store, game_id, events, expected=0, command_id="create")
        except GameArchived:  # (a ConcurrencyError too: first)
            return  # started, played and archived meanwhile: nothing to start or resume
        except ConcurrencyError:
            pass  # started already: the first draws stand
        self._resume_ended_at_start(game_id, record, events)

    def _resume_ended_at_start(
        self, game_id: str, record: dict[str, Any], events: list[Event]
    ) -> None:
        """Resume, in the game just started, each vacation it paused at its start that the
        book now says was ended or called off: an end recorded after this start read the
        book may have listed the player's games before this one was in them (each resume
        under the end's own command id, `resume_clocks`: appended once either way)."""
        paused = {e.vacation for e in events if isinstance(e, ClockPaused) and e.vacation}
        key_id, ids = record.get("key_id"), record.get("player_ids") or []
        if not paused or self.ends is None or not key_id:
            return
        for player_id, ended in self.ends(key_id, sorted({i for i in ids if i})).items():
            for vacation_id, start, back in ended:
                if vacation_id in paused:
                    try:
                        self.resume_clocks(game_id, key_id, player_id, back, (vacation_id, start))
                    except GameError as exc:
                        # The game is made: refusing its creation now would have the
                        # caller make another. Left to a retry of the end (rare: every
                        # attempt here lost to the new game's own moves).
                        if exc.code != STALE_SEQUENCE:
                            raise

    def _away_at_start(self, state: GameState, record: dict[str, Any], now: int) -> list[Event]:
        """`ClockPaused` for each vacation, running or declared to come, of each seat's
        player (its key's player ids, docs/clocks.md), applied to `state`: their turns'
        clocks stand still while they are away, from the game's start at the earliest."""
        key_id, ids = record.get("key_id"), record.get("player_ids") or []
        if self.away is None or not key_id or not any(ids):
            return []
        spans = self.away(key_id, sorted({i for i in ids if i}), now)
        events: list[Event] = []
        for seat, player_id in enumerate(ids):
            for start, until, vacation in spans.get(player_id, []):
                pause = PauseClock(seat, now, until, max(now, start), vacation)
                for event in decide(state, pause):
                    state.apply(event)
                    events.append(event)
        return events

    def start_prepared(
        self, game_id: str, record: dict[str, Any], ruleset: Ruleset
    ) -> tuple[dict[str, Any], bool]:
        """Start a game from a secrets record made elsewhere (a lobby's seats, a rematch):
        the record is stored unless the game has one (SET NX), then the start is appended
        from the stored record. Idempotent: any number of calls, at once or after a crash
        between the two steps, make one game — and none once that game went to the archive
        (its secrets record gone, its tombstone kept: a lobby or match finished late). Returns
        the stored record and whether this call stored it (only then are tokens it made the
        game's)."""
        if self.secrets.archived(game_id):
            return record, False
        stored = self.secrets.put_new(game_id, with_takeover(record, ruleset))
        if not stored:
            record = self.secrets.get(game_id) or record
        self._append_start(game_id, record, ruleset)
        return record, stored

    def _reserve_bots(
        self,
        key_id: str | None,
        game_id: str,
        bots: list[dict[str, Any] | None],
        ruleset: Ruleset,
    ) -> None:
        """Reserve the game's bot seconds against its key's budgets, in flight and for the
        day (issue 32, finding 2: one request could buy half an hour of bot CPU), or refuse
        the game: 429 `bot_budget_exceeded` / `bot_day_budget_exceeded`, nothing written.
        The bot worker gives the in-flight seconds back at its end."""
        if self.bot_budget is None or key_id is None or not any(bots):
            return
        state = GameState()
        for event in decide(state, StartGame(ruleset, len(bots))):
            state.apply(event)
        seconds = bot_seconds(bots, state.bag_size, self.move_floor_ms)
        refused = self.bot_budget.reserve(key_id, game_id, seconds)
        if refused is not None:
            raise over_budget(refused, seconds, "this game's bots")

    def rematch(self, game_id: str, key_id: str) -> dict[str, Any]:
        """The next game for the same players (docs/lobby.md, "Rematch"): the same ruleset,
        names, player ids, bots, owner key and listing, seats rotated by one (the old seat 1
        moves first, the old seat 0 last), asked for by the key that owns the game once it is
        over. Its id is derived from the old game's, so any number of requests, at once or
        retried, make one game: the request that stored its secrets answers each seat's new
        token (`created`), every other the same game with no token (a lost answer's tokens
        are re-issued by `POST /games/{id}/players/{seat}/token`)."""
        state, record = self._finished(game_id)
        if record.get("key_id") is None or record.get("key_id") != key_id:
            raise Forbidden(
                "not_game_owner", "only the API key that created this game may ask a rematch"
            )
        if state.phase != OVER:
            raise OutOfTurnError("game_not_over", "a rematch follows a game that is over", "R7.1")
        count = len(record["names"])
        moved = [(seat + 1) % count for seat in range(count)]  # new seat -> old seat
        names = [record["names"][old] for old in moved]
        ids = [(record.get("player_ids") or [None] * count)[old] for old in moved]
        bots = [(record.get("bots") or [None] * count)[old] for old in moved]
        tokens = [None if bot else secrets.token_urlsafe(24) for bot in bots]
        new_id = derived_game_id(b"rematch:" + game_id.encode())
        ruleset = state.ruleset
        fresh = secrets_record(
            secrets.token_hex(16), names, tokens, ids, key_id, bots, bool(record.get("public"))
        )
        fresh["rematch_of"] = game_id
        # A repeat reserves no bot time again, nor a rematch played and archived (whose
        # reservation was given back): start_prepared makes that one no second time.
        if self.secrets.get(new_id) is None and not self.secrets.archived(new_id):
            self._reserve_bots(key_id, new_id, bots, ruleset)
        _, created = self.start_prepared(new_id, fresh, ruleset)
        players = []
        for seat, old in enumerate(moved):
            player: dict[str, Any] = {
                "seat": seat,
                "previous_seat": old,
                "name": names[seat],
                "player_id": ids[seat],
                "token": tokens[seat] if created else None,
            }
            if bots[seat]:
                player["bot"] = bots[seat]
            players.append(player)
        return {"game_id": new_id, "rematch_of": game_id, "created": created, "players": players}

    def _finished(self, game_id: str) -> tuple[GameState, dict[str, Any]]:
        """A game a rematch may follow and its record (names, player ids, bots, owner key):
        from Redis, or from its archived copy once it was archived. Players of an
        asynchronous game ask for their rematch when they next open the app, often after
        ARCHIVE_AFTER (an hour by default); every other command on an archived game is
        over (409 `game_over`)."""
        reads = self.archive_reads
        if reads is not None and self.secrets.archived(game_id):
            events = reads.read(game_id, MOVES)  # the copy read once (`record` needs it)
            record = reads.record(game_id)
            if events and record is not None:
                return fold(to_engine(event) for event in events), record
        cached = self.load(game_id)
        return cached.state, cached.secrets

    def play_turn(
        self,
        game_id: str,
        token: str | None,
        x: Any,
        y: Any,
        rotation: Any,
        meeple: Meeple | None,
        idempotency_key: str | None = None,
        expected_seq: int | None = None,
        trust_cache: bool = False,
        recall: bool = False,
        tile: str | None = None,
    ) -> TurnResult:
        """Play the drawn tile for the token's seat; appends the turn and the next draws.
        With `recall` the seat takes its abbot back instead of placing a meeple (R9.2).
        With a hand (R10.3) `tile` names the hand's tile to play.

        `trust_cache` says that this process serves every command of the game (one worker per
        command instance, each game routed to one instance by the proxy's hash; the command
        service's TRUST_CACHE setting), so a cached state is taken as current without reading
        the stream first — one Redis round trip less per turn. Nothing rests on that belief: the
        append is conditional on the cached sequence, so if another process did append
        meanwhile, the append is refused and the turn is decided again on the cached state
        caught up with the events after its sequence (never the whole game again); and a turn is
        only refused after its refusal was checked against the stream. The turn runs ahead of
        the stream on the cached state itself (no copy per turn) unless request threads may read
        it (`in_place` False).
        """
        asked = Asked(self.store, game_id, token, idempotency_key)
        turn = Turn(asked, (x, y, rotation, meeple), expected_seq, recall, tile)
        return self._run(game_id, Taken(self.games, game_id, trust_cache, self.in_place), turn)

    def resign(self, game_id: str, token: str | None) -> TurnResult:
        """The token's seat leaves the game (docs/lifecycle.md): `PlayerResigned`, then (ruleset
        `on_leave: "bot:<level>"`, docs/takeover.md) `SeatTakenOver`, then the next player's
        draw if it was this seat's turn, or the end with final scoring when fewer than two
        players are left (with a takeover: none still in). A takeover is reserved against the
        game's API key's bot budgets first, or refused (`TakeoverRefused`: the seat is skipped;
        services/common/takeover.py). One conditional append; a seat resigns once, so its
        command id is fixed and a retry answers the first result (and is charged once)."""
        payer = TakeoverPayer(self.bot_budget, self.move_floor_ms)
        resignation = Resignation(Asked(self.store, game_id, token), payer)
        return self._run(game_id, Taken(self.games, game_id, False, False), resignation)

    def reissue_token(self, game_id: str, seat: Any, key_id: str) -> dict[str, Any]:
        """A new secret token for a seat, asked for by the API key that created the game (a
        lost phone must not lose a game). The old token stops working at once: the secrets
        record is changed first, then `TokenReissued` is appended, so every process serving
        the game — whose cached state is now behind the stream, its next append refused —
        reloads the secrets before it accepts another command (docs/lifecycle.md)."""
        unit = Taken(self.games, game_id, False, False)
        try:
            self._check_reissue(unit.cached, seat, key_id)
            token = secrets.token_urlsafe(24)
            if not self.secrets.replace_token(game_id, seat, token_hash(token)):
                raise NotFound("game_not_found", f"no game {game_id}")
        except BaseException:
            unit.release()
            raise
        done = run_command(self.store, game_id, unit, Reissue(seat, uuid.uuid4().hex))
        seq = done.appended.result.last_seq if isinstance(done, Committed) else done.seq
        return {"game_id": game_id, "seat": seat, "token": token, "seq": seq}

    def pause_clocks(
        self,
        game_id: str,
        key_id: str,
        player_id: str,
        now_ms: int,
        span: tuple[int, int],
        vacation_id: str,
    ) -> list[dict[str, Any]]:
        """Pause the clocks of `player_id`'s seats in a game of `key_id`, at `now_ms`, for a
        vacation `span` (from, until: Unix ms, from now or later; docs/clocks.md): one
        `ClockPaused` per seat still in, a conditional append each under
        `vacation:<id>:<seat>`. A game not of this key, not started or over (or gone to the
        archive), or without the player in, gets nothing (an empty list): the vacation is
        recorded already, so one game's refusal must not fail the others."""
        start, until = span

        def pause(seat: int) -> Pause:
            command = PauseClock(seat, now_ms, until, start, vacation_id)
            return Pause(command, f"vacation:{vacation_id}:{seat}", self._now_ms)

        return self._clock_change(game_id, key_id, player_id, pause)

    def resume_clocks(
        self,
        game_id: str,
        key_id: str,
        player_id: str,
        now_ms: int,
        vacation: tuple[str, int],
    ) -> list[dict[str, Any]]:
        """Resume the clocks of `player_id`'s seats in a game of `key_id`, back at `now_ms`
        from a vacation (its id and start) ended early, or called off before its start: one
        `ClockResumed` per seat still in and away then, under `vacation-end:<id>:<seat>` (as
        `pause_clocks`; a seat back already gets nothing)."""
        vacation_id, start = vacation

        def resume(seat: int) -> Pause:
            command = ResumeClock(seat, now_ms, start, vacation_id)
            return Pause(command, f"vacation-end:{vacation_id}:{seat}", self._now_ms)

        return self._clock_change(game_id, key_id, player_id, resume)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _clock_change(
        self, game_id: str, key_id: str, player_id: str, handler: Callable[[int], Pause]
    ) -> list[dict[str, Any]]:
        """Each seat of `player_id` in the game of `key_id`: `handler(seat)` run; what it
        appended (a game refusing it, e.g. over or archived, gives nothing). A change that
        lost its append to the game's moves at every attempt raises `stale_sequence`: not a
        refusal but not done either, and the caller's retry must do it."""
        try:
            return self._clock_changes(game_id, key_id, player_id, handler)
        except GameError as exc:
            if exc.code == STALE_SEQUENCE:
                raise
            return []

    def _clock_changes(
        self, game_id: str, key_id: str, player_id: str, handler: Callable[[int], Pause]
    ) -> list[dict[str, Any]]:
        cached = self.load(game_id)
        ids = cached.secrets.get("player_ids") or []
        if cached.secrets.get("key_id") != key_id or cached.state.phase == OVER:
            return []
        paused = []
        for seat, found in enumerate(ids):
            if found != player_id:
                continue
            unit = Taken(self.games, game_id, False, False)
            change = handler(seat)
            done = run_command(self.store, game_id, unit, change)
            if done is None:
                continue
            state = done.state
            if isinstance(change.command, ResumeClock) and state.pauses_ms[seat] == change.before:
                continue  # an end logged for a pause to come: no clock of the seat ran again
            seq = done.appended.result.last_seq if isinstance(done, Committed) else done.seq
            running = state.deadline_ms if state.current == seat and state.drawn else None
            paused.append({"game_id": game_id, "seat": seat, "seq": seq, "deadline_ms": running})
        return paused

    @staticmethod
    def _check_reissue(cached: Cached, seat: Any, key_id: str) -> None:
        """Refuse a re-issue by another key, of no seat, in a game over, or of a bot seat."""
        owner = cached.secrets.get("key_id")
        if owner is None or owner != key_id:
            raise Forbidden(
                "not_game_owner",
                "only the API key that created this game may re-issue its tokens",
            )
        players = cached.state.players
        if type(seat) is not int or not 0 <= seat < players:
            raise NotFound("seat_not_found", f"this game's seats are 0-{players - 1}")
        if cached.state.phase == OVER:
            raise OutOfTurnError("game_over", "the game is over", "R7.1")
        if is_bot(cached.secrets, seat):  # nobody but the bot worker plays a bot seat
            raise OutOfTurnError("bot_seat", "a bot plays this seat: it has no token", None)

    # -- undo (docs/undo.md) ------------------------------------------------------------
    def request_undo(
        self, game_id: str, token: str | None, idempotency_key: str | None = None
    ) -> TurnResult:
        """Ask to undo the token's seat's last placement: undone at once (`free`), or a
        request the other players answer before `undo_seconds` pass (`consent`)."""
        now = int(self.clock() * 1000)
        deadline = now + int(self.undo_seconds * 1000)

        def decided(state: GameState, seat: int, record: dict[str, Any]) -> list[Event]:
            events = decide(state, RequestUndo(seat, now, deadline))
            return events + bot_consents(state, events, record, now)

        return self.command(game_id, token, decided, f"/games/{game_id}/undo", {}, idempotency_key)

    def answer_undo(
        self,
        game_id: str,
        token: str | None,
        request: int,
        accept: bool,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Accept or refuse undo request `request` for the token's seat."""
        now = int(self.clock() * 1000)
        verb = "accept" if accept else "refuse"
        return self.command(
            game_id,
            token,
            lambda state, seat, _record: decide(state, AnswerUndo(seat, request, accept, now)),
            f"/games/{game_id}/undo/{request}/{verb}",
            {},
            idempotency_key,
        )

    def command(
        self,
        game_id: str,
        token: str | None,
        decided: Decide,
        path: str,
        body: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Decide the seat's command (`decided(state, seat, secrets record)` gives its events)
        on the game caught up from its stream and append its events (with the next draws, if
        any) on the condition that the stream is still where it was read: the path for a
        seat's rarer commands. The cached state is never changed in place here: the events
        apply to a copy. An `Idempotency-Key` is bound to (path, seat, body) as for a turn."""
        handler = Command(Asked(self.store, game_id, token, idempotency_key), decided, path, body)
        return self._run(game_id, Taken(self.games, game_id, False, False), handler)

    def _run(self, game_id: str, unit: Taken, handler: Handler[Taken, TurnResult]) -> TurnResult:
        """Run a seat's command (what follows its append — scoring, a bot's turn — is for the
        consumers of the change feed: an undo that reverts scores included)."""
        try:
            done = run_command(self.store, game_id, unit, handler)
        except CommandReused:  # the key is in the stream already, for another request
            raise IdempotencyKeyReused from None
        if not isinstance(done, Committed):
            return done
        return TurnResult(done.appended.stored, done.state, done.appended.result.last_seq)

    # -- hints and views ----------------------------------------------------------------
    def hint(self, game_id: str, token: str | None, level: str) -> HintReply:
        """The move bot `level` would play now for the token's seat, asked of the bot worker
        (services/command/hints.py): 200 with it once shown, 202 while pending."""
        cached = self.load(game_id)
        seat = seat_of(cached, token)
        return hints.hint(self.hint_desk, game_id, cached, seat, level)

    def turn_view(self, game_id: str) -> dict[str, Any]:
        """Whose turn, the drawn tile, and every legal placement with its meeple spots."""
        return views.turn_view(game_id, self.load(game_id))

    def hand_view(self, game_id: str, token: str | None) -> dict[str, Any]:
        """R10.3: the token's seat's own hand (services/command/views.py `hand_view`)."""
        cached = self.load(game_id)
        return views.hand_view(game_id, cached, seat_of(cached, token))


def bot_consents(
    state: GameState, events: list[Event], record: dict[str, Any], now_ms: int
) -> list[Event]:
    """A bot seat's answers to an undo request (`events`, decided on `state`): it accepts at
    once, in the same append as the request (docs/undo.md), so a request waits only for the
    human players; when every voter is a bot, the undo itself (`TurnUndone`) follows."""
    asked = next((e for e in events if isinstance(e, UndoRequested)), None)
    if asked is None or any(isinstance(e, TurnUndone) for e in events):
        return []  # no request, or granted already (`free`, or nobody else to ask)
    bots = [seat for seat in undo_voters(state, asked.player) if is_bot(record, seat)]
    if not bots:
        return []
    twin = state.copy()
    for event in events:
        twin.apply(event)
    answers: list[Event] = []
    for seat in bots:
        for event in decide(twin, AnswerUndo(seat, asked.request, True, now_ms)):
            twin.apply(event)
            answers.append(event)
    return answers


def checked_players(
    names: list[str],
    player_ids: list[str | None] | None,
    bots: list[dict[str, Any] | None] | None,
) -> tuple[list[str | None], list[dict[str, Any] | None]]:
    """A new game's players checked (2 to 6, names that differ, one id and one bot entry
    per player): their ids and bots, None where not given."""
    if not 2 <= len(names) <= 6:
        raise MalformedError("bad_players", "a game has 2 to 6 players", "R1.3")
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        first_index = seen.setdefault(name.strip().casefold(), index)
        if first_index != index:
            raise MalformedError(
                "duplicate_player_name",
                f"players {first_index} and {index} are both called {name.strip()!r}: "
                "names must differ (ignoring case and surrounding spaces)",
                None,
                name=name,
                indexes=[first_index, index],
            )
    ids: list[str | None] = list(player_ids) if player_ids is not None else [None] * len(names)
    if len(ids) != len(names):
        raise MalformedError("bad_player_ids", "one player_id (or null) per player")
    kinds: list[dict[str, Any] | None] = list(bots) if bots is not None else [None] * len(names)
    if len(kinds) != len(names):
        raise MalformedError("bad_bots", "one bot (or null) per player")
    return ids, kinds


def bot_seconds(bots: list[dict[str, Any] | None], tiles: int, floor_ms: int) -> float:
    """What a game's bot seats cost at most: each bot's paced move (services/common/pace.py
    `move_ms`: mcts its think_ms, any level at least the floor) times its share of the
    `tiles` to place."""
    moves = -(-tiles // max(1, len(bots)))
    return sum(
        move_ms(str(bot["level"]), int(bot.get("think_ms") or 0), floor_ms) * moves / 1000
        for bot in bots
        if bot is not None
    )


class BotBudget(TakeoverBudget, Protocol):
    """Bot seconds per API key, in flight and per day (services/redis_store/bot_budget.py)."""

    def reserve(self, key_id: str, game_id: str, seconds: float) -> Refused | None:
        """None when reserved; else what refused it (nothing written)."""


def over_budget(refused: Refused, seconds: float, what: str) -> RateLimited:
    """The 429 of a refused reservation of `seconds` for `what` (a game's bots, a hint):
    `bot_day_budget_exceeded` until the next UTC midnight, `hint_budget_exceeded` for a
    seat's hints in a game, else `bot_budget_exceeded`."""
    held, limit = round(refused.held, 1), refused.limit
    details: dict[str, Any] = {"budget": refused.budget, "limit_seconds": limit,
                               "asked_seconds": round(seconds, 2)}  # fmt: skip
    if refused.budget == "day":
        return RateLimited(
            "bot_day_budget_exceeded",
            f"this API key has taken {held:.0f} of its {limit:.0f} bot seconds today (UTC); "
            f"{what} would take {seconds:.1f} more",
            None,
            **details,
            used_seconds=held,
            retry_after=seconds_to_midnight(time.time()),
        )
    if refused.budget == "seat":
        return RateLimited(
            "hint_budget_exceeded",
            f"this seat's hints in this game have taken {held:.1f} of its {limit:.0f} "
            f"seconds; {what} would take {seconds:.1f} more",
            None,
            **details,
            used_seconds=held,
            retry_after=3_600,  # it never refills: the game's hints are used up
        )
    if refused.budget == "hints_in_flight":
        return RateLimited(
            "bot_budget_exceeded",
            f"this API key has {held:.0f} hints being worked out, its most at once; "
            "ask again when one is answered",
            None,
            **details,
            in_flight_hints=int(held),
            retry_after=1,
        )
    return RateLimited(  # a budget used up: 429 with Retry-After, as a rate limit
        "bot_budget_exceeded",
        f"this API key's games in progress and hints hold {held:.0f} of its {limit:.0f} bot "
        f"seconds; {what} would take {seconds:.1f} more",
        None,
        **details,
        in_flight_seconds=held,
        retry_after=60 if what != "this hint" else 1,
    )


def checked_bot_only(bots: list[dict[str, Any] | None], max_think_ms: int | None) -> None:
    """Refuse a game whose every seat is a bot if a bot would think more than `max_think_ms`
    a move (422 `bot_only_think_ms`): nobody plays it, and its bots' CPU is taken from every
    other game's bot seats (issue 32). None: no ceiling."""
    if max_think_ms is None or not bots or any(bot is None for bot in bots):
        return
    # Only mcts thinks its think_ms; greedy and random take the worker's fixed floor.
    over = [
        i
        for i, bot in enumerate(bots)
        if bot is not None and bot["level"] == "mcts" and int(bot["think_ms"]) > max_think_ms
    ]
    if over:
        raise MalformedError(
            "bot_only_think_ms",
            f"a game with no human seat lets its bots think at most {max_think_ms} ms a move: "
            f"players {over} ask for more",
            None,
            max_think_ms=max_think_ms,
            players=over,
        )


def seats_in_order(players: int, seat_order: list[int] | None, seed: str) -> list[int]:
    """Which player sits in each seat: as asked, or (R2.2 Decision) a random first player
    drawn from the seed, then clockwise."""
    if seat_order is None:
        first = random.Random(seed + ":seats").randrange(players)
        return [(first + i) % players for i in range(players)]
    if sorted(seat_order) != list(range(players)):
        raise MalformedError("bad_seat_order", "seat_order must list each player once", "R10.2")
    return seat_order


def secrets_record(
    seed: str,
    seats: list[str],
    tokens: list[str | None],
    seat_ids: list[str | None],
    key_id: str | None,
    seat_bots: list[dict[str, Any] | None],
    public: bool = False,
) -> dict[str, Any]:
    """A new game's secrets record (services/command/secrets_store.py), in seat order."""
    record: dict[str, Any] = {
        "seed": seed,
        "names": seats,
        "tokens": {token_hash(t): i for i, t in enumerate(tokens) if t is not None},
    }
    if any(i is not None for i in seat_ids):
        # Beside the names, in seat order: the append script indexes both (GET /games).
        record["player_ids"] = seat_ids
    if key_id is not None:  # the API key that created it (its subscriptions cover it)
        record["key_id"] = key_id
    if any(seat_bots):
        record["bots"] = seat_bots  # read by the bot worker (services/bots)
    if public:  # listed without a key (the games directory indexes it apart)
        record["public"] = True
    return record


def with_takeover(record: dict[str, Any], ruleset: Ruleset) -> dict[str, Any]:
    """The secrets `record` of a game whose ruleset has a bot take over a seat that leaves
    (`on_leave`, docs/takeover.md), marked so: the bot worker's feed consumer then follows
    the game as it follows a game with a bot seat (whose seats the log alone says)."""
    if ruleset.takeover is None:
        return record
    return {**record, "on_leave": ruleset.on_leave}


def seated_players(
    names: list[str],
    order: list[int],
    tokens: list[str | None],
    ids: list[str | None],
    kinds: list[dict[str, Any] | None],
) -> list[dict[str, Any]]:
    """A created game's seats as answered: name, token, the request's player index, and the
    player's id and bot when given."""
    players = []
    for seat, (index, token) in enumerate(zip(order, tokens, strict=True)):
        player: dict[str, Any] = {
            "seat": seat,
            "name": names[index],
            "player_index": index,  # which entry of the request's `players` sits here
            "token": token,
        }
        if ids[index] is not None:
            player["player_id"] = ids[index]
        if kinds[index]:
            player["bot"] = kinds[index]
        players.append(player)
    return players
