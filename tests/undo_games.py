"""Games for the undo tests: a seed and the moves that lead, through the command service's
own draws, to a placement that completes a city holding a meeple of each of two players.

The search plays the service itself on its in-memory adapters (the draws are the seed's, as
on a real suite): each player puts a meeple in a city whenever it can, and the search stops
at the first drawn tile that can join two such cities into a completed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from carcassonne.events import TilePlaced, meeple_to_dict
from carcassonne.game import actions
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from eventstore.port import InMemoryEventStore
from services.command.secrets_store import MemorySecrets
from services.command.service import GameService

Move = dict[str, Any]  # a turn's body: x, y, rotation, meeple


@dataclass(frozen=True)
class CityJoin:
    """A game's seed, the moves before the goal, and the goal: a placement that completes a
    city with one meeple of each of the two players in it (`points` to each)."""

    seed: str
    moves: tuple[Move, ...]
    goal: Move
    points: int


def _body(action: tuple[int, int, int, Any]) -> Move:
    x, y, rotation, meeple = action
    return {"x": x, "y": y, "rotation": rotation, "meeple": meeple_to_dict(meeple)}


def _goal(state: GameState) -> tuple[Move, int] | None:
    """A placement of the drawn tile that completes a city holding meeples of both players."""
    assert state.drawn is not None
    for action in actions(state):
        if action[3] is not None:
            continue
        twin = state.copy()
        before = len(twin.log)
        twin.apply(TilePlaced(state.current, state.drawn, *action))
        for scored in twin.log[before:]:
            if scored.kind == "city" and tuple(scored.meeples) == (1, 1):
                return _body(action), scored.points
    return None


@cache
def city_join(ruleset: Ruleset, first_seed: int = 0) -> CityJoin:
    """The first seed (from `first_seed` on) whose game reaches a two-meeple city join."""
    for number in range(first_seed, first_seed + 200):
        seed = f"undo-{number}"
        service = GameService(InMemoryEventStore(), MemorySecrets())
        game_id, seats = service.create_game(["Ann", "Bob"], ruleset, [0, 1], seed=seed)
        moves: list[Move] = []
        while True:
            state = service.load(game_id).state
            if state.over or state.turn > 40:
                break
            found = _goal(state)
            if found is not None:
                return CityJoin(seed, tuple(moves), found[0], found[1])
            choices = actions(state)
            cities = [a for a in choices if a[3] is not None and a[3].feature == "city"]
            quiet = [a for a in choices if a[3] is None]
            action = (cities or quiet)[0] if (cities or quiet) else choices[0]
            move = _body(action)
            service.play_turn(
                game_id,
                seats[state.current]["token"],
                move["x"],
                move["y"],
                move["rotation"],
                action[3],
            )
            moves.append(move)
    raise AssertionError("no seed reached a two-meeple city join")
