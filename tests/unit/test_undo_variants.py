"""Undo (docs/undo.md) with two variants: The Abbot (R9.2), a turn that puts the abbot out and
one that takes it back instead of placing a meeple (its monastery or garden scoring at once),
and R10.6, where filling a hole (a square with tiles on all four sides) grants another turn.

An undo puts back the state right before the placement, exactly: the board, the abbot on the
board or in the supply, the meeple ids, the supply, the scores, whose turn it is and whether
it is an extra turn, and the bag with its draw count (the next draws are fresh ones). The scoring
worker's `ScoreReverted` events take back exactly the points the placement gave.

The positions are found by playing the command service's own games (its seeded draws) with a
fixed policy until the situation arises (a bounded search, cached per ruleset: `position`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carcassonne.errors import GameError
from carcassonne.events import Event, RequestUndo, StartGame, TurnUndone, UndoRequested
from carcassonne.game import (
    RECALL_ABBOT,
    Action,
    action_events,
    actions,
    command_for_action,
    decide,
    fold,
)
from carcassonne.geometry import DELTA
from carcassonne.record import record_from_events, replay
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_engine, to_new
from eventstore.score_stream import FEATURE_SCORED, SCORE_REVERTED
from services.command.service import GameService
from services.common.draws import draw_until_placeable
from services.scoring.scorer import Scorer
from tests.unit.test_undo import NOW, code, service_at

ABBOT = Ruleset(abbot=True, tile_edition="2nd")  # R9.2, with the 2nd edition's gardens
HOLE = Ruleset(hole_extra_turn=True)  # R10.6
BOTH = replace(ABBOT, hole_extra_turn=True)


def rules(mode: str, variant: Ruleset) -> Ruleset:
    """`variant` with undo `mode` (free or consent)."""
    return replace(variant, undo=mode)


def but_the_draw(exact_state: dict[str, Any]) -> dict[str, Any]:
    """`exact(state)` without what the draw after a placement decides (after an undo that
    draw is a fresh one, docs/undo.md): the tile in hand, the bag, the draw count and the
    tiles discarded as unplaceable (R4.4) on the way."""
    return {k: v for k, v in exact_state.items() if k not in ("drawn", "bag", "draws", "discarded")}


def exact(state: GameState) -> dict[str, Any]:
    """The state as an undo must put it back: the snapshot and what it leaves out (the meeple
    ids and the features that hold them, the next meeple id, the draw count, the frontier).

    Not the undo window itself: after an undo nobody may undo again until the next placement
    (docs/undo.md: one copy, never a chain), while before the placement the previous placer
    still could."""
    board = state.board
    return {
        **state.snapshot(),
        "meeple_ids": sorted(state.meeples.items()),
        "next_meeple": state.next_meeple,
        "draws": (state.drawn_count, state.bag_size),
        "features": [
            (root, f.kind, sorted(f.tiles), f.open, f.pennants, list(f.meeples), f.done)
            for root, f in enumerate(board.feats)
            if f is not None
        ],
        "frontier": sorted(board.frontier.items()),
    }


# -- the positions -----------------------------------------------------------------------


def fills_hole(state: GameState, action: Action) -> bool:
    """Whether `action` puts a tile on a square with tiles on all four sides (R10.6)."""
    return state.board.is_hole(action[:2])


def scores_points(state: GameState, action: Action) -> bool:
    """Whether `action` gives anyone points at once (a completed feature, or the recall)."""
    twin = state.copy()
    before = len(twin.log)
    for event in action_events(state, action):
        twin.apply(event)
    return any(sum(s.awarded) for s in twin.log[before:])


def abbot_in(state: GameState, kind: str) -> bool:
    """Whether the player to move has the abbot on a `kind` (monastery or garden), R9.2."""
    abbot = state.abbot_of(state.current)
    return abbot is not None and state.meeples[abbot].meeple.feature == kind


def is_abbot(action: Action) -> bool:
    return action[3] is not None and action[3] != RECALL_ABBOT and action[3].abbot


def hole_scored(state: GameState) -> bool:
    """Whether the last placement (it filled a hole: this is its extra turn) gave points."""
    return any(sum(s.awarded) for s in state.log if s.turn == state.turn and not s.final)


Goal = Callable[[GameState, Action], bool]
GOALS: dict[str, Goal] = {
    # R9.2: taking the abbot back from a garden, from a monastery
    "recall garden": lambda s, a: a[3] == RECALL_ABBOT and abbot_in(s, "garden"),
    "recall monastery": lambda s, a: a[3] == RECALL_ABBOT and abbot_in(s, "monastery"),
    # R9.2: the abbot put out by a placement that also scores a completed feature
    "abbot scoring": lambda s, a: is_abbot(a) and scores_points(s, a),
    # R10.6: a placement with a meeple on the extra turn of a hole that scored when filled
    # (the search's last move filled it: `at_hole` stops before that move)
    "extra turn": lambda s, a: s.extra_turn and a[3] is not None and hole_scored(s),
    # R9.2 with R10.6: the abbot taken back by the placement that fills a hole
    "recall hole": lambda s, a: a[3] == RECALL_ABBOT and not s.extra_turn and fills_hole(s, a),
}


def neighbours(state: GameState, action: Action) -> int:
    x, y = action[:2]
    return sum((x + dx, y + dy) in state.board.tiles for dx, dy in DELTA)


def policy(state: GameState, choices: list[Action], rng: random.Random) -> Action:
    """The searching games' move: the abbot out whenever it can go, never taken back, and
    tiles packed close (most neighbours first: holes come sooner); ties by `rng`."""
    kept = [a for a in choices if a[3] != RECALL_ABBOT]
    pool = [a for a in kept if is_abbot(a)] or kept
    most = max(neighbours(state, a) for a in pool)
    return rng.choice([a for a in pool if neighbours(state, a) == most])


@dataclass(frozen=True)
class Position:
    """A game's seed, the actions before the goal, and the goal's action."""

    seed: str
    moves: tuple[Action, ...]
    goal: Action


@dataclass
class Game:
    """A game on the command service's in-memory adapters, and its scoring worker."""

    service: GameService
    store: InMemoryEventStore
    game_id: str
    tokens: dict[int, str]

    @property
    def state(self) -> GameState:
        """The cached state (it changes in place: `exact` or copy what must be kept)."""
        return self.service.load(self.game_id).state

    def play(self, action: Action) -> None:
        x, y, rotation, meeple = action
        token = self.tokens[self.state.current]
        if meeple == RECALL_ABBOT:
            self.service.play_turn(self.game_id, token, x, y, rotation, None, recall=True)
        else:
            self.service.play_turn(self.game_id, token, x, y, rotation, meeple)

    def undo(self, player: int) -> list[str]:
        """The undo of `player`'s placement, asked and (consent) accepted by the other seat:
        the types of the events appended."""
        asked = self.service.request_undo(self.game_id, self.tokens[player])
        types = [e.type for e in asked.events]
        if types == ["UndoRequested"]:
            request = asked.events[0].payload["request"]
            answer = self.service.answer_undo(self.game_id, self.tokens[1 - player], request, True)
            types += [e.type for e in answer.events]
        return types

    def scored(self) -> list[StoredEvent]:
        """The score stream, caught up with the moves."""
        Scorer(self.store).catch_up(self.game_id)
        return self.store.read(self.game_id, SCORES)

    def folded(self) -> GameState:
        """The state as a fresh fold of the move stream."""
        return fold(to_engine(e) for e in self.store.read(self.game_id, MOVES))


