"""The board: placed tiles, features kept by union-find, and the open frontier.

Everything that affects the board lives here: which tile is on which square, which
feature each printed segment belongs to, how many edges each road and city still has open,
who stands in each feature, and which empty squares a tile may be put on (with the edges
it must match). Placing a tile touches only that square and its neighbours: no rescans.

Each placed segment gets a *node* number; nodes joined across edges share a union-find
root, and the root owns the `Feature` record (kind, tiles, open edges, pennants, meeples).
"""

from __future__ import annotations

from .geometry import DELTA, HALF_BASE, N_SLOTS, RING, opposite_half
from .tiles import CITY, FIELD, GARDEN, MONASTERY, Orientation, TileType

Pos = tuple[int, int]
FREE = "."  # a frontier edge with no neighbour yet

# For an edge direction d: (my slot, the neighbour's facing slot) for the edge itself and for
# its two field half-edges.
FACING: tuple[tuple[tuple[int, int], ...], ...] = tuple(
    (
        (d, d ^ 2),
        (HALF_BASE + 2 * d, HALF_BASE + opposite_half(2 * d)),
        (HALF_BASE + 2 * d + 1, HALF_BASE + opposite_half(2 * d + 1)),
    )
    for d in range(4)
)


AROUND = ((0, 0), *RING)  # a square and the eight around it


# Each edge direction with its (dx, dy) and its FACING pairs, each marked with whether it is
# the edge itself (a matched road or city edge closes two open edges): `place`'s loop.
SIDES: tuple[tuple[int, tuple[int, int], tuple[tuple[int, int, bool], ...]], ...] = tuple(
    (d, DELTA[d], tuple((mine, theirs, k == 0) for k, (mine, theirs) in enumerate(FACING[d])))
    for d in range(4)
)


class Feature:
    """A road, city, field or monastery as it stands now (owned by a union-find root)."""

    __slots__ = ("cities", "done", "kind", "meeples", "open", "pennants", "tiles")

    def __init__(
        self, kind: str, tiles: set[Pos], open_edges: int, pennants: int, cities: list[int]
    ) -> None:
        self.kind = kind
        self.tiles = tiles  # squares the feature occupies (a square counts once, R6.2)
        self.open = open_edges  # road/city edges not yet matched by a neighbour
        self.pennants = pennants
        self.meeples: list[int] = []  # ids of the meeples standing in it
        self.cities = cities  # field: city nodes it borders (roots looked up when scoring)
        self.done = False  # completed and scored (roads, cities, monasteries)

    def copy(self) -> Feature:
        """An independent copy (for pure `evolve`)."""
        # Not through __init__: a bot's glance at a move copies several (simple.glance); with
        # Board.place's inline loop, ~3 % fewer instructions weighing a turn (docs/bots.md).
        twin = _new_feature(Feature)
        twin.kind = self.kind
        twin.tiles = set(self.tiles)
        twin.open = self.open
        twin.pennants = self.pennants
        twin.cities = self.cities.copy()
        twin.meeples = self.meeples.copy()
        twin.done = self.done
        return twin


_new_feature = _new_board = object.__new__


class Placed:
    """A tile on the board: its type, rotation and first node number."""

    __slots__ = ("base", "orientation", "rotation", "tile")

    def __init__(self, tile: TileType, rotation: int, base: int) -> None:
        self.tile = tile
        self.rotation = rotation
        self.orientation: Orientation = tile.orientations[rotation]
        self.base = base


