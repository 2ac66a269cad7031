"""R10.3 three-tile hand: each player holds three tiles, plays one a turn and draws back to
three; the hand is hidden in the public log by commitments (docs/rules.md, "R10.3
three-tile hand").

The start tile D (C R F R: city N, road W–E, field S) lies at (0,0); y grows south.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from carcassonne.errors import GameError, IllegalMoveError, MalformedError
from carcassonne.events import (
    DiscardTile,
    DrawTile,
    EndGame,
    Event,
    GameEnded,
    HandDrawn,
    HandsRevealed,
    PlayTurn,
    StartGame,
    TileDiscarded,
    TilePlaced,
    TileReturned,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import decide, hand_actions, hand_of, is_unplaceable
from carcassonne.hand import commit, seal, unseal_all, verify
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import DRAW, OVER, PLACE, GameState
from carcassonne.tiles import CITY, Meeple

HAND = Ruleset(hand=3)


class Table:
    """A hand game driven command by command; `events` is the engine's (unsealed) log."""

    def __init__(self, ruleset: Ruleset = HAND, players: int = 2) -> None:
        self.state = GameState()
        self.events: list[Event] = []
        self.draws = 0
        self.run(StartGame(ruleset, players))

    def run(self, command: object) -> list[Event]:
        events = decide(self.state, command)  # type: ignore[arg-type]
        for event in events:
            self.state.apply(event)
        self.events += events
        return events

    def draw(self, *tiles: str) -> None:
        for tile in tiles:
            self.run(DrawTile(tile, nonce=f"nonce-{self.draws}"))
            self.draws += 1


def test_r10_3_ruleset_key_defaults_to_one_and_records_three() -> None:
    """R10.3: `"hand": 1` is the base game and is left out of the record; 3 is recorded."""
    assert Ruleset().hand == 1 and "hand" not in Ruleset().to_dict()
    assert Ruleset.from_dict({"hand": 3}).to_dict()["hand"] == 3
    assert Ruleset.from_dict({"hand": 1}) == Ruleset()


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"hand": 2}, "bad_hand"),
        ({"hand": True}, "bad_hand"),
        ({"hand": "3"}, "bad_hand"),
        ({"hand": 3, "river": True}, "hand_with_river"),
        ({"hand": 3, "turn_seconds": 60}, "hand_with_turn_limit"),
        ({"hand": 3, "undo": "free"}, "hand_with_undo"),
    ],
)
def test_r10_3_bad_hand_rulesets_are_refused(data: dict[str, object], code: str) -> None:
    with pytest.raises(MalformedError) as caught:
        Ruleset.from_dict(data)
    assert caught.value.code == code


def test_r10_3_the_player_to_move_draws_up_to_three_then_plays() -> None:
    """R10.3: player 0 draws three tiles (phase draw until then), then may play."""
    table = Table()
    assert table.state.phase == DRAW
    table.draw("E", "V")
    assert table.state.phase == DRAW and hand_of(table.state, 0) == ["E", "V"]
    table.draw("U")
    assert table.state.phase == PLACE and hand_of(table.state, 0) == ["E", "V", "U"]
    assert table.state.bag_size == 71 - 3
    with pytest.raises(GameError) as caught:
        table.run(DrawTile("A"))  # a hand's draw needs its nonce: the service's secret salt
    assert caught.value.code in ("tile_already_drawn", "bad_nonce")


def test_r10_3_a_play_names_a_tile_of_the_hand() -> None:
    """R10.3: the turn's `tile` must be in the hand (tile_not_in_hand) and is required."""
    table = Table()
    table.draw("E", "V", "U")
    with pytest.raises(IllegalMoveError) as caught:
        table.run(PlayTurn(0, 0, -1, 2, tile="A"))
    assert caught.value.code == "tile_not_in_hand" and caught.value.rule == "R10.3"
    with pytest.raises(MalformedError) as missing:
        table.run(PlayTurn(0, 0, -1, 2))
    assert missing.value.code == "tile_required"


