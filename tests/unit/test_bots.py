"""The bot policies (shared/carcassonne/bots): legal moves only, reproducible, and blind to
the draw order (they are given a `PlayerView`, built from the state alone)."""

from __future__ import annotations

import collections
import dataclasses
import json
import random
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from carcassonne import cli
from carcassonne.bots import LEVELS, POLICIES, Budget, PlayerView, choose, player_view
from carcassonne.bots.duel import play_duel_game, summarize, wilson
from carcassonne.bots.heuristic import Appraisal, margin, worth, worth_glanced
from carcassonne.bots.leaf import leaf_worth
from carcassonne.bots.simple import after, glance, ranked, weigh, weigh_all
from carcassonne.bots.view import HIDDEN_STATE, PUBLIC_STATE
from carcassonne.events import DrawTile, TileDrawn
from carcassonne.game import (
    Action,
    actions,
    command_for_action,
    decide,
    drawable,
    fold,
    is_unplaceable,
)
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState

from .test_properties import FAST, rulesets

SMALL = Budget(playouts=12)
# Every ruleset variant there is: the property tests' rulesets (which cover the river, the
# closing border and the extra turn) with hints on or off.
variants = st.tuples(rulesets, st.booleans()).map(lambda t: dataclasses.replace(t[0], hints=t[1]))


def position(seed: int, players: int, ruleset: Ruleset, turns: int) -> GameState | None:
    """A random game stopped after `turns` tiles, with a tile drawn that fits (or None)."""
    _, events = random_game(random.Random(seed), players, ruleset, max_turns=turns)
    state = fold(events[:-1])  # without its GameEnded("stopped") (or the real end)
    if state.over or not state.bag:
        return None
    rng = random.Random(seed + 1)
    choices = sorted(drawable(state))  # with the river, its tiles first (R9.1)
    for tile in rng.sample(choices, len(choices)):
        state.apply(TileDrawn(tile))
        if not is_unplaceable(state):
            return state
        state = fold_without_last(state)
    return None


def fold_without_last(state: GameState) -> GameState:
    """`state` before its last draw (a copy with the tile back in the bag)."""
    twin = state.copy()
    assert twin.drawn is not None
    twin.bag[twin.drawn] = twin.bag.get(twin.drawn, 0) + 1
    twin.bag_size += 1
    twin.drawn, twin.phase = None, "draw"
    return twin


@FAST
@given(
    st.integers(0, 2**32 - 1), st.integers(2, 6), variants, st.integers(0, 80), st.integers(0, 99)
)
def test_every_level_plays_only_legal_actions(
    seed: int, players: int, ruleset: Ruleset, turns: int, move_seed: int
) -> None:
    """Over random positions of every ruleset variant, each bot's move is one `actions`
    lists and `decide` accepts it (R4, R5)."""
    state = position(seed, players, ruleset, turns)
    if state is None:
        return
    legal = set(actions(state))
    for level in LEVELS:
        choice = choose(level, player_view(state), move_seed, SMALL)
        assert choice.action in legal, (level, choice)
        events = decide(state, command_for_action(state, choice.action))  # R9.2: a recall too
        assert events, level


