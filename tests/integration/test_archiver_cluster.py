"""The archiver on a real Redis Cluster (3 primaries; `make run-cluster` archives there too):
finished games on several primaries are copied, verified and removed (each game's removal
script on its own slot: a cluster pipeline refuses scripts, so they are sent one by one),
and one restored exactly; games with bot seats give their API key's bot seconds back (each
key's budget in its own slot, apart from the game's)."""

from __future__ import annotations

from pathlib import Path

from redis.crc import key_slot

from eventstore.envelope import MOVES, SCORES
from services.archive.archiver import Archiver
from services.archive.sqlite import SqliteArchive
from services.redis_store import RedisEventStore
from services.redis_store.bot_budget import BotBudget, ended_key, in_flight_key
from services.redis_store.connect import connect
from services.redis_store.keys import archived_key, game_keys, secrets_key
from tests.archive_games import play
from tests.redis_cluster import Cluster, flush_cluster, redis_cluster  # noqa: F401


def test_finished_games_on_a_cluster_are_archived_and_restored(
    redis_cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    flush_cluster(redis_cluster)
    client = connect(redis_cluster.url, role="test-archive", max_connections=8)
    store = RedisEventStore(client)
    bots = {"key_id": "k_cl", "bots": [None, {"level": "greedy", "think_ms": 1}]}
    games = [play(store, 70 + i, record=bots if i % 2 else None) for i in range(4)]
    budget = BotBudget(client, 1_000)
    for game_id in games[1::2]:  # reserved as at their creation
        assert budget.reserve("k_cl", game_id, 9.0) is None
    assert len({key_slot(game_keys(g, MOVES)[0].encode()) * 3 // 16384 for g in games}) > 1
    before = {g: (client.xrange(game_keys(g, MOVES)[0]), client.xrange(game_keys(g, SCORES)[0]))
              for g in games}  # fmt: skip
    archive = SqliteArchive(tmp_path / "archive.sqlite3")
    archiver = Archiver(client, archive, after_ms=0)
    assert archiver.run(10**15) == {"archived": 4}
    for game_id in games:
        assert archive.read(game_id) is not None
        assert client.exists(archived_key(game_id)) == 1
        assert client.exists(game_keys(game_id, MOVES)[0], secrets_key(game_id)) == 0
    assert client.zcard(in_flight_key("k_cl")) == 0  # the bot games' seconds given back
    assert all(client.exists(ended_key("k_cl", g)) for g in games[1::2])
    archiver.restore(games[0], schedule=False)
    moves, scores = (client.xrange(game_keys(games[0], s)[0]) for s in (MOVES, SCORES))
    assert (moves, scores) == before[games[0]]
    archive.close()