def new_game(ruleset: Ruleset, seed: str) -> Game:
    service, store = service_at([NOW])
    game_id, seats = service.create_game(["Ann", "Bob"], ruleset, [0, 1], seed=seed)
    return Game(service, store, game_id, {s["seat"]: s["token"] for s in seats})


@cache
def position(ruleset: Ruleset, goal: str) -> Position:
    """The first game (seeds `goal-0`, `goal-1` …, at most 60, 72 turns each) in which the
    player to move has an action that meets `GOALS[goal]`. Searched with undo `free`: the
    undo mode changes neither the draws nor the legal actions."""
    wanted = GOALS[goal]
    for number in range(60):
        seed = f"{goal}-{number}"
        rng = random.Random(seed)
        game = new_game(replace(ruleset, undo="free"), seed)
        moves: list[Action] = []
        while not (state := game.state).over and state.turn < 72:
            choices = actions(state)
            found = next((a for a in choices if wanted(state, a)), None)
            if found is not None:
                return Position(seed, tuple(moves), found)
            action = policy(state, choices, rng)
            game.play(action)
            moves.append(action)
    raise AssertionError(f"no game reached {goal!r}")


def at_goal(ruleset: Ruleset, goal: str, back: int = 0) -> tuple[Game, Action]:
    """A new game (the same draws as the search's) right before the goal's action, or
    `back` moves before it (then the action returned is the move the search played there)."""
    found = position(replace(ruleset, undo="free"), goal)
    moves = [*found.moves, found.goal]
    game = new_game(ruleset, found.seed)
    for action in moves[: len(moves) - 1 - back]:
        game.play(action)
    action = moves[len(moves) - 1 - back]
    assert action in actions(game.state)
    return game, action


