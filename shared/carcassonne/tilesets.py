"""The tile sets as data: one table per set (TILES.md §1 and §2).

Row format (see `tiles.parse_tile`): ``EDGES | segment | segment …`` in the canonical
orientation of TILES.md (JCloisterZone's). A field lists its half-edges and, after ``->``,
the city segments of the same tile it borders (0 = the tile's first city segment).
"""

from __future__ import annotations

from .tiles import TileSet, TileType, parse_tile

# name: (spec, gardens among the base-set copies — 2nd-edition artwork, R1.4)
SPECS: dict[str, tuple[str, int]] = {
    "A": ("F F R F | monastery | road S | field NNW NNE ENE ESE SSE SSW WSW WNW", 0),
    "B": ("F F F F | monastery | field NNW NNE ENE ESE SSE SSW WSW WNW", 0),
    "C": ("C C C C | city+ N E S W", 0),
    "D": ("C R F R | city N | road W E | field ENE WNW -> 0 | field ESE SSE SSW WSW", 0),
    "E": ("C F F F | city N | field ENE ESE SSE SSW WSW WNW -> 0", 1),
    "F": ("F C F C | city+ E W | field NNW NNE -> 0 | field SSE SSW -> 0", 0),
    "G": ("F C F C | city E W | field NNW NNE -> 0 | field SSE SSW -> 0", 0),
    "H": ("C F C F | city N | city S | field ENE ESE WSW WNW -> 0 1", 1),
    "I": ("C F F C | city N | city W | field ENE ESE SSE SSW -> 0 1", 1),
    "J": ("C R R F | city N | road E S | field ENE SSW WSW WNW -> 0 | field ESE SSE", 0),
    "K": ("C F R R | city N | road S W | field WNW ENE ESE SSE -> 0 | field SSW WSW", 0),
    "L": (
        "C R R R | city N | road E | road S | road W"
        " | field ENE WNW -> 0 | field ESE SSE | field SSW WSW",
        0,
    ),
    "M": ("C F F C | city+ N W | field ENE ESE SSE SSW -> 0", 1),
    "N": ("C F F C | city N W | field ENE ESE SSE SSW -> 0", 1),
    "O": ("C R R C | city+ N W | road E S | field ENE SSW -> 0 | field ESE SSE", 0),
    "P": ("C R R C | city N W | road E S | field ENE SSW -> 0 | field ESE SSE", 0),
    "Q": ("C C F C | city+ N E W | field SSE SSW -> 0", 0),
    "R": ("C C F C | city N E W | field SSE SSW -> 0", 1),
    "S": ("C C R C | city+ N E W | road S | field SSE -> 0 | field SSW -> 0", 0),
    "T": ("C C R C | city N E W | road S | field SSE -> 0 | field SSW -> 0", 0),
    "U": ("F R F R | road W E | field WNW NNW NNE ENE | field ESE SSE SSW WSW", 1),
    "V": ("F F R R | road S W | field WNW NNW NNE ENE ESE SSE | field SSW WSW", 1),
    "W": (
        "F R R R | road E | road S | road W"
        " | field WNW NNW NNE ENE | field ESE SSE | field SSW WSW",
        0,
    ),
    "X": (
        "R R R R | road N | road E | road S | road W"
        " | field WNW NNW | field NNE ENE | field ESE SSE | field SSW WSW",
        0,
    ),
    # The two demo-set types that are not base tiles (Inns & Cathedrals shapes; names are
    # JCloisterZone's ids). LRFR: two roads that both end at the monastery.
    "LRFR": (
        "F R F R | monastery | road E | road W | field ESE SSE SSW WSW | field ENE NNW NNE WNW",
        0,
    ),
    # CFR: a city cap N and a road S that ends at the city.
    "CFR": ("C F R F | city N | road S | field WSW WNW SSW -> 0 | field ENE ESE SSE -> 0", 0),
}

BASE_COUNTS: dict[str, int] = {
    "A": 2, "B": 4, "C": 1, "D": 4, "E": 5, "F": 2, "G": 1, "H": 3, "I": 2, "J": 3, "K": 3,
    "L": 3, "M": 2, "N": 3, "O": 2, "P": 3, "Q": 1, "R": 3, "S": 2, "T": 1, "U": 8, "V": 9,
    "W": 4, "X": 1,
}  # fmt: skip

# "Carcassonne for 2" distribution used by the print-and-play demo (R1.2, TILES.md §2).
DEMO_COUNTS: dict[str, int] = {
    "A": 1, "B": 2, "LRFR": 1, "D": 4, "E": 2, "CFR": 1, "F": 2, "G": 1, "H": 2, "L": 3,
    "J": 2, "K": 2, "I": 2, "N": 4, "O": 2, "P": 1, "Q": 1, "S": 2, "T": 1, "V": 5, "U": 4,
    "W": 3,
}  # fmt: skip


