"""Board and tile pictures (carcassonne.svg): golden SVGs byte for byte, and the structure
that pages rely on (docs/pictures.md), checked on every golden game.

Regenerate the goldens after a deliberate change to the drawing (and bump
`carcassonne.svg.DRAWING_VERSION`): ``UPDATE_GOLDEN=1 .venv/bin/python -m pytest
tests/unit/test_svg.py``, then look at the pictures before committing them.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from carcassonne import cli
from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.projection import open_features
from carcassonne.record import Record, load_record, replay
from carcassonne.state import GameState
from carcassonne.svg import PALETTE, board_svg, feature_ids, tile_svg
from carcassonne.tileart import SIZE, spot_point, tile_art, tile_spots, turn_point
from carcassonne.tiles import CITY, FIELD, MONASTERY, ROAD
from carcassonne.tilesets import CATALOG, TILESETS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
PICTURES = GOLDEN / "svg"
GAMES = sorted(GOLDEN.glob("*.json"))
NS = "{http://www.w3.org/2000/svg}"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def golden_record(path: Path) -> Record:
    data = json.loads(path.read_text(encoding="utf-8"))
    return load_record(
        {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}
    )


def parse(picture: str) -> ET.Element:
    return ET.fromstring(picture)


def by_class(root: ET.Element, name: str) -> list[ET.Element]:
    return [e for e in root.iter() if name in (e.get("class") or "").split()]


@pytest.fixture(scope="module", params=GAMES, ids=[p.stem for p in GAMES])
def game(request: pytest.FixtureRequest) -> tuple[Path, GameState]:
    return request.param, replay(golden_record(request.param))


def test_every_golden_game_has_its_golden_picture(game):
    path, state = game
    picture = board_svg(state)
    target = PICTURES / f"{path.stem}.svg"
    if UPDATE:
        PICTURES.mkdir(exist_ok=True)
        target.write_text(picture, encoding="utf-8", newline="\n")
    assert target.exists(), f"no golden picture {target.name}: run with UPDATE_GOLDEN=1"
    assert picture == target.read_text(encoding="utf-8"), (
        f"{target.name} differs: if the drawing changed on purpose, regenerate with "
        "UPDATE_GOLDEN=1 (see docs/pictures.md) and bump DRAWING_VERSION"
    )


def test_no_stale_golden_pictures():
    assert sorted(p.stem for p in PICTURES.glob("*.svg")) == [p.stem for p in GAMES]


def test_the_root_names_the_turn_and_frames_every_tile(game):
    _, state = game
    root = parse(board_svg(state))
    assert root.tag == f"{NS}svg"
    assert root.get("data-turn") == str(state.turn)
    left, top, width, height = (int(v) for v in root.get("viewBox", "").split())
    for x, y in state.board.tiles:
        assert left <= x * SIZE and x * SIZE + SIZE <= left + width
        assert top <= y * SIZE and y * SIZE + SIZE <= top + height


def test_one_group_per_placed_tile_in_placement_order(game):
    _, state = game
    tiles = by_class(parse(board_svg(state)), "tile")
    assert len(tiles) == len(state.board.tiles) == state.turn + 1
    drawn = [(int(g.get("data-x", "")), int(g.get("data-y", ""))) for g in tiles]
    assert drawn == list(state.board.tiles)
    for g, placed in zip(tiles, state.board.tiles.values(), strict=True):
        assert g.get("data-tile") == placed.tile.name
        assert g.get("data-rotation") == str(placed.rotation)
        segs = by_class(g, "seg")
        assert len(segs) == len(placed.orientation.segments), "every segment drawn once"
        assert sorted(s.get("class", "") for s in segs) == sorted(
            f"seg seg-{s.kind}" for s in placed.orientation.segments
        )


def test_pennants_are_drawn(game):
    _, state = game
    pennants = by_class(parse(board_svg(state)), "pennant")
    assert len(pennants) == sum(p.tile.pennants for p in state.board.tiles.values())


def test_meeples_stand_on_their_spots_in_seat_colours(game):
    _, state = game
    meeples = by_class(parse(board_svg(state)), "meeple")
    assert len(meeples) == len(state.meeples)
    ids = feature_ids(state.board)
    for g, m in zip(meeples, state.meeples.values(), strict=True):
        assert g.get("data-player") == str(m.player)
        assert (g.get("data-x"), g.get("data-y")) == (str(m.pos[0]), str(m.pos[1]))
        assert g.get("data-spot") == m.meeple.spot
        assert g.get("data-feature") == ids[state.board.find(m.node)]
        (shape,) = list(g)
        assert shape.get("fill") == PALETTE[m.player]
        px, py = spot_point(state.board.tiles[m.pos].orientation, m.meeple.spot)
        assert g.get("transform") == f"translate({m.pos[0] * SIZE + px} {m.pos[1] * SIZE + py})"


def test_segments_of_one_feature_share_one_id_and_no_other(game):
    _, state = game
    board = state.board
    root = parse(board_svg(state))
    seen: dict[str, int] = {}
    for g, placed in zip(by_class(root, "tile"), board.tiles.values(), strict=True):
        by_index = {}
        drawn = by_class(g, "seg")
        # Painting order is fields, roads, cities, monastery, garden; map back by kind and order.
        order = sorted(
            range(len(placed.orientation.segments)),
            key=lambda i: ("field", "road", "city", "monastery", "garden").index(
                placed.orientation.segments[i].kind
            ),
        )
        for index, element in zip(order, drawn, strict=True):
            by_index[index] = element.get("data-feature")
        for index, feature in by_index.items():
            feature_root = board.find(placed.base + index)
            assert seen.setdefault(feature, feature_root) == feature_root, feature
    assert len(set(seen.values())) == len(seen)


def test_the_last_placed_tile_is_marked(game):
    _, state = game
    (mark,) = by_class(parse(board_svg(state)), "last-placed")
    assert (int(mark.get("data-x", "")), int(mark.get("data-y", ""))) == list(state.board.tiles)[-1]


def test_open_features_are_outlined_only_when_asked(game):
    _, state = game
    assert by_class(parse(board_svg(state)), "open-feature") == []
    outlined = by_class(parse(board_svg(state, outline_open=True)), "open-feature")
    assert len(outlined) == len(open_features(state))
    ids = feature_ids(state.board)
    expected = {
        ids[state.board.find(placed.base + i)]
        for placed in state.board.tiles.values()
        for i, seg in enumerate(placed.orientation.segments)
        if seg.kind != FIELD and not state.board.feature(placed.base + i).done
    }
    assert {g.get("data-feature") for g in outlined} == expected


def test_drawing_is_deterministic_and_leaves_the_state_alone(game):
    _, state = game
    before = (list(state.board.parent), state.snapshot())
    assert board_svg(state, True) == board_svg(state, True)
    assert (list(state.board.parent), state.snapshot()) == before


def test_the_start_board_marks_nothing():
    state = replay(load_record({**_readme(), "turns": []}))
    root = parse(board_svg(state))
    assert root.get("data-turn") == "0"
    assert len(by_class(root, "tile")) == 1
    assert by_class(root, "last-placed") == []


def _readme() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / "readme_example_2p.json").read_text())
    return {k: v for k, v in data.items() if k not in ("expected", "why", "regression")}


@pytest.mark.parametrize("tileset", sorted(TILESETS))
def test_each_tile_type_draws_its_segments_and_spots_lie_inside_the_square(tileset):
    for tile in TILESETS[tileset].types.values():
        for rotation in range(4):
            root = parse(tile_svg(tile, rotation))
            segs = by_class(root, "seg")
            assert sorted(int(s.get("data-segment", "")) for s in segs) == list(
                range(len(tile.segments))
            )
            assert len(by_class(root, "pennant")) == tile.pennants
            orient = tile.orientations[rotation]
            spots = tile_spots(orient)
            assert {s for s, _, _ in spots} == set(orient.spots)
            points = [p for _, _, p in spots]
            assert len(set(points)) == len(points), f"{tile.name}{rotation}: spots overlap"
            for _, _, (x, y) in spots:
                assert 5 <= x <= 95 and 5 <= y <= 95


def test_spots_turn_with_the_tile():
    """A spot's point on a turned tile is the unturned point turned with it."""

    for tile in TILESETS["base"].types.values():
        base = {s: p for s, _, p in tile_spots(tile.orientations[0])}
        for rotation in range(1, 4):
            for spot, _, point in tile_spots(tile.orientations[rotation]):
                if spot in EDGES:
                    old = EDGES[(EDGES.index(spot) - rotation) % 4]
                elif spot in HALF_EDGES:
                    old = HALF_EDGES[(HALF_EDGES.index(spot) - 2 * rotation) % 8]
                else:
                    old = spot
                assert turn_point(base[old], rotation) == point, (tile.name, rotation, spot)