def board_facts(state: GameState) -> tuple[object, ...]:
    """Everything a placement could change in a state, as values to compare."""
    board = state.board
    feats = [
        None if f is None else (f.kind, sorted(f.tiles), f.open, f.pennants, f.meeples, f.done)
        for f in board.feats
    ]
    roots = [board.find(node) for node in range(len(board.parent))]
    return (state.scores, state.supply, sorted(state.meeples), feats, roots)


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(2, 6), variants, st.integers(0, 80))
def test_a_glance_weighs_an_action_as_a_whole_copy_does_and_changes_nothing(
    seed: int, players: int, ruleset: Ruleset, turns: int
) -> None:
    """`glance` shares the features a placement cannot change with the state it reads: every
    action of random positions of every variant weighs the same as on a whole copy, and the
    state it was read from is left as it was (R6: completions and their scores included)."""
    state = position(seed, players, ruleset, turns)
    if state is None:
        return
    before = board_facts(state)
    for action in actions(state):
        whole, glanced = after(state, action), glance(state, action)
        assert worth(glanced) == worth(whole), action
        assert board_facts(glanced) == board_facts(whole), action
    assert board_facts(state) == before


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(2, 6), variants, st.integers(0, 80))
def test_an_appraisal_reads_back_the_same_weights_to_the_last_bit(
    seed: int, players: int, ruleset: Ruleset, turns: int
) -> None:
    """`worth_glanced` (the terms of the features a placement cannot change read from the
    position's `Appraisal`) is `worth` itself, the same floats, on every action of random
    positions of every variant: completions, joined cities beside farms, the abbot (R9.2), the
    closing border (R10.5) included; so bots weigh exactly as before and play the same moves."""
    state = position(seed, players, ruleset, turns)
    if state is None:
        return
    appraisal = Appraisal(state)
    for action in actions(state):
        glanced = glance(state, action)
        assert worth_glanced(glanced, appraisal) == worth(glanced), action
        assert weigh(state, action, appraisal) == weigh(state, action), action


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(2, 6), variants, st.integers(0, 80))
def test_weighing_a_turn_at_once_gives_each_actions_own_weight(
    seed: int, players: int, ruleset: Ruleset, turns: int
) -> None:
    """`weigh_all` (a placement glanced at once, each meeple on it added by `meeple_gain`)
    agrees with `weigh` of each action, a meeple on a feature the tile completes (R6) and
    the abbot (R9.2) included, and changes nothing in the state it reads."""
    state = position(seed, players, ruleset, turns)
    if state is None:
        return
    before = board_facts(state)
    choices = actions(state)
    for action, value in zip(choices, weigh_all(state, choices), strict=True):
        assert value == pytest.approx(weigh(state, action), abs=1e-9), action
    assert board_facts(state) == before


def test_the_same_seed_gives_the_same_move() -> None:
    for seed in range(6):
        state = position(seed, 2 + seed % 3, Ruleset(), 10 + 7 * seed)
        assert state is not None
        view = player_view(state)
        for level in LEVELS:
            first = choose(level, view, "s1", Budget(playouts=40))
            again = choose(level, player_view(state), "s1", Budget(playouts=40))
            assert first == again, level


def test_the_random_bot_depends_on_its_seed() -> None:
    state = position(3, 2, Ruleset(), 20)
    assert state is not None and len(actions(state)) > 5
    moves = {choose("random", player_view(state), seed).action for seed in range(20)}
    assert len(moves) > 1


def test_the_view_holds_counts_not_the_draw_order() -> None:
    """Two games whose bags were shuffled differently but that reached the same position
    give the same view and the same move: the policy cannot tell the orders apart."""
    _, events = random_game(random.Random(7), 2, Ruleset(), max_turns=15)
    events = events[:-1]  # without GameEnded("stopped")
    state = fold(events)
    tile = sorted(state.bag)[0]
    # The two "services" hold different secret orders for the rest of the bag.
    rest = [name for name, n in sorted(state.bag.items()) for _ in range(n)]
    order_a, order_b = rest[:], rest[:]
    random.Random(1).shuffle(order_a)
    random.Random(2).shuffle(order_b)
    assert order_a != order_b
    views = []
    for _order in (order_a, order_b):
        twin = fold(events)
        twin.apply(decide(twin, DrawTile(tile))[0])
        views.append(player_view(twin))
    assert views[0] == views[1]
    for level in LEVELS:
        assert choose(level, views[0], 5, SMALL) == choose(level, views[1], 5, SMALL)
    # What a view holds, and that the bag is counts by type (no sequence of draws).
    names = {f.name for f in dataclasses.fields(PlayerView)}
    assert names == {
        "ruleset",
        "players",
        "me",
        "tile",
        "scores",
        "supply",
        "bag",
        "turn",
        "extra_turn",
        "discarded",
        "placed",
        "standing",
        "state",
        "hand",  # R10.3: the mover's own hand only (tests/unit/test_rules_hand.py)
    }
    left = dict(state.bag)
    left[tile] -= 1
    assert views[0].bag == tuple(sorted((k, n) for k, n in left.items() if n))