def test_r10_3_playing_from_the_hand_scores_and_refills_next_turn() -> None:
    """R10.3 with R6.1: board D0@0,0; player 0 holds E, V, U and plays `E2@0,-1:S` (the city
    cap facing the start's city, a knight on it): the two-tile city is complete, 4 points to
    player 0, the knight comes home. The hand keeps V and U; player 1 then draws three."""
    table = Table()
    table.draw("E", "V", "U")
    placed = table.run(PlayTurn(0, 0, -1, 2, Meeple(CITY, "S"), tile="E"))
    assert isinstance(placed[0], TilePlaced) and placed[0].nonce == "nonce-0"
    assert table.state.scores == [4, 0]
    assert table.state.supply == [7, 7]
    assert hand_of(table.state, 0) == ["V", "U"]
    assert table.state.current == 1 and table.state.phase == DRAW
    table.draw("A", "B", "C")
    assert hand_of(table.state, 1) == ["A", "B", "C"] and table.state.phase == PLACE


def test_r10_3_the_public_log_hides_the_hand_until_the_tile_is_played() -> None:
    """R10.3: the sealed draw names the player and a commitment, never the tile or nonce;
    the placement reveals tile and nonce, which open the commitment."""
    table = Table()
    table.draw("E", "V", "U")
    drawn = table.events[1]
    assert isinstance(drawn, HandDrawn) and drawn.tile == "E"
    public = event_to_dict(seal(drawn))
    assert public == {"type": "HandDrawn", "player": 0, "commitment": commit("E", "nonce-0")}
    assert "E" not in str(public) and "nonce" not in str(public).replace("commitment", "")
    assert event_from_dict(public) == seal(drawn)
    # a fold of the public log knows the hand's size, not its tiles
    public_state = GameState()
    for event in table.events:
        public_state.apply(seal(event))
    assert public_state.hand_lists() == [[None, None, None], []]
    assert public_state.phase == PLACE and public_state.bag_size == table.state.bag_size
    table.run(PlayTurn(0, 0, -1, 2, tile="E"))
    public_state.apply(seal(table.events[-1]))
    assert public_state.hand_lists() == [[None, None], []]


def test_r10_3_unseal_finds_each_tile_again_from_its_nonce() -> None:
    table = Table()
    table.draw("E", "V", "U")
    sealed = [seal(e) for e in table.events]
    opened = unseal_all(sealed, lambda n: f"nonce-{n}", HAND.tiles.types)
    assert opened == table.events
    assert [e.tile for e in opened if isinstance(e, HandDrawn)] == ["E", "V", "U"]


def test_r10_3_r4_4_a_hand_tile_that_fits_nowhere_is_discarded_by_name() -> None:
    """R10.3 with R4.4, area 1x1 (only the start square): nothing fits; a hand tile that fits
    nowhere is discarded naming it and its nonce, and the player refills."""
    table = Table(Ruleset(hand=3, area=(1, 1)))
    table.draw("E", "V", "U")
    events = table.run(DiscardTile(0, "V"))
    assert events == [TileDiscarded(0, "V", "nonce-1")]
    assert hand_of(table.state, 0) == ["E", "U"] and table.state.phase == DRAW
    assert table.state.discarded == ["V"]
    with pytest.raises(GameError) as caught:
        Table().run(DiscardTile(0))
    assert caught.value.code in ("no_tile_drawn", "tile_required")


def test_r10_3_a_hand_tile_that_fits_is_not_discarded() -> None:
    table = Table()
    table.draw("E", "V", "U")
    with pytest.raises(IllegalMoveError) as caught:
        table.run(DiscardTile(0, "E"))
    assert caught.value.code == "tile_fits" and caught.value.rule == "R4.4"


def test_r10_3_r10_4_a_returned_tile_stops_the_refill_for_the_turn() -> None:
    """R10.3 with R10.4, area 1x1: the unplaceable tile goes back into the bag and the player,
    still holding tiles, draws no more this turn (else the bag could be drawn forever)."""
    table = Table(Ruleset(hand=3, area=(1, 1), unplaceable="return"))
    table.draw("E", "V", "U")
    events = table.run(DiscardTile(0, "V"))
    assert events == [TileReturned(0, "V", "nonce-1")]
    assert table.state.bag_size == 71 - 2 and table.state.phase == PLACE
    table.run(DiscardTile(0, "E"))
    ended = table.run(DiscardTile(0, "U"))  # the hand is empty and nothing in the bag fits
    assert isinstance(ended[-1], GameEnded) and ended[-1].reason == "no placeable tile left"
    assert isinstance(ended[-2], HandsRevealed)
    assert verify(table.events) == []


