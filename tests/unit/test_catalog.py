"""The tile catalog (carcassonne.catalog): the tile data as an app reads it, checked against
the engine's own tables, and against the HTTP schemas that document it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from carcassonne.catalog import catalog_index, palette, tileset_catalog
from carcassonne.geometry import EDGES, HALF_EDGES
from carcassonne.svg import PALETTE
from carcassonne.tileart import spot_point
from carcassonne.tiles import CITY, FIELD, MONASTERY
from carcassonne.tilesets import TILESETS
from services.query.picture_schemas import TilesetIndex, TilesetOut

SETS = sorted(TILESETS)


@pytest.mark.parametrize("name", SETS)
def test_every_tile_type_with_its_count(name):
    data = tileset_catalog(name)
    assert data is not None
    tileset = TILESETS[name]
    assert [t["name"] for t in data["tiles"]] == list(tileset.types)
    assert sum(t["count"] for t in data["tiles"]) == data["size"] == tileset.size
    assert data["start"] == tileset.start and data["meeples"] == tileset.meeples
    assert data["tile_size"] == 100


@pytest.mark.parametrize("name", SETS)
def test_segments_are_the_engines(name):
    data = tileset_catalog(name)
    assert data is not None
    for entry in data["tiles"]:
        tile = TILESETS[name].types[entry["name"]]
        assert entry["edges"] == tile.edges
        assert len(entry["segments"]) == len(tile.segments)
        for seg, out in zip(tile.segments, entry["segments"], strict=True):
            assert out["kind"] == seg.kind
            assert {EDGES.index(e) for e in out["edges"]} == set(seg.edges)
            assert {HALF_EDGES.index(h) for h in out["half_edges"]} == set(seg.halves)
            assert out["pennants"] == seg.pennants
            for city in out["cities"]:
                assert out["kind"] == FIELD
                assert entry["segments"][city]["kind"] == CITY
        # The edge letters follow from the segments (what an app would check).
        derived = ["F"] * 4
        for out in entry["segments"]:
            for e in out["edges"]:
                derived[EDGES.index(e)] = "C" if out["kind"] == CITY else "R"
        assert "".join(derived) == entry["edges"]


@pytest.mark.parametrize("name", SETS)
def test_spots_are_every_nameable_spot_at_the_boards_points(name):
    data = tileset_catalog(name)
    assert data is not None
    for entry in data["tiles"]:
        orient = TILESETS[name].types[entry["name"]].orientations[0]
        assert {s["spot"] for s in entry["spots"]} == set(orient.spots)
        for spot in entry["spots"]:
            assert spot["segment"] == orient.spots[spot["spot"]]
            assert spot["kind"] == entry["segments"][spot["segment"]]["kind"]
            assert (spot["x"], spot["y"]) == spot_point(orient, spot["spot"])
        kinds = {s["kind"] for s in entry["spots"]}
        assert (MONASTERY in kinds) == any(s["kind"] == MONASTERY for s in entry["segments"])


@pytest.mark.parametrize("name", SETS)
def test_each_drawing_shows_each_segment_once(name):
    data = tileset_catalog(name)
    assert data is not None
    for entry in data["tiles"]:
        root = ET.fromstring(entry["svg"])
        assert root.get("viewBox") == "0 0 100 100" and root.get("data-tile") == entry["name"]
        segs = [e for e in root.iter() if "seg" in (e.get("class") or "").split()]
        assert sorted(int(e.get("data-segment", "")) for e in segs) == list(
            range(len(entry["segments"]))
        )
        for element in segs:
            kind = entry["segments"][int(element.get("data-segment", ""))]["kind"]
            assert element.get("class") == f"seg seg-{kind}"
        pennants = [e for e in root.iter() if e.get("class") == "pennant"]
        assert len(pennants) == sum(s["pennants"] for s in entry["segments"])


def test_versions_name_the_data():
    base, demo = tileset_catalog("base"), tileset_catalog("demo")
    river = tileset_catalog("river")
    assert base is not None and demo is not None and river is not None
    assert base["version"] != demo["version"]
    assert len(base["version"]) == 16
    index = catalog_index()
    assert {s["name"]: s["version"] for s in index["tilesets"]} == {
        "base": base["version"],
        "demo": demo["version"],
        "river": river["version"],
        "gardens": tileset_catalog("gardens")["version"],
    }
    assert tileset_catalog("nope") is None


def test_the_palette_is_the_pictures():
    colours = palette()
    assert [c["colour"] for c in colours] == list(PALETTE)
    assert len(set(PALETTE)) == 6 and [c["seat"] for c in colours] == list(range(6))
    assert catalog_index()["palette"] == colours


@pytest.mark.parametrize("name", SETS)
def test_the_documented_schema_reads_the_catalog_exactly(name):
    # The schemas are closed (unknown keys raise): the document describes every key.
    data = json.loads(json.dumps(tileset_catalog(name)))
    assert TilesetOut().load(data) == data
    index = json.loads(json.dumps(catalog_index()))
    assert TilesetIndex().load(index) == index


def test_the_river_is_in_the_catalog_with_its_river_drawn() -> None:
    """R9.1: the catalog lists the river's 12 tiles (the spring its start); their `I` edges
    carry no segment and no spot, and each drawing has the river path (a pool on the spring
    and the lake)."""
    river = tileset_catalog("river")
    assert river is not None and river["start"] == "RIVA" and river["size"] == 12
    for entry in river["tiles"]:
        assert "I" in entry["edges"]
        assert all(seg["kind"] != "river" for seg in entry["segments"])
        assert 'class="river"' in entry["svg"]
        assert ('class="river-pool"' in entry["svg"]) == (entry["name"] in ("RIVA", "RIVL"))
    assert "river" in {s["name"] for s in catalog_index()["tilesets"]}


def test_the_garden_tiles_are_in_the_catalog_with_their_garden() -> None:
    """R9.2: the catalog's `gardens` set lists the 2nd edition's garden tiles (Eg … Vg and
    RIVJ), each with a garden segment, a garden spot for the abbot and a drawn flower bed."""
    gardens = tileset_catalog("gardens")
    assert gardens is not None
    names = [t["name"] for t in gardens["tiles"]]
    assert names == ["Eg", "Hg", "Ig", "Mg", "Ng", "Rg", "Ug", "Vg", "RIVJ"]
    for entry in gardens["tiles"]:
        assert [s["kind"] for s in entry["segments"]].count("garden") == 1
        assert "garden" in {s["spot"] for s in entry["spots"]}
        assert "seg-garden" in entry["svg"]
