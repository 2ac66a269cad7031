"""Does the event store's own Redis path pay? (`make bench`) — the figure that keeps `Wire`.

The event store sends its append script and catch-up XRANGE through `Wire` (hiredis packer
and parser, raw replies, connections checked out per command from a bounded LIFO of its own)
and everything else through redis-py's client (bounded BlockingConnectionPool). This
measures, against a private redis-server, the CPU per command of both paths (the baseline:
redis-py's client with hiredis, what the store would use without `Wire`) and puts the
difference beside the CPU of a whole turn played in process through the command service's
`GameService` on the same store.

Target: `Wire` saves at least 5 % of a turn's CPU (the saving / the turn's CPU, both measured
in this run: already a ratio); below that it is not worth its code.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from carcassonne.game import actions  # noqa: E402
from carcassonne.ruleset import Ruleset  # noqa: E402
from services.command.secrets_store import MemorySecrets  # noqa: E402
from services.command.service import GameService  # noqa: E402
from services.redis_store import RedisEventStore, game_keys  # noqa: E402
from services.redis_store.changes import changes_key  # noqa: E402
from services.redis_store.connect import connect  # noqa: E402
from services.redis_store.keys import archived_key, new_game_id, shard_of  # noqa: E402
from services.redis_store.store import APPEND_LUA  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import exit_code, judge  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

TARGET_SHARE = 0.05


def cpu_us(fn: Callable[[], Any], n: int) -> float:
    """Median over 5 rounds of the process CPU per call, in µs (CPU, not wall: the server's
    time is not ours)."""
    fn()
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            fn()
        rounds.append((time.process_time() - start) / n * 1e6)
    return sorted(rounds)[2]


def turn_cpu_us(store: RedisEventStore, turns: int) -> float:
    """CPU per turn of GameService.play_turn on `store` (cached state, one append each)."""
    service = GameService(store, MemorySecrets())
    rng = random.Random(7)
    total, played = 0.0, 0
    while played < turns:
        game_id, players = service.create_game(["a", "b"], Ruleset(), [0, 1])
        tokens = {p["seat"]: p["token"] for p in players}
        while played < turns and not (state := service.load(game_id).state).over:
            x, y, rotation, meeple = rng.choice(actions(state))
            start = time.process_time()
            service.play_turn(
                game_id, tokens[state.current], x, y, rotation, meeple, trust_cache=True
            )
            total += time.process_time() - start
            played += 1
    return total / played * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=size(5_000, 50), help="commands per round")
    parser.add_argument("--turns", type=int, default=size(700, 20), help="turns played in process")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    proc, url, _ = start_redis()
    try:
        client = connect(url, role="bench", max_connections=4)
        store = RedisEventStore(client)
        raw = store.wire
        game = new_game_id()
        # The append script's keys as the store names them: stream, idempotency, marker, the
        # game's tombstone and the change feed of the game's shard.
        feed = changes_key(shard_of(game) or 0)
        keys = [*game_keys(game, "moves")[:3], archived_key(game), feed]
        stream = keys[0]
        client.xadd(
            stream, {"type": "TileDrawn", "v": 1, "cmd": "c", "t": 1, "data": "{}"}, id="1-0"
        )
        seq = iter(range(10**9))
        sha = client.script_load(APPEND_LUA)
        assert sha == store._append.sha
        script = client.register_script(APPEND_LUA)

        def append_args() -> list[Any]:
            # expected (-1: any), command id, time, marker, expected marker, fingerprint, game,
            # stream, trace, after command (services/redis_store/store.py `append`), the event
            return [-1, f"k{next(seq)}", 1, "", "", "", game, "moves", "", "", "TileDrawn", 1,
                    '{"tile":"E"}']  # fmt: skip

        figures = {
            "xrange_redis_py_us": cpu_us(lambda: client.xrange(stream, "1-0", "+"), args.calls),
            "xrange_raw_us": cpu_us(lambda: raw.call("XRANGE", stream, "1-0", "+"), args.calls),
            "append_redis_py_us": cpu_us(lambda: script(keys=keys, args=append_args()), args.calls),
            "append_raw_us": cpu_us(
                lambda: raw.call("EVALSHA", sha, len(keys), *keys, *append_args()), args.calls
            ),
            "turn_us": turn_cpu_us(store, args.turns),
        }
    finally:
        proc.kill()
        proc.wait()
    # An owned turn sends one append (its cached state is current); a catch-up adds an XRANGE.
    saving = figures["append_redis_py_us"] - figures["append_raw_us"]
    share = saving / figures["turn_us"]
    figures["saving_per_turn_us"], figures["saving_share"] = saving, share
    if args.json:
        print(json.dumps(figures))
    print("event store's Redis path: CPU per command (µs), Wire vs redis-py + hiredis (baseline)")
    for name in ("xrange", "append"):
        print(
            f"  {name:<8} Wire {figures[name + '_raw_us']:6.1f}"
            f"   redis-py client (baseline) {figures[name + '_redis_py_us']:6.1f}"
        )
    print(
        f"  a turn in process (GameService, this store): {figures['turn_us']:.0f} µs CPU;"
        f" Wire saves {saving:.1f} µs of its append = {share:.1%} (else delete Wire)"
    )
    judge(
        "Wire's saving / a turn's CPU",
        saving,
        figures["turn_us"],
        min_ratio=TARGET_SHARE,
        unit="µs",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