def at_hole(mode: str) -> tuple[Game, Action]:
    """A game right before a placement that fills a hole and scores (R10.6)."""
    game, action = at_goal(rules(mode, HOLE), "extra turn", back=1)
    assert fills_hole(game.state, action) and scores_points(game.state, action)
    return game, action


def reverted_by_last_move(game: Game) -> list[dict[str, Any]]:
    """The `ScoreReverted` payloads the worker appended for the last move (the undo)."""
    last = game.store.last_seq(game.game_id, MOVES)
    return [
        e.payload for e in game.scored() if e.type == SCORE_REVERTED and e.payload["move"] == last
    ]


def scored_by(game: Game, first_move: int) -> list[dict[str, Any]]:
    """The `FeatureScored` payloads of the moves from `first_move` on."""
    return [
        e.payload
        for e in game.scored()
        if e.type == FEATURE_SCORED and e.payload["move"] >= first_move
    ]


def totals(game: Game) -> list[int]:
    """Each seat's total by the score stream (the last award's or reversion's totals)."""
    running = [0, 0]
    for event in game.scored():
        if event.type in (FEATURE_SCORED, SCORE_REVERTED):
            running = event.payload["totals"]
    return running


# -- The Abbot (R9.2) ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["garden", "monastery"])
@pytest.mark.parametrize("mode", ["free", "consent"])
def test_r9_2_undoing_an_abbot_recall_puts_the_abbot_back_and_reverts_its_score(
    kind: str, mode: str
) -> None:
    """R9.2: the player takes the abbot back from its garden (or monastery) instead of placing
    a meeple: the feature scores at once and the abbot goes to the supply. The undo puts the
    abbot back on the board with the same id, the points back, and the same tile in hand; the
    worker reverts exactly the recall's points (a garden's too: `ScoreReverted` kind
    "garden", refused by the score stream's schema before it was fixed). Placing the same way
    again gives the same game as the first time, with the same next tile."""
    ruleset = rules(mode, ABBOT)
    game, recall = at_goal(ruleset, f"recall {kind}")
    player = game.state.current
    abbot = game.state.abbot_of(player)
    assert abbot is not None
    standing = game.state.meeples[abbot]
    assert standing.meeple.abbot and standing.meeple.feature == kind
    before = exact(game.state)
    totals_before = totals(game)
    assert totals_before == before["scores"]

    first = game.store.last_seq(game.game_id, MOVES) + 1
    game.play(recall)
    recalled = exact(game.state)
    assert game.state.abbot_of(player) is None and game.state.abbots[player]
    (scoring,) = [s for s in scored_by(game, first) if s["rule"] == "R9.2" and not s["complete"]]
    assert scoring["kind"] == kind and scoring["points"] > 0
    assert scoring["returned"][player] == 1
    gained = [a - b for a, b in zip(recalled["scores"], before["scores"], strict=True)]
    assert sum(gained) >= scoring["points"]

    assert game.undo(player)[-1] == "TurnUndone"
    assert exact(game.state) == before
    assert exact(game.folded()) == before
    assert game.state.meeples[abbot] == standing  # the same abbot, the same id, in its feature
    assert abbot in game.state.board.feature(standing.node).meeples
    assert not game.state.abbots[player] and game.state.drawn == before["drawn"]

    reverted = reverted_by_last_move(game)
    assert reverted[0]["kind"] == kind  # newest first: the recall was scored last
    assert reverted[0]["reverted"] == scoring["awarded"]
    assert reverted[0]["restored"][player] == 1  # the abbot stands on the board again
    undone = [sum(r["reverted"]) for r in reverted]
    assert sum(undone) == sum(gained)
    assert reverted[-1]["totals"] == totals_before == game.state.scores

    game.play(recall)  # the same turn again: the same game but for the next draw, a fresh one
    assert but_the_draw(exact(game.state)) == but_the_draw(recalled)
    assert exact(game.folded()) == exact(game.state)
    assert totals(game) == recalled["scores"]


