"""SVG pictures of tiles and boards, drawn from the tile data (`tileart.py`).

Pure and deterministic: the same state gives the same bytes (fixed attribute order, integer
coordinates, tiles in placement order), so pictures can be compared with golden files and
cached under an ETag. The document structure is a contract that pages and apps rely on; it
is written down in docs/pictures.md — change both together.
"""

from __future__ import annotations

from collections.abc import Iterable
from xml.sax.saxutils import quoteattr

from .board import Board
from .state import GameState
from .tileart import JUNCTION, PENNANT_D, POOL, SIZE, TileArt, spot_point, tile_art
from .tiles import FIELD, TileType

XMLNS = "http://www.w3.org/2000/svg"
# Seat colours, player 0 first: the same in every picture and in the tile catalog.
PALETTE: tuple[str, ...] = ("#d7263d", "#1f5fbf", "#f2c230", "#1e8c3a", "#222222", "#9b4dca")
PALETTE_NAMES: tuple[str, ...] = ("red", "blue", "yellow", "green", "black", "purple")
MARGIN = 10
DRAWING_VERSION = 2  # part of every picture's ETag: bump it when the drawing changes

# Presentation attributes (not a stylesheet) so that a fragment looks right wherever it is
# pasted, and a page's CSS still wins over them to highlight a feature.
PAINT = {
    "field": 'fill="#a3c86a"',
    "road": 'fill="none" stroke="#f4efdc" stroke-width="9" stroke-linejoin="round"',
    "city": 'fill="#c98b4b"',
    "monastery": 'fill="#efe1bf" stroke="#6b4423" stroke-width="1.5"',
    "garden": 'fill="#e8a0c8" stroke="#3f6f2f" stroke-width="2"',
}
GROUND = 'fill="#a3c86a" stroke="#7fa04e" stroke-width="0.5"'
PENNANT = 'fill="#2a5db0" stroke="#ffffff" stroke-width="1.2"'
JUNCTION_PAINT = 'fill="#8a7a5a"'
WALL = 'fill="none" stroke="#6b4423" stroke-width="2"'
RIVER_PAINT = 'fill="none" stroke="#3f8fd2" stroke-width="14" stroke-linecap="butt"'
POOL_PAINT = 'fill="#3f8fd2"'
MEEPLE_D = (
    "M0,-9C3,-9 4,-6 3,-4L9,-2C11,-1 10,2 8,2L5,2L8,9L2,9L0,5L-2,9L-8,9L-5,2L-8,2"
    "C-10,2 -11,-1 -9,-2L-3,-4C-4,-6 -3,-9 0,-9Z"
)
FARMER = ' transform="rotate(-90)"'  # a farmer lies in its field
OPEN_PAINT = 'fill="none" stroke="#fff200" stroke-width="3" stroke-dasharray="6 4"'
LAST_PAINT = 'fill="none" stroke="#ff3b30" stroke-width="4"'


def player_colour(player: int) -> str:
    """A seat's colour (the palette has 6, the most players a game can have, R1.3)."""
    return PALETTE[player % len(PALETTE)]


def _tile_parts(tile: TileType, rotation: int, feature_of: Iterable[str] | None) -> list[str]:
    """The ground, segments, pennants and junction of one tile, in painting order."""
    art = tile_art(tile, rotation)
    ids = list(feature_of) if feature_of is not None else None
    parts = [f'<rect class="ground" width="{SIZE}" height="{SIZE}" {GROUND}/>']
    shields: list[tuple[int, int]] = []
    walls = []
    river_drawn = not art.river
    for index, seg in art.segments:
        if not river_drawn and seg.kind != FIELD:  # over the fields, under the bridges
            parts.extend(_river_parts(art))
            river_drawn = True
        tag = f'data-feature="{ids[index]}"' if ids is not None else f'data-segment="{index}"'
        parts.append(f'<path class="seg seg-{seg.kind}" {tag} d="{seg.d}" {PAINT[seg.kind]}/>')
        shields.extend(seg.pennants)
        if seg.wall:
            walls.append(seg.wall)
    if walls:  # the cities' inner edges, not the tile's border: joined cities look whole
        parts.append(f'<path class="wall" d="{"".join(walls)}" {WALL}/>')
    if not river_drawn:
        parts.extend(_river_parts(art))
    if art.junction:
        parts.append(f'<path class="junction" d="{JUNCTION}" {JUNCTION_PAINT}/>')
    for x, y in shields:
        parts.append(f'<path class="pennant" d="M{x},{y}{PENNANT_D}" {PENNANT}/>')
    return parts


def _river_parts(art: TileArt) -> list[str]:
    """The river (R9.1): no feature, so no data-segment; a pool where it starts or ends."""
    parts = [f'<path class="river" d="{art.river}" {RIVER_PAINT}/>']
    if art.pool:
        parts.append(f'<path class="river-pool" d="{POOL}" {POOL_PAINT}/>')
    return parts


