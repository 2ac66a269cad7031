"""HTTP schemas of the pictures and the tile catalog (for the OpenAPI document).

The catalog is encoded straight from `carcassonne.catalog` (cached bytes); these schemas
describe it. The board picture's query adds `open` to the board view's `at`/`turn`.
"""

from __future__ import annotations

from marshmallow import fields, validate

from services.common.schemas import Closed

from .schemas import AtArgs

EDGE = validate.OneOf(["N", "E", "S", "W"])
HALF_EDGE = validate.OneOf(["NNW", "NNE", "ENE", "ESE", "SSE", "SSW", "WSW", "WNW"])
KIND = validate.OneOf(["road", "city", "field", "monastery", "garden"])  # garden: R9.2
COORD = validate.Range(0, 100)


class BoardSvgArgs(AtArgs):
    open = fields.Boolean(
        load_default=False,
        metadata={"description": "outline the open (incomplete) roads, cities and monasteries"},
    )


class Colour(Closed):
    seat = fields.Integer(required=True, validate=validate.Range(0, 5))
    name = fields.String(required=True)
    colour = fields.String(
        required=True,
        validate=validate.Regexp(r"^#[0-9a-f]{6}$"),
        metadata={"description": "the seat's meeple colour in every picture"},
    )


class CatalogSegment(Closed):
    index = fields.Integer(required=True, metadata={"description": "the segment's number"})
    kind = fields.String(required=True, validate=KIND)
    edges = fields.List(
        fields.String(validate=EDGE),
        required=True,
        metadata={"description": "a road's or city's edges (empty for fields and monasteries)"},
    )
    half_edges = fields.List(
        fields.String(validate=HALF_EDGE),
        required=True,
        metadata={"description": "a field's half-edges (empty for the other kinds)"},
    )
    pennants = fields.Integer(required=True, metadata={"description": "coats of arms (cities)"})
    cities = fields.List(
        fields.Integer(),
        required=True,
        metadata={"description": "a field: the `index` of each city segment it borders"},
    )


class CatalogSpot(Closed):
    spot = fields.String(
        required=True, metadata={"description": "edge N E S W, half-edge NNW…WNW, or monastery"}
    )
    kind = fields.String(required=True, validate=KIND)
    segment = fields.Integer(required=True, metadata={"description": "the segment's `index`"})
    x = fields.Integer(required=True, validate=COORD, metadata={"description": "0-100, east"})
    y = fields.Integer(required=True, validate=COORD, metadata={"description": "0-100, south"})


class CatalogTile(Closed):
    name = fields.String(required=True)
    count = fields.Integer(required=True, metadata={"description": "copies in the set"})
    gardens = fields.Integer(
        required=True, metadata={"description": "copies showing a garden (decoration, R1.4)"}
    )
    edges = fields.String(
        required=True,
        validate=validate.Regexp(r"^[CRFI]{4}$"),
        metadata={
            "description": "N E S W: C city, R road, F field, I river (R9.1: no segment, "
            "no meeple; drawn as the svg's `river` path)"
        },
    )
    segments = fields.List(fields.Nested(CatalogSegment), required=True)
    spots = fields.List(
        fields.Nested(CatalogSpot),
        required=True,
        metadata={"description": "every spot a meeple may name, with where it stands"},
    )
    svg = fields.String(
        required=True,
        metadata={
            "description": "the tile drawn in a 100×100 square; each segment is an element "
            'with class "seg seg-<kind>" and data-segment="<index>" (docs/pictures.md)'
        },
    )


class TilesetOut(Closed):
    """GET /tilesets/{name}."""

    version = fields.String(
        required=True, metadata={"description": "a hash of this data: also its ETag"}
    )
    name = fields.String(required=True)
    start = fields.String(required=True, metadata={"description": "the start tile's type"})
    meeples = fields.Integer(required=True, metadata={"description": "each player's meeples"})
    size = fields.Integer(required=True, metadata={"description": "tiles, the start included"})
    tile_size = fields.Integer(
        required=True,
        metadata={
            "description": "the side of a tile in `spots` and `svg` coordinates (y south); "
            "a clockwise quarter turn maps (x, y) to (tile_size - y, x)"
        },
    )
    palette = fields.List(fields.Nested(Colour), required=True)
    tiles = fields.List(
        fields.Nested(CatalogTile),
        required=True,
        metadata={"description": "unturned, as in TILES.md"},
    )


class TilesetSummary(Closed):
    name = fields.String(required=True)
    size = fields.Integer(required=True)
    types = fields.Integer(required=True, metadata={"description": "tile types"})
    start = fields.String(required=True)
    meeples = fields.Integer(required=True)
    version = fields.String(required=True)
    href = fields.String(required=True)


class TilesetIndex(Closed):
    """GET /tilesets."""

    version = fields.String(required=True)
    tilesets = fields.List(fields.Nested(TilesetSummary), required=True)
    palette = fields.List(fields.Nested(Colour), required=True)
