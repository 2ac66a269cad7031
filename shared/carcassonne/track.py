"""The score track (R8.1): 50 spaces, lapped, with 50/100 point tiles."""

from __future__ import annotations

from dataclasses import dataclass

SPACES = 50


@dataclass(frozen=True)
class TrackPosition:
    """Where a score stands on the track and the point tiles its player shows."""

    score: int
    space: int  # 0-49
    laps: int  # times the marker reached or passed 0 again
    point_tiles: tuple[int, ...]  # faces shown: a 50 tile turns to 100 on the next lap

    def to_dict(self) -> dict[str, object]:
        """As JSON."""
        return {
            "score": self.score,
            "space": self.space,
            "laps": self.laps,
            "point_tiles": list(self.point_tiles),
        }


def track_position(score: int) -> TrackPosition:
    """The track view of a score (never capped): 120 -> space 20, 2 laps, one "100" tile."""
    if type(score) is not int or score < 0:
        raise ValueError("a score is a non-negative integer")
    laps = score // SPACES
    # Each point tile shows 50, turned to 100 on the following lap; a third lap takes a new tile.
    tiles = (100,) * (laps // 2) + (50,) * (laps % 2)
    return TrackPosition(score, score % SPACES, laps, tiles)