def test_every_engine_field_a_view_copies_is_known_to_be_public() -> None:
    """A field added to GameState must be classified (bots/view.py PUBLIC_STATE) before a
    bot may be given it: a hidden one would leak through `PlayerView.position()`."""
    assert set(GameState.__slots__) == PUBLIC_STATE | HIDDEN_STATE


def test_policies_are_given_only_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """The duel (which holds the shuffled order) hands each policy a PlayerView only."""
    seen: list[tuple[object, ...]] = []
    greedy = POLICIES["greedy"]

    def spy(*args: object) -> object:
        seen.append(args)
        return greedy(*args)  # type: ignore[arg-type]

    monkeypatch.setitem(POLICIES, "greedy", spy)
    play_duel_game(0, 3, ("greedy", "random"))
    assert seen
    for view, rng, budget in seen:
        assert type(view) is PlayerView
        assert type(rng) is random.Random and type(budget) is Budget


def test_greedy_takes_points_on_offer() -> None:
    """Greedy's move is the best by its own estimate, and looking does not change the state."""
    for seed in range(40):
        state = position(seed, 2, Ruleset(), 12)
        if state is None:
            continue
        me = state.current
        before = worth(state)[me]
        choice = choose("greedy", player_view(state), 0)
        best = max(margin(worth(after(state, a)), me) for a in actions(state))
        assert choice.value == pytest.approx(best)
        assert before == worth(state)[me]  # the state was not changed


def test_mcts_with_a_time_budget_stops_in_time() -> None:
    state = position(4, 2, Ruleset(), 30)
    assert state is not None
    started = time.perf_counter()
    choice = choose("mcts", player_view(state), 1, Budget(think_ms=150, clock=time.perf_counter))
    took = time.perf_counter() - started
    assert choice.playouts > 0
    assert took < 1.0  # one playout is a few ms: the deadline is checked before each


def test_a_time_budget_needs_a_clock() -> None:
    with pytest.raises(ValueError):
        Budget(think_ms=10)


def test_an_unknown_level_is_refused() -> None:
    state = position(1, 2, Ruleset(), 5)
    assert state is not None
    with pytest.raises(ValueError, match="unknown bot level"):
        choose("genius", player_view(state), 0)


def test_a_view_needs_a_drawn_tile() -> None:
    _, events = random_game(random.Random(1), 2, Ruleset(), max_turns=3)
    state = fold(events[:-1])
    with pytest.raises(ValueError):
        player_view(state)


def test_wilson_interval() -> None:
    lo, hi = wilson(190, 200)
    assert 0.91 < lo < 0.92 and 0.97 < hi < 0.98
    assert wilson(0, 0) == (0.0, 1.0)


def test_duel_games_pair_seats_on_one_bag() -> None:
    a = play_duel_game(0, 9, ("random", "random"))
    b = play_duel_game(1, 9, ("random", "random"))
    assert a.seat_a == 0 and b.seat_a == 1
    summary = summarize([a, b])
    assert summary.games == 2 and summary.wins_a + summary.wins_b + summary.draws == 2