class Board:
    """Tiles, features and frontier of one game; mutated in place by `place`."""

    __slots__ = (
        "bounds",
        "closes",
        "feats",
        "frontier",
        "monasteries",
        "parent",
        "tiles",
        "touched",
    )

    def __init__(
        self, bounds: tuple[int, int, int, int] | None = None, closes: bool = False
    ) -> None:
        self.tiles: dict[Pos, Placed] = {}
        self.parent: list[int] = []
        self.feats: list[Feature | None] = []
        # empty square next to a tile -> the 4 edge types it must match (N E S W, FREE = any)
        self.frontier: dict[Pos, str] = {}
        self.monasteries: dict[Pos, int] = {}  # and gardens (R9.2): square -> feature node
        self.bounds = bounds
        self.closes = closes  # R10.5 variant: an edge facing the border counts as matched
        # A `copy_around` copy: the roots whose features it copied (every other feature is
        # shared with the board it was copied from, and the same object there); None: a
        # board of its own.
        self.touched: set[int] | None = None

    def copy(self) -> Board:
        """An independent copy; tiles and orientations are immutable and shared."""
        twin = _new_board(Board)  # not through __init__, whose empty containers are replaced
        twin.bounds, twin.closes, twin.touched = self.bounds, self.closes, None
        twin.tiles = dict(self.tiles)
        twin.parent = list(self.parent)
        twin.feats = [f.copy() if f is not None else None for f in self.feats]
        twin.frontier = dict(self.frontier)
        twin.monasteries = dict(self.monasteries)
        return twin

    def copy_around(self, pos: Pos) -> Board:
        """A copy only for placing one tile on `pos` (a bot weighing a placement): the
        features that placement could change are copied, every other one is shared with
        this board, so the copy costs the neighbourhood rather than the whole board.

        A placement changes only the features of the tiles beside `pos` (joined across
        its edges, then maybe completed) and the monasteries or gardens around it (their
        ring fills up, R6.3); the lists and dicts of the board itself are copied whole
        (cheap, no objects in them are changed). Anything else applied to the copy — a
        second tile, an abbot recalled (R9.2) — could change a shared feature: use `copy`.
        """
        # Not through __init__, whose empty containers would be replaced; with the copied
        # roots kept in a set: ~4.5 % fewer instructions weighing a turn (docs/bots.md).
        twin = _new_board(Board)
        twin.bounds, twin.closes = self.bounds, self.closes
        twin.tiles = dict(self.tiles)
        twin.parent = list(self.parent)
        feats = twin.feats = list(self.feats)
        twin.frontier = dict(self.frontier)
        twin.monasteries = dict(self.monasteries)
        touched: set[int] = set()
        twin.touched = touched
        tiles, find = self.tiles, twin.find
        x, y = pos
        for dx, dy in DELTA:
            nb = tiles.get((x + dx, y + dy))
            if nb is None:
                continue
            nbase = nb.base
            for index in range(len(nb.orientation.segments)):
                root = find(nbase + index)
                feat = feats[root]
                if feat is not None and root not in touched:  # not copied yet
                    feats[root] = feat.copy()
                    touched.add(root)
        monasteries = self.monasteries
        if monasteries:
            for dx, dy in RING:
                node = monasteries.get((x + dx, y + dy))
                if node is not None and node not in touched:
                    feats[node] = feats[node].copy()  # type: ignore[union-attr]
                    touched.add(node)
        return twin

    # -- union-find -------------------------------------------------------------------
    def find(self, node: int) -> int:
        """The root of `node`'s feature (with path halving)."""
        parent = self.parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def feature(self, node: int) -> Feature:
        """The feature record that `node` belongs to."""
        feat = self.feats[self.find(node)]
        assert feat is not None
        return feat

    def _union(self, a: int, b: int) -> int:
        """Join the features of roots a and b; returns the surviving root."""
        feats = self.feats
        fa, fb = feats[a], feats[b]
        assert fa is not None and fb is not None
        if len(fa.tiles) < len(fb.tiles):
            a, b, fa, fb = b, a, fb, fa
        fa.tiles |= fb.tiles
        fa.open += fb.open
        fa.pennants += fb.pennants
        fa.meeples.extend(fb.meeples)
        fa.cities.extend(fb.cities)
        feats[b] = None
        self.parent[b] = a
        return a

    # -- placing ----------------------------------------------------------------------
    def in_bounds(self, pos: Pos) -> bool:
        """Whether `pos` lies on the table (always, unless R10.5 bounds it)."""
        if self.bounds is None:
            return True
        min_x, max_x, min_y, max_y = self.bounds
        return min_x <= pos[0] <= max_x and min_y <= pos[1] <= max_y

    def place(self, tile: TileType, pos: Pos, rotation: int) -> int:
        """Put a checked tile down and join its segments; returns its first node number."""
        tiles, parent, feats = self.tiles, self.parent, self.feats
        orient = tile.orientations[rotation]
        base = len(parent)
        for index, seg in enumerate(orient.segments):
            parent.append(base + index)
            cities = [base + c for c in seg.cities] if seg.cities else []  # only fields have any
            feats.append(Feature(seg.kind, {pos}, seg.n_edges, seg.pennants, cities))
        if orient.surrounded >= 0:  # a monastery or a garden (R9.2): scored by its ring
            self.monasteries[pos] = base + orient.surrounded
        tiles[pos] = Placed(tile, rotation, base)
        self.frontier.pop(pos, None)
        find, union, frontier = self.find, self._union, self.frontier
        bounded = self.bounds is not None
        x, y = pos
        my_slots, edges = orient.slot_segment, orient.edges
        for d, (dx, dy), facing in SIDES:
            npos = (x + dx, y + dy)
            nb = tiles.get(npos)
            if nb is None:
                kind = edges[d]
                if bounded and not self.in_bounds(npos):  # R10.5: no tile will come there
                    if self.closes and kind in "RC":
                        feat = feats[find(base + my_slots[d])]
                        assert feat is not None
                        feat.open -= 1  # R10.5 variant: the border closes this road or city edge
                    continue
                # `_constrain`, inline: this runs for every tile a bot glances at (with
                # SIDES, ~1.5 % fewer instructions weighing a turn; docs/bots.md)
                edge = d ^ 2
                key = frontier.get(npos, "....")
                frontier[npos] = key[:edge] + kind + key[edge + 1 :]
                continue
            their_slots = nb.orientation.slot_segment
            nbase = nb.base
            for mine, theirs, closes in facing:
                local = my_slots[mine]
                if local < 0:
                    continue
                ra, rb = find(base + local), find(nbase + their_slots[theirs])
                root = ra if ra == rb else union(ra, rb)
                if closes:  # a matched road or city edge closes two open edges
                    feat = feats[root]
                    assert feat is not None
                    feat.open -= 2
        return base

    def _constrain(self, pos: Pos, edge: int, kind: str) -> bool:
        """Record that the empty square `pos` must show `kind` on `edge`; False if `pos` is
        off the table (R10.5), where no tile will ever come."""
        if not self.in_bounds(pos):
            return False
        key = self.frontier.get(pos, "....")
        self.frontier[pos] = key[:edge] + kind + key[edge + 1 :]
        return True

    # -- completion -------------------------------------------------------------------
    def completed_by(self, pos: Pos) -> list[int]:
        """Roots of the features that the tile on `pos` has just completed (R6.1-R6.3, R6.5)."""
        placed = self.tiles[pos]
        done: list[int] = []
        feats = self.feats
        for index, seg in enumerate(placed.orientation.segments):
            if seg.kind in (FIELD, MONASTERY, GARDEN):
                continue
            root = self.find(placed.base + index)
            feat = feats[root]
            assert feat is not None
            if feat.open == 0 and not feat.done and root not in done:
                done.append(root)
        x, y = pos
        for dx, dy in AROUND:
            node = self.monasteries.get((x + dx, y + dy))
            if node is None or node in done:
                continue
            feat = feats[node]
            assert feat is not None
            if not feat.done and self.neighbours((x + dx, y + dy)) == 8:
                done.append(node)
        return done

    def is_hole(self, pos: Pos) -> bool:
        """Whether the squares on all four sides of `pos` hold tiles (R10.6)."""
        tiles = self.tiles
        x, y = pos
        return all((x + dx, y + dy) in tiles for dx, dy in DELTA)

    def neighbours(self, pos: Pos) -> int:
        """How many of the 8 squares around `pos` hold a tile."""
        tiles = self.tiles
        x, y = pos
        return sum((x + dx, y + dy) in tiles for dx, dy in RING)

    def monastery_tiles(self, pos: Pos) -> list[Pos]:
        """The monastery's square and the tiles around it."""
        x, y = pos
        return [pos] + [(x + dx, y + dy) for dx, dy in RING if (x + dx, y + dy) in self.tiles]

    # -- meeple checks ----------------------------------------------------------------
    def occupied_mask(self, pos: Pos) -> int:
        """Bit mask of the slots of the empty square `pos` that lead into occupied features.

        A segment of a tile put on `pos` may take a meeple only if none of its slots is in
        this mask (R5.3: the whole joined feature must be empty).
        """
        feats = self.feats
        mask = 0
        for slot, root in enumerate(self.facing_roots(pos)):
            if root >= 0 and feats[root].meeples:  # type: ignore[union-attr]
                mask |= 1 << slot
        return mask

    def facing_roots(self, pos: Pos) -> list[int]:
        """Per slot of the empty square `pos`: the root of the neighbour's feature a segment
        on that slot would join, or -1 (no neighbour there, or a city edge's half)."""
        tiles, find = self.tiles, self.find
        x, y = pos
        roots = [-1] * N_SLOTS
        for d in range(4):
            dx, dy = DELTA[d]
            nb = tiles.get((x + dx, y + dy))
            if nb is None:
                continue
            their_slots = nb.orientation.slot_segment
            for mine, theirs in FACING[d]:
                seg = their_slots[theirs]
                if seg >= 0:
                    roots[mine] = find(nb.base + seg)
        return roots

    def occupied_segments(self, pos: Pos, orient: Orientation, occupied: int) -> int:
        """`occupied` (`occupied_mask(pos)`) for a tile put on `pos` as `orient`, widened to
        every slot of each of its segments that joins an occupied feature after placement
        (R5.3): two segments of the tile touching one feature of the board become one
        feature, so a segment can reach a meeple through another (a farm running round the
        end of a road joins the fields on both sides of it)."""
        if not occupied:
            return 0
        roots = self.facing_roots(pos)
        taken = {roots[slot] for slot in range(N_SLOTS) if occupied >> slot & 1}
        segments = orient.segments
        left = list(range(len(segments)))
        grew = True
        while grew:  # until no segment left touches a taken feature
            grew = False
            for i in left:
                slots = segments[i].slots
                if any(roots[slot] in taken for slot in slots):
                    taken.update(roots[slot] for slot in slots if roots[slot] >= 0)
                    occupied |= segments[i].mask
                    left.remove(i)
                    grew = True
                    break
        return occupied

    def city_is_complete(self, node: int) -> bool:
        """Whether the city that `node` belongs to is complete (R6.2)."""
        feat = self.feature(node)
        return feat.kind == CITY and feat.open == 0
