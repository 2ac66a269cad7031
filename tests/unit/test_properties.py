"""Property tests over random legal games (hypothesis draws the seed, players and ruleset).

Each example plays `random_game(random.Random(seed), players, ruleset)` to the end and checks
invariants of the rules (RULES.md) and of the event-sourced engine along the way.
"""

from __future__ import annotations

import functools
import json
import random
from collections import Counter
from dataclasses import replace
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carcassonne.errors import GameError
from carcassonne.events import (
    AbbotRecalled,
    Command,
    DiscardTile,
    DrawTile,
    EndGame,
    Event,
    GameEnded,
    GameStarted,
    PlayTurn,
    RecallAbbot,
    StartGame,
    TileDiscarded,
    TileDrawn,
    TilePlaced,
    TileReturned,
    event_from_dict,
    event_to_dict,
)
from carcassonne.game import (
    RECALL_ABBOT,
    actions,
    command_for_action,
    decide,
    drawable,
    evolve,
    fold,
    is_unplaceable,
    placements,
)
from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.notation import format_record, format_turn, parse_record, parse_turn
from carcassonne.record import load_record, record_events, record_from_events, score_record
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import DRAW, OVER, PLACE, GameState, river_turn
from carcassonne.tiles import CITY, FIELD, GARDEN, MONASTERY, ROAD, Meeple
from carcassonne.tilesets import LAKE

from .samples import fingerprint

