"""The command side's service layer: create games, play turns, describe the turn to play.

It folds the move stream with the engine, decides commands, draws tiles with the game's
secret seed, and appends every resulting event in one conditional, idempotent append. A
rejected command appends nothing. States are cached per process with their sequence and
caught up from the stream, so a late turn costs what an early one does.
"""

from __future__ import annotations

import hashlib
import random
import secrets
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import Counter

from carcassonne.bots import Budget, choose, choose_in_hand, hand_views, player_view
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
from carcassonne.game import RECALL_ABBOT, actions, decide, hand_actions, hand_of
from carcassonne.ruleset import Ruleset
from carcassonne.state import OVER, PLACE, GameState
from carcassonne.tiles import Meeple
from carcassonne.undo import undo_voters
from eventstore.envelope import MOVES, AppendResult, NewEvent, StoredEvent
from eventstore.errors import CommandReused, ConcurrencyError
from eventstore.port import EventStore
from eventstore.schemas import to_engine, to_new
from services.common.body import fingerprint
from services.common.draws import draw_until_placeable, opened
from services.redis_store.bot_index import is_bot
from services.redis_store.keys import new_game_id

# What a turn costs beyond its append: move events read from the stream to bring a cached state
# up to date (a cold load reads the whole game). With each game served by one process it stays
# near 0 per turn; tests/bench/bench_instances.py reads it from /metrics.
EVENTS_READ = Counter(
    "carcassonne_events_read_total",
    "Move events read from the stream to catch a cached game state up (XRANGE entries)",
)
HINTS = Counter(
    "carcassonne_hints_total",
    "Hints answered, by level and whether the bot searched or a kept hint was sent",
    ["level", "source"],
)
HINTS_KEPT = 1_024  # positions whose hints a process keeps (one search per position and level)


def status_of(state: GameState) -> str:
    """A game's status as views and `GET /games?status=` name it."""
    if state.phase != OVER:
        return "in_progress"
    return "abandoned" if state.abandoned else "over"


def now_ms() -> int:
    """The service's clock (Unix ms): deadlines are computed here, never in the engine."""
    return int(time.time() * 1000)


class NotFound(GameError):
    """No such game."""

    status = 404


class AuthError(GameError):
    """Missing or unknown player token."""

    status = 401


class Forbidden(GameError):
    """A valid token of another seat."""

    status = 403


class IdempotencyKeyReused(GameError):
    """An Idempotency-Key sent again with a different request: 422, nothing done."""

    def __init__(self) -> None:
        super().__init__(
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different request; "
            "send a new key with a new request",
        )


def check_reuse(stored: str, given: str) -> None:
    """`IdempotencyKeyReused` when a key's stored request fingerprint is not this request's
    (an empty one, from before fingerprints were stored, is taken as a match)."""
    if stored and given and stored != given:
        raise IdempotencyKeyReused


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


class Secrets(Protocol):
    """Per-game secrets kept outside the event log: token hashes and the draw seed."""

    def put(self, game_id: str, data: dict[str, Any]) -> None:
        """Store a new game's secrets."""

    def put_new(self, game_id: str, data: dict[str, Any]) -> bool:
        """Store a game's secrets unless it has some already; True if these were stored."""

    def get(self, game_id: str) -> dict[str, Any] | None:
        """A game's secrets, or None for an unknown game."""

    def replace_token(self, game_id: str, seat: int, token_hash: str) -> bool:
        """Make `token_hash` the seat's only token (the old one stops matching); False if
        the game has no secrets."""


