"""What a game's score stream holds: the engine's scorings of its move stream, as events.

The scoring worker appends them; the query service, replays and third parties read them.
One `FeatureScored` per scored feature (during play, R6; and at the end, R7.2-R7.4), each
naming the move (sequence in the move stream) that caused it, then one `GameScored` with
the final totals, ranks and winners (R7.5) after the move that ended the game.

An undone placement (`TurnUndone`, docs/undo.md) that had completed features gets one
`ScoreReverted` per feature it had scored, newest first, each naming the `TurnUndone` as its
`move`: the points taken back per seat (`reverted`), the meeples that scoring had sent home
and that now stand on the board again (`restored`), and the running totals after it. Nothing
in the stream is deleted: a total is the sum of the awards minus the reversions.

Everything here is a pure function of the moves: the worker, the tests and anyone replaying
a game compute the same score stream from the same move stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from marshmallow import RAISE, Schema, fields, validate

from carcassonne.scoring import ScoreEvent, ranks
from carcassonne.state import GameState

from .envelope import NewEvent, StoredEvent
from .schemas import register, to_engine

FEATURE_SCORED, GAME_SCORED, SCORE_REVERTED = "FeatureScored", "GameScored", "ScoreReverted"

REVERTIBLE_KINDS = ["road", "city", "monastery", "garden"]  # ScoreReverted's `kind`

_PLAYER_INTS = fields.List(fields.Integer(strict=True), validate=validate.Length(2, 6))
_POS = fields.List(fields.Integer(strict=True), validate=validate.Length(2, 2))


class FeatureScoredV1(Schema):
    """One scored feature, explained (the engine's `ScoreEvent`) and placed in the game."""

    class Meta:
        unknown = RAISE

    move = fields.Integer(required=True, strict=True, validate=validate.Range(1))
    kind = fields.String(
        required=True, validate=validate.OneOf(["road", "city", "monastery", "garden", "farm"])
    )
    rule = fields.String(required=True, validate=validate.Length(2, 12))
    final = fields.Boolean(required=True, truthy={True}, falsy={False})
    turn = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    complete = fields.Boolean(required=True, truthy={True}, falsy={False})
    tiles = fields.List(_POS, required=True)
    pennants = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    meeples = _PLAYER_INTS
    winners = fields.List(fields.Integer(strict=True), required=True)
    points = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    awarded = _PLAYER_INTS
    returned = _PLAYER_INTS
    cities = fields.List(fields.List(_POS))
    totals = _PLAYER_INTS


class GameScoredV1(Schema):
    """The final result: totals after final scoring, totals before it, ranks and winners."""

    class Meta:
        unknown = RAISE

    move = fields.Integer(required=True, strict=True, validate=validate.Range(1))
    final_scores = _PLAYER_INTS
    scores_before_final = _PLAYER_INTS
    ranks = _PLAYER_INTS
    winners = fields.List(fields.Integer(strict=True), required=True)


class ScoreRevertedV1(Schema):
    """A feature's scoring taken back because the placement that completed it was undone."""

    class Meta:
        unknown = RAISE

    move = fields.Integer(required=True, strict=True, validate=validate.Range(1))
    request = fields.Integer(required=True, strict=True, validate=validate.Range(1))
    # Any scoring an undoable placement can make: a completed feature (R6; a garden, R9.2)
    # or the abbot taken back (R9.2). Not a farm: farms score only at the end, which stands.
    kind = fields.String(required=True, validate=validate.OneOf(REVERTIBLE_KINDS))
    turn = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    tiles = fields.List(_POS, required=True)
    points = fields.Integer(required=True, strict=True, validate=validate.Range(0))
    reverted = _PLAYER_INTS
    restored = _PLAYER_INTS
    totals = _PLAYER_INTS


register(FEATURE_SCORED, 1, FeatureScoredV1())
register(SCORE_REVERTED, 1, ScoreRevertedV1())
register(GAME_SCORED, 1, GameScoredV1())


def score_events(state: GameState, moves: Iterable[StoredEvent]) -> list[NewEvent]:
    """Apply `moves` (the ones right after `state`'s) to `state`; the score events they cause.

    `state` is changed in place: afterwards it stands after the last move.
    """
    out: list[NewEvent] = []
    for stored in moves:
        log, before = state.log, len(state.log)
        totals = list(state.scores)
        state.apply(to_engine(stored))
        if stored.type == "TurnUndone":
            out += _reverted(stored, log[len(state.log) : before], totals)
            continue
        for scored in state.log[before:]:
            totals = [t + a for t, a in zip(totals, scored.awarded, strict=True)]
            payload: dict[str, Any] = {"move": stored.seq, **scored.to_dict(), "totals": totals}
            out.append(_new(FEATURE_SCORED, payload))
        if stored.type == "GameEnded":
            rank, winners = ranks(state.scores, [why is not None for why in state.out])
            payload = {
                "move": stored.seq,
                "final_scores": list(state.scores),
                "scores_before_final": list(state.scores_before_final or state.scores),
                "ranks": list(rank),
                "winners": list(winners),
            }
            out.append(_new(GAME_SCORED, payload))
    return out


def _reverted(stored: StoredEvent, undone: list[ScoreEvent], totals: list[int]) -> list[NewEvent]:
    """The `ScoreReverted` events of an undo: `undone` are the scorings the undone placement
    caused (the log of the state before the undo minus that of the state after it)."""
    out = []
    for scored in reversed(undone):
        totals = [t - a for t, a in zip(totals, scored.awarded, strict=True)]
        payload: dict[str, Any] = {
            "move": stored.seq,
            "request": stored.payload["request"],
            "kind": scored.kind,
            "turn": scored.turn,
            "tiles": [list(t) for t in scored.tiles],
            "points": scored.points,
            "reverted": list(scored.awarded),
            "restored": list(scored.returned or [0] * len(totals)),
            "totals": totals,
        }
        out.append(_new(SCORE_REVERTED, payload))
    return out


def _new(event_type: str, payload: dict[str, Any]) -> NewEvent:
    # Not validated: made from the engine's state, and a property test holds every score
    # event of random games to the schemas above (tests/unit/test_properties.py).
    return NewEvent(event_type, 1, payload)