rulesets = st.builds(
    Ruleset,
    tileset=st.sampled_from(["base", "demo"]),
    farmers=st.booleans(),
    farm_scoring=st.sampled_from(["3rd", "2nd", "1st"]),
    incomplete_score=st.booleans(),
    meeples=st.one_of(st.none(), st.none(), st.integers(0, 3)),
    unplaceable=st.sampled_from(["discard", "return"]),
    # small tables make unplaceable tiles (R4.4/R10.4) common
    area=st.one_of(st.none(), st.none(), st.sampled_from([(3, 3), (5, 3), (4, 4), (6, 5)])),
    hole_extra_turn=st.booleans(),
    river=st.booleans(),
    abbot=st.booleans(),
)
# R10.5's variant needs a bounded table: on for about half of the bounded ones.
rulesets = st.builds(
    lambda rules, closes, second: replace(
        rules,
        border_closes=closes and rules.area is not None,
        tile_edition="2nd" if second and rules.tileset == "base" else "1st",  # R1.2: no demo
    ),
    rulesets,
    st.booleans(),
    st.booleans(),
)
games = st.tuples(st.integers(0, 2**32 - 1), st.integers(2, 6), rulesets)
river_games = st.tuples(
    st.integers(0, 2**32 - 1), st.integers(2, 6), rulesets.map(lambda r: replace(r, river=True))
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def play(game: tuple[int, int, Ruleset]) -> tuple[GameState, list[Event]]:
    seed, players, ruleset = game
    return random_game(random.Random(seed), players, ruleset)


def states_along(events: list[Event]):
    """(event, state after it) for every event, on one state applied in place."""
    state = GameState()
    for event in events:
        state.apply(event)
        yield event, state


# ------------------------------------------------------------------------ meeples, scores


@FAST
@given(games)
def test_meeples_conserved_farmers_stay_scores_never_decrease(game):
    state, events = play(game)
    _, players, ruleset = game
    per_player = ruleset.meeples_per_player
    farmers: dict[int, Any] = {}
    last_scores = [0] * players
    for event, now in states_along(events):
        if isinstance(event, GameStarted):
            continue
        meeples = [m for m in now.meeples.values() if not m.meeple.abbot]
        assert sum(now.supply) + len(meeples) == players * per_player
        on_board = Counter(m.player for m in meeples)
        abbots = Counter(m.player for m in now.meeples.values() if m.meeple.abbot)
        for p in range(players):
            assert now.supply[p] >= 0
            assert now.supply[p] + on_board[p] == per_player
            # R9.2: one abbot each, in the supply or on the board, never both or neither
            assert now.abbots[p] + abbots[p] == (1 if ruleset.abbot else 0)
        for meeple_id, farmer in farmers.items():  # R5.2/R6.6: farmers lie down until the end
            assert now.meeples.get(meeple_id) == farmer
        farmers.update((i, m) for i, m in now.meeples.items() if m.meeple.feature == FIELD)
        assert all(now_p >= before for now_p, before in zip(now.scores, last_scores, strict=True))
        last_scores = list(now.scores)
        for meeple_id, m in now.meeples.items():  # every meeple stands in its feature
            assert meeple_id in now.board.feature(m.node).meeples
            # R9.2: gardens hold only the abbot; the abbot stands only in one or a monastery
            assert (m.meeple.feature == GARDEN) <= m.meeple.abbot
            assert m.meeple.abbot <= (m.meeple.feature in (GARDEN, MONASTERY))
    if not ruleset.farmers:
        assert not farmers
        assert all(s.kind != "farm" for s in state.log)
    if per_player == 0 and not ruleset.abbot:
        assert not state.meeples and not any(state.scores)


@FAST
@given(games)
def test_each_completed_feature_is_scored_exactly_once(game):
    state, _ = play(game)
    board = state.board
    # The abbot taken back scores its feature during play, incomplete (R9.2): not a completion.
    during = [s for s in state.log if not s.final and s.complete]
    # With R10.5's border closing features, two roads of one tile can each be a whole road:
    # features are counted, not merely collected.
    keys = Counter((s.kind, frozenset(s.tiles)) for s in during)
    done: Counter[tuple[str, frozenset[tuple[int, int]]]] = Counter()
    for feat in board.feats:
        if feat is None:
            continue
        if feat.kind in (ROAD, CITY):
            assert feat.done == (feat.open == 0), "closed roads and cities are done, others not"
            if feat.done:
                done[(feat.kind, frozenset(feat.tiles))] += 1
        elif feat.kind in (MONASTERY, GARDEN):
            (pos,) = feat.tiles
            assert feat.done == (board.neighbours(pos) == 8)
            if feat.done:
                done[(feat.kind, frozenset(board.monastery_tiles(pos)))] += 1
        if feat.done:
            assert not feat.meeples, "meeples go home from a scored feature (R6.6)"
    assert keys == done, "each completed feature is scored once during play"
    for s in during:
        assert s.complete and s.returned == s.meeples
        if s.kind == MONASTERY:
            assert len(s.tiles) == 9
    finals = [s for s in state.log if s.final and s.kind != "farm"]
    occupied_open = [
        f for f in board.feats
        if f is not None and f.kind != FIELD and not f.done and f.meeples
    ]  # fmt: skip
    assert len(finals) == len(occupied_open)
    assert not any(s.complete for s in finals)


@FAST
@given(games)
def test_score_explanations_follow_the_rules(game):
    state, _ = play(game)
    _, players, ruleset = game
    assert state.scores == [sum(s.awarded[p] for s in state.log) for p in range(players)]
    assert state.scores_before_final == tuple(
        sum(s.awarded[p] for s in state.log if not s.final) for p in range(players)
    )
    paid_cities = []
    for s in state.log:
        top = max(s.meeples)
        assert s.winners == tuple(p for p, c in enumerate(s.meeples) if top and c == top)
        n = len(s.tiles)
        if not s.final and not s.complete:  # R9.2: the abbot taken back, 1 + neighbours
            assert s.rule == "R9.2" and s.kind in (MONASTERY, GARDEN) and sum(s.meeples) == 1
            expected = n
        elif not s.final:
            expected = {ROAD: n, CITY: 2 * n + 2 * s.pennants, MONASTERY: 9, GARDEN: 9}[s.kind]
        elif s.kind == "farm":
            per_city = {"3rd": 3, "2nd": 3, "1st": 4}[ruleset.farm_scoring]
            expected = per_city * len(s.cities)
            if ruleset.farm_scoring == "1st":
                assert len(s.cities) == 1
                paid_cities.append(s.cities[0])
        elif not ruleset.incomplete_score:
            expected = 0
        else:
            expected = {ROAD: n, CITY: n + s.pennants, MONASTERY: n, GARDEN: n}[s.kind]
        assert s.points == expected, s
        for p in range(players):
            if s.kind == "farm" and ruleset.farm_scoring == "2nd":
                assert s.awarded[p] <= (s.points if p in s.winners else 0)
                assert s.awarded[p] % 3 == 0
            else:
                assert s.awarded[p] == (s.points if p in s.winners else 0)
    # With R10.5's border closing features, two caps of one tile can each be a whole city:
    # then two cities have the same tiles, and the tiles no longer tell them apart.
    if not ruleset.border_closes:
        assert len(paid_cities) == len(set(paid_cities)), "1st edition: each city scored once"


# ------------------------------------------------------------------------------- tiles


@FAST
@given(games)
def test_tiles_placed_plus_discarded_equals_tiles_drawn(game):
    state, events = play(game)
    _, _, ruleset = game
    count = Counter(type(e) for e in events)
    placed, discarded = count[TilePlaced], count[TileDiscarded]
    returned, drawn = count[TileReturned], count[TileDrawn]
    assert placed + discarded + returned == drawn == state.drawn_count
    assert state.turn == placed == len(state.board.tiles) - 1
    assert state.discarded == [e.tile for e in events if isinstance(e, TileDiscarded)]
    assert state.bag_size == sum(state.bag.values())
    assert ruleset.tiles.size - 1 == drawn - returned + state.bag_size
    assert count[GameStarted] == 1 and isinstance(events[0], GameStarted)
    assert count[GameEnded] == 1 and isinstance(events[-1], GameEnded)
    assert state.over
    if ruleset.unplaceable == "discard":
        assert state.bag_size == 0, "R7.1: the game ends when the bag is empty"
        assert returned == 0
    else:  # R9.1 decision: a river tile that fits nowhere is discarded even so
        assert all(e.tile.startswith("RIV") for e in events if isinstance(e, TileDiscarded))
        assert all(is_unplaceable(state, name) for name in state.bag)
    if ruleset.area is not None:
        bounds = ruleset.bounds()
        assert bounds is not None
        assert all(
            bounds[0] <= x <= bounds[1] and bounds[2] <= y <= bounds[3]
            for x, y in state.board.tiles
        )


@FAST
@given(river_games)
def test_the_river_is_legal(game):
    """R9.1: the river tiles come first, the lake last of them; each placed one continues the
    river's open end, no two river tiles in a row turn the same way (a straight between two
    curves resets this: TILES.md §3), the river never flows into a tile or off the table —
    its end is never a taken square, whatever comes after — and no meeple stands on it (it
    is no feature)."""
    state, events = play(game)
    drawn = [e.tile for e in events if isinstance(e, TileDrawn)]
    rivers = [t for t in drawn if t.startswith("RIV")]
    assert drawn[: len(rivers)] == rivers and rivers[-1] == LAKE and len(rivers) == 11
    now = GameState()
    turns: list[int] = []  # per river tile placed: +1 right, -1 left, 0 straight on
    for event in events:
        end, heading = now.river_end, now.river_heading
        now.apply(event)
        if now.river_end is not None:
            assert now.river_end not in now.board.tiles
            assert now.board.in_bounds(now.river_end) or now.turn == 0  # the spring's end
        if not (isinstance(event, TilePlaced) and event.tile.startswith("RIV")):
            continue
        assert (event.x, event.y) == end
        ttype = now.tiles.types[event.tile]
        outs = [d for d in ttype.river_edges(event.rotation) if d != heading ^ 2]
        assert heading ^ 2 in ttype.river_edges(event.rotation)
        if outs:
            turns.append(river_turn(heading, outs[0]))
            assert now.river_turn == turns[-1]
            assert now.river_end is not None and now.river_end not in now.board.tiles
        else:
            assert event.tile == LAKE and now.river_end is None
    assert not any(a and a == b for a, b in pairwise(turns)), turns
    kinds = (ROAD, CITY, FIELD, MONASTERY, GARDEN)
    assert all(f is None or f.kind in kinds for f in state.board.feats)


def _takes(state: GameState, command: Command) -> bool:
    try:
        decide(state, command)
    except GameError:
        return False
    return True


@FAST
@given(river_games)
def test_river_games_through_decide_never_raise_and_end(game):
    """R9.1 with R4.4, now that the river may run back beside itself and trap its own end: a
    game played command by command through `decide` (each draw from `drawable`; a tile that
    fits nowhere discarded, else a uniformly chosen action) raises nothing and ends. On each
    river draw, `placements` is exactly what `decide` takes at the river's end and what
    `actions` places. Twelve land tiles after the river, the game is ended (the land part is
    the other tests' business); every loop takes a tile out of the bag or places it."""
    seed, players, ruleset = game
    rng = random.Random(seed)
    state = GameState()

    def run(command: Command) -> None:
        for event in decide(state, command):
            state.apply(event)

    run(StartGame(ruleset, players))
    land = 0
    for _ in range(2 * (11 + 12) + 1):
        if state.phase == OVER:
            break
        if state.phase == DRAW:
            pool = drawable(state)
            if not any(state.tiles.types[name].river for name in pool):
                land += 1
                if land > 12:
                    run(EndGame("stopped"))
                    continue
            run(DrawTile(rng.choice([name for name, n in sorted(pool.items()) for _ in range(n)])))
            continue
        assert state.drawn is not None
        if state.tiles.types[state.drawn].river:
            end = state.river_end
            assert end is not None and end not in state.board.tiles
            takes = {(*end, r) for r in range(4) if _takes(state, PlayTurn(state.current, *end, r))}
            assert set(placements(state)) == takes == {(x, y, r) for x, y, r, _ in actions(state)}
        choices = actions(state)
        if not choices:
            assert is_unplaceable(state)
            run(DiscardTile(state.current))
            continue
        run(command_for_action(state, choices[rng.randrange(len(choices))]))
    assert state.over
    assert not any(name.startswith("RIV") for name in state.bag)


# ------------------------------------------------------------------- event sourcing


@SLOW
@given(games)
def test_replaying_events_gives_the_same_state_and_evolve_is_pure(game):
    state, events = play(game)
    assert fold(events).snapshot() == state.snapshot()
    reduced = functools.reduce(evolve, events, GameState())
    assert reduced.snapshot() == state.snapshot()
    current = GameState()
    for event in events:
        before = fingerprint(current)
        following = evolve(current, event)
        assert fingerprint(current) == before, f"evolve changed its input on {event}"
        current = following
    assert fingerprint(current) == fingerprint(state)


def command_for(event: Event) -> Any:
    match event:
        case GameStarted():
            return StartGame(event.ruleset, event.players)
        case TileDrawn():
            return DrawTile(event.tile)
        case TilePlaced():
            return PlayTurn(event.player, event.x, event.y, event.rotation, event.meeple)
        case AbbotRecalled():  # with its TilePlaced: one RecallAbbot (see below)
            return None
        case TileDiscarded() | TileReturned():
            return DiscardTile(event.player)
        case GameEnded():
            return EndGame(event.reason)
    raise AssertionError(event)


@FAST
@given(games)
def test_decide_accepts_every_event_of_a_random_game(game):
    _, events = play(game)
    state = GameState()
    index = 0
    while index < len(events):
        event = events[index]
        if isinstance(event, TilePlaced | TileDiscarded | TileReturned):
            assert event.player == state.current, "turn order"
        before = state.snapshot()
        command = command_for(event)
        following = events[index + 1] if index + 1 < len(events) else None
        if isinstance(event, TilePlaced) and isinstance(following, AbbotRecalled):
            command = RecallAbbot(event.player, event.x, event.y, event.rotation)
        produced = decide(state, command)
        assert state.snapshot() == before, "decide never changes the state"
        assert produced == events[index : index + len(produced)]
        for e in produced:
            state.apply(e)
        index += len(produced)
    assert state.over


def brute_force_actions(state: GameState) -> set[tuple[int, int, int, Meeple | None]]:
    """Every turn decide accepts (meeple spots canonicalised as `actions` names them)."""
    assert state.drawn is not None
    orientations = state.tiles.types[state.drawn].orientations
    candidates: list[Meeple | None] = [None, Meeple(MONASTERY, MONASTERY)]
    candidates += [Meeple(MONASTERY, MONASTERY, True), Meeple(GARDEN, GARDEN, True)]  # R9.2
    candidates += [Meeple(GARDEN, GARDEN)]
    candidates += [Meeple(kind, e) for kind in (ROAD, CITY) for e in EDGES]
    candidates += [Meeple(FIELD, h) for h in HALF_EDGES]
    squares = set(state.board.frontier)
    squares |= {(x + 2, y) for x, y in state.board.frontier}  # some far or taken squares
    squares |= set(list(state.board.tiles)[:3])
    accepted = set()
    for x, y in squares:
        for rotation in range(4):
            for meeple in candidates:
                try:
                    decide(state, PlayTurn(state.current, x, y, rotation, meeple))
                except GameError:  # refused
                    continue
                if meeple is not None:
                    orient = orientations[rotation]
                    canonical = orient.segments[orient.spots[meeple.spot]].meeple
                    meeple = canonical._replace(abbot=meeple.abbot)
                accepted.add((x, y, rotation, meeple))
            try:  # R9.2: the tile placed and the abbot taken back
                decide(state, RecallAbbot(state.current, x, y, rotation))
            except GameError:
                continue
            accepted.add((x, y, rotation, RECALL_ABBOT))
    return accepted


@SLOW
@given(games, st.randoms(use_true_random=False))
def test_actions_are_exactly_the_turns_decide_accepts(game, rnd):
    _, events = play(game)
    placing = [i for i, e in enumerate(events) if isinstance(e, TileDrawn)]
    for index in rnd.sample(placing, min(2, len(placing))):
        state = fold(events, upto=index + 1)
        assert state.phase == PLACE
        legal = actions(state)
        assert len(legal) == len(set(legal))
        assert set(legal) == brute_force_actions(state)
        assert is_unplaceable(state) == (not legal) == (not placements(state))
        assert {(x, y, r) for x, y, r, _ in legal} == set(placements(state))


# --------------------------------------------------------------------- serialisation


@FAST
@given(games)
def test_record_round_trips(game):
    state, events = play(game)
    record = record_from_events(events)
    assert record_events(record) == events
    assert score_record(record)["final_scores"] == state.scores
    assert load_record(record.to_dict()) == record
    assert load_record(json.loads(json.dumps(record.to_dict()))) == record
    assert parse_record(format_record(record)) == record
    assert parse_record(format_record(record, per_line=1)) == record
    assert parse_record(format_record(record, per_line=1000)) == record
    for turn in record.turns:
        assert parse_turn(format_turn(turn)) == turn


@FAST
@given(games)
def test_events_round_trip_through_dicts(game):
    _, events = play(game)
    for event in events:
        data = event_to_dict(event)
        assert data["type"] == type(event).__name__
        assert event_from_dict(data) == event
        assert event_from_dict(json.loads(json.dumps(data))) == event


# --------------------------------------------------------------------- R10.3 hands

hand_games = st.tuples(
    st.integers(0, 2**32 - 1),
    st.integers(2, 6),
    rulesets.map(lambda r: replace(r, river=False, abbot=False, hand=3)),
)


@given(hand_games)
@SLOW
def test_hand_tiles_conserved_and_hidden_until_the_end(game):
    """R10.3: at every event each tile is in exactly one place: a hand, the bag, the board or
    the discards (hand + bag + board + discards = the tile set); a fold of the sealed public
    log knows every hand's size but no tile of it until the tile leaves the hand; at the end
    the log verifies and the public fold equals the engine's state."""
    from carcassonne.hand import seal, verify

    _, events = play(game)
    total = sum(game[2].tiles.bag().values()) + 1  # and the start tile
    public = GameState()
    revealed = False
    for event, state in states_along(events):
        public.apply(seal(event))
        revealed = revealed or type(event).__name__ == "HandsRevealed"
        held = sum(len(hand) for hand in state.hands)
        assert held + state.bag_size + len(state.board.tiles) + len(state.discarded) == total
        assert all(len(hand) <= 3 for hand in state.hands)
        assert [len(h) for h in public.hands] == [len(h) for h in state.hands]
        if not revealed:
            assert all(tile is None for hand in public.hand_lists() for tile in hand)
            # the unseen count is the bag and the hidden hands
            assert sum(public.bag.values()) == state.bag_size + held
    assert public.snapshot() == state.snapshot()
    assert verify([seal(e) for e in events]) == []
    record = record_from_events([seal(e) for e in events])
    assert record_events(record) == events


# ------------------------------------------------------------------------ stored schemas


@given(st.one_of(games, hand_games))
@SLOW
def test_every_event_and_every_score_event_pass_the_stored_schemas(game):
    """The services append the engine's events and the worker's score events unchecked
    (eventstore.port.CHECK_PAYLOADS is the suite's), and read what is stored unchecked: this
    is what holds them to the stored schemas, which the log's readers and its documents
    assume (a garden's ScoreReverted once did not fit). Every event of a random game of any
    ruleset, and every score event the worker makes of them, pass; the finals are the
    engine's."""
    from eventstore.envelope import MOVES, SCORES
    from eventstore.port import InMemoryEventStore
    from eventstore.schemas import to_new, validate_payload
    from eventstore.score_stream import score_events

    state, events = play(game)
    store = InMemoryEventStore()  # checks every payload too: the suite's CHECK_PAYLOADS
    moves = [to_new(e) for e in events]
    store.append("g", MOVES, moves, expected=0, command_id="moves")
    scored = score_events(GameState(), store.read("g", MOVES))
    store.append("g", SCORES, scored, expected=0, command_id="scores")
    for new in moves + scored:  # whatever the switch says
        validate_payload(new.type, new.version, new.payload)
    final = store.read("g", SCORES)[-1]
    assert final.type == "GameScored" and final.payload["final_scores"] == state.scores
