"""The 50-space score track (R8.1, TILES.md section 6).

Spaces 0-49, lapped. Reaching or passing 0 again shows a point tile with its 50 side up;
on the next lap it is turned to 100; a third lap takes a further tile (50 side). The score
itself is never capped.
"""

from __future__ import annotations

import pytest

from carcassonne.track import SPACES, TrackPosition, track_position


def test_r8_1_track_has_50_spaces():
    assert SPACES == 50


@pytest.mark.parametrize(
    ("score", "space", "laps", "tiles"),
    [
        (0, 0, 0, ()),  # start: no lap, no point tile
        (1, 1, 0, ()),
        (49, 49, 0, ()),  # last space of the first lap
        (50, 0, 1, (50,)),  # reaching 0 again: a tile, 50 side up
        (51, 1, 1, (50,)),
        (99, 49, 1, (50,)),
        (100, 0, 2, (100,)),  # second lap: the same tile turned to 100
        (120, 20, 2, (100,)),
        (149, 49, 2, (100,)),
        (150, 0, 3, (100, 50)),  # third lap: a further tile, 50 side up
        (151, 1, 3, (100, 50)),
        (200, 0, 4, (100, 100)),  # ... which is turned to 100 on the fourth lap
        (250, 0, 5, (100, 100, 50)),
    ],
)
def test_r8_1_space_laps_and_point_tiles(score, space, laps, tiles):
    pos = track_position(score)
    assert (pos.score, pos.space, pos.laps, pos.point_tiles) == (score, space, laps, tiles)
    assert sum(pos.point_tiles) + pos.space == score  # the view always adds up to the score


def test_r8_1_score_is_never_capped():
    pos = track_position(1234)
    assert pos.score == 1234 and pos.space == 34 and pos.laps == 24
    assert pos.point_tiles == (100,) * 12


def test_r8_1_as_json():
    assert track_position(120).to_dict() == {
        "score": 120,
        "space": 20,
        "laps": 2,
        "point_tiles": [100],
    }
    assert isinstance(track_position(7), TrackPosition)


@pytest.mark.parametrize("bad", [-1, -50, 1.5, "12", None, True])
def test_r8_1_rejects_what_is_not_a_score(bad):
    with pytest.raises(ValueError):
        track_position(bad)
