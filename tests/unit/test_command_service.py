"""The command service layer on its in-memory adapters (no Redis, no HTTP)."""

from __future__ import annotations

import random

import pytest

from carcassonne.errors import GameError
from carcassonne.events import meeple_from_dict
from carcassonne.record import record_from_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from eventstore.envelope import MOVES
from eventstore.port import InMemoryEventStore
from services.command.errors import IdempotencyKeyReused
from services.command.handlers import turn_fingerprint
from services.command.imports import import_fingerprint, import_game, import_game_id
from services.command.records import replay_record
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService
from services.common.draws import draw_tile


def make() -> tuple[GameService, InMemoryEventStore]:
    store = InMemoryEventStore()
    return GameService(store, MemorySecrets()), store


def test_draws_are_reproducible_from_the_seed_and_stay_inside_the_bag() -> None:
    bag = {"A": 1, "C": 1, "V": 9}
    picks = [draw_tile("seed", n, bag) for n in range(50)]
    assert picks == [draw_tile("seed", n, bag) for n in range(50)]
    assert set(picks) <= set(bag) and len(set(picks)) > 1
    assert draw_tile("s", 0, {"X": 1}) == "X"


def test_a_rejected_turn_appends_nothing_and_keeps_the_cached_state_usable() -> None:
    """R4.1: a tile far from the board is refused; the next legal turn still works."""
    service, store = make()
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(), seat_order=[0, 1])
    before = store.last_seq(game_id, MOVES)
    with pytest.raises(GameError) as info:
        service.play_turn(game_id, seats[0]["token"], 40, 40, 0, None)
    assert (info.value.code, info.value.rule) == ("not_adjacent", "R4.1")
    assert store.last_seq(game_id, MOVES) == before
    x, y, rotation = next(
        (p["x"], p["y"], p["rotation"]) for p in service.turn_view(game_id)["placements"]
    )
    result = service.play_turn(game_id, seats[0]["token"], x, y, rotation, None)
    assert result.events[0].type == "TilePlaced"
    assert result.seq == store.last_seq(game_id, MOVES) > before


def test_the_seat_order_decides_who_moves_first() -> None:
    """R2.2 / R10.2: seat_order [1, 0] puts bob in seat 0, to move first."""
    service, _ = make()
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(), seat_order=[1, 0])
    assert [s["name"] for s in seats] == ["bob", "ann"]
    view = service.turn_view(game_id)
    assert (view["player"], view["player_name"]) == (0, "bob")
    with pytest.raises(GameError) as info:
        service.play_turn(game_id, seats[1]["token"], 0, -1, 0, None)
    assert info.value.code == "not_your_turn"


def test_a_finished_game_leaves_the_state_cache_and_its_view_still_answers() -> None:
    """A game over (R7.1) takes no more turns: its state is not kept after the last one."""
    service, store = make()
    ruleset = Ruleset(tileset="demo")
    game_id, seats = service.create_game(["ann", "bob"], ruleset, seat_order=[0, 1])
    while not (view := service.turn_view(game_id))["over"]:
        spot = view["placements"][0]
        token = seats[view["player"]]["token"]
        result = service.play_turn(game_id, token, spot["x"], spot["y"], spot["rotation"], None)
        assert (game_id in service.games.kept) == (not result.state.over)
    assert game_id not in service.games.kept or service.games.kept[game_id].state.over
    assert view["seed"] and view["seq"] == store.last_seq(game_id, MOVES)


class LostReplyStore(InMemoryEventStore):
    """Appends, then answers the first append as a retry would: "already there"."""

    lost = 0

    def append(self, game_id, stream, events, **kwargs):
        result = super().append(game_id, stream, events, **kwargs)
        if kwargs.get("command_id", "").startswith("create") or self.lost:
            return result
        self.lost += 1
        return super().append(game_id, stream, events, **kwargs)  # the retry: a duplicate


