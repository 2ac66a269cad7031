"""Tile types and their 4 orientations, built once from the one-table tile sets.

A tile type is written as one row of text (see `tilesets.py`): its edge string and its
segments. Everything the hot paths need (edges after rotation, which board slots each
segment covers, bit masks for meeple checks) is precomputed here per rotation, so that
placing a tile never re-derives geometry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .geometry import EDGE_INDEX, EDGES, HALF_BASE, HALF_EDGE_INDEX, HALF_EDGES, N_SLOTS

ROAD, CITY, FIELD, MONASTERY = "road", "city", "field", "monastery"
GARDEN = "garden"  # R9.2: on 2nd-edition tiles, a feature only the abbot may take
KINDS = (ROAD, CITY, FIELD, MONASTERY, GARDEN)
SURROUNDED = (MONASTERY, GARDEN)  # features scored by the tiles around them (R6.3, R9.2)
# The river (R9.1) is no feature: it has no segment, takes no meeple and is never scored. A
# river edge ('I') only has to meet a river edge, and its two halves are fields split by it.
RIVER, RIVER_EDGE = "river", "I"


class Meeple(NamedTuple):
    """Where a meeple goes on the tile just placed: a feature and one of its spots.

    `spot` is an edge (``N E S W``, roads and cities) or a half-edge (``NNW … WNW``, fields)
    in board directions after rotation, or ``"monastery"`` / ``"garden"``. Any spot of the
    segment names it. `abbot` marks the player's abbot (R9.2) rather than a meeple.
    """

    feature: str
    spot: str
    abbot: bool = False


@dataclass(frozen=True)
class Segment:
    """One feature part printed on a tile, in the tile's own orientation (TILES.md)."""

    kind: str
    edges: tuple[int, ...] = ()  # road/city edges, 0-3
    halves: tuple[int, ...] = ()  # field half-edges, 0-7
    pennants: int = 0
    cities: tuple[int, ...] = ()  # for a field: local indexes of the city segments it borders


@dataclass(frozen=True)
class OrientedSegment:
    """A segment after rotation: board slots, its slot bit mask and its canonical spot."""

    kind: str
    slots: tuple[int, ...]
    mask: int
    meeple: Meeple  # canonical spot: the first edge / half-edge clockwise, or "monastery"
    n_edges: int
    pennants: int
    cities: tuple[int, ...]


@dataclass(frozen=True)
class Orientation:
    """A tile type turned `rotation` quarter turns clockwise."""

    rotation: int
    edges: str  # board N, E, S, W: 'C', 'R' or 'F'
    segments: tuple[OrientedSegment, ...]
    slot_segment: tuple[int, ...]  # per board slot: local segment index, or -1
    monastery: int  # local index of the monastery segment, or -1
    spots: dict[str, int]  # every nameable spot (edge, half-edge, "monastery") -> segment
    surrounded: int = -1  # local index of the monastery or garden segment (R6.3, R9.2), or -1


@dataclass(frozen=True)
class TileType:
    """A tile type of a tile set: name, count in the set, edges and segments."""

    name: str
    count: int
    edges: str
    segments: tuple[Segment, ...]
    gardens: int = 0  # how many of the `count` copies show a garden (decoration, R1.4)
    river: bool = False  # a river tile (R9.1): it has river edges ('I')
    orientations: tuple[Orientation, ...] = field(default=(), compare=False, repr=False)
    # frontier key (required edges N E S W, "." = any) -> rotations that fit; a pure memo
    _fits: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    def rotations_for(self, key: str) -> tuple[int, ...]:
        """Rotations whose edges match every constrained edge of `key` (R4.2, R4.3)."""
        hit = self._fits.get(key)
        if hit is None:
            hit = tuple(
                o.rotation
                for o in self.orientations
                if all(k == "." or k == e for k, e in zip(key, o.edges, strict=True))
            )
            self._fits[key] = hit
        return hit

    @property
    def has_monastery(self) -> bool:
        """Whether the tile shows a monastery."""
        return any(s.kind == MONASTERY for s in self.segments)

    def river_edges(self, rotation: int) -> tuple[int, ...]:
        """The board edges that carry the river after `rotation` (R9.1)."""
        return tuple(d for d, e in enumerate(self.orientations[rotation].edges) if e == RIVER_EDGE)

    @property
    def pennants(self) -> int:
        """Coats of arms printed on the tile."""
        return sum(s.pennants for s in self.segments)


