"""What a game in progress would score if it ended now: its open features and farms.

Read-only views of a `GameState` for the query side. The points come from the engine's own
final-scoring functions (`score_incomplete`, R7.2 / R10.1, and `score_farms`, R7.3 / R7.4),
called exactly as `GameState` calls them when the game ends; nothing here restates a rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .board import Pos
from .scoring import ScoreEvent, meeple_counts, score_farms, score_incomplete
from .state import GameState
from .tiles import FIELD, SURROUNDED


@dataclass(frozen=True)
class OpenFeature:
    """A road, city or monastery not completed yet, and its final score if the game ended now."""

    kind: str
    tiles: tuple[Pos, ...]  # squares the feature occupies (a monastery: its own square)
    pennants: int
    missing: int  # roads and cities: edges still open; a monastery: empty squares around it
    meeples: tuple[int, ...]  # per player
    if_ended: ScoreEvent | None  # None: nobody stands in it, so it would score nothing (R7.2)

    def to_dict(self) -> dict[str, Any]:
        """As JSON."""
        return {
            "kind": self.kind,
            "tiles": [list(t) for t in self.tiles],
            "pennants": self.pennants,
            "missing": self.missing,
            "meeples": list(self.meeples),
            "if_ended": None if self.if_ended is None else self.if_ended.to_dict(),
        }


def open_features(state: GameState) -> list[OpenFeature]:
    """Every incomplete road, city and monastery, in board order, with its R7.2 score now."""
    board, players = state.board, state.players
    scored = iter(
        score_incomplete(board, state.owner, players, state.turn, state.ruleset.incomplete_score)
    )
    out = []
    for feat in board.feats:
        if feat is None or feat.done or feat.kind == FIELD:
            continue
        # `score_incomplete` yields one event per occupied open feature, in this same order.
        final = next(scored) if feat.meeples else None
        if feat.kind in SURROUNDED:
            (pos,) = feat.tiles
            missing = 8 - board.neighbours(pos)
        else:
            missing = feat.open
        out.append(
            OpenFeature(
                kind=feat.kind,
                tiles=tuple(sorted(feat.tiles)),
                pennants=feat.pennants,
                missing=missing,
                meeples=tuple(meeple_counts(feat, state.owner, players)),
                if_ended=final,
            )
        )
    assert next(scored, None) is None, "score_incomplete and the board disagree"
    return out


def farms_if_ended(state: GameState) -> list[ScoreEvent]:
    """The farm scorings the game's edition would give now (R7.3, R7.4; none without farmers)."""
    if not state.ruleset.farmers:
        return []
    return score_farms(
        state.board, state.owner, state.players, state.turn, state.ruleset.farm_scoring
    )


def projected_scores(
    state: GameState,
    features: list[OpenFeature] | None = None,
    farms: list[ScoreEvent] | None = None,
) -> tuple[int, ...]:
    """Each player's total if the game ended now (the totals themselves once it is over)."""
    if state.over:
        return tuple(state.scores)
    features = open_features(state) if features is None else features
    farms = farms_if_ended(state) if farms is None else farms
    totals = list(state.scores)
    finals = [f.if_ended for f in features if f.if_ended is not None] + list(farms)
    for scored in finals:
        totals = [t + a for t, a in zip(totals, scored.awarded, strict=True)]
    return tuple(totals)