@pytest.mark.parametrize("mode", ["free", "consent"])
def test_r9_2_undoing_an_abbot_placement_sends_the_abbot_back_to_the_supply(mode: str) -> None:
    """R9.2: a placement puts the abbot in its garden or monastery and completes a feature
    (scored at once, R6). The undo takes the abbot back to the supply (no meeple of the
    supply was used: R9.2's abbot is a figure of its own), the meeple ids back (the next
    figure out gets the id the abbot had), the points back (the worker reverts each scoring
    and puts back the meeples it had sent home); then the abbot goes out again with the same
    id, and the game goes on as before."""
    ruleset = rules(mode, ABBOT)
    game, placement = at_goal(ruleset, "abbot scoring")
    player = game.state.current
    assert game.state.abbots[player] and game.state.abbot_of(player) is None
    before = exact(game.state)
    totals_before = totals(game)

    first = game.store.last_seq(game.game_id, MOVES) + 1
    game.play(placement)
    placed = exact(game.state)
    abbot = game.state.abbot_of(player)
    assert abbot == before["next_meeple"] and not game.state.abbots[player]
    assert placed["supply"][player] >= before["supply"][player]  # the abbot is no meeple
    awarded = scored_by(game, first)
    assert awarded and sum(sum(s["awarded"]) for s in awarded) > 0

    types = game.undo(player)
    assert types[-1] == "TurnUndone" and (mode == "free") == ("UndoAccepted" not in types)
    assert exact(game.state) == before
    assert exact(game.folded()) == before
    assert game.state.abbots[player] and game.state.abbot_of(player) is None

    reverted = reverted_by_last_move(game)
    assert [r["kind"] for r in reverted] == [s["kind"] for s in reversed(awarded)]
    assert [r["reverted"] for r in reverted] == [s["awarded"] for s in reversed(awarded)]
    assert [r["restored"] for r in reverted] == [s["returned"] for s in reversed(awarded)]
    assert reverted[-1]["totals"] == totals_before == game.state.scores

    game.play(placement)  # again: the same game but for the next draw, a fresh one
    assert but_the_draw(exact(game.state)) == but_the_draw(placed)
    assert totals(game) == placed["scores"]


# -- R10.6: filling a hole grants another turn --------------------------------------------


