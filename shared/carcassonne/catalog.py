"""The tile catalog: every tile type of a set as plain data an app can draw from.

Per tile type: its count, edges, segments (kind, edges or half-edges, pennants, the cities a
field borders), the meeple spots with their points in tile coordinates (from
`tileart.spot_point`, the board's own), and an SVG drawing (`svg.tile_svg`). Each set carries
a `version`, a hash of its data (drawings included), so a cache keyed on it is never stale.
Pure and computed once per set.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from .geometry import EDGES, HALF_EDGES
from .svg import PALETTE, PALETTE_NAMES, tile_svg
from .tileart import SIZE, tile_spots
from .tiles import TileSet, TileType
from .tilesets import CATALOG


def palette() -> list[dict[str, Any]]:
    """The seat colours every picture uses, seat 0 first."""
    return [
        {"seat": seat, "name": name, "colour": colour}
        for seat, (name, colour) in enumerate(zip(PALETTE_NAMES, PALETTE, strict=True))
    ]


def tile_entry(tile: TileType) -> dict[str, Any]:
    """One tile type, unturned (as in TILES.md), with its segments, spots and drawing."""
    return {
        "name": tile.name,
        "count": tile.count,
        "gardens": tile.gardens,
        "edges": tile.edges,
        "segments": [
            {
                "index": index,
                "kind": seg.kind,
                "edges": [EDGES[e] for e in sorted(seg.edges)],
                "half_edges": [HALF_EDGES[h] for h in sorted(seg.halves)],
                "pennants": seg.pennants,
                "cities": list(seg.cities),
            }
            for index, seg in enumerate(tile.segments)
        ],
        "spots": [
            {"spot": spot, "kind": tile.segments[index].kind, "segment": index, "x": x, "y": y}
            for spot, index, (x, y) in tile_spots(tile.orientations[0])
        ],
        "svg": tile_svg(tile),
    }


def _version(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _set_data(tileset: TileSet) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": tileset.name,
        "start": tileset.start,
        "meeples": tileset.meeples,
        "size": tileset.size,
        "tile_size": SIZE,
        "palette": palette(),
        "tiles": [tile_entry(t) for t in tileset.types.values()],
    }
    return {"version": _version(data), **data}


@cache
def tileset_catalog(name: str) -> dict[str, Any] | None:
    """The catalog of tile set `name`, or None when there is no such set."""
    tileset = CATALOG.get(name)
    return None if tileset is None else _set_data(tileset)


@cache
def catalog_index() -> dict[str, Any]:
    """Every tile set in brief (name, size, number of types, version) and the palette."""
    sets = []
    for name in CATALOG:
        data = tileset_catalog(name)
        assert data is not None
        sets.append(
            {
                "name": name,
                "size": data["size"],
                "types": len(data["tiles"]),
                "start": data["start"],
                "meeples": data["meeples"],
                "version": data["version"],
                "href": f"/tilesets/{name}",
            }
        )
    body: dict[str, Any] = {"tilesets": sets, "palette": palette()}
    return {"version": _version(body), **body}
