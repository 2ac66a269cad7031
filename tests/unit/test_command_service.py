"""The command service layer on its in-memory adapters (no Redis, no HTTP)."""

from __future__ import annotations

import pytest

from carcassonne.errors import GameError
from carcassonne.ruleset import Ruleset
from eventstore.envelope import MOVES
from eventstore.port import InMemoryEventStore
from services.command.service import GameService, MemorySecrets, draw_tile


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
        assert (game_id in service._cache) == (not result.state.over)
    assert game_id not in service._cache or service._cache[game_id].state.over
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