# The River (R9.1, TILES.md §3): 12 tiles, one of each name. Names are "RIV" and the tile's
# Wikicarpedia letter, so they cannot be read as a base letter; they are part of the public
# record format. RIVD/RIVF are the same straight and RIVG/RIVJ the same curve (RIVJ shows the
# river's garden in the 2nd edition). RIVA is the spring (the start tile), RIVL the lake.
RIVER_SPECS: dict[str, str] = {
    "RIVA": "F I F F | river E | field NNW NNE ENE ESE SSE SSW WSW WNW",
    "RIVB": (
        "C I R I | city N | road S | river W E"
        " | field ENE -> 0 | field WNW -> 0 | field ESE SSE | field SSW WSW"
    ),
    "RIVC": "C I C I | city N | city S | river W E | field ENE WNW -> 0 | field ESE WSW -> 1",
    "RIVD": "F I F I | river W E | field WNW NNW NNE ENE | field WSW SSW SSE ESE",
    "RIVE": "C C I I | city N E | river W S | field WNW SSE -> 0 | field WSW SSW",
    "RIVF": "F I F I | river W E | field WNW NNW NNE ENE | field WSW SSW SSE ESE",
    "RIVG": "F F I I | river W S | field WNW NNW NNE ENE ESE SSE | field WSW SSW",
    "RIVH": (
        "F I R I | monastery | road S | river W E"
        " | field WNW NNW NNE ENE | field ESE SSE | field SSW WSW"
    ),
    "RIVI": (
        "R R I I | road N E | river W S | field WNW NNW ESE SSE | field NNE ENE | field WSW SSW"
    ),
    "RIVJ": "F F I I | river W S | field WNW NNW NNE ENE ESE SSE | field WSW SSW",
    "RIVK": (
        "R I R I | road N S | river W E"
        " | field WNW NNW | field NNE ENE | field ESE SSE | field SSW WSW"
    ),
    "RIVL": "F F F I | river W | field NNW NNE ENE ESE SSE SSW WSW WNW",
}
SPRING, LAKE = "RIVA", "RIVL"
RIVER_TILES = {name: parse_tile(name, 1, spec) for name, spec in RIVER_SPECS.items()}


def _build(name: str, counts: dict[str, int], meeples: int, gardens: bool) -> TileSet:
    types: dict[str, TileType] = {}
    for letter, count in counts.items():
        spec, garden_count = SPECS[letter]
        types[letter] = parse_tile(letter, count, spec, garden_count if gardens else 0)
    return TileSet(name=name, start="D", meeples=meeples, types=types)


BASE = _build("base", BASE_COUNTS, meeples=7, gardens=True)
DEMO = _build("demo", DEMO_COUNTS, meeples=5, gardens=False)

TILESETS: dict[str, TileSet] = {BASE.name: BASE, DEMO.name: DEMO}


GARDEN_SUFFIX = "g"  # R9.2: the 2nd-edition copy of a base tile that shows a garden: "Eg"
RIVER_GARDEN = "RIVJ"  # the river's garden tile (TILES.md §4)
TILE_EDITIONS = ("1st", "2nd")

_COMBINED: dict[tuple[str, bool, str, bool], TileSet] = {}


def tile_set(name: str, river: bool = False, edition: str = "1st", abbot: bool = False) -> TileSet:
    """The tiles a game plays with: a tile set, with the river added when `river` is on, and
    in the 2nd edition the garden copies told apart.

    With the river (R9.1) the spring is the start tile, and the set's own start tile is mixed
    into the normal tiles (TILES.md §3: "mix it into the normal tiles when a bag is used").
    In the 2nd edition (R9.2, TILES.md §4) one copy each of E H I M N R U V is its own type,
    the letter and "g" (``Eg``), and RIVJ shows a garden; with the abbot a garden is a
    feature (a segment), without it decoration (R1.4). 1st-edition tiles have no gardens.
    """
    base = TILESETS[name]
    if not river and edition == "1st":
        return base
    key = (name, river, edition, abbot)
    combined = _COMBINED.get(key)
    if combined is None:
        types = dict(base.types)
        start = base.start
        if edition == "2nd":
            types = _with_gardens(types, abbot)
        if river:
            types.update(RIVER_TILES)
            if edition == "2nd":
                spec = RIVER_SPECS[RIVER_GARDEN] + (" | garden" if abbot else "")
                types[RIVER_GARDEN] = parse_tile(RIVER_GARDEN, 1, spec, gardens=1)
            start = SPRING
        combined = TileSet(name, start, base.meeples, types)
        _COMBINED[key] = combined
    return combined


def _with_gardens(types: dict[str, TileType], abbot: bool) -> dict[str, TileType]:
    """The types with each garden copy split off as its own type (`Eg` beside `E`)."""
    out: dict[str, TileType] = {}
    for name, tile in types.items():
        if not tile.gardens:
            out[name] = tile
            continue
        spec = SPECS[name][0]
        if tile.count > tile.gardens:
            out[name] = parse_tile(name, tile.count - tile.gardens, spec)
        garden = name + GARDEN_SUFFIX
        out[garden] = parse_tile(
            garden, tile.gardens, spec + (" | garden" if abbot else ""), gardens=tile.gardens
        )
    return out


# The tile catalog's sets: the playable sets, the river on its own (an expansion that joins
# either, `tile_set`) and the 2nd edition's garden tiles (R9.2, with their garden feature).
# The last two bring no meeples: their `meeples` is 0.
CATALOG: dict[str, TileSet] = {
    **TILESETS,
    "river": TileSet("river", SPRING, 0, RIVER_TILES),
    "gardens": TileSet(
        "gardens",
        "Eg",
        0,
        {n: t for n, t in tile_set("base", True, "2nd", abbot=True).types.items() if t.gardens},
    ),
}
