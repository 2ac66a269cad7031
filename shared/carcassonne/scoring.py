"""Scoring: completed features during play (R6) and the final scoring (R7).

Every score is an explanation (`ScoreEvent`): the feature, its tiles and pennants, the
meeples of each player in it, the winners, the points and the rule applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .board import Board, Feature, Pos
from .tiles import CITY, FIELD, MONASTERY, ROAD, SURROUNDED

FARM = "farm"
CITY_POINTS_COMPLETE, PENNANT_POINTS_COMPLETE = 2, 2  # R6.2
MONASTERY_POINTS = 9  # R6.3
FARM_POINTS = {"3rd": 3, "2nd": 3, "1st": 4}  # R7.3, R7.4


@dataclass(frozen=True)
class ScoreEvent:
    """One scoring, explained. `awarded` is what each player actually gained from it."""

    kind: str  # road, city, monastery, garden (R9.2) or farm
    rule: str
    final: bool  # False: scored during play (R6); True: final scoring (R7)
    turn: int  # tiles placed when it was scored (the turn that caused it, 1-based)
    tiles: tuple[Pos, ...]
    pennants: int
    meeples: tuple[int, ...]  # per player: meeples (or farmers) counted for the majority
    winners: tuple[int, ...]
    points: int  # what the feature is worth to each winner
    awarded: tuple[int, ...]
    returned: tuple[int, ...] = ()  # per player: meeples back to supply (R6.6)
    complete: bool = True
    cities: tuple[tuple[Pos, ...], ...] = ()  # farms: the completed cities that pay

    def to_dict(self) -> dict[str, Any]:
        """The explanation as JSON."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "rule": self.rule,
            "final": self.final,
            "turn": self.turn,
            "complete": self.complete,
            "tiles": [list(t) for t in self.tiles],
            "pennants": self.pennants,
            "meeples": list(self.meeples),
            "winners": list(self.winners),
            "points": self.points,
            "awarded": list(self.awarded),
        }
        if self.returned:
            out["returned"] = list(self.returned)
        if self.kind == FARM:
            out["cities"] = [[list(t) for t in city] for city in self.cities]
        return out


def majority(counts: Sequence[int]) -> tuple[int, ...]:
    """Players with the most meeples (all of them on a tie); nobody if nobody stands (R6.4)."""
    top = max(counts)
    if top == 0:
        return ()
    return tuple(p for p, c in enumerate(counts) if c == top)


def _award(players: int, winners: tuple[int, ...], points: int) -> tuple[int, ...]:
    return tuple(points if p in winners else 0 for p in range(players))


def meeple_counts(feat: Feature, owner: Callable[[int], int], players: int) -> list[int]:
    """Meeples of each player standing in a feature."""
    counts = [0] * players
    for meeple_id in feat.meeples:
        counts[owner(meeple_id)] += 1
    return counts


def score_completed(
    board: Board, root: int, owner: Callable[[int], int], players: int, turn: int
) -> ScoreEvent:
    """Score a feature completed during play (R6.1-R6.4); unoccupied ones score 0 (R5.6)."""
    feat = board.feats[root]
    assert feat is not None
    counts = meeple_counts(feat, owner, players)
    if feat.kind == ROAD:
        tiles, points, rule = feat.tiles, len(feat.tiles), "R6.1"
    elif feat.kind == CITY:
        tiles = feat.tiles
        points = CITY_POINTS_COMPLETE * len(tiles) + PENNANT_POINTS_COMPLETE * feat.pennants
        rule = "R6.2"
    else:  # a monastery (R6.3) or a garden, scored as one (R9.2)
        (pos,) = feat.tiles
        tiles, points = set(board.monastery_tiles(pos)), MONASTERY_POINTS
        rule = "R6.3" if feat.kind == MONASTERY else "R9.2"
    winners = majority(counts)
    return ScoreEvent(
        kind=feat.kind,
        rule=rule,
        final=False,
        turn=turn,
        tiles=tuple(sorted(tiles)),
        pennants=feat.pennants,
        meeples=tuple(counts),
        winners=winners,
        points=points,
        awarded=_award(players, winners, points),
        returned=tuple(counts),
    )


def score_incomplete(
    board: Board, owner: Callable[[int], int], players: int, turn: int, enabled: bool
) -> list[ScoreEvent]:
    """Final scoring of occupied incomplete roads, cities and monasteries (R7.2; R10.1)."""
    out = []
    for feat in board.feats:
        if feat is None or feat.done or not feat.meeples or feat.kind == FIELD:
            continue
        counts = meeple_counts(feat, owner, players)
        tiles: set[Pos] | list[Pos] = feat.tiles
        if feat.kind in SURROUNDED:
            (pos,) = feat.tiles
            tiles = board.monastery_tiles(pos)
            points = len(tiles)  # 1 for the monastery (or garden) and 1 per tile around it
        elif feat.kind == CITY:
            points = len(tiles) + feat.pennants
        else:
            points = len(tiles)
        if not enabled:
            points = 0
        winners = majority(counts)
        out.append(
            ScoreEvent(
                kind=feat.kind,
                rule="R7.2" if enabled else "R10.1",
                final=True,
                turn=turn,
                tiles=tuple(sorted(tiles)),
                pennants=feat.pennants,
                meeples=tuple(counts),
                winners=winners,
                points=points,
                awarded=_award(players, winners, points),
                complete=False,
            )
        )
    return out