def test_r10_6_undoing_the_placement_that_filled_a_hole_takes_the_extra_turn_back() -> None:
    """R10.6: the placement fills a hole and scores: the same player draws again (extra
    turn). The undo takes the extra turn back: the same player holds the same tile with no
    extra turn pending, the points are reverted by the worker, and the tile drawn for the
    extra turn is back in the bag with its draw count. The same placement again grants the
    extra turn again (its tile a fresh draw); placed elsewhere instead, the turn passes on."""
    for again in (True, False):
        game, hole = at_hole("free")
        player = game.state.current
        before = exact(game.state)
        assert not before["extra_turn"]
        first = game.store.last_seq(game.game_id, MOVES) + 1

        game.play(hole)
        filled = exact(game.state)
        assert (filled["current"], filled["extra_turn"]) == (player, True)
        awarded = scored_by(game, first)

        assert game.undo(player) == ["UndoRequested", "TurnUndone"]
        assert exact(game.state) == before
        assert exact(game.folded()) == before
        assert (game.state.current, game.state.extra_turn) == (player, False)
        reverted = reverted_by_last_move(game)
        assert [r["reverted"] for r in reverted] == [s["awarded"] for s in reversed(awarded)]
        assert totals(game) == before["scores"]

        if again:  # the same placement: the extra turn again
            game.play(hole)
            assert but_the_draw(exact(game.state)) == but_the_draw(filled)
            continue
        elsewhere = next(
            a for a in actions(game.state) if not fills_hole(game.state, a) and a[3] is None
        )
        game.play(elsewhere)
        state = game.state
        assert (state.current, state.extra_turn) == (1 - player, False)
        assert exact(game.folded()) == exact(state)
        assert totals(game) == state.scores


@pytest.mark.parametrize("mode", ["free", "consent"])
def test_r10_6_undoing_a_placement_made_on_the_extra_turn_gives_the_extra_turn_back(
    mode: str,
) -> None:
    """R10.6: on the extra turn a filled hole granted, the player places (with a meeple): the
    turn passes to the next player. The undo gives the extra turn back to the same player,
    not to the next: same tile, `extra_turn` still true (so another hole grants nothing:
    not chained). The hole's own placement stands: there is no undo of it any more (one undo
    point, never a chain)."""
    game, on_extra = at_goal(rules(mode, HOLE), "extra turn")
    player = game.state.current
    before = exact(game.state)
    assert before["extra_turn"]

    game.play(on_extra)
    placed = exact(game.state)
    assert (placed["current"], placed["extra_turn"]) == (1 - player, False)

    assert game.undo(player)[-1] == "TurnUndone"
    state = game.state
    assert (state.current, state.extra_turn, state.drawn) == (player, True, before["drawn"])
    assert exact(state) == before
    assert exact(game.folded()) == before
    assert totals(game) == before["scores"]
    with pytest.raises(GameError) as info:
        game.service.request_undo(game.game_id, game.tokens[player])
    assert code(info) == ("undo_not_allowed", 409)  # the hole's placement stands

    game.play(on_extra)
    assert but_the_draw(exact(game.state)) == but_the_draw(placed)
    assert exact(game.folded()) == exact(game.state)


def test_r10_6_in_a_consent_game_the_placers_extra_turn_ends_the_pending_request() -> None:
    """R10.6 with consent: the player who filled a hole asks to undo it; meanwhile the next
    placement is their own extra turn's, and it ends the request (as any next placement
    does). That placement may then be undone in turn, giving the extra turn back."""
    game, hole = at_hole("consent")
    player = game.state.current
    game.play(hole)
    assert game.state.extra_turn
    asked = game.service.request_undo(game.game_id, game.tokens[player])
    assert [e.type for e in asked.events] == ["UndoRequested"]

    before = exact(game.state)
    on_extra = actions(game.state)[0]
    game.play(on_extra)  # the player's extra turn: the next placement
    with pytest.raises(GameError) as info:
        game.service.answer_undo(game.game_id, game.tokens[1 - player], 1, True)
    assert code(info) == ("undo_closed", 409)

    assert game.undo(player) == ["UndoRequested", "UndoAccepted", "TurnUndone"]  # request 2
    state = game.state
    assert (state.current, state.extra_turn) == (player, True)
    assert {**exact(state), "undo": None} == {**before, "undo": None}
    assert state.undo is None and state.undo_requests == 2


