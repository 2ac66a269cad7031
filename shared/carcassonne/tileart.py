"""How a tile looks: shapes of its segments and the spots where meeples stand, per rotation.

Derived from the tile data alone (`tiles.py`: each segment's edges, field half-edges,
pennants, monastery); no tile is drawn by hand. Coordinates are in a 100×100 square, y
growing south (as on the board), integers only so that every picture is byte-stable.

- Fields: for each run of consecutive half-edges (clockwise), the fan from the centre of the
  square over that stretch of the border. Fans of different fields never overlap: each
  half-edge belongs to one field, and roads run along the fans' sides through the centre.
- Roads: a stroke from each edge's midpoint to the centre (one path per segment).
- Cities: one of five shapes chosen by how many edges the city has and how they lie (a cap,
  a corner, a band between opposite edges, three sides, the whole square), turned to fit.
- Monastery: a small building in the centre. Pennants: a shield inside their city.

`spot_point` is the one place that says where a meeple stands; the catalog and the board
both use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from .geometry import EDGES, HALF_BASE, HALF_EDGES
from .tiles import CITY, FIELD, GARDEN, MONASTERY, ROAD, Orientation, TileType

SIZE = 100
CENTRE = (50, 50)
Point = tuple[int, int]
# A path as (command, points) steps; only M L Q C Z, so turning it is turning its points.
Steps = tuple[tuple[str, tuple[Point, ...]], ...]

EDGE_MID: tuple[Point, ...] = ((50, 0), (100, 50), (50, 100), (0, 50))
# Each half-edge's stretch of the border, clockwise: (start, end).
HALF_SPAN: tuple[tuple[Point, Point], ...] = (
    ((0, 0), (50, 0)),
    ((50, 0), (100, 0)),
    ((100, 0), (100, 50)),
    ((100, 50), (100, 100)),
    ((100, 100), (50, 100)),
    ((50, 100), (0, 100)),
    ((0, 100), (0, 50)),
    ((0, 50), (0, 0)),
)
# Meeple spots in the unturned square: 15 in from the middle of an edge for a city, 25 for a
# road (on it), 15 in from the middle of a half-edge for a field; the monastery's centre.
CITY_SPOT: tuple[Point, ...] = ((50, 15), (85, 50), (50, 85), (15, 50))
ROAD_SPOT: tuple[Point, ...] = ((50, 25), (75, 50), (50, 75), (25, 50))
FIELD_SPOT: tuple[Point, ...] = (
    (25, 15),
    (75, 15),
    (85, 25),
    (85, 75),
    (75, 85),
    (25, 85),
    (15, 75),
    (15, 25),
)
MONASTERY_SPOT: Point = CENTRE  # the centre, so that every spot turns with the tile


def _p(x: int, y: int) -> Point:
    return (x, y)


# The city shapes, each drawn for one placement of its edges (turned by `_turn` to fit), with
# the point where its pennants go.
CAP_N: Steps = (("M", (_p(0, 0),)), ("L", (_p(100, 0),)), ("C", ((70, 30), (30, 30), (0, 0))))
CORNER_NE: Steps = (
    ("M", ((0, 0),)),
    ("L", ((100, 0),)),
    ("L", ((100, 100),)),
    ("Q", ((60, 40), (0, 0))),
)
BAND_NS: Steps = (
    ("M", ((0, 0),)),
    ("L", ((100, 0),)),
    ("Q", ((40, 50), (100, 100))),
    ("L", ((0, 100),)),
    ("Q", ((60, 50), (0, 0))),
)
THREE_NES: Steps = (
    ("M", ((0, 0),)),
    ("L", ((100, 0),)),
    ("L", ((100, 100),)),
    ("L", ((0, 100),)),
    ("C", ((40, 70), (40, 30), (0, 0))),
)
FULL: Steps = (("M", ((0, 0),)), ("L", ((100, 0),)), ("L", ((100, 100),)), ("L", ((0, 100),)))
SHAPES: dict[str, Steps] = {
    "cap": CAP_N,
    "corner": CORNER_NE,
    "band": BAND_NS,
    "three": THREE_NES,
    "full": FULL,
}
PENNANT_AT: dict[str, Point] = {
    "cap": (50, 9),
    "corner": (80, 20),
    "band": (50, 50),
    "three": (62, 50),
    "full": (50, 50),
}
MONASTERY_STEPS: Steps = (
    ("M", ((37, 68),)),
    ("L", ((37, 44),)),
    ("L", ((50, 31),)),
    ("L", ((63, 44),)),
    ("L", ((63, 68),)),
)
JUNCTION = "M43,43L57,43L57,57L43,57Z"
POOL = "M50,36L64,50L50,64L36,50Z"  # the spring's source and the lake, around the centre


def turn_point(point: Point, quarter_turns: int) -> Point:
    """`point` after `quarter_turns` clockwise quarter turns of the square about its centre."""
    x, y = point
    for _ in range(quarter_turns % 4):
        x, y = SIZE - y, x
    return (x, y)


def _turn(steps: Steps, quarter_turns: int) -> Steps:
    return tuple((cmd, tuple(turn_point(p, quarter_turns) for p in pts)) for cmd, pts in steps)


def _d(steps: Steps, close: bool = True) -> str:
    """SVG path data: `M0,0L100,0…Z`."""
    out = "".join(cmd + " ".join(f"{x},{y}" for x, y in pts) for cmd, pts in steps)
    return out + "Z" if close else out


def city_shape(edges: tuple[int, ...]) -> tuple[str, int]:
    """Which of the five city shapes covers these board edges, and how many quarter turns
    clockwise from its drawn placement (cap N, corner N+E, band N+S, three sides N+E+S)."""
    have = sorted(edges)
    if len(have) == 1:
        return "cap", have[0]
    if len(have) == 4:
        return "full", 0
    if len(have) == 3:
        return "three", (({0, 1, 2, 3} - set(have)).pop() - 3) % 4
    a, b = have
    if b - a == 2:
        return "band", a
    return "corner", b if (a, b) == (0, 3) else a  # the corner's first edge clockwise


def _field_d(halves: list[int]) -> str:
    """Fans from the centre over each run of consecutive half-edges (clockwise)."""
    chosen = set(halves)
    starts = [h for h in sorted(chosen) if (h - 1) % 8 not in chosen] or [0]
    parts = []
    for start in starts:
        run = [start]
        while (run[-1] + 1) % 8 in chosen and len(run) < 8:
            run.append((run[-1] + 1) % 8)
        points = [CENTRE, HALF_SPAN[run[0]][0]] + [HALF_SPAN[h][1] for h in run]
        parts.append("M" + "L".join(f"{x},{y}" for x, y in points) + "Z")
    return "".join(parts)


def _road_d(edges: list[int], runs_on: bool) -> str:
    """Legs from each edge's midpoint to the centre (where a junction, a monastery or the
    other leg meets it). A lone dead end with nothing in the middle (`runs_on`) goes on
    towards the opposite edge, under whatever feature it ends at (a city, CFR)."""
    cx, cy = CENTRE
    first, *rest = edges
    if runs_on and not rest:
        (x, y), (ox, oy) = EDGE_MID[first], EDGE_MID[first ^ 2]
        return f"M{x},{y}L{ox + (cx - ox) * 2 // 5},{oy + (cy - oy) * 2 // 5}"
    out = f"M{EDGE_MID[first][0]},{EDGE_MID[first][1]}L{cx},{cy}"
    for index, edge in enumerate(rest):
        x, y = EDGE_MID[edge]
        out += f"L{x},{y}" if index == 0 else f"M{cx},{cy}L{x},{y}"
    return out


@dataclass(frozen=True)
class SegmentArt:
    """One segment as drawn: its kind, path data, and pennant shield centres."""

    kind: str
    d: str
    pennants: tuple[Point, ...]
    wall: str = ""  # a city's inner edge (its curves), stroked apart from the tile's border


@dataclass(frozen=True)
class TileArt:
    """A tile type at one rotation, as drawn: segments in painting order, and decorations."""

    segments: tuple[tuple[int, SegmentArt], ...]  # (segment index, art), fields first
    junction: bool  # three or more roads end in the middle (a village)
    river: str = ""  # R9.1: the river's stroke (path data), "" on a tile without one
    pool: bool = False  # the river starts or ends in the middle (the spring, the lake)


PAINT_ORDER = {FIELD: 0, ROAD: 1, CITY: 2, MONASTERY: 3, GARDEN: 4}
# R9.2: a garden lies in a field, at the first of these half-edges (in the tile's own
# orientation, south first: where the base tiles' fields are widest) that is field.
GARDEN_HALVES = (4, 3, 5, 2, 6, 1, 7, 0)


def garden_point(orient: Orientation) -> Point:
    """Where a tile's garden (and the abbot in it) is drawn, turned with the tile."""
    for half in GARDEN_HALVES:
        board_half = (half + 2 * orient.rotation) % 8
        local = orient.slot_segment[HALF_BASE + board_half]
        if local >= 0 and orient.segments[local].kind == FIELD:
            return FIELD_SPOT[board_half]
    return CENTRE