def test_city_spots_are_city_and_field_spots_are_field():
    for tile in TILESETS["base"].types.values():
        orient = tile.orientations[0]
        for spot, index, _ in tile_spots(orient):
            kind = orient.segments[index].kind
            assert (kind == CITY) == (
                spot in ("N", "E", "S", "W") and orient.edges["NESW".index(spot)] == "C"
            )


# -- the command line ----------------------------------------------------------------------


def run(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


@pytest.fixture
def record_file(tmp_path: Path) -> Path:
    path = tmp_path / "game.json"
    path.write_text(json.dumps(_readme()), encoding="utf-8")
    return path


def test_show_svg_writes_the_golden_picture(record_file, tmp_path):
    out = tmp_path / "board.svg"
    assert run(["show", str(record_file), "--svg", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == (PICTURES / "readme_example_2p.svg").read_text()


def test_show_svg_to_stdout_at_a_turn(record_file, capsys):
    assert run(["show", str(record_file), "--svg", "-", "--turn", "1"]) == 0
    root = parse(capsys.readouterr().out)
    assert root.get("data-turn") == "1"
    assert len(by_class(root, "tile")) == 2


def test_show_svg_turn_zero_and_the_last_turn(record_file, capsys):
    assert run(["show", str(record_file), "--svg", "-", "--turn", "0"]) == 0
    assert len(by_class(parse(capsys.readouterr().out), "tile")) == 1
    assert run(["show", str(record_file), "--svg", "-", "--turn", "3"]) == 0
    assert capsys.readouterr().out == (PICTURES / "readme_example_2p.svg").read_text()


@pytest.mark.parametrize("turn", ["4", "99"])
def test_show_svg_a_turn_beyond_the_game_exits_2(record_file, capsys, turn):
    assert run(["show", str(record_file), "--svg", "-", "--turn", turn]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"--turn {turn}: this game has turns 0-3" in err


@pytest.mark.parametrize("turn", ["-1", "x", "1.5", "9" * 30])
def test_show_svg_a_malformed_turn_exits_2(record_file, capsys, turn):
    assert run(["show", str(record_file), "--svg", "-", "--turn", turn]) == 2
    assert "--turn" in capsys.readouterr().err


def test_show_svg_unreadable_record_and_unwritable_file_exit_2(record_file, tmp_path, capsys):
    assert run(["show", str(tmp_path / "missing.json"), "--svg", "-"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert run(["show", str(record_file), "--svg", str(tmp_path / "no" / "dir.svg")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_show_text_at_a_turn(record_file, capsys):
    assert run(["show", str(record_file), "--turn", "1"]) == 0
    out = capsys.readouterr().out
    assert "Q1" in out and "I2" not in out


# -- meeple spots lie on their own segment as drawn -------------------------------------------


def _polygons(d: str) -> list[list[tuple[float, float]]]:
    """Path data (M L Q C Z, absolute) flattened to polygons, curves sampled."""
    polys: list[list[tuple[float, float]]] = []
    here = (0.0, 0.0)
    for cmd, args in re.findall(r"([MLQCZ])([^MLQCZ]*)", d):
        nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", args)]
        pts = list(zip(nums[::2], nums[1::2], strict=True))
        if cmd == "M":
            polys.append([pts[0]])
        elif cmd == "L":
            polys[-1].extend(pts)
        elif cmd in "QC":
            ctrl = [here, *pts]
            for step in range(1, 21):
                t = step / 20
                level = ctrl
                while len(level) > 1:  # de Casteljau
                    level = [
                        (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t)
                        for a, b in pairwise(level)
                    ]
                polys[-1].append(level[0])
        if polys and polys[-1]:
            here = polys[-1][-1]
    return polys


def _inside(point: tuple[int, int], d: str) -> bool:
    """Even-odd rule over every subpath."""
    x, y = point
    crossings = 0
    for poly in _polygons(d):
        for (x1, y1), (x2, y2) in zip(poly, poly[1:] + poly[:1], strict=True):
            if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
                crossings += 1
    return crossings % 2 == 1


def _near_line(point: tuple[int, int], d: str, width: float) -> bool:
    x, y = point
    for poly in _polygons(d):
        for (x1, y1), (x2, y2) in pairwise(poly):
            dx, dy = x2 - x1, y2 - y1
            t = max(0.0, min(1.0, ((x - x1) * dx + (y - y1) * dy) / ((dx * dx + dy * dy) or 1)))
            if (x - x1 - t * dx) ** 2 + (y - y1 - t * dy) ** 2 <= (width / 2) ** 2:
                return True
    return False


@pytest.mark.parametrize("tileset", sorted(CATALOG))
def test_each_spot_stands_on_its_segment_and_off_the_others(tileset):
    """A meeple drawn at its spot is seen on its own feature: a city spot inside the city, a
    road spot on the road, a field spot in its field's fan and under no city or road, the
    monastery spot on the building; none on the river (R9.1)."""

    for tile in CATALOG[tileset].types.values():
        for rotation in range(4):
            drawn = tile_art(tile, rotation)
            art = dict(drawn.segments)
            for spot, index, point in tile_spots(tile.orientations[rotation]):
                seg = art[index]
                where = (tile.name, rotation, spot, point)
                if drawn.river and seg.kind == FIELD:  # the rest is drawn over the river
                    assert not _near_line(point, drawn.river, 14), (*where, "on the river")
                if seg.kind == ROAD:
                    assert _near_line(point, seg.d, 9), where
                else:
                    assert _inside(point, seg.d), where
                for other_index, other in art.items():
                    if other_index == index or seg.kind == MONASTERY:
                        continue
                    if other.kind == CITY:
                        assert not _inside(point, other.d), (*where, "in a city")
                    if other.kind == ROAD and seg.kind != ROAD:
                        assert not _near_line(point, other.d, 9), (*where, "on a road")