class MemorySecrets:
    """`Secrets` in a dict (unit tests)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}

    def put(self, game_id: str, data: dict[str, Any]) -> None:
        """See `Secrets.put`."""
        self._data[game_id] = data

    def put_new(self, game_id: str, data: dict[str, Any]) -> bool:
        """See `Secrets.put_new`."""
        return self._data.setdefault(game_id, data) is data

    def get(self, game_id: str) -> dict[str, Any] | None:
        """See `Secrets.get`."""
        return self._data.get(game_id)

    def replace_token(self, game_id: str, seat: int, token_hash: str) -> bool:
        """See `Secrets.replace_token`."""
        record = self._data.get(game_id)
        if record is None:
            return False
        tokens = {h: s for h, s in record["tokens"].items() if s != seat}
        self._data[game_id] = {**record, "tokens": {**tokens, token_hash: seat}}
        return True


def token_hash(token: str) -> str:
    """Tokens are stored hashed: a leaked secrets record does not let anyone play."""
    return hashlib.sha256(token.encode()).hexdigest()


# Events a cached game keeps since its last checkpoint before it takes a new one (a copy of
# the state): a turn's events are applied to the cached state in place, and a refused append
# rebuilds the state at the cached sequence from the checkpoint and these events. A copy per
# turn cost ~50 µs; one per this many events costs a few µs a turn.
CHECKPOINT_EVENTS = 64


@dataclass
class Cached:
    """A game's state at `seq` (the last move event it reflects), with its secrets record.

    `base` is a copy of the state at `base_seq` and `since` the engine events applied after
    it up to `seq`, all in memory: a turn runs ahead of the stream on `state` itself, and if
    its append is refused, `rewound` gives the state at `seq` again without reading the
    stream (the events after `seq` are then read, never the whole game).
    """

    state: GameState
    seq: int
    secrets: dict[str, Any]
    base: GameState | None = None
    base_seq: int = 0
    since: list[Event] = field(default_factory=list)

    def checkpoint(self) -> None:
        """Make sure `state` can be rewound to `seq` after it is changed in place."""
        if self.base is None or len(self.since) >= CHECKPOINT_EVENTS:
            self.base, self.base_seq, self.since = self.state.copy(), self.seq, []

    def advanced(self, state: GameState, seq: int, events: list[Event]) -> Cached:
        """The cache entry for `state` at `seq`: this one's with `events` applied."""
        if self.base is None:
            return Cached(state, seq, self.secrets)
        return Cached(state, seq, self.secrets, self.base, self.base_seq, self.since + events)

    def rewound(self) -> Cached:
        """The state at `seq` again, rebuilt from the checkpoint (the state ran ahead)."""
        if self.base is None:
            raise AssertionError("a cached state changed in place without a checkpoint")
        state = self.base.copy()
        for event in self.since:
            state.apply(event)
        return Cached(state, self.seq, self.secrets, self.base, self.base_seq, self.since)


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
        self._cache: dict[str, Cached] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # Hints already worked out, by (game, seq, level): an mcts hint holds this worker for
        # up to HINT_THINK_MS, and a client asking again (or a thousand times) for the same
        # position gets the same answer at once. Each position costs one search per level.
        self._hints: OrderedDict[tuple[str, int, str], dict[str, Any]] = OrderedDict()

    # -- loading ----------------------------------------------------------------------
    def load(self, game_id: str, take: bool = False) -> Cached:
        """The game's state caught up to the end of its move stream.

        With `take`, the cached state is removed from the cache and handed over to be
        changed in place (a command puts it back with `keep` once its append succeeded);
        otherwise the cached state is shared and must only be read.
        """
        if take:
            cached = self._take(game_id)
        else:
            with self._lock:
                cached = self._cache.get(game_id)
        if cached is None:
            found = self.secrets.get(game_id)
            if found is None:
                raise NotFound("game_not_found", f"no game {game_id}")
            cached = Cached(GameState(), 0, found)
        # A state at sequence 0 is new here; a taken one is ours alone when one thread runs.
        own = (take and self.in_place) or cached.seq == 0
        cached = self._caught_up(game_id, cached, own=own)
        if cached.seq == 0:
            raise NotFound("game_not_found", f"no game {game_id}")
        if not take:
            self.keep(game_id, cached)
        return cached

    def _caught_up(self, game_id: str, cached: Cached, own: bool) -> Cached:
        """`cached` with the moves appended since its sequence applied (in place if `own`)."""
        fresh = self.store.read(game_id, MOVES, after=cached.seq)
        if not fresh:
            return cached
        EVENTS_READ.inc(len(fresh))
        if not own:
            cached = Cached(cached.state.copy(), cached.seq, cached.secrets)
        events = []
        seed = cached.secrets["seed"]
        for stored in fresh:
            event = opened(cached.state, to_engine(stored), seed)  # R10.3: hands known here
            cached.state.apply(event)
            events.append(event)
        advanced = cached.advanced(cached.state, fresh[-1].seq, events)
        if any(isinstance(e, TokenReissued) for e in events):
            # A seat's token was replaced: the cached token hashes are stale from here on.
            advanced.secrets = self.secrets.get(game_id) or advanced.secrets
        return advanced

    def keep(self, game_id: str, cached: Cached) -> None:
        """Cache a state (unless a newer one is there already)."""
        with self._lock:
            current = self._cache.get(game_id)
            if current is None or current.seq <= cached.seq:
                if current is None and len(self._cache) >= self._cache_size:
                    self._cache.pop(next(iter(self._cache)))  # the oldest entry
                self._cache[game_id] = cached

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
                    self._caught_up(game_id, self._before_turn(cached, state), own=self.in_place),
                    True,
                )
                continue
            if result.duplicate:
                # This command id is in the stream already: our own append, retried after its
                # first reply was lost, or a client's retry with the same Idempotency-Key that
                # got there first. Either way the answer is what was stored for it.
                cached, checked = (
                    self._caught_up(game_id, self._before_turn(cached, state), own=self.in_place),
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

    @staticmethod
    def _before_turn(cached: Cached, state: GameState) -> Cached:
        """`cached` as it was before a turn ran ahead on `state` (rebuilt if in place)."""
        return cached.rewound() if state is cached.state else cached

    def _take(self, game_id: str) -> Cached | None:
        """Remove a game's cached state from the cache, to be changed in place."""
        with self._lock:
            return self._cache.pop(game_id, None)

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

    def hint(self, game_id: str, token: str | None, level: str, think_ms: int) -> dict[str, Any]:
        """The move bot `level` would play now for the token's seat, with its estimated
        value; only in a game whose ruleset allows hints, and only for the seat to move.

        The bot sees `player_view(state)` (no draw seed) and its generator is seeded by the
        game and sequence, so the same position gets the same hint (greedy, random); a hint
        worked out once is kept (`HINTS_KEPT` positions), so it is the same at every level
        and asking again costs no search."""
        cached = self.load(game_id)
        seat = self.seat_of(cached, token)
        state = cached.state
        key = (game_id, cached.seq, level)
        with self._lock:
            known = self._hints.get(key)
        if known is not None and known["player"] == seat:
            HINTS.labels(level, "kept").inc()
            return dict(known)
        if not state.ruleset.hints:
            raise Forbidden(
                "hints_disabled", "this game's ruleset does not allow hints (ruleset.hints)"
            )
        if state.over:
            raise OutOfTurnError("game_over", "the game is over", "R7.1")
        if seat != state.current:
            raise OutOfTurnError(
                "not_your_turn",
                f"it is player {state.current}'s turn",
                "R2.2",
                current=state.current,
            )
        budget = Budget(think_ms=think_ms, clock=time.perf_counter)
        started = time.perf_counter()
        tile = state.drawn
        if state.hands:  # R10.3: the bot weighs each tile of the seat's own hand
            tile, choice = choose_in_hand(
                level, hand_views(state), f"hint:{game_id}:{cached.seq}", budget
            )
        else:
            choice = choose(level, player_view(state), f"hint:{game_id}:{cached.seq}", budget)
        x, y, rotation, meeple = choice.action
        hint = {
            "game_id": game_id,
            "seq": cached.seq,
            "player": seat,
            "tile": tile,
            "level": level,
            "x": x,
            "y": y,
            "rotation": rotation,
            "meeple": None if meeple is None else meeple_to_dict(meeple),
            "value": round(choice.value, 2),
            "playouts": choice.playouts,
            "think_ms": int((time.perf_counter() - started) * 1000),
        }
        HINTS.labels(level, "searched").inc()
        with self._lock:
            self._hints[key] = hint
            while len(self._hints) > HINTS_KEPT:
                self._hints.popitem(last=False)
        return dict(hint)

    # -- views ------------------------------------------------------------------------
    def turn_view(self, game_id: str) -> dict[str, Any]:
        """Whose turn, the drawn tile, and every legal placement with its meeple spots."""
        cached = self.load(game_id)
        state = cached.state
        options: dict[tuple[int, int, int], list[Any]] = {}
        recalls: set[tuple[int, int, int]] = set()  # R9.2: placements that may take it back
        for x, y, rotation, meeple in actions(state):
            spots = options.setdefault((x, y, rotation), [])
            if meeple == RECALL_ABBOT:
                recalls.add((x, y, rotation))
            elif meeple is not None:
                spots.append(meeple_to_dict(meeple))
        view: dict[str, Any] = {
            "game_id": game_id,
            "seq": cached.seq,
            "over": state.phase == OVER,
            "player": None if state.phase == OVER else state.current,
            "player_name": None if state.phase == OVER else cached.secrets["names"][state.current],
            "tile": state.drawn,
            "tiles_left": state.bag_size,
            "scores": list(state.scores),
            "supply": list(state.supply),
            "placements": [
                {"x": x, "y": y, "rotation": r, "meeples": spots}
                | ({"recall_abbot": True} if (x, y, r) in recalls else {})
                for (x, y, r), spots in options.items()
            ],
            "deadline_ms": state.deadline_ms,
            "out": list(state.out),
            "status": status_of(state),
        }
        if state.phase == OVER:
            view["seed"] = cached.secrets["seed"]  # R2.1 Decision: revealed once the game ends
        if state.ruleset.undo != "off":
            view["undo"] = undo_view(state)
        if state.hands:  # R10.3: how many tiles each seat holds; which, only once it is over
            view["hand_sizes"] = [len(hand) for hand in state.hands]
            if state.phase == OVER:
                view["hands"] = state.hand_lists()
        return view

    def hand_view(self, game_id: str, token: str | None) -> dict[str, Any]:
        """R10.3: the token's seat's own hand, and when it is that seat's move every legal
        (tile, placement) with its meeple spots. Nobody else's hand: the seat comes from the
        token. Once the game is over every hand is public (the turn view's `hands`)."""
        cached = self.load(game_id)
        seat = self.seat_of(cached, token)
        state = cached.state
        if not state.hands:
            raise OutOfTurnError(
                "no_hand", "this game is played without a hand (ruleset hand 1)", "R10.3"
            )
        to_move = state.phase == PLACE and state.current == seat
        placements: list[dict[str, Any]] = []
        if to_move:
            options: dict[tuple[str, int, int, int], list[Any]] = {}
            for tile, (x, y, rotation, meeple) in hand_actions(state):
                spots = options.setdefault((tile, x, y, rotation), [])
                if meeple is not None:
                    spots.append(meeple_to_dict(meeple))
            placements = [
                {"tile": tile, "x": x, "y": y, "rotation": r, "meeples": spots}
                for (tile, x, y, r), spots in options.items()
            ]
        return {
            "game_id": game_id,
            "seq": cached.seq,
            "player": seat,
            "hand": hand_of(state, seat),
            "to_move": to_move,
            "placements": placements,
        }


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


def undo_view(state: GameState) -> dict[str, Any]:
    """What a client needs to offer undo: who may ask now (None: nobody) and the last
    placement's request, if any (its deadline is the client's to compare with its clock)."""
    point, pending = state.undo_point, state.undo
    return {
        "mode": state.ruleset.undo,
        "may_request": point.current if point is not None and pending is None else None,
        "request": None if pending is None else pending.to_dict(),
    }