def test_a_retried_append_whose_first_reply_was_lost_answers_the_stored_turn() -> None:
    store = LostReplyStore()
    service = GameService(store, MemorySecrets())
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(), seat_order=[0, 1])
    spot = service.turn_view(game_id)["placements"][0]
    before = store.last_seq(game_id, MOVES)
    result = service.play_turn(
        game_id, seats[0]["token"], spot["x"], spot["y"], spot["rotation"], None
    )
    assert store.lost == 1 and result.replayed
    assert [e.seq for e in result.events] == list(
        range(before + 1, store.last_seq(game_id, MOVES) + 1)
    )
    assert result.events[0].type == "TilePlaced"
    assert service.turn_view(game_id)["player"] == 1  # the turn happened once


# -- trust_cache: a process that serves every command of a game skips the catch-up read ------
class CountingStore(InMemoryEventStore):
    """Counts catch-up reads, so a test can tell whether the stream was read."""

    reads = 0

    def read(self, game_id, stream, after=0, limit=None):
        self.reads += 1
        return super().read(game_id, stream, after, limit)


def _legal_turn(service: GameService, game_id: str) -> tuple[int, int, int, int]:
    view = service.turn_view(game_id)
    spot = view["placements"][0]
    return view["player"], spot["x"], spot["y"], spot["rotation"]


def _two_processes() -> tuple[GameService, GameService, CountingStore, str, list[dict]]:
    """Two services on one store and one set of secrets: two worker processes."""
    store, secrets = CountingStore(), MemorySecrets()
    owner, other = GameService(store, secrets), GameService(store, secrets)
    game_id, seats = owner.create_game(["ann", "bob"], Ruleset(), seat_order=[0, 1])
    return owner, other, store, game_id, seats


def test_a_trusted_cache_plays_a_turn_without_reading_the_stream() -> None:
    owner, _, store, game_id, seats = _two_processes()
    seat, x, y, rotation = _legal_turn(owner, game_id)  # caches the state
    reads = store.reads
    result = owner.play_turn(game_id, seats[seat]["token"], x, y, rotation, None, trust_cache=True)
    assert store.reads == reads  # the cached state was taken as current: one append, no read
    assert result.seq == store.last_seq(game_id, MOVES)


def test_a_trusted_cache_that_fell_behind_is_refolded_and_the_turn_still_lands() -> None:
    """Another process played a turn: the owner's cached state is one turn behind. Its turn
    is refused by the conditional append, folded again from the stream and decided again; the
    stream equals a fold of itself and holds both turns."""
    owner, other, store, game_id, seats = _two_processes()
    _legal_turn(owner, game_id)  # the owner caches the state at the game's start
    seat, x, y, rotation = _legal_turn(other, game_id)
    other.play_turn(game_id, seats[seat]["token"], x, y, rotation, None)
    seat2, x2, y2, rotation2 = _legal_turn(other, game_id)
    assert seat2 != seat  # R3: the next player
    played = owner.play_turn(
        game_id, seats[seat2]["token"], x2, y2, rotation2, None, trust_cache=True
    )
    assert played.seq == store.last_seq(game_id, MOVES)
    placed = [e for e in store.read(game_id, MOVES) if e.type == "TilePlaced"]
    assert [(e.payload["x"], e.payload["y"]) for e in placed] == [(x, y), (x2, y2)]
    fresh = GameService(store, owner.secrets).load(game_id)
    assert fresh.state.scores == played.state.scores and fresh.state.current == played.state.current


def test_a_turn_the_stale_cache_would_allow_is_refused_by_the_stream() -> None:
    """The owner's stale cache says it is still the first player's turn; the stream says the
    second's (R3). The first player's repeated turn is refused (the conditional append fails and
    the turn is decided again on the stream's state) and appends nothing; the second player's
    turn then lands."""
    owner, other, store, game_id, seats = _two_processes()
    _legal_turn(owner, game_id)
    seat, x, y, rotation = _legal_turn(other, game_id)
    other.play_turn(game_id, seats[seat]["token"], x, y, rotation, None)
    before = store.last_seq(game_id, MOVES)
    with pytest.raises(GameError) as info:
        owner.play_turn(game_id, seats[seat]["token"], x, y, rotation, None, trust_cache=True)
    assert info.value.code in ("not_your_turn", "occupied")
    assert store.last_seq(game_id, MOVES) == before
    seat2, x2, y2, rotation2 = _legal_turn(other, game_id)
    result = owner.play_turn(
        game_id, seats[seat2]["token"], x2, y2, rotation2, None, trust_cache=True
    )
    assert result.seq == store.last_seq(game_id, MOVES) > before