def test_r10_3_r7_1_the_game_ends_when_bag_and_hands_are_empty() -> None:
    """R10.3 with R7.1: random whole games end with every hand empty; the log verifies."""
    for seed in range(5):
        state, events = random_game(random.Random(seed), 2 + seed % 3, HAND)
        assert state.phase == OVER
        assert not any(state.hands) and state.bag_size == 0
        assert isinstance(events[-1], GameEnded) and isinstance(events[-2], HandsRevealed)
        assert verify([seal(e) for e in events]) == []


def test_r10_3_ending_early_reveals_the_hands() -> None:
    """R10.3: a game ended with tiles in hands (a record that stops) reveals them all."""
    table = Table()
    table.draw("E", "V", "U")
    table.run(PlayTurn(0, 0, -1, 2, tile="E"))
    table.draw("A", "B", "C")
    events = table.run(EndGame())
    assert events[0] == HandsRevealed(
        (
            (("V", "nonce-1"), ("U", "nonce-2")),
            (("A", "nonce-3"), ("B", "nonce-4"), ("C", "nonce-5")),
        )
    )
    public = GameState()
    for event in table.events:
        public.apply(seal(event))
    assert public.hand_lists() == [["V", "U"], ["A", "B", "C"]]
    assert public.snapshot() == table.state.snapshot()
    assert verify([seal(e) for e in table.events]) == []


def test_r10_3_verify_finds_a_tampered_reveal() -> None:
    table = Table()
    table.draw("E", "V", "U")
    table.run(EndGame())
    log = [seal(e) for e in table.events]
    tampered = HandsRevealed(((("A", "nonce-0"), ("V", "nonce-1"), ("U", "nonce-2")), ()))
    assert verify([*log[:-2], tampered, log[-1]]) != []
    assert verify(log[:-2]) == ["3 drawn tile(s) never revealed"]


def test_r10_3_actions_enumerate_the_tile_choice() -> None:
    table = Table()
    table.draw("E", "V", "V")
    choices = hand_actions(table.state)
    assert {tile for tile, _ in choices} == {"E", "V"}
    assert len(choices) == len(set(choices))


def test_r10_3_conservation_hand_bag_board_discards() -> None:
    """Every tile is in exactly one place at every step: a hand, the bag, the board (start
    tile included) or the discards."""
    total = sum(HAND.tiles.bag().values()) + 1
    for seed in range(3):
        _, events = random_game(random.Random(seed), 3, Ruleset(hand=3, area=(7, 7)))
        replayed = GameState()
        for event in events:
            replayed.apply(event)
            held = sum(len(hand) for hand in replayed.hands)
            placed = len(replayed.board.tiles)
            count = held + replayed.bag_size + placed + len(replayed.discarded)
            assert not replayed.hands or count == total
        kinds = Counter(type(e).__name__ for e in events)
        assert (
            kinds["HandDrawn"]
            == kinds["TilePlaced"]
            + kinds["TileDiscarded"]
            + sum(len(h) for e in events if isinstance(e, HandsRevealed) for h in e.hands)
            + kinds["TileReturned"]
        )


def test_r10_3_base_game_log_is_unchanged() -> None:
    """Without a hand the events' JSON is as it always was: no nonce, no commitment."""
    _, events = random_game(random.Random(1), 2)
    text = str([event_to_dict(e) for e in events])
    assert "nonce" not in text and "HandDrawn" not in text


def test_r10_3_a_bot_sees_its_own_hand_never_another_and_plays_legally() -> None:
    """R10.3 information boundary: a hand view shows the mover's hand; the other seats' hand
    tiles are only counted among the unseen tiles (its state has no hands at all); every
    level's chosen tile and move are legal."""
    from carcassonne.bots import LEVELS, Budget, choose_in_hand, hand_views

    table = Table()
    table.draw("E", "V", "U")
    table.run(PlayTurn(0, 0, -1, 2, tile="E"))
    table.draw("A", "B", "B")  # player 1's hand
    # player 1 moves: the views show A and B, and the other hand (V, U) only as unseen
    views = hand_views(table.state)
    assert [v.tile for v in views] == ["A", "B"]
    assert all(v.hand == ("A", "B", "B") for v in views)
    unseen = dict(views[0].bag)
    total = dict(table.state.bag)
    assert unseen["V"] == total.get("V", 0) + 1 and unseen["U"] == total.get("U", 0) + 1
    assert all(v.position().hands == [] for v in views)
    for level in LEVELS:
        tile, choice = choose_in_hand(level, views, "s", Budget(playouts=8))
        x, y, rotation, meeple = choice.action
        assert decide(table.state, PlayTurn(1, x, y, rotation, meeple, tile=tile))