def _wall_d(steps: Steps) -> str:
    """The curved steps of a city outline alone, each from where the outline stood."""
    out, here = [], (0, 0)
    for cmd, pts in steps:
        if cmd in "QC":
            out.append(f"M{here[0]},{here[1]}{cmd}" + " ".join(f"{x},{y}" for x, y in pts))
        here = pts[-1]
    return "".join(out)


def _segment_art(orient: Orientation, index: int, dead_ends: int) -> SegmentArt:
    seg = orient.segments[index]
    edges = [s for s in seg.slots if s < HALF_BASE]
    if seg.kind == FIELD:
        return SegmentArt(FIELD, _field_d([s - HALF_BASE for s in seg.slots]), ())
    if seg.kind == ROAD:
        runs_on = dead_ends == 1 and orient.monastery < 0
        return SegmentArt(ROAD, _road_d(edges, runs_on), ())
    if seg.kind == MONASTERY:
        return SegmentArt(MONASTERY, _d(MONASTERY_STEPS), ())
    if seg.kind == GARDEN:  # a small flower bed in a field (R9.2)
        x, y = garden_point(orient)
        return SegmentArt(GARDEN, f"M{x - 8},{y}L{x},{y - 8}L{x + 8},{y}L{x},{y + 8}Z", ())
    shape, turns = city_shape(tuple(edges))
    at = turn_point(PENNANT_AT[shape], turns)
    # Several pennants on one segment (none in the base set) sit side by side.
    shields = tuple((at[0] + 14 * i, at[1]) for i in range(seg.pennants))
    outline = _turn(SHAPES[shape], turns)
    return SegmentArt(CITY, _d(outline), shields, _wall_d(outline))