def score_recall(
    board: Board, root: int, owner: Callable[[int], int], players: int, turn: int
) -> ScoreEvent:
    """R9.2: the abbot taken back scores its monastery or garden at once as at game end: 1
    for the tile and 1 per tile around it (counted whatever R10.1 says: it is not the end)."""
    feat = board.feats[root]
    assert feat is not None and feat.kind in SURROUNDED
    (pos,) = feat.tiles
    tiles = board.monastery_tiles(pos)
    counts = meeple_counts(feat, owner, players)
    winners = majority(counts)
    return ScoreEvent(
        kind=feat.kind,
        rule="R9.2",
        final=False,
        turn=turn,
        tiles=tuple(sorted(tiles)),
        pennants=0,
        meeples=tuple(counts),
        winners=winners,
        points=len(tiles),
        awarded=_award(players, winners, len(tiles)),
        returned=tuple(counts),
        complete=False,
    )


@dataclass
class _Farm:
    tiles: tuple[Pos, ...]
    counts: list[int]
    cities: list[int]  # roots of the completed cities it borders


def _farms(board: Board, owner: Callable[[int], int], players: int) -> list[_Farm]:
    """Every farm with farmers, with the completed cities it borders (R7.3)."""
    farms = []
    for feat in board.feats:
        if feat is None or feat.kind != FIELD or not feat.meeples:
            continue
        cities: list[int] = []
        for node in feat.cities:
            root = board.find(node)
            city = board.feats[root]
            assert city is not None
            if city.open == 0 and root not in cities:
                cities.append(root)
        cities.sort(key=lambda r: min(board.feats[r].tiles))  # type: ignore[union-attr]
        farms.append(_Farm(tuple(sorted(feat.tiles)), meeple_counts(feat, owner, players), cities))
    return farms


def score_farms(
    board: Board, owner: Callable[[int], int], players: int, turn: int, edition: str
) -> list[ScoreEvent]:
    """Final farm scoring by the game's edition: 3rd (R7.3), 2nd or 1st (R7.4)."""
    farms = _farms(board, owner, players)

    def city_tiles(root: int) -> tuple[Pos, ...]:
        feat = board.feats[root]
        assert feat is not None
        return tuple(sorted(feat.tiles))

    out = []
    if edition == "1st":
        # Per completed city: farmers on all farms touching it; the majority takes 4.
        order: list[int] = []
        for farm in farms:
            order.extend(c for c in farm.cities if c not in order)
        order.sort(key=city_tiles)
        for city in order:
            counts = [0] * players
            tiles: set[Pos] = set()
            for farm in farms:
                if city in farm.cities:
                    counts = [a + b for a, b in zip(counts, farm.counts, strict=True)]
                    tiles.update(farm.tiles)
            winners = majority(counts)
            points = FARM_POINTS["1st"]
            out.append(
                ScoreEvent(
                    kind=FARM,
                    rule="R7.4",
                    final=True,
                    turn=turn,
                    tiles=tuple(sorted(tiles)),
                    pennants=0,
                    meeples=tuple(counts),
                    winners=winners,
                    points=points,
                    awarded=_award(players, winners, points),
                    complete=False,
                    cities=(city_tiles(city),),
                )
            )
        return out
    paid: list[set[int]] = [set() for _ in range(players)]  # 2nd edition: once per player
    for farm in farms:
        winners = majority(farm.counts)
        points = FARM_POINTS[edition] * len(farm.cities)
        if edition == "2nd":
            awarded = [0] * players
            for p in winners:
                fresh = [c for c in farm.cities if c not in paid[p]]
                paid[p].update(fresh)
                awarded[p] = FARM_POINTS["2nd"] * len(fresh)
        else:
            awarded = list(_award(players, winners, points))
        out.append(
            ScoreEvent(
                kind=FARM,
                rule="R7.3" if edition == "3rd" else "R7.4",
                final=True,
                turn=turn,
                tiles=farm.tiles,
                pennants=0,
                meeples=tuple(farm.counts),
                winners=winners,
                points=points,
                awarded=tuple(awarded),
                complete=False,
                cities=tuple(city_tiles(c) for c in farm.cities),
            )
        )
    return out


def ranks(
    totals: Sequence[int], out: Sequence[bool] = ()
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Competition ranks (1 = best; ties share) and the winners (R7.5).

    Seats `out` of the game (resigned or timed out, docs/lifecycle.md) rank after every seat
    still in, whatever their totals, and among themselves by total (ties share, as R7.5);
    only a seat still in can win.
    """
    gone = [bool(out[p]) if p < len(out) else False for p in range(len(totals))]
    staying = sum(not g for g in gone)
    rank = tuple(
        (staying if gone[p] else 0)
        + 1
        + sum(other > mine and gone[q] == gone[p] for q, other in enumerate(totals))
        for p, mine in enumerate(totals)
    )
    return rank, tuple(p for p, r in enumerate(rank) if r == 1 and not gone[p])