def test_a_trusted_retry_with_the_same_idempotency_key_answers_the_original_turn() -> None:
    owner, _, store, game_id, seats = _two_processes()
    seat, x, y, rotation = _legal_turn(owner, game_id)
    token = seats[seat]["token"]
    first = owner.play_turn(game_id, token, x, y, rotation, None, "k1", trust_cache=True)
    after = store.last_seq(game_id, MOVES)
    again = owner.play_turn(game_id, token, x, y, rotation, None, "k1", trust_cache=True)
    assert again.replayed and not first.replayed
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in first.events]
    assert store.last_seq(game_id, MOVES) == after


def test_a_trusted_cache_behind_the_stream_accepts_the_clients_correct_if_match() -> None:
    """If-Match names the stream's sequence, which the stale cache has not reached yet."""
    owner, other, store, game_id, seats = _two_processes()
    _legal_turn(owner, game_id)
    seat, x, y, rotation = _legal_turn(other, game_id)
    other.play_turn(game_id, seats[seat]["token"], x, y, rotation, None)
    seat2, x2, y2, rotation2 = _legal_turn(other, game_id)
    current = store.last_seq(game_id, MOVES)
    result = owner.play_turn(
        game_id, seats[seat2]["token"], x2, y2, rotation2, None,
        expected_seq=current, trust_cache=True,
    )  # fmt: skip
    assert result.seq > current
    with pytest.raises(GameError) as info:  # and a stale If-Match is still refused
        seat3, x3, y3, rotation3 = _legal_turn(other, game_id)
        owner.play_turn(
            game_id, seats[seat3]["token"], x3, y3, rotation3, None,
            expected_seq=current, trust_cache=True,
        )  # fmt: skip
    assert info.value.code == "stale_sequence"


# -- Idempotency-Key bound to the request (IETF Idempotency-Key draft, Stripe) ----------------
def _placements(service: GameService, game_id: str) -> tuple[int, list[tuple[int, int, int]]]:
    view = service.turn_view(game_id)
    return view["player"], [(p["x"], p["y"], p["rotation"]) for p in view["placements"]]


def test_a_key_reused_for_another_turn_is_refused_and_appends_nothing() -> None:
    service, store = make()
    game_id, seats = service.create_game(["ann", "bob"], Ruleset(), seat_order=[0, 1])
    seat, spots = _placements(service, game_id)
    token = seats[seat]["token"]
    first = service.play_turn(game_id, token, *spots[0], None, "k1")
    after = store.last_seq(game_id, MOVES)
    with pytest.raises(IdempotencyKeyReused) as info:
        service.play_turn(game_id, token, *spots[1], None, "k1")
    assert (info.value.code, info.value.status) == ("idempotency_key_reused", 422)
    assert store.last_seq(game_id, MOVES) == after
    again = service.play_turn(game_id, token, *spots[0], None, "k1")  # the same request
    assert again.replayed and again.seq == first.seq
    # The key is per seat: the other seat's "k1" is another command, and plays normally.
    seat2, spots2 = _placements(service, game_id)
    assert service.play_turn(game_id, seats[seat2]["token"], *spots2[0], None, "k1").seq > after


