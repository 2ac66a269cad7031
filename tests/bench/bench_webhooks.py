"""Webhook benchmark (`make bench`): deliveries per second of one worker process, and the
Redis connections it held, on loopback.

A backlog of score events is stored for `--games` games (one hook each, to one fast local
receiver: an asyncio HTTP server in its own process that answers 204 and counts what it got,
per hook and in order). One Celery worker process (thread pool, `--concurrency` threads, as
deploy runs it) on the webhook queue is started, and one `subscriptions.dispatch` per game is
sent. Reported: deliveries per second from the first dispatch to the last delivery, and the
most Redis connections of the webhook tasks seen in CLIENT LIST (sampled every 20 ms, both
`cc:webhooks` and `cc:webhooks:wire`) beside the bound the worker configured.

Baseline, same run: raw POSTs per second to the same receiver from one process with the
same number of threads, through the same HTTP client code (one lookup, a checked address, a
new connection per POST): what the HTTP part alone allows.

Targets (counts, not speed: judged as they are, tests/bench/targets.py): every delivery made,
once and in seq order per hook; connections ≤ the bound. The throughput beside its baseline
is printed, not judged.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from celery import Celery  # noqa: E402

from carcassonne.ruleset import Ruleset  # noqa: E402
from carcassonne.simulate import random_game  # noqa: E402
from carcassonne.state import GameState  # noqa: E402
from eventstore.envelope import MOVES, SCORES, NewEvent, StoredEvent  # noqa: E402
from eventstore.schemas import to_new  # noqa: E402
from eventstore.score_stream import FEATURE_SCORED, GAME_SCORED, score_events  # noqa: E402
from services.command.hooks import Webhooks  # noqa: E402
from services.common.signing import SIGNATURE_HEADER  # noqa: E402
from services.redis_store import RedisEventStore  # noqa: E402
from services.redis_store.connect import connect  # noqa: E402
from services.scoring.posting import HttpPoster  # noqa: E402
from tests.bench.smoke import size  # noqa: E402
from tests.bench.targets import check, exit_code  # noqa: E402
from tests.integration.http_client import free_port  # noqa: E402
from tests.integration.workers import celery_env, running, worker  # noqa: E402
from tests.redis_server import start_redis  # noqa: E402

ROLE = "cc:webhooks"

# ------------------------------------------------------------------ the receiver


def serve_receiver(port: int) -> None:
    """A fast webhook receiver (asyncio, one process): answers 204 and closes; counts per
    hook, and how often a seq came that was not the next one. GET /stats answers the counts."""
    got: dict[str, int] = {}  # hook -> last seq accepted
    stats = {"count": 0, "out_of_order": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            if lines[0].startswith("GET"):
                body = json.dumps(stats).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n"
                             b"\r\n%s" % (len(body), body))  # fmt: skip
            else:
                data = json.loads(await reader.readexactly(int(headers["content-length"])))
                hook, seq = data["hook_id"], int(data["seq"])
                if seq != got.get(hook, 0) + 1:
                    stats["out_of_order"] += 1
                got[hook] = max(seq, got.get(hook, 0))
                stats["count"] += 1
                writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ValueError, KeyError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def receiver_stats(port: int) -> dict[str, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/stats")
        return dict(json.loads(conn.getresponse().read()))
    finally:
        conn.close()


def start_receiver() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--receiver", str(port)], cwd=ROOT)
    deadline = time.monotonic() + 10
    while True:
        try:
            receiver_stats(port)
            return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("the receiver did not start") from None
            time.sleep(0.05)


# ------------------------------------------------------------------ backlog


def score_pool(count: int, seed: int) -> list[NewEvent]:
    """`count` score events as the worker writes them (FeatureScored of random games, then a
    GameScored): the same list serves every game."""
    rng = random.Random(seed)
    pool: list[NewEvent] = []
    while len(pool) < count - 1:
        _, events = random_game(rng, 5, Ruleset(meeples=40))
        stored = [StoredEvent("x", MOVES, i + 1, e.type, e.version, 0, "c", e.payload)
                  for i, e in enumerate(to_new(e) for e in events)]  # fmt: skip
        pool += [e for e in score_events(GameState(), stored) if e.type == FEATURE_SCORED]
    final = NewEvent(GAME_SCORED, 1, {"move": 144, "final_scores": [1, 2, 3, 4, 5],
                                      "scores_before_final": [1, 2, 3, 4, 5],
                                      "ranks": [5, 4, 3, 2, 1], "winners": [4]})  # fmt: skip
    return [*pool[: count - 1], final]


def store_backlog(url: str, games: int, events: int, receiver: str) -> list[str]:
    """Games with a move stream, `events` score events and one hook each."""
    client = redis.Redis.from_url(url)
    store = RedisEventStore(client)
    hooks = Webhooks(client, store, None, allow_private=True)
    _, moves = random_game(random.Random(1), 5)
    new_moves = [to_new(e) for e in moves]
    scores = score_pool(events, seed=2)
    ids = []
    for i in range(games):
        game_id = f"wb{i:030x}"
        store.append(game_id, MOVES, new_moves, expected=0, command_id="m", marker="$seq")
        store.append(game_id, SCORES, scores, expected=0, command_id="s", marker="x")
        hooks.register(game_id, receiver, "a-bench-secret-of-length", "k_bench")
        ids.append(game_id)
    client.close()
    return ids


# ------------------------------------------------------------------ measurements


class ConnectionWatch(threading.Thread):
    """Samples CLIENT LIST every 20 ms: the most webhook-task connections seen."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = connect(url, role="bench-watch", max_connections=1)
        self.most = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.02):
            names = [c.get("name", "") for c in self.client.client_list()]
            self.most = max(self.most, sum(1 for n in names if n.split(":wire")[0] == ROLE))