def test_duel_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["duel", "--a", "greedy", "--b", "random", "--games", "2", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 2 and out["wins_a"] + out["wins_b"] + out["draws"] == 2
    assert len(out["ci95"]) == 2 and out["ci95"][0] <= out["ci95"][1]


def test_mcts_compares_candidates_on_the_same_determinizations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired playouts: within a round every candidate is played out on one bag order and
    one playout seed; rounds differ; sequential halving narrows the race phase by phase."""
    from carcassonne.bots import mcts

    calls: list[tuple[tuple[str, ...], int]] = []
    real = mcts.playout

    def recording(state: GameState, order: list[str], plies: int, rng: random.Random) -> GameState:
        calls.append((tuple(order), rng.getrandbits(32)))
        return real(state, order, plies, rng)

    monkeypatch.setattr(mcts, "playout", recording)
    state = position(2, 2, Ruleset(), 12)
    assert state is not None
    choice = choose("mcts", player_view(state), 5, Budget(playouts=120))
    assert 0 < choice.playouts <= 120 and len(calls) == choice.playouts
    # Split the calls into rounds: a round is a run of calls with one (order, seed).
    rounds: list[int] = []
    for i, call in enumerate(calls):
        if i and call == calls[i - 1]:
            rounds[-1] += 1
        else:
            rounds.append(1)
    assert len(rounds) > 1 and len(set(calls)) == len(rounds)  # each round its own draw
    assert rounds == sorted(rounds, reverse=True)  # the race only ever narrows
    assert rounds[0] == min(mcts.WIDTH, len(actions(state))) and rounds[-1] <= 2
    # Stratified: the rounds' first draws (the end of each order) come from one shuffled copy
    # of the bag, so no tile type is first more often than the bag holds it.
    firsts = collections.Counter(call[0][-1] for i, call in enumerate(calls)
                                 if i == 0 or call != calls[i - 1])  # fmt: skip
    assert len(rounds) <= state.bag_size
    assert all(firsts[name] <= state.bag[name] for name in firsts)


def test_mcts_with_no_playouts_to_spend_plays_the_best_prior_of_greedys_candidates() -> None:
    """Without a playout, the move is the greedy ranking's candidate whose position the
    fitted leaf (`leaf.leaf_worth`) weighs best."""
    from carcassonne.bots import mcts

    state = position(3, 2, Ruleset(), 20)
    assert state is not None
    me = state.current
    candidates = [a for _, a in ranked(state, actions(state))[: mcts.WIDTH]]
    best = max(margin(leaf_worth(after(state, a)), me) for a in candidates)
    choice = choose("mcts", player_view(state), 1, Budget(playouts=1))
    assert choice.playouts == 0
    assert choice.value == pytest.approx(best)
    assert choice.value == pytest.approx(margin(leaf_worth(after(state, choice.action)), me))


def test_duel_cli_reads_think_time_on_the_cpu_clock(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["duel", "--a", "mcts", "--b", "random", "--games", "1", "--json"]
    code = cli.main([*argv, "--think-ms", "5", "--clock", "cpu"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clock"] == "cpu" and out["games"] == 1
    assert 0 < out["ms_per_move_a"] < 200  # about 5 ms of CPU a move, whatever else runs


def test_duel_cli_writes_each_game_as_it_ends(tmp_path: Path) -> None:
    results = tmp_path / "games.jsonl"
    argv = ["duel", "--a", "greedy", "--b", "random", "--games", "3", "--json"]
    assert cli.main([*argv, "--results", str(results)]) == 0
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(line["game"] for line in lines) == [0, 1, 2]
    for line in lines:
        seat = line["seat_a"]
        other = max(s for p, s in enumerate(line["scores"]) if p != seat)
        assert line["diff"] == line["scores"][seat] - other


@pytest.mark.parametrize("players", [2, 3, 4])
def test_an_mcts_playout_plays_one_round_of_the_table_the_movers_next_turn_included(
    monkeypatch: pytest.MonkeyPatch, players: int
) -> None:
    """The playout after a candidate plays every seat's turn once, the mover's next one last:
    with 3 players a playout that stopped before the mover's own next turn lost 11 points a
    game to the one that plays it (docs/bots.md, issue 30)."""
    from carcassonne.bots import mcts

    movers: list[list[int]] = []
    real_playout, real_action = mcts.playout, mcts.playout_action

    def recording(state: GameState, order: list[str], plies: int, rng: random.Random) -> GameState:
        movers.append([])
        return real_playout(state, order, plies, rng)

    def acting(state: GameState, choices: list[Action], rng: random.Random) -> Action:
        movers[-1].append(state.current)
        return real_action(state, choices, rng)

    monkeypatch.setattr(mcts, "playout_action", acting)
    monkeypatch.setattr(mcts, "playout", recording)
    state = position(6, players, Ruleset(), 10)
    assert state is not None
    me = state.current
    choose("mcts", player_view(state), 1, Budget(playouts=16))
    assert movers
    others = [(me + k) % players for k in range(1, players)]
    assert all(seats == [*others, me] for seats in movers)
