"""What do time banks cost a turn? (`make bench`, issue 30: "clock overhead: turn throughput
with time banks ≥ 95 % of without"; docs/clocks.md)

Against a private redis-server, in one process: games with a Fischer bank (3 days + 1 day:
no turn runs out while measured) and games without a clock, played turn by turn through the
command service's `GameService.play_turn` (decided, drawn and appended: the cached path, as
bench_lifecycle's baseline). A banked turn appends one more event (`BankCharged`) and folds
it. The two kinds are played in alternating rounds (one turn in every game of one kind, then
of the other, the order swapped each round), so a machine that slows down mid-run slows
both alike. Printed beside them, for information: games with a fixed turn limit
(`turn_seconds`, today's clock). Target: banked turns/s ≥ 0.95 × turns/s without a clock.

Python's full (generation 2) garbage collection is settled between the timed rounds, untimed:
the bench's heap holds every kind's games (~300k tracked objects, ~0.3 s a full collection),
and a full collection falls wherever the objects kept since the last one pass a quarter of
it — a handful of such pauses a run, each ~8 % of a kind's time, charged to whichever kind's
round was running. With the kinds' rounds in a fixed pattern (banked and turn_limit at the
ends, no_clock always in the middle), 6 of a run's 7 landed in the clocked kinds' rounds in
each of three runs measured (issue 30): that, not the clocks, made the banked ratio
0.77-0.89 and turn_limit's 0.51-0.70. So before each timed round the heap is collected and
frozen (`gc.freeze`): a round's collections then scan only what its own kind made, and its
young-generation collections stay in its time. What a kind's turns keep alive (what brings
full collections sooner in a long-running worker) is printed beside the rates, as objects
kept per turn.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from carcassonne.game import actions  # noqa: E402
from carcassonne.ruleset import Ruleset  # noqa: E402
from eventstore.envelope import MOVES  # noqa: E402
from services.command.secrets_store import RedisSecrets  # noqa: E402
from services.command.service import GameService  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.connect import connect  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code, judge  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

MIN_RATIO = 0.95
KINDS = {
    "banked": Ruleset(initial_seconds=3 * 86_400, increment_seconds=86_400),
    "no_clock": Ruleset(),
    "turn_limit": Ruleset(turn_seconds=86_400),
}
Games = list[tuple[str, list[str]]]


def create_games(service: GameService, count: int, ruleset: Ruleset) -> Games:
    """`count` new 2-player games: (id, tokens by seat)."""
    games = []
    for _ in range(count):
        game_id, players = service.create_game(["Ann", "Bob"], ruleset, [0, 1])
        games.append((game_id, [p["token"] for p in players]))
    return games


def settled() -> int:
    """Collect the garbage and freeze what is left (`gc.freeze`: never scanned again), so that
    no full collection of the whole heap falls into the next timed round; returns how many
    tracked objects were left unfrozen, i.e. made and kept since the last call."""
    gc.collect()
    kept = len(gc.get_objects())
    gc.freeze()
    return kept


def one_round(service: GameService, games: Games, rng: random.Random) -> tuple[int, float, int]:
    """One turn in every game not over: (turns played, seconds spent playing them, tracked
    objects those turns kept alive)."""
    plans = []
    for game_id, tokens in games:
        state = service.load(game_id).state
        if state.over:
            continue
        x, y, rotation, _ = rng.choice(actions(state))
        plans.append((game_id, tokens[state.current], x, y, rotation))
    settled()  # the heap as the plans left it: not this round's to collect
    started = time.perf_counter()
    for game_id, token, x, y, rotation in plans:
        service.play_turn(game_id, token, x, y, rotation, None, trust_cache=True)
    seconds = time.perf_counter() - started
    return len(plans), seconds, settled()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=size(300, 4), help="games of each kind")
    parser.add_argument("--rounds", type=int, default=size(40, 2), help="turns per game")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    proc, url, _ = start_redis()
    try:
        client = connect(url, role="bench", max_connections=4)
        store = RedisEventStore(client)
        service = GameService(store, RedisSecrets(client), cache_size=4 * args.games)
        games = {kind: create_games(service, args.games, rules) for kind, rules in KINDS.items()}
        played = dict.fromkeys(KINDS, 0)
        spent = dict.fromkeys(KINDS, 0.0)
        kept = dict.fromkeys(KINDS, 0)
        rngs = {kind: random.Random(kind) for kind in KINDS}
        order = list(KINDS)
        for _ in range(args.rounds):
            for kind in order:
                turns, seconds, objects = one_round(service, games[kind], rngs[kind])
                played[kind] += turns
                spent[kind] += seconds
                kept[kind] += objects
            order.reverse()
        charged = sum(
            e.type == "BankCharged" for g, _ in games["banked"] for e in store.read(g, MOVES)
        )
        ended = sum(service.load(g).state.over for g, _ in games["banked"])
    finally:
        proc.kill()
        proc.wait(timeout=10)
    rate = {kind: played[kind] / spent[kind] for kind in KINDS}
    if args.json:
        figures = {"turns_per_s": rate, "turns": played, "charged": charged, "kept": kept}
        print(json.dumps(figures, indent=1))
    print(f"turns through GameService.play_turn, {args.games} games of each kind, "
          f"{args.rounds} alternating rounds (one process)")  # fmt: skip
    for kind in KINDS:
        print(f"  {kind:<12} {rate[kind]:9.0f} turns/s ({played[kind]:,} turns), "
              f"{rate[kind] / rate['no_clock']:.3f}x no_clock, "
              f"{kept[kind] / played[kind]:.1f} objects kept per turn")  # fmt: skip
    # every banked placement followed by a draw charged its bank: one BankCharged per turn
    # played, but the last of a game that ended (no draw follows it)
    check("banked turns that charged a bank", charged, at_least=played["banked"] - ended,
          always=True)  # fmt: skip
    judge(
        "clock overhead: banked turns/s / turns/s without",
        rate["banked"],
        rate["no_clock"],
        min_ratio=MIN_RATIO,
        unit="/s",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
