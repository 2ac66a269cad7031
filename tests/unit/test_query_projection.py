"""The query side's projections on the in-memory store: open features scored as if the game
ended now (R7.2-R7.4), incremental catch-up, past views from snapshots, the score track
(R8.1), the merged log's cursors and live events."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest

from carcassonne.events import GameEnded
from carcassonne.game import fold
from carcassonne.projection import farms_if_ended, open_features, projected_scores
from carcassonne.record import load_record, record_events
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.track import track_position
from eventstore.envelope import MOVES, SCORES, StoredEvent
from eventstore.port import InMemoryEventStore
from eventstore.schemas import to_engine
from eventstore.score_stream import GAME_SCORED
from services.query.log import PollingWaiter, format_cursor, live, page, parse_cursor
from services.query.projector import BadParameter, NotFound, Projector
from services.query.views import board_view, scores_view
from services.scoring.scorer import Scorer

from .samples import README_RECORD, fingerprint
from .test_query_games import long_game, store_game


def readme_state():
    return fold(record_events(load_record(README_RECORD)))


# ---------------------------------------------------------------- the engine projection


def test_readme_game_open_features_score_as_rule_r7_2_says() -> None:
    """README game: D at 0,0; Q1@0,-1; I2@0,1 with player 1's knight on its east city;
    E2@-1,-1 with player 0's farmer. The knight's city lies on I alone, still open, no
    pennant: worth 1 point at the end (R7.2: 1 per tile, 1 per pennant) to player 1."""
    state = readme_state()
    features = open_features(state)
    (knight,) = [f for f in features if f.if_ended is not None]
    assert knight.kind == "city" and knight.tiles == ((0, 1),) and knight.pennants == 0
    assert knight.meeples == (0, 1)
    assert knight.if_ended is not None
    assert knight.if_ended.rule == "R7.2" and knight.if_ended.points == 1
    assert knight.if_ended.awarded == (0, 1)
    # Unoccupied open features would score nothing for anyone.
    assert all(sum(f.meeples) == 0 for f in features if f.if_ended is None)


RULESETS = [Ruleset(), Ruleset(farm_scoring="1st"), Ruleset(incomplete_score=False),
            Ruleset(farmers=False)]  # fmt: skip


@pytest.mark.parametrize("ruleset", RULESETS)
def test_scores_if_ended_equal_the_engine_ending_the_game_there(ruleset: Ruleset) -> None:
    """At every placement of a random game, the projection's totals are exactly what the
    engine's final scoring (R7.2, R10.1, R7.3/R7.4) gives if `GameEnded` came next."""
    _, events = random_game(random.Random(3), 3, ruleset)
    state = fold(events[:1])
    for event in events[1:]:
        state.apply(event)
        if state.over:
            assert projected_scores(state) == tuple(state.scores)
            continue
        ended = state.copy()
        ended.apply(GameEnded("now"))
        final = ended.log[len(state.log) :]
        features, farms = open_features(state), farms_if_ended(state)
        assert projected_scores(state, features, farms) == tuple(ended.scores)
        shown = [f.if_ended for f in features if f.if_ended is not None] + farms
        assert sorted(map(repr, shown)) == sorted(map(repr, final))


# ------------------------------------------------------------------------ the projector


class CountingStore(InMemoryEventStore):
    """Counts the move events read (to show catch-ups read only what is new)."""

    def __init__(self) -> None:
        super().__init__()
        self.moves_read = 0

    def read(self, game_id: str, stream: str, after: int = 0, limit: int | None = None):
        out = super().read(game_id, stream, after, limit)
        if stream == MOVES:
            self.moves_read += len(out)
        return out


def test_catch_up_reads_only_new_moves_and_matches_the_fold() -> None:
    store = CountingStore()
    _, events = random_game(random.Random(1), 2, Ruleset())
    store_game(store, "g", events[:40])
    projector = Projector(store)
    assert fingerprint(projector.current("g").state) == fingerprint(fold(events[:40]))
    store_game(store, "g", events[40:])
    store.moves_read = 0
    pos = projector.current("g")
    # The new moves, and the cached last one again: is it still the log's (a failover)?
    assert store.moves_read == len(events) - 40 + 1
    assert pos.seq == len(events)
    assert fingerprint(pos.state) == fingerprint(fold(events))
    store.moves_read = 0
    projector.current("g")
    assert store.moves_read == 1


def test_every_past_view_equals_the_fold_and_replays_fewer_moves_than_a_snapshot_gap() -> None:
    store = InMemoryEventStore()
    _, events = random_game(random.Random(2), 3, Ruleset())
    store_game(store, "g", events)
    projector = Projector(store, snapshot_every=10)
    projector.current("g")
    projector.at("g", len(events) - 1)  # the first past view folds once, keeping snapshots
    assert projector.replayed == len(events) - 1
    order = list(range(1, len(events) + 1))
    random.Random(0).shuffle(order)  # jumps back and forth, not only stepping forward
    for at in order:
        before = projector.replayed
        pos = projector.at("g", at)
        assert pos.seq == at
        assert fingerprint(pos.state) == fingerprint(fold(events[:at]))
        assert projector.replayed - before < 10
    with pytest.raises(BadParameter) as bad:
        projector.at("g", len(events) + 1)
    assert bad.value.code == "at_out_of_range"