# -- both variants ------------------------------------------------------------------------


def test_r9_2_r10_6_undoing_a_recall_that_filled_a_hole() -> None:
    """R9.2 with R10.6: the placement fills a hole and takes the abbot back (scored at
    once): an extra turn follows. The undo puts the abbot back on the board, takes the extra
    turn and the recall's points back (the worker reverts them), and gives the same tile."""
    game, recall = at_goal(rules("free", BOTH), "recall hole")
    player = game.state.current
    abbot = game.state.abbot_of(player)
    before = exact(game.state)
    first = game.store.last_seq(game.game_id, MOVES) + 1

    game.play(recall)
    state = game.state
    assert (state.current, state.extra_turn, state.abbot_of(player)) == (player, True, None)
    awarded = scored_by(game, first)
    assert any(s["rule"] == "R9.2" for s in awarded)

    assert game.undo(player) == ["UndoRequested", "TurnUndone"]
    assert exact(game.state) == before
    assert exact(game.folded()) == before
    assert game.state.abbot_of(player) == abbot and not game.state.extra_turn
    reverted = reverted_by_last_move(game)
    assert [r["reverted"] for r in reverted] == [s["awarded"] for s in reversed(awarded)]
    assert totals(game) == before["scores"]


# -- the property ---------------------------------------------------------------------------


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    players=st.integers(2, 4),
    area=st.sampled_from([None, (6, 6)]),
)
def test_undoing_any_placement_with_the_abbot_and_r10_6_restores_the_state_before_it(
    seed: int, players: int, area: tuple[int, int] | None
) -> None:
    """R9.2 and R10.6 on (and sometimes a bounded table, R10.5, where holes are common):
    random games whose every placement is undone right after it (and after the next draws,
    as the command service appends them) give back the state before it exactly; placing the
    same way again gives the state after it again but for the draws (fresh ones); the log
    folds to the live state and its record replays to it."""
    ruleset = replace(BOTH, undo="free", area=area)
    rng = random.Random(seed)
    draws = f"variants-{seed}"  # the service's draw seed
    state = GameState()
    log: list[Event] = []

    def run(command: Any) -> list[Event]:
        events = decide(state, command)
        for event in events:
            state.apply(event)
        log.extend(events)
        return events

    def play(action: Action) -> None:
        run(command_for_action(state, action))
        log.extend(draw_until_placeable(state, draws))

    run(StartGame(ruleset, players))
    log.extend(draw_until_placeable(state, draws))
    while not state.over:
        player, before = state.current, exact(state)
        action = rng.choice(actions(state))
        play(action)
        if state.over:
            break
        placed = exact(state)
        undone = run(RequestUndo(player, NOW))
        assert [type(e) for e in undone] == [UndoRequested, TurnUndone]
        assert exact(state) == before
        if rng.random() < 0.5:
            play(action)  # the same game but for the draws after it, fresh ones
            assert but_the_draw(exact(state)) == but_the_draw(placed)
        else:
            play(rng.choice(actions(state)))
    assert fold(log).snapshot() == state.snapshot()
    assert replay(record_from_events(log)).snapshot() == state.snapshot()
    # The scoring worker scores the whole log: every score event it appends (a garden's or
    # a recall's ScoreReverted too) passes the store's schemas, and its finals are the game's.
    store = InMemoryEventStore()
    store.append("g", MOVES, [to_new(e) for e in log], expected=0, command_id="log")
    Scorer(store).catch_up("g")
    final = store.read("g", SCORES)[-1]
    assert final.type == "GameScored" and final.payload["final_scores"] == state.scores