def test_r10_3_records_round_trip_and_replay_the_same_log() -> None:
    """R10.3 records: a finished hand game's record (JSON and notation) lists its draws with
    their nonces; replayed, it gives the very same events (so the same commitments), and a
    record of the sealed public log after the end is the same record."""
    from carcassonne.notation import format_record, parse_record
    from carcassonne.record import load_record, record_events, record_from_events, replay

    for seed, ruleset in enumerate([HAND, Ruleset(hand=3, area=(5, 5), unplaceable="return")]):
        state, events = random_game(random.Random(seed), 3, ruleset)
        record = record_from_events(events)
        assert record.draws is not None
        assert record_from_events([seal(e) for e in events]) == record
        assert load_record(record.to_dict()) == record
        assert parse_record(format_record(record)) == record
        assert record_events(record) == events
        assert replay(record).scores == state.scores


def test_r10_3_a_running_hand_game_has_no_record_yet() -> None:
    """R10.3: while hands are secret the public log cannot make a record."""
    from carcassonne.record import record_from_events

    table = Table()
    table.draw("E", "V", "U")
    with pytest.raises(MalformedError) as caught:
        record_from_events([seal(e) for e in table.events])
    assert caught.value.code == "hand_not_revealed"


def test_r10_3_a_record_whose_draws_run_short_names_the_turn() -> None:
    from carcassonne.errors import RecordError
    from carcassonne.record import load_record, record_events, record_from_events

    _, events = random_game(random.Random(3), 2, HAND)
    data = record_from_events(events).to_dict()
    data["draws"] = data["draws"][:10]
    with pytest.raises(RecordError) as caught:
        record_events(load_record(data))
    assert caught.value.code == "draws_short" and caught.value.index is not None


def test_r10_3_without_a_hand_a_turn_may_name_only_the_drawn_tile() -> None:
    """R3: in the base game a turn's optional `tile` must be the drawn one (tile_not_drawn)."""
    state = GameState()
    for event in decide(state, StartGame(Ruleset(), 2)):
        state.apply(event)
    for event in decide(state, DrawTile("E")):
        state.apply(event)
    with pytest.raises(IllegalMoveError) as caught:
        decide(state, PlayTurn(0, 0, -1, 2, tile="V"))
    assert caught.value.code == "tile_not_drawn"
    assert decide(state, PlayTurn(0, 0, -1, 2, tile="E"))[0] == TilePlaced(0, "E", 0, -1, 2)


def test_r10_3_a_resigned_seat_keeps_its_hand_and_the_game_still_ends() -> None:
    """R10.3 with resigning (docs/lifecycle.md): a seat that leaves keeps its hand, the others
    play on, and the game ends once the bag and the hands of the seats still in are empty;
    the leaver's hand is revealed then."""
    from carcassonne.events import Resign

    rng = random.Random(2)
    table = Table(Ruleset(hand=3, area=(3, 3)), players=3)
    nonce = 0
    while table.state.phase != OVER:
        state = table.state
        if state.phase == DRAW:
            bag = [name for name, n in sorted(state.bag.items()) for _ in range(n)]
            table.run(DrawTile(rng.choice(bag), nonce=f"x{nonce}"))
            nonce += 1
            continue
        if state.turn == 2 and state.out[2] is None:
            table.run(Resign(2))
            continue
        dead = [
            h.tile for h in state.hands[state.current] if h.tile and is_unplaceable(state, h.tile)
        ]
        if dead:
            table.run(DiscardTile(state.current, dead[0]))
            continue
        tile, (x, y, rotation, meeple) = rng.choice(hand_actions(state))
        table.run(PlayTurn(state.current, x, y, rotation, meeple, tile))
    revealed = next(e for e in table.events if isinstance(e, HandsRevealed))
    assert revealed.hands[2] and not revealed.hands[0] and not revealed.hands[1]
    assert verify([seal(e) for e in table.events]) == []