def test_a_trusted_cache_meets_a_reused_key_in_the_append_itself() -> None:
    """The owner decides a legal later turn from its cache without reading the stream; the
    key it carries was bound to the seat's first turn. The append script refuses it
    (CommandReused), nothing is appended, and the game goes on."""
    owner, _, store, game_id, seats = _two_processes()
    seat, x, y, rotation = _legal_turn(owner, game_id)
    token = seats[seat]["token"]
    owner.play_turn(game_id, token, x, y, rotation, None, "k1", trust_cache=True)
    other_seat, x2, y2, rotation2 = _legal_turn(owner, game_id)
    owner.play_turn(game_id, seats[other_seat]["token"], x2, y2, rotation2, None, trust_cache=True)
    assert _legal_turn(owner, game_id)[0] == seat  # the first seat's turn again, legal spots
    _, x3, y3, rotation3 = _legal_turn(owner, game_id)
    before, reads = store.last_seq(game_id, MOVES), store.reads
    with pytest.raises(IdempotencyKeyReused):
        owner.play_turn(game_id, token, x3, y3, rotation3, None, "k1", trust_cache=True)
    assert store.reads == reads  # decided from the cache: the append script caught it
    assert store.last_seq(game_id, MOVES) == before
    played = owner.play_turn(game_id, token, x3, y3, rotation3, None, "k2", trust_cache=True)
    assert played.seq > before and not played.replayed


def test_a_turn_fingerprint_names_the_game_seat_placement_and_meeple() -> None:
    city = meeple_from_dict({"edge": "N", "feature": "city"})
    assert turn_fingerprint("g", 0, 1, 2, 3, city) == turn_fingerprint(
        "g", 0, 1, 2, 3, meeple_from_dict({"feature": "city", "edge": "N"})
    )
    variants = {turn_fingerprint("g", 0, 1, 2, 3, city), turn_fingerprint("g", 0, 1, 2, 3, None),
                turn_fingerprint("g", 1, 1, 2, 3, city), turn_fingerprint("g", 0, 1, 2, 0, city),
                turn_fingerprint("h", 0, 1, 2, 3, city)}  # fmt: skip
    assert len(variants) == 5


def test_import_with_a_key_makes_one_game_and_refuses_another_record() -> None:
    service, store = make()
    rng = random.Random(3)
    records = [record_from_events(random_game(rng, 2, Ruleset())[1]) for _ in range(2)]
    first_replay = replay_record(records[0])
    made = import_game(service, first_replay, ["a", "b"], "k_1", "key-1")
    again = import_game(service, replay_record(records[0]), ["a", "b"], "k_1", "key-1")
    assert (again.game_id, again.seq, again.replayed) == (made.game_id, made.seq, True)
    assert not made.replayed and store.last_seq(made.game_id, MOVES) == made.seq
    with pytest.raises(IdempotencyKeyReused):  # another record under the same key
        import_game(service, replay_record(records[1]), ["a", "b"], "k_1", "key-1")
    with pytest.raises(IdempotencyKeyReused):  # the same record, other names
        import_game(service, first_replay, ["a", "c"], "k_1", "key-1")
    with pytest.raises(IdempotencyKeyReused):  # the same record, now asked to be rated
        import_game(service, first_replay, ["a", "b"], "k_1", "key-1", rated=True)
    assert (service.secrets.get(made.game_id) or {})["names"] == ["a", "b"]
    other_key = import_game(service, first_replay, ["a", "b"], "k_2", "key-1")
    assert other_key.game_id != made.game_id and not other_key.replayed
    # Without a key every import is a new game.
    assert import_game(service, first_replay, ["a", "b"], "k_1").game_id != made.game_id


def test_an_import_whose_first_attempt_stopped_before_its_append_is_finished_by_the_retry():
    """The first attempt wrote the secrets (SET NX) and died before its append: the retry
    with the same key and record appends the game itself."""
    service, store = make()
    replayed = replay_record(record_from_events(random_game(random.Random(4), 3, Ruleset())[1]))
    game_id = import_game_id("k_1", "key-9")
    assert service.secrets.put_new(
        game_id,
        {"names": ["a", "b", "c"], "seed": None, "tokens": {},
         "imported": {"key_id": "k_1", "time_ms": 0,
                      "fingerprint": import_fingerprint("k_1", replayed, ["a", "b", "c"])}},
    )  # fmt: skip
    done = import_game(service, replayed, ["a", "b", "c"], "k_1", "key-9")
    assert (done.game_id, done.replayed) == (game_id, False)
    assert store.last_seq(game_id, MOVES) == done.seq == len(replayed.events)