def tile_svg(tile: TileType, rotation: int = 0) -> str:
    """One tile type as a standalone 100×100 picture; segments carry `data-segment`."""
    body = "".join(_tile_parts(tile, rotation, None))
    return (
        f'<svg xmlns="{XMLNS}" viewBox="0 0 {SIZE} {SIZE}" width="{SIZE}" height="{SIZE}" '
        f'data-tile={quoteattr(tile.name)} data-rotation="{rotation}">{body}</svg>'
    )


def _find(parent: list[int], node: int) -> int:
    """The union-find root, without path halving: a shared state must stay untouched."""
    while parent[node] != node:
        node = parent[node]
    return node


def feature_ids(board: Board) -> dict[int, str]:
    """Per union-find root, the feature's id: ``x,y:SPOT`` of its first placed segment (the
    segment's first edge or half-edge clockwise, or ``monastery``)."""
    ids: dict[int, str] = {}
    parent = board.parent
    for (x, y), placed in board.tiles.items():  # in placement order: lowest nodes first
        for index, seg in enumerate(placed.orientation.segments):
            root = _find(parent, placed.base + index)
            if root not in ids:
                ids[root] = f"{x},{y}:{seg.meeple.spot}"
    return ids


def board_svg(state: GameState, outline_open: bool = False) -> str:
    """The board after `state.turn` placements: tiles, meeples in seat colours, the last
    placed tile marked, and (with `outline_open`) each open road, city and monastery outlined."""
    board = state.board
    tiles = board.tiles
    if tiles:
        xs = [x for x, _ in tiles]
        ys = [y for _, y in tiles]
        left, top = min(xs) * SIZE - MARGIN, min(ys) * SIZE - MARGIN
        width = (max(xs) - min(xs) + 1) * SIZE + 2 * MARGIN
        height = (max(ys) - min(ys) + 1) * SIZE + 2 * MARGIN
    else:
        left, top, width, height = -MARGIN, -MARGIN, SIZE + 2 * MARGIN, SIZE + 2 * MARGIN
    parent = board.parent
    ids = feature_ids(board)
    out = [
        f'<svg xmlns="{XMLNS}" viewBox="{left} {top} {width} {height}" width="{width}" '
        f'height="{height}" class="carcassonne-board" data-turn="{state.turn}" '
        f'data-players="{state.players}">'
    ]
    outlines: dict[int, list[str]] = {}
    for (x, y), placed in tiles.items():
        roots = [_find(parent, placed.base + i) for i in range(len(placed.orientation.segments))]
        out.append(
            f'<g class="tile" data-x="{x}" data-y="{y}" data-tile={quoteattr(placed.tile.name)} '
            f'data-rotation="{placed.rotation}" transform="translate({x * SIZE} {y * SIZE})">'
        )
        out.extend(_tile_parts(placed.tile, placed.rotation, (ids[r] for r in roots)))
        out.append("</g>")
        if outline_open:
            for index, seg in tile_art(placed.tile, placed.rotation).segments:
                feat = board.feats[roots[index]]
                if feat is not None and not feat.done and seg.kind != FIELD:
                    outlines.setdefault(roots[index], []).append(
                        f'<path d="{seg.d}" transform="translate({x * SIZE} {y * SIZE})"/>'
                    )
    if outlines:
        for root in sorted(outlines, key=lambda r: ids[r]):
            out.append(f'<g class="open-feature" data-feature="{ids[root]}" {OPEN_PAINT}>')
            out.extend(outlines[root])
            out.append("</g>")
    if state.turn > 0:
        x, y = next(reversed(tiles))  # the tiles keep placement order
        out.append(
            f'<rect class="last-placed" data-x="{x}" data-y="{y}" x="{x * SIZE + 2}" '
            f'y="{y * SIZE + 2}" width="{SIZE - 4}" height="{SIZE - 4}" {LAST_PAINT}/>'
        )
    for meeple in state.meeples.values():
        x, y = meeple.pos
        px, py = spot_point(tiles[meeple.pos].orientation, meeple.meeple.spot)
        out.append(
            f'<g class="meeple" data-player="{meeple.player}" data-x="{x}" data-y="{y}" '
            f'data-spot="{meeple.meeple.spot}" data-feature="{ids[_find(parent, meeple.node)]}" '
            + ('data-abbot="true" ' if meeple.meeple.abbot else "")  # R9.2
            + f'transform="translate({x * SIZE + px} {y * SIZE + py})">'
            f'<path d="{MEEPLE_D}"{FARMER if meeple.meeple.feature == FIELD else ""} '
            f'fill="{player_colour(meeple.player)}" stroke="#000000" stroke-width="1.2"/></g>'
        )
    out.append("</svg>\n")
    return "".join(out)