def baseline(port: int, threads: int, seconds: float) -> float:
    """Raw POSTs per second, `threads` threads of this process, the worker's HTTP client."""
    poster = HttpPoster(timeout=5.0, allow_private=True)
    url = f"http://127.0.0.1:{port}/hooks/in"
    # A delivery's signature header as a hook registered today gets it (t=, v1=).
    signature = f"t={int(time.time())},v1={'0' * 64}"
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature}
    counts = [0] * threads
    end = time.monotonic() + seconds

    def run(i: int) -> None:
        seq = 0
        while time.monotonic() < end:
            seq += 1
            body = json.dumps({"hook_id": f"base{i}", "seq": seq, "payload": {"x": "y" * 300}})
            if poster(url, body.encode(), headers).status == 204:
                counts[i] += 1

    started = time.monotonic()
    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description="webhook delivery benchmark")
    parser.add_argument("--games", type=int, default=size(40, 3), help="games, one hook each")
    parser.add_argument("--events", type=int, default=size(60, 5), help="score events per game")
    parser.add_argument("--concurrency", type=int, default=2, help="worker threads (deploy: 2)")
    parser.add_argument("--baseline-seconds", type=float, default=size(5.0, 0.5))
    parser.add_argument("--timeout", type=float, default=90.0, help="give up after this long")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--receiver", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.receiver:
        serve_receiver(args.receiver)
        return 0

    redis_proc, url, workdir = start_redis()
    receiver, port = start_receiver()
    try:
        total = args.games * args.events
        games = store_backlog(url, args.games, args.events, f"http://127.0.0.1:{port}/hooks/in")
        env = celery_env(url, WEBHOOK_ALLOW_PRIVATE="1")
        proc = worker(env, name="bench-wh", concurrency=args.concurrency, queues="webhooks")
        sender = Celery("bench-webhooks", broker=env["BROKER_URL"])
        watch = ConnectionWatch(url)
        with running(proc):
            watch.start()
            started = time.monotonic()
            for game_id in games:
                sender.send_task("subscriptions.dispatch", args=[game_id], queue="webhooks")
            deadline = started + args.timeout
            while (done := receiver_stats(port))["count"] < total:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            elapsed = time.monotonic() - started
            time.sleep(0.5)  # a duplicate would arrive now
            done = receiver_stats(port)
            watch.stopped.set()
            watch.join(timeout=5)
            found = re.findall(r"max_connections=(\d+)", proc.log.read_text(errors="replace"))
            bound = int(found[0]) if found else 0
        sender.close()
        rate = done["count"] / elapsed if elapsed else 0.0
        base = baseline(port, args.concurrency, args.baseline_seconds)
    finally:
        receiver.kill()
        receiver.wait(timeout=10)
        redis_proc.terminate()
        redis_proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)

    figures: dict[str, Any] = {
        "deliveries": done["count"],
        "expected": total,
        "out_of_order": done["out_of_order"],
        "seconds": round(elapsed, 2),
        "deliveries_per_s": round(rate, 1),
        "baseline_posts_per_s": round(base, 1),
        "connections_max": watch.most,
        "connections_bound": bound,
    }
    if args.json:
        print(json.dumps(figures))
    print(f"webhooks: one worker process (threads, concurrency {args.concurrency}), "
          f"{args.games} hooks x {args.events} score events to a local receiver")  # fmt: skip
    print(f"  deliveries: {done['count']}/{total} in {elapsed:.1f} s, "
          f"{done['out_of_order']} out of seq order")  # fmt: skip
    print(f"  throughput: {rate:.0f} deliveries/s per worker process; baseline: {base:.0f} raw "
          f"POSTs/s from one process with {args.concurrency} threads "
          f"({rate / base if base else 0:.2f}x of what the HTTP part alone allows)")  # fmt: skip
    print(f"  Redis connections held: max {watch.most} seen in CLIENT LIST, bound {bound} "
          "(2 x threads + 2)")  # fmt: skip
    check("webhook deliveries made (each once)", done["count"], at_least=total, at_most=total,
          always=True)  # fmt: skip
    check("webhook deliveries out of seq order", done["out_of_order"], at_most=0, always=True)
    check("webhook Redis connections (max seen)", watch.most, at_least=1, at_most=bound)
    return 0


if __name__ == "__main__":
    sys.exit(main() or exit_code())