@cache
def tile_art(tile: TileType, rotation: int) -> TileArt:
    """How `tile` turned `rotation` quarter turns clockwise is drawn (computed once)."""
    orient = tile.orientations[rotation]
    dead_ends = sum(1 for s in orient.segments if s.kind == ROAD and s.n_edges == 1)
    junction = dead_ends >= 3
    order = sorted(range(len(orient.segments)), key=lambda i: PAINT_ORDER[orient.segments[i].kind])
    river = tile.river_edges(rotation) if tile.river else ()
    return TileArt(
        tuple((i, _segment_art(orient, i, dead_ends)) for i in order),
        junction,
        _road_d(list(river), False) if river else "",  # edge to centre, as a road runs
        len(river) == 1,
    )


def spot_point(orient: Orientation, spot: str) -> Point:
    """Where a meeple on `spot` (board edge, half-edge or "monastery") stands on the turned tile."""
    if spot == MONASTERY:
        return MONASTERY_SPOT
    if spot == GARDEN:
        return garden_point(orient)
    if spot in EDGES:
        edge = EDGES.index(spot)
        seg = orient.segments[orient.spots[spot]]
        return CITY_SPOT[edge] if seg.kind == CITY else ROAD_SPOT[edge]
    return FIELD_SPOT[HALF_EDGES.index(spot)]


def tile_spots(orient: Orientation) -> list[tuple[str, int, Point]]:
    """Every nameable spot of a turned tile: (spot, segment index, point), edges first."""
    return [
        (spot, orient.spots[spot], spot_point(orient, spot))
        for spot in (*EDGES, *HALF_EDGES, MONASTERY, GARDEN)
        if spot in orient.spots
    ]


PENNANT_D = "m-6,-6h12v6l-6,7l-6,-7z"  # a shield around its centre (relative moves)
