"""One sentence per score event, the same everywhere: the CLI, `POST /v1/score` and the
query service's `/scores` all call `explain` (so a player sees one wording of one score).

It reads the JSON form of a score (`ScoreEvent.to_dict()`, which the score stream's
`FeatureScored` payload extends), so a stored event and a freshly computed one read alike:

    city of 4 tiles with 1 pennant, completed (R6.2): 10 points each to alice and bob
    city of 1 tile, incomplete at the end of the game (R7.2): 1 point to bob
    farm of 3 tiles bordering 1 completed city, at the end of the game (R7.3): 3 points to ann
    road of 2 tiles, incomplete at the end of the game (R10.1): 0 points to player 1

Seats without a name are "player N" (N is the 0-based seat, as everywhere in the API).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .scoring import ScoreEvent


def plural(count: int, singular: str, many: str | None = None) -> str:
    """`1 tile`, `2 tiles`, `0 tiles`; `many` for irregular words (`city` → `cities`)."""
    return f"{count} {singular if count == 1 else (many or singular + 's')}"


def seat_name(names: Sequence[str] | None, seat: int) -> str:
    """A seat's name, or "player N" when the game's names are unknown."""
    return names[seat] if names is not None and 0 <= seat < len(names) else f"player {seat}"


def explain(score: ScoreEvent | Mapping[str, Any], names: Sequence[str] | None = None) -> str:
    """One sentence for a score event: what was scored, when, under which rule, for whom."""
    data: Mapping[str, Any] = score.to_dict() if isinstance(score, ScoreEvent) else score
    kind, tiles = data["kind"], len(data["tiles"])
    if kind == "farm":
        cities = plural(len(data.get("cities", ())), "completed city", "completed cities")
        what = f"farm of {plural(tiles, 'tile')} bordering {cities}"
    elif kind in ("monastery", "garden"):
        # Its tiles are the monastery (or garden) itself and the neighbours it counts (R6.3,
        # R7.2, R9.2).
        what = f"{kind} with {tiles - 1} of 8 neighbouring tiles"
    else:
        what = f"{kind} of {plural(tiles, 'tile')}"
        if data.get("pennants"):
            what += f" with {plural(data['pennants'], 'pennant')}"
    if kind == "farm":
        when = "at the end of the game"
    elif data["complete"]:
        when = "completed"
    elif not data["final"]:  # R9.2: scored during play though incomplete: the abbot came back
        when = "abbot taken back"
    else:
        when = "incomplete at the end of the game"
    return f"{what}, {when} ({data['rule']}): {_whom(data, names)}"


def _whom(data: Mapping[str, Any], names: Sequence[str] | None) -> str:
    winners: Sequence[int] = data["winners"]
    if not winners:
        return "nobody stood in it: no points"
    points: int = data["points"]
    awarded: Sequence[int] = data["awarded"]
    who = _and([seat_name(names, p) for p in winners])
    each = " each" if len(winners) > 1 else ""
    text = f"{plural(points, 'point')}{each} to {who}"
    if any(awarded[p] != points for p in winners):
        # 2nd-edition farms (R7.4): a city pays each player once, so a winner may gain less.
        if len(winners) == 1:
            return f"{text}, who gains {plural(awarded[winners[0]], 'point')}"
        gains = [f"{seat_name(names, p)} gains {plural(awarded[p], 'point')}" for p in winners]
        text += "; " + ", ".join(gains)
    return text


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