def test_unknown_games_are_not_found_and_not_cached() -> None:
    projector = Projector(InMemoryEventStore())
    with pytest.raises(NotFound):
        projector.current("nope")
    assert not projector._cache


def test_snapshots_are_kept_for_the_most_recently_replayed_games_only() -> None:
    store = InMemoryEventStore()
    for i, seed in enumerate((1, 2, 3)):
        store_game(store, f"g{i}", random_game(random.Random(seed), 2, max_turns=20)[1])
    projector = Projector(store, snapshot_every=4, replay_games=2)
    for game_id in ("g0", "g1", "g2"):
        projector.at(game_id, 30)
    assert not projector._cache["g0"].snapshots
    assert sorted(projector._cache["g2"].snapshots) == [4, 8, 12, 16, 20, 24, 28]
    assert fingerprint(projector.at("g0", 30).state) == fingerprint(
        fold(to_engine(e) for e in store.read("g0", MOVES)[:30])
    )


def test_the_cache_is_a_bounded_lru() -> None:
    store = InMemoryEventStore()
    for i, seed in enumerate((1, 2, 3)):
        store_game(store, f"g{i}", random_game(random.Random(seed), 2, max_turns=5)[1])
    projector = Projector(store, cache_size=2)
    for game_id in ("g0", "g1", "g0", "g2"):
        projector.current(game_id)
    assert list(projector._cache) == ["g0", "g2"]


class RacingStore(InMemoryEventStore):
    """A scorer appends its next batch right after the projector has read the marker."""

    def __init__(self) -> None:
        super().__init__()
        self.scorer: Scorer | None = None

    def marker(self, game_id: str, stream: str) -> str | None:
        value = super().marker(game_id, stream)
        if stream == SCORES and self.scorer is not None:
            scorer, self.scorer = self.scorer, None  # once (the scorer reads markers too)
            scorer.catch_up(game_id)
        return value


def test_scores_stop_at_the_progress_read_and_the_rest_comes_next_time() -> None:
    store = RacingStore()
    _, events = random_game(random.Random(4), 2, Ruleset())
    store_game(store, "g", events[:60])
    Scorer(store).catch_up("g")  # moves 1-60 scored
    store_game(store, "g", events[60:])
    store.scorer = Scorer(store)  # scores the rest while the projector reads
    projector = Projector(store)
    first = projector.current("g")
    assert first.progress == 60
    assert all(e.payload["move"] <= 60 for e in first.scores)
    assert first.scores == tuple(e for e in store.read("g", SCORES) if e.payload["move"] <= 60)
    second = projector.current("g")
    assert second.progress == len(events)
    assert second.scores == tuple(store.read("g", SCORES))


# ----------------------------------------------------------------------------- the views


def test_score_track_of_a_game_past_100_points() -> None:
    """A greedy game whose winner passes 100: the track shows 2 laps, one 100-point tile
    (R8.1: a 50 tile turned on the second lap) and the space `score % 50`."""
    final, events = long_game()
    store = InMemoryEventStore()
    store_game(store, "g", events)
    Scorer(store).catch_up("g")
    view = scores_view(Projector(store).current("g"))
    totals = [p["score"] for p in view["players"]]
    (result,) = [e.payload for e in store.read("g", SCORES) if e.type == GAME_SCORED]
    assert totals == result["final_scores"] == final.scores
    assert view["over"] and view["scored_up_to"] == len(events) and view["unscored_moves"] == 0
    for player in view["players"]:
        score = player["score"]
        assert sum(player["points"].values()) == score
        assert player["track"] == {
            k: v for k, v in track_position(score).to_dict().items() if k != "score"
        }
        assert player["track"]["space"] == score % 50
        if score >= 100:
            assert player["track"]["laps"] >= 2 and 100 in player["track"]["point_tiles"]
    assert max(totals) >= 100
    assert len(view["events"]) == len(final.log)


def test_scores_view_before_the_worker_caught_up_says_how_far_it_is() -> None:
    store = InMemoryEventStore()
    _, events = random_game(random.Random(6), 2, Ruleset())
    store_game(store, "g", events[:30])
    Scorer(store).catch_up("g")
    store_game(store, "g", events[30:])
    view = scores_view(Projector(store).current("g"))
    assert view["seq"] == len(events) and view["scored_up_to"] == 30
    assert view["unscored_moves"] == len(events) - 30 and not view["over"]
    scored = fold(events[:30])
    assert [p["score"] for p in view["players"]] == scored.scores


