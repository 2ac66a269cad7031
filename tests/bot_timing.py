"""Does a bot's move time tell its hidden hand (R10.3, issue 32 finding 1)? Measured as an
opponent would: bot seats play hand games on a real Redis through `BotPlayer.play` (what the
bot worker's task runs), and each move's time is the gap between the public `time_ms` of the
event before it and of its `TilePlaced`. After the game its log is folded with the secret
seed to learn what the mover held; the moves with a full hand of three are grouped by how many
distinct tiles it had (1, 2 or 3: an opponent knows the hand's size, not its make-up).

The baseline, `paced=False`, is how bots moved before issue 32 (one search per distinct tile,
each with the whole think time, appended as soon as decided), rebuilt by injection only: a
policy that drops the move's shared deadline and a sleep that does nothing.

Used by tests/integration/test_bot_timing.py (asserts) and tests/bench/bench_bot_timing.py
(prints the figure).
"""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from carcassonne.bots import Budget, Choice, PlayerView, choose
from carcassonne.ruleset import Ruleset
from carcassonne.state import GameState
from eventstore.envelope import MOVES
from eventstore.schemas import to_engine
from services.bots.player import PLAYED, BotPlayer
from services.command.secrets_store import RedisSecrets
from services.command.service import GameService
from services.common.draws import opened
from services.redis_store import RedisEventStore

HAND = Ruleset(hand=3)


@dataclass(frozen=True)
class Move:
    """One bot move: how many distinct tiles its hand of three held, and its public gap."""

    distinct: int
    gap_ms: int


def moves_of(client: redis.Redis, game_id: str, seed: str) -> list[Move]:
    """The moves of a finished game made with a full hand, each with its gap (the game's
    first move is left out: its gap starts at the game's creation)."""
    stored = RedisEventStore(client).read(game_id, MOVES)
    state = GameState()
    out: list[Move] = []
    previous_ms: int | None = None
    placed = 0
    for event in stored:
        if event.type == "TilePlaced" and state.hands:
            hand = [held.tile for held in state.hands[state.current] if held.tile is not None]
            if placed and len(hand) == 3 and previous_ms is not None:
                out.append(Move(len(set(hand)), event.time_ms - previous_ms))
            placed += 1
        state.apply(opened(state, to_engine(event), seed))
        previous_ms = event.time_ms
    return out


def unpaced(level: str, view: PlayerView, seed: str, budget: Budget) -> Choice:
    """The policy as it was given a hand's view before issue 32: the whole think time."""
    whole = Budget(think_ms=budget.think_ms, clock=budget.clock) if budget.timed else budget
    return choose(level, view, seed, whole)


def play_games(
    url: str,
    level: str,
    think_ms: int,
    games: int,
    jobs: int = 3,
    floor_ms: int = 100,
    paced: bool = True,
    moves: int | None = None,
) -> list[Move]:
    """Play `games` two-bot hand games at `level`, `jobs` at once (a process each, as the
    bot worker's prefork children: no game waits on another's interpreter lock), moves lasting
    `floor_ms` at least, to the end or for `moves` moves, and return their moves with a full
    hand; `paced=False`: the baseline (the module's doc)."""
    task = partial(_play_one, url, level, think_ms, floor_ms, paced, moves)
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        played = pool.map(task, range(games), chunksize=1)
    client = redis.Redis.from_url(url)
    return [move for game_id, seed in played for move in moves_of(client, game_id, seed)]


def _play_one(
    url: str,
    level: str,
    think_ms: int,
    floor_ms: int,
    paced: bool,
    moves: int | None,
    number: int,
) -> tuple[str, str]:
    """Create one two-bot hand game and play it (to the end, or `moves` moves): its id and
    secret seed."""
    client = redis.Redis.from_url(url)
    secrets = RedisSecrets(client)
    service = GameService(RedisEventStore(client), secrets)
    bot = {"level": level, "think_ms": think_ms}
    seed = f"timing:{level}:{number}:{random.random()}"
    args: dict[str, Any] = {"floor_ms": floor_ms}
    if not paced:
        args = {"floor_ms": 0, "policy": unpaced, "sleep": lambda seconds: None}
    player = BotPlayer(RedisEventStore(client), secrets.get, **args)
    game_id, _ = service.create_game(["a", "b"], HAND, [0, 1], None, bots=[bot, bot], seed=seed)
    played = 0
    while (moves is None or played < moves) and player.play(game_id).kind == PLAYED:
        played += 1
    return game_id, seed


def groups(moves: Sequence[Move]) -> dict[int, list[int]]:
    """The gaps (ms) by distinct tiles in the hand, sorted."""
    out: dict[int, list[int]] = {}
    for move in moves:
        out.setdefault(move.distinct, []).append(move.gap_ms)
    return {k: sorted(v) for k, v in sorted(out.items())}


def best_threshold_accuracy(a: Sequence[float], b: Sequence[float]) -> float:
    """The balanced accuracy (mean of the two groups' hit rates; chance is 0.5) of the best
    single-threshold classifier between two groups of times: "at most t is group a" or the
    other way round, over every threshold, in-sample (so a little above 0.5 by luck alone)."""
    if not a or not b:
        return 0.5
    best = 0.5
    for t in sorted(set(a) | set(b)):
        below_a = sum(1 for v in a if v <= t) / len(a)
        below_b = sum(1 for v in b if v <= t) / len(b)
        balanced = (below_a + (1 - below_b)) / 2
        best = max(best, balanced, 1 - balanced)
    return best


def summary(moves: Sequence[Move]) -> dict[str, Any]:
    """Ranges per group and the best classifier's balanced accuracy for each pair of groups."""
    by = groups(moves)
    pairs = {
        f"{i}v{j}": round(best_threshold_accuracy(by[i], by[j]), 3) for i in by for j in by if i < j
    }
    return {
        "groups": {
            k: {"n": len(v), "min": v[0], "median": v[len(v) // 2], "max": v[-1]}
            for k, v in by.items()
        },
        "accuracy": pairs,
    }


def describe(name: str, result: dict[str, Any], show: Callable[[str], None] = print) -> None:
    """Print a level's figure: each group's range and the classifier's accuracy."""
    parts = [
        f"{k} distinct: {g['min']}-{g['max']} ms (median {g['median']}, n={g['n']})"
        for k, g in result["groups"].items()
    ]
    accuracy = ", ".join(f"{pair} {value:.2f}" for pair, value in result["accuracy"].items())
    show(f"{name}: {'; '.join(parts)}; best threshold accuracy {accuracy}")
