"""The command side's service layer: create games, play turns, describe the turn to play.

It folds the move stream with the engine, decides commands, draws tiles with the game's
secret seed, and appends every resulting event in one conditional, idempotent append. A
rejected command appends nothing. States are cached per process with their sequence and
caught up from the stream, so a late turn costs what an early one does.
"""

from __future__ import annotations

import random
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from carcassonne.errors import GameError, MalformedError, OutOfTurnError
from carcassonne.events import (
    AnswerUndo,
    Event,
    PlayTurn,
    RecallAbbot,
    RequestUndo,
    Resign,
    StartGame,
    TokenReissued,
    TurnUndone,
    UndoRequested,
    meeple_to_dict,
    with_seats,
)
from carcassonne.game import decide
from carcassonne.ruleset import Ruleset
from carcassonne.state import OVER, GameState
from carcassonne.tiles import Meeple
from carcassonne.undo import undo_voters
from eventstore.envelope import MOVES, AppendResult, NewEvent, StoredEvent
from eventstore.errors import CommandReused, ConcurrencyError
from eventstore.port import EventStore
from eventstore.schemas import to_new
from services.common.body import fingerprint
from services.common.draws import draw_until_placeable
from services.redis_store.bot_index import is_bot
from services.redis_store.keys import new_game_id

from . import hints, views
from .cache import Cached, FoldCache
from .errors import AuthError, Forbidden, IdempotencyKeyReused, NotFound, check_reuse
from .hints import kept_hints
from .secrets_store import Secrets, token_hash


def now_ms() -> int:
    """The service's clock (Unix ms): deadlines are computed here, never in the engine."""
    return int(time.time() * 1000)


def turn_fingerprint(
    game_id: str,
    seat: int,
    x: Any,
    y: Any,
    rotation: Any,
    meeple: Meeple | None,
    tile: str | None = None,
) -> str:
    """What a turn's Idempotency-Key is bound to: the request as the command means it (the
    seat of its token, the placement and the meeple), so a retry that spells the same body
    differently (key order, an explicit `"meeple": null`) is still the same request."""
    body = {
        "seat": seat,
        "x": x,
        "y": y,
        "rotation": rotation,
        "meeple": None if meeple is None else meeple_to_dict(meeple),
    }
    if tile is not None:  # R10.3: the hand tile played is part of the request
        body["tile"] = tile
    return fingerprint("POST", f"/games/{game_id}/turns", body)


class BotHandoff(Protocol):
    """Where a bot seat's turn goes (services/command/bots.py `BotCaller`)."""

    def expect(self, game_id: str) -> None:
        """A game with bot seats is about to be created."""

    def __call__(self, game_id: str) -> None:
        """A bot is to move in the game."""


@dataclass(frozen=True)
class TurnResult:
    """What a turn appended and what comes next."""

    events: list[StoredEvent]
    state: GameState
    seq: int
    replayed: bool = False


def stored_events(
    game_id: str, new_events: list[NewEvent], result: AppendResult, command_id: str
) -> list[StoredEvent]:
    """The events of a command's append as stored (seqs and time from the append's result)."""
    return [
        StoredEvent(game_id, MOVES, seq, e.type, e.version, result.time_ms, command_id, e.payload)
        for seq, e in enumerate(new_events, start=result.first_seq)
    ]


