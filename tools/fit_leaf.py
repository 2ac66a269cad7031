"""Fit mcts's leaf weights (`carcassonne.bots.leaf.WEIGHTS`) on greedy games, and say how
well the fit and the heuristic foretell the final lead on games left out of it.

    .venv/bin/python -m tools.fit_leaf --games 300 --seed fit1

Plays `--games` greedy games for each of 2, 3 and 4 players (base set with farmers), records
every player's `leaf.terms` after every move with their final score, fits one weight vector
a (player count, stage) by least squares on the even games and reports, on the odd ones, the
spread (sd) of (final lead − foretold lead) by `heuristic.worth` and by the fit; then prints
`WEIGHTS` fitted on all the games. About 2.5 minutes of CPU for 300 games a count.
`--players 3 4` fits only those counts: `WEIGHTS`' rows for 3 and 4 players are
`--games 200 --seed fitb --players 3 4` (1.5 minutes); its rows for 2 players are the fit of
`--seed fit1` from before the stuck-city terms, with 0 for those (leaf.py).
"""

from __future__ import annotations

import argparse
import math
import random
from collections import defaultdict

from carcassonne.bots import choose
from carcassonne.bots.heuristic import margin, worth
from carcassonne.bots.leaf import STAGES, fit_weights, stage, terms
from carcassonne.bots.view import player_view
from carcassonne.events import GameEnded, GameStarted, TileDrawn
from carcassonne.game import action_events, actions
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import bag_order, set_aside
from carcassonne.state import GameState

# (tiles left, scores, each player's terms, worth) after a move; then the final scores
Position = tuple[int, list[int], list[list[float]], list[float]]
Rows = list[tuple[list[float], float]]


def greedy_game(players: int, seed: str, game: int) -> tuple[list[Position], list[int]]:
    """One greedy game's positions after each move, and its final scores."""
    state = GameState()
    state.apply(GameStarted(Ruleset(), players))
    bag_rng = random.Random(f"leaf:{seed}:{players}:{game}")
    order = bag_order(state, bag_rng)
    seen: list[Position] = []
    while order and not state.over:
        tile = order.pop()
        state.apply(TileDrawn(tile))
        if not actions(state):
            set_aside(state, tile, order, bag_rng, state.apply)
            continue
        view = player_view(state)
        action = choose("greedy", view, f"{seed}:{game}:{state.turn}").action
        for event in action_events(state, action):
            state.apply(event)
        if not state.over:
            seen.append((state.bag_size, list(state.scores), terms(state), worth(state)))
    if not state.over:
        state.apply(GameEnded("last tile placed"))
    return seen, list(state.scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=300, help="games a player count")
    parser.add_argument("--seed", default="fit1")
    parser.add_argument("--players", type=int, nargs="+", default=[2, 3, 4], help="player counts")
    args = parser.parse_args()
    rows: dict[tuple[int, int, int], Rows] = defaultdict(list)  # (players, stage, odd) -> rows
    test: list[tuple[int, Position, list[int]]] = []
    for players in args.players:
        for game in range(args.games):
            seen, final = greedy_game(players, args.seed, game)
            for position in seen:
                left, scores, split, _ = position
                if stage(left) < 0:
                    continue
                for p in range(players):
                    key = (players, stage(left), game % 2)
                    rows[key].append((split[p], final[p] - scores[p]))
                if game % 2:
                    test.append((players, position, final))
    even = {
        (players, at): fit_weights(found) for (players, at, odd), found in rows.items() if not odd
    }
    errors: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for players, (left, scores, split, judged), final in test:
        weights = even[(players, stage(left))]
        foretold = [
            score + weights[-1] + sum(w * t for w, t in zip(weights, row, strict=False))
            for score, row in zip(scores, split, strict=True)
        ]
        for p in range(players):
            lead = margin([float(s) for s in final], p)
            error = errors[(players, stage(left))]
            error[0] += 1
            error[1] += (lead - margin(judged, p)) ** 2
            error[2] += (lead - margin(foretold, p)) ** 2
    print("players  tiles left  rows  sd(final lead - worth's)  sd(final lead - fit's)")
    for (players, at), (n, by_worth, by_fit) in sorted(errors.items()):
        low = STAGES[at]
        high = STAGES[at + 1] - 1 if at + 1 < len(STAGES) else "end"
        sds = f"{math.sqrt(by_worth / n):24.2f}  {math.sqrt(by_fit / n):22.2f}"
        print(f"{players:7}  {low:>4}-{high:<5}  {int(n):5}  {sds}")
    print("WEIGHTS: dict[int, tuple[tuple[float, ...], ...]] = {")
    for players in args.players:
        print(f"    {players}: (")
        for at in range(len(STAGES)):
            both = rows[(players, at, 0)] + rows[(players, at, 1)]
            weights = fit_weights(both)[:-1]  # the intercept is the same for every player
            print("        (" + ", ".join(f"{w:.3f}" for w in weights) + "),")
        print("    ),")
    print("}")


if __name__ == "__main__":
    main()