def test_board_view_lists_the_engine_board() -> None:
    store = InMemoryEventStore()
    record_events_ = record_events(load_record(README_RECORD))
    store_game(store, "g", record_events_)
    view = board_view(Projector(store, names=lambda _: ["ann", "bob"]).current("g"))
    assert [(t["tile"], t["x"], t["y"], t["rotation"]) for t in view["tiles"]] == [
        ("D", 0, 0, 0), ("Q", 0, -1, 1), ("I", 0, 1, 2), ("E", -1, -1, 2),
    ]  # fmt: skip
    assert view["meeples"] == [
        {"player": 1, "x": 0, "y": 1, "feature": "city", "spot": "E"},
        {"player": 0, "x": -1, "y": -1, "feature": "field", "spot": "NNW"},
    ]
    assert [p["name"] for p in view["players"]] == ["ann", "bob"]
    state = fold(record_events_)
    assert view["scores_if_ended"] == list(projected_scores(state))
    json.dumps(view)  # plain JSON


# ------------------------------------------------------------------------ the merged log


def merged_all(store: InMemoryEventStore, game_id: str, limit: int) -> list[StoredEvent]:
    out, cursor = [], (0, 0)
    while True:
        items, cursor = page(store, game_id, cursor, limit)
        out += [e for e, _ in items]
        if len(items) < limit:
            return out


def test_pages_cover_both_streams_once_in_order_whatever_the_page_size() -> None:
    store = InMemoryEventStore()
    _, events = random_game(random.Random(8), 2, Ruleset())
    store_game(store, "g", events)
    Scorer(store).catch_up("g")
    moves, scores = store.read("g", MOVES), store.read("g", SCORES)
    whole = merged_all(store, "g", 10_000)
    assert sorted(whole, key=lambda e: (e.stream, e.seq)) == sorted(
        moves + scores, key=lambda e: (e.stream, e.seq)
    )
    # A score event comes right after the move it names, before the next move.
    for i, event in enumerate(whole):
        if event.stream == SCORES:
            before = [e.seq for e in whole[:i] if e.stream == MOVES]
            assert before[-1] == event.payload["move"]
    for limit in (1, 3, 7, 50):
        assert merged_all(store, "g", limit) == whole


def test_a_cursor_neither_skips_nor_repeats_when_scores_arrive_late() -> None:
    store = InMemoryEventStore()
    _, events = random_game(random.Random(9), 2, Ruleset())
    store_game(store, "g", events[:50])
    seen: list[tuple[str, int]] = []
    items, cursor = page(store, "g", (0, 0), 1_000)  # every move so far, no scores yet
    seen += [(e.stream, e.seq) for e, _ in items]
    Scorer(store).catch_up("g")  # now scores of moves already delivered appear
    store_game(store, "g", events[50:])
    Scorer(store).catch_up("g")
    while True:
        items, cursor = page(store, "g", cursor, 7)
        seen += [(e.stream, e.seq) for e, _ in items]
        if not items:
            break
    expected = [(MOVES, s) for s in range(1, len(events) + 1)]
    expected += [(SCORES, s) for s in range(1, store.last_seq("g", SCORES) + 1)]
    assert sorted(seen) == sorted(expected) and len(seen) == len(set(seen))
    assert parse_cursor(format_cursor(cursor)) == cursor == (len(events), expected[-1][1])


def sse_events(text: str) -> list[dict[str, Any]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and line[0] != ":")
        if "data" in fields:
            out.append({"id": fields["id"], "event": fields["event"], **json.loads(fields["data"])})
    return out


def test_live_sends_each_later_event_once_and_resumes_from_its_id() -> None:
    store = InMemoryEventStore()
    _, events = random_game(random.Random(10), 2, Ruleset())
    store_game(store, "g", events[:20])
    waiter = PollingWaiter(store, interval=0.005)
    start = (store.last_seq("g", MOVES), store.last_seq("g", SCORES))

    def feed() -> None:
        store_game(store, "g", events[20:60])
        Scorer(store).catch_up("g")

    threading.Timer(0.05, feed).start()
    first = "".join(live(store, waiter, "g", start, max_seconds=0.5, heartbeat=0.1))
    got = sse_events(first)
    assert ": keepalive" in first  # a quiet spell sends a comment line
    resume = parse_cursor(got[-1]["id"])
    store_game(store, "g", events[60:])
    Scorer(store).catch_up("g")
    got += sse_events("".join(live(store, waiter, "g", resume, max_seconds=0, heartbeat=0.1)))
    moves = [e["seq"] for e in got if e["event"] == "move"]
    scores = [e["seq"] for e in got if e["event"] == "score"]
    assert moves == list(range(21, len(events) + 1))
    assert scores == list(range(1, store.last_seq("g", SCORES) + 1))
    assert all(e["cursor"] == e["id"] for e in got)