class GameService:
    """Validates commands against the rules and appends their events."""

    def __init__(
        self,
        store: EventStore,
        secrets_store: Secrets,
        cache_size: int = 10_000,
        notify: Callable[[str], None] | None = None,
        notify_ms: int = 2_000,
        in_place: bool = True,
        bots: BotHandoff | None = None,
        undo_seconds: float = 120,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`notify(game_id)` wakes the scoring worker; it is called at most once per game per
        `notify_ms` (the store's notification flag), and only after a successful append.

        `in_place`: a turn changes the cached state itself (no copy per turn), which is only
        safe when one thread serves this process's requests (gunicorn's sync worker, the
        default): a view on another thread could be reading the state meanwhile. With
        request threads (`GUNICORN_THREADS` > 1) pass False: a turn then works on a copy.

        `undo_seconds`: how long the other players have to answer an undo request (ruleset
        `undo: consent`); `clock` gives the time (seconds) undo deadlines are set and checked by.
        """
        self.in_place = in_place
        self.bots = bots
        self.undo_seconds = undo_seconds
        self.clock = clock
        self.store = store
        self.secrets = secrets_store
        self.notify = notify
        self.notify_ms = notify_ms if notify is not None else 0
        self.games = FoldCache(store, secrets_store, cache_size, in_place)
        self._cache = self.games.kept  # the states themselves (tests look at an entry)
        self._hints = kept_hints()

    # -- loading ----------------------------------------------------------------------
    def load(self, game_id: str, take: bool = False) -> Cached:
        """The game's state caught up to the end of its move stream (`FoldCache.load`)."""
        return self.games.load(game_id, take)

    def keep(self, game_id: str, cached: Cached) -> None:
        """Cache a state (unless a newer one is there already)."""
        self.games.keep(game_id, cached)

    def _caught_up(self, game_id: str, cached: Cached, own: bool) -> Cached:
        return self.games.caught_up(game_id, cached, own)

    def _take(self, game_id: str) -> Cached | None:
        return self.games.take(game_id)

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
    ) -> tuple[str, list[dict[str, Any]]]:
        """Start a game; returns its id and each seat's name, secret token, the index of the
        request's player in that seat (`player_index`) and its `player_id` if given (R2.2).

        Two players whose names are the same once trimmed and compared without case are
        refused (422 `duplicate_player_name`): an app could not tell their seats apart.
        `seed` (tests and tools only; never taken from a request) fixes the draws."""
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
        ids = list(player_ids) if player_ids is not None else [None] * len(names)
        if len(ids) != len(names):
            raise MalformedError("bad_player_ids", "one player_id (or null) per player")
        kinds = list(bots) if bots is not None else [None] * len(names)
        if len(kinds) != len(names):
            raise MalformedError("bad_bots", "one bot (or null) per player")
        game_id = new_game_id()  # on an index shard's slot (services/redis_store/keys.py)
        seed = seed or secrets.token_hex(16)
        if seat_order is None:  # R2.2 Decision: a random first player, then clockwise
            first = random.Random(seed + ":seats").randrange(len(names))
            seat_order = [(first + i) % len(names) for i in range(len(names))]
        elif sorted(seat_order) != list(range(len(names))):
            raise MalformedError("bad_seat_order", "seat_order must list each player once", "R10.2")
        seats = [names[i] for i in seat_order]
        seat_ids = [ids[i] for i in seat_order]
        seat_bots = [kinds[i] for i in seat_order]
        # A bot seat has no token: nobody may play its turns but the bot worker.
        tokens = [None if b else secrets.token_urlsafe(24) for b in seat_bots]
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
        self.secrets.put(game_id, record)
        if any(seat_bots) and self.bots is not None:
            self.bots.expect(game_id)
        state = GameState()
        events = self._run(state, StartGame(ruleset, len(seats)))
        events = with_seats(events, seats, seat_ids)  # the log itself says who sits where
        events += self._draw_until_placeable(state, seed)
        # Nothing to score yet; but a game with an owner key wakes the worker all the same:
        # its subscriptions learn of the first turn when the worker has passed the start.
        wake = key_id is not None and self.notify is not None
        result = self.store.append(
            game_id,
            MOVES,
            [to_new(e) for e in events],
            expected=0,
            command_id="create",
            marker="$seq",
            notify_ms=self.notify_ms if wake else 0,
        )
        if wake and result.notify and self.notify is not None:
            self.notify(game_id)
        if seat_bots[state.current] and self.bots is not None:
            self.bots(game_id)  # a bot moves first
        players = []
        for seat, (index, token) in enumerate(zip(seat_order, tokens, strict=True)):
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
        return game_id, players

    def seat_of(self, cached: Cached, token: str | None) -> int:
        """The seat a bearer token belongs to."""
        if not token:
            raise AuthError("missing_token", "send Authorization: Bearer <player token>")
        seat = cached.secrets["tokens"].get(token_hash(token))
        if seat is None:
            raise Forbidden("bad_token", "this token belongs to no player of this game")
        return int(seat)

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

        `trust_cache` says that this process serves every command of the game (the command
        service's gunicorn worker routes each game to one worker: services/common/affinity.py),
        so a cached state is taken as current without reading the stream first — one Redis
        round trip less per turn. Nothing rests on that belief: the append is conditional on
        the cached sequence, so if another process did append meanwhile, the append is refused
        and the turn is decided again on the cached state caught up with the events after its
        sequence (never the whole game again); and a turn is only refused after its refusal
        was checked against the stream.
        """
        cached = self._take(game_id) if trust_cache else None
        checked = cached is None  # True: `cached` was caught up with the stream just now
        if cached is None:
            cached = self.load(game_id, take=True)
        any_id = uuid.uuid4().hex
        for _attempt in range(4):
            # Checked again after every catch-up: a re-issued token (TokenReissued) brought
            # fresh secrets, and the old token must stop working at once.
            try:
                seat = self.seat_of(cached, token)
            except GameError:
                self.keep(game_id, cached)
                raise
            if idempotency_key:
                command_id = f"turn:{seat}:{idempotency_key}"
                request = turn_fingerprint(game_id, seat, x, y, rotation, meeple, tile)
                request += ":recall_abbot" if recall else ""  # R9.2: another request
            else:
                command_id, request = any_id, ""
            if checked and idempotency_key:
                try:
                    replay = self._replayed(game_id, cached, command_id, request)
                except GameError:
                    self.keep(game_id, cached)  # nothing was decided on it yet
                    raise
                if replay is not None:
                    self.keep(game_id, cached)
                    return replay
            try:
                if expected_seq is not None and expected_seq != cached.seq:
                    raise OutOfTurnError(
                        "stale_sequence",
                        f"the game is at sequence {cached.seq}",
                        None,
                        expected=expected_seq,
                        actual=cached.seq,
                    )
                command = (
                    RecallAbbot(seat, x, y, rotation)
                    if recall
                    else PlayTurn(seat, x, y, rotation, meeple, tile)
                )
                events = decide(cached.state, command)
            except GameError:
                # A refusal may come from a cached state that is behind the stream (or be a
                # retry of a turn already played): check first.
                if not checked:
                    cached, checked = self._caught_up(game_id, cached, own=self.in_place), True
                    continue
                self.keep(game_id, cached)
                raise
            # The turn runs ahead of the stream on the cached state itself (no copy per turn):
            # if the append is refused (another process appended meanwhile), the state at the
            # cached sequence is rebuilt from its checkpoint in memory and catches up from
            # that sequence (XRANGE after it), never from 0.
            if self.in_place:
                cached.checkpoint()
                state = cached.state
            else:
                state = cached.state.copy()  # other threads may be reading `cached.state`
            try:
                events, new_events, result = self._apply_and_append(
                    game_id, cached, state, events, command_id, request
                )
            except CommandReused:
                # The key is in the stream already, for another request. Nothing was
                # appended; this state ran ahead of the stream, so it is not kept.
                raise IdempotencyKeyReused from None
            except ConcurrencyError:
                if expected_seq is not None:  # the client's If-Match is behind the stream too
                    raise OutOfTurnError(
                        "stale_sequence", "the game moved on; reload and retry", None
                    ) from None
                # Another process won: catch up from our sequence and decide again.
                cached, checked = (
                    self._caught_up(game_id, cached.before(state), own=self.in_place),
                    True,
                )
                continue
            if result.duplicate:
                # This command id is in the stream already: our own append, retried after its
                # first reply was lost, or a client's retry with the same Idempotency-Key that
                # got there first. Either way the answer is what was stored for it.
                cached, checked = (
                    self._caught_up(game_id, cached.before(state), own=self.in_place),
                    True,
                )
                self.keep(game_id, cached)
                replay = self._replayed(game_id, cached, command_id, request)
                if replay is not None:
                    return replay
                continue
            stored = stored_events(game_id, new_events, result, command_id)
            if not state.over:  # a finished game takes no more turns: no need to keep it
                self.keep(game_id, cached.advanced(state, result.last_seq, events))
            if result.notify and self.notify is not None:
                self.notify(game_id)
            self._hand_to_bot(game_id, cached.secrets, state)
            return TurnResult(stored, state, result.last_seq)
        raise OutOfTurnError("stale_sequence", "the game moved on; reload and retry", None)

    def resign(self, game_id: str, token: str | None) -> TurnResult:
        """The token's seat leaves the game (docs/lifecycle.md): `PlayerResigned`, then the next
        player's draw if it was this seat's turn, or the end with final scoring when fewer
        than two players are left. One conditional append; a seat resigns once, so its command
        id is fixed and a retry answers the first result."""
        command_id = ""
        for _attempt in range(4):
            cached = self.load(game_id)  # shared: read only, the command works on a copy
            seat = self.seat_of(cached, token)
            command_id = f"resign:{seat}"
            if cached.state.out[seat] is not None:
                replay = self._replayed(game_id, cached, command_id, "")
                if replay is not None:
                    return replay
            state = cached.state.copy()
            events = self._run(state, Resign(seat))
            events += self._draw_until_placeable(state, cached.secrets["seed"])
            try:
                result = self.store.append(
                    game_id,
                    MOVES,
                    [to_new(e) for e in events],
                    expected=cached.seq,
                    command_id=command_id,
                    marker="$seq",
                    notify_ms=self.notify_ms,
                )
            except ConcurrencyError:
                continue  # a move got in first: decide again on the game as it is now
            if result.duplicate:
                continue  # appended by an earlier try of ours: answered from the stream
            stored = stored_events(game_id, [to_new(e) for e in events], result, command_id)
            self.keep(game_id, Cached(state, result.last_seq, cached.secrets))
            if result.notify and self.notify is not None:
                self.notify(game_id)
            self._hand_to_bot(game_id, cached.secrets, state)  # a resignation may pass the turn
            return TurnResult(stored, state, result.last_seq)
        raise OutOfTurnError("stale_sequence", "the game moved on; retry", None)

    def _hand_to_bot(self, game_id: str, record: dict[str, Any], state: GameState) -> None:
        """Send the bot worker the game when its next turn is a bot seat's."""
        if self.bots is not None and not state.over and is_bot(record, state.current):
            self.bots(game_id)

    def reissue_token(self, game_id: str, seat: Any, key_id: str) -> dict[str, Any]:
        """A new secret token for a seat, asked for by the API key that created the game (a
        lost phone must not lose a game). The old token stops working at once: the secrets
        record is changed first, then `TokenReissued` is appended, so every process serving
        the game — whose cached state is now behind the stream, its next append refused —
        reloads the secrets before it accepts another command (docs/lifecycle.md)."""
        cached = self.load(game_id)
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
        token = secrets.token_urlsafe(24)
        if not self.secrets.replace_token(game_id, seat, token_hash(token)):
            raise NotFound("game_not_found", f"no game {game_id}")
        command_id = uuid.uuid4().hex
        for _attempt in range(4):
            # Conditional like any append, so it never lands after the game's end.
            try:
                result = self.store.append(
                    game_id,
                    MOVES,
                    [to_new(TokenReissued(seat))],
                    expected=cached.seq,
                    command_id=command_id,
                    marker="$seq",
                )
            except ConcurrencyError:
                cached = self.load(game_id)
                if cached.state.phase == OVER:
                    raise OutOfTurnError("game_over", "the game is over", "R7.1") from None
                continue
            return {"game_id": game_id, "seat": seat, "token": token, "seq": result.last_seq}
        raise OutOfTurnError("stale_sequence", "the game moved on; retry", None)

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
        decided: Callable[[GameState, int, dict[str, Any]], list[Event]],
        path: str,
        body: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Decide the seat's command (`decided(state, seat, secrets record)` gives its events) on
        the game caught up from its stream and append its
        events (with the next draws, if any) on the condition that the stream is still where
        it was read: the plain path for a seat's rarer commands (a turn has its own, faster
        one). The cached state is never changed in place here: the events apply to a copy.
        An `Idempotency-Key` is bound to (path, seat, body) as for a turn."""
        for _attempt in range(4):
            cached = self.load(game_id, take=True)
            try:
                seat = self.seat_of(cached, token)
                if idempotency_key:
                    command_id = f"cmd:{seat}:{idempotency_key}"
                    request = fingerprint("POST", path, {"seat": seat, **body})
                    replay = self._replayed(game_id, cached, command_id, request)
                    if replay is not None:
                        self.keep(game_id, cached)
                        return replay
                else:
                    command_id, request = uuid.uuid4().hex, ""
                events = decided(cached.state, seat, cached.secrets)
            except GameError:
                self.keep(game_id, cached)
                raise
            state = cached.state.copy()
            try:
                events, new_events, result = self._apply_and_append(
                    game_id, cached, state, events, command_id, request
                )
            except CommandReused:
                self.keep(game_id, cached)
                raise IdempotencyKeyReused from None
            except ConcurrencyError:
                self.keep(game_id, cached)  # another process appended: read and decide again
                continue
            if result.duplicate:
                self.keep(game_id, cached)
                continue  # appended before (a retry): the next attempt answers its result
            stored = stored_events(game_id, new_events, result, command_id)
            if not state.over:
                self.keep(game_id, cached.advanced(state, result.last_seq, events))
            if result.notify and self.notify is not None:
                self.notify(game_id)  # an undo may revert scores: the worker follows
            # A refused undo lets a bot to move play now (it waited for the answer).
            self._hand_to_bot(game_id, cached.secrets, state)
            return TurnResult(stored, state, result.last_seq)
        raise OutOfTurnError("stale_sequence", "the game moved on; reload and retry", None)

    def _apply_and_append(
        self,
        game_id: str,
        cached: Cached,
        state: GameState,
        events: list[Event],
        command_id: str,
        request: str,
    ) -> tuple[list[Event], list[NewEvent], AppendResult]:
        """Apply a decided command's `events` to `state`, add the draws that follow, and
        append them all on the condition that the stream is still at `cached.seq`.

        The one append of every seat command (a turn and the rarer ones): its exceptions
        (`CommandReused`, `ConcurrencyError`) are the caller's to handle.
        """
        for event in events:
            state.apply(event)
        events = events + self._draw_until_placeable(state, cached.secrets["seed"])
        new_events = [to_new(e) for e in events]
        result = self.store.append(
            game_id,
            MOVES,
            new_events,
            expected=cached.seq,
            command_id=command_id,
            marker="$seq",  # "moves up to here exist": the worker compares its progress
            notify_ms=self.notify_ms,
            fingerprint=request,  # bound to the command id in the same script
        )
        return events, new_events, result

    def _replayed(
        self, game_id: str, cached: Cached, command_id: str, request: str
    ) -> TurnResult | None:
        """The original result of a command id already appended, if it was (and came from
        the same request: else `IdempotencyKeyReused`)."""
        done = self.store.command_result(game_id, MOVES, command_id)
        if done is None:
            return None
        check_reuse(done.fingerprint, request)
        events = self.store.read(
            game_id, MOVES, after=done.first_seq - 1, limit=done.last_seq - done.first_seq + 1
        )
        return TurnResult(events, cached.state, done.last_seq, replayed=True)

    def _run(self, state: GameState, command: Any) -> list[Event]:
        events = decide(state, command)
        for event in events:
            state.apply(event)
        return events

    @staticmethod
    def _draw_until_placeable(state: GameState, seed: str) -> list[Event]:
        """Draw for the next player (R4.4), the turn's clock starting now (a turn limit)."""
        return draw_until_placeable(state, seed, now_ms())

    # -- hints and views ----------------------------------------------------------------
    def hint(self, game_id: str, token: str | None, level: str, think_ms: int) -> dict[str, Any]:
        """The move bot `level` would play now for the token's seat (services/command/hints.py)."""
        cached = self.load(game_id)
        return hints.hint(
            self._hints, game_id, cached, self.seat_of(cached, token), level, think_ms
        )

    def turn_view(self, game_id: str) -> dict[str, Any]:
        """Whose turn, the drawn tile, and every legal placement with its meeple spots."""
        return views.turn_view(game_id, self.load(game_id))

    def hand_view(self, game_id: str, token: str | None) -> dict[str, Any]:
        """R10.3: the token's seat's own hand (services/command/views.py `hand_view`)."""
        cached = self.load(game_id)
        return views.hand_view(game_id, cached, self.seat_of(cached, token))


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