def parse_tile(name: str, count: int, spec: str, gardens: int = 0) -> TileType:
    """Build a tile type from its one-line description.

    `spec` is ``"EDGES | seg | seg …"``; a segment is ``city N E``, ``city+ N E`` (with a
    pennant), ``road W E``, ``field ENE WNW -> 0`` (bordering city segment 0, counted among
    the tile's cities in order) or ``monastery``; ``river W E`` names a river tile's river
    edges (R9.1: the river is no segment).
    """
    head, *parts = [p.strip() for p in spec.split("|")]
    edges = head.replace(" ", "")
    city_locals: list[int] = []
    raw: list[tuple[str, list[str], list[int], int]] = []
    river_edges: set[int] = set()
    for part in parts:
        body, _, link_text = part.partition("->")
        kind, *spots = body.split()
        if kind == RIVER:
            river_edges.update(EDGE_INDEX[w] for w in spots)
            continue
        pennants = kind.count("+")
        kind = kind.rstrip("+")
        if kind not in KINDS:
            raise ValueError(f"tile {name}: unknown segment kind {kind!r}")
        if kind == CITY:
            city_locals.append(len(raw))
        raw.append((kind, spots, [int(n) for n in link_text.split()], pennants))
    segments = []
    for kind, words, links, pennants in raw:
        if kind == FIELD:
            segments.append(
                Segment(
                    FIELD,
                    halves=tuple(HALF_EDGE_INDEX[w] for w in words),
                    cities=tuple(city_locals[i] for i in links),
                )
            )
        else:
            segments.append(
                Segment(kind, edges=tuple(EDGE_INDEX[w] for w in words), pennants=pennants)
            )
    tile = TileType(name, count, edges, tuple(segments), gardens, river=bool(river_edges))
    _check(tile, river_edges)
    object.__setattr__(tile, "orientations", tuple(_orient(tile, r) for r in range(4)))
    return tile


def _check(tile: TileType, river_edges: set[int]) -> None:
    """Reject a table row whose segments contradict its edge string or leave gaps."""
    if len(tile.edges) != 4 or set(tile.edges) - set("CRFI"):
        raise ValueError(f"tile {tile.name}: bad edge string {tile.edges!r}")
    derived = [RIVER_EDGE if e in river_edges else "F" for e in range(4)]
    halves_seen: list[int] = []
    for seg in tile.segments:
        for e in seg.edges:
            if derived[e] != "F":
                raise ValueError(f"tile {tile.name}: edge {EDGES[e]} in two segments")
            derived[e] = "C" if seg.kind == CITY else "R"
        halves_seen.extend(seg.halves)
    if "".join(derived) != tile.edges:
        raise ValueError(f"tile {tile.name}: segments give {''.join(derived)}, not {tile.edges}")
    expected = sorted(h for h in range(8) if tile.edges[h // 2] != "C")
    if sorted(halves_seen) != expected:
        raise ValueError(f"tile {tile.name}: field half-edges do not cover the non-city edges")


def _orient(tile: TileType, rotation: int) -> Orientation:
    """Precompute a tile type's geometry after `rotation` clockwise quarter turns."""
    edges = "".join(tile.edges[(d - rotation) % 4] for d in range(4))
    slot_segment = [-1] * N_SLOTS
    segments = []
    spots: dict[str, int] = {}
    monastery = surrounded = -1
    for index, seg in enumerate(tile.segments):
        board_edges = sorted((e + rotation) % 4 for e in seg.edges)
        board_halves = sorted((h + 2 * rotation) % 8 for h in seg.halves)
        slots = tuple(board_edges) + tuple(HALF_BASE + h for h in board_halves)
        for slot in slots:
            slot_segment[slot] = index
        names = [EDGES[e] for e in board_edges] + [HALF_EDGES[h] for h in board_halves]
        if seg.kind == MONASTERY:
            monastery = index
            names = [MONASTERY]
        if seg.kind in SURROUNDED:
            if surrounded >= 0:
                raise ValueError(f"tile {tile.name}: a monastery and a garden on one tile")
            surrounded = index
            names = [seg.kind]
        for spot_name in names:
            spots[spot_name] = index
        mask = 0
        for slot in slots:
            mask |= 1 << slot
        segments.append(
            OrientedSegment(
                kind=seg.kind,
                slots=slots,
                mask=mask,
                meeple=Meeple(seg.kind, names[0]),
                n_edges=len(board_edges),
                pennants=seg.pennants,
                cities=seg.cities,
            )
        )
    return Orientation(
        rotation, edges, tuple(segments), tuple(slot_segment), monastery, spots, surrounded
    )


@dataclass(frozen=True)
class TileSet:
    """A named set of tile types with the start tile and the meeples each player gets."""

    name: str
    start: str
    meeples: int
    types: dict[str, TileType]

    @property
    def size(self) -> int:
        """Number of tiles in the set, the start tile included."""
        return sum(t.count for t in self.types.values())

    def bag(self) -> dict[str, int]:
        """The tiles to be drawn: the whole set less the start tile (R2.1)."""
        counts = {name: t.count for name, t in self.types.items()}
        counts[self.start] -= 1
        return {name: n for name, n in counts.items() if n}
