"""Board geometry: directions, half-edges, rotation and the 12 slots of a square.

Conventions (the game record's): x grows east, y grows south; rotations are clockwise
quarter turns. A square has 12 *slots*: the four edges N E S W (0-3), which carry a road
or a city, and the eight field half-edges NNW … WNW (4-11), listed clockwise.
"""

from __future__ import annotations

EDGES: tuple[str, ...] = ("N", "E", "S", "W")
HALF_EDGES: tuple[str, ...] = ("NNW", "NNE", "ENE", "ESE", "SSE", "SSW", "WSW", "WNW")

EDGE_INDEX: dict[str, int] = {name: i for i, name in enumerate(EDGES)}
HALF_EDGE_INDEX: dict[str, int] = {name: i for i, name in enumerate(HALF_EDGES)}

# (dx, dy) of the neighbour across each edge; y grows south.
DELTA: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))

# The eight squares around a square, for monasteries (R6.3).
RING: tuple[tuple[int, int], ...] = (
    (-1, -1),
    (0, -1),
    (1, -1),
    (-1, 0),
    (1, 0),
    (-1, 1),
    (0, 1),
    (1, 1),
)

N_SLOTS = 12
HALF_BASE = 4  # slot number of half-edge 0


def opposite_edge(edge: int) -> int:
    """The edge of the neighbour that touches `edge` (N↔S, E↔W)."""
    return edge ^ 2


def opposite_half(half: int) -> int:
    """The neighbour's half-edge that touches `half` (NNW↔SSW, NNE↔SSE, ENE↔WNW, ESE↔WSW).

    With the clockwise numbering this is an XOR with 5 (0↔5, 1↔4, 2↔7, 3↔6).
    """
    return half ^ 5


def rotate_edge(edge: int, rotation: int) -> int:
    """Where `edge` of a tile lies on the board after `rotation` clockwise quarter turns."""
    return (edge + rotation) % 4


def rotate_half(half: int, rotation: int) -> int:
    """Where half-edge `half` lies after `rotation` clockwise quarter turns (two steps each)."""
    return (half + 2 * rotation) % 8


def edge_slot(edge: int) -> int:
    """The slot number of an edge."""
    return edge


def half_slot(half: int) -> int:
    """The slot number of a half-edge."""
    return HALF_BASE + half
