"""A compact text notation for turns and whole records (as UCI and PGN are for chess).

Turn: ``TILE ROTATION @ X , Y [: SPOT]``, e.g. ``Q1@0,-1``, ``I2@0,1:E`` (meeple in the city
on the east edge), ``E2@-1,-1:NNW`` (farmer), ``B0@1,0:M`` (monk); a discard is ``C-``.
The spot's feature is read off the tile; where it would read otherwise (an illegal meeple
in a record), it is spelt out: ``:road.N``.

Record: a header line, then the turns separated by white space; ``#`` starts a comment::

    carcassonne-record/1 base players=2 farmers=on farm=3rd incomplete=on
    Q1@0,-1 I2@0,1:E E2@-1,-1:NNW
"""

from __future__ import annotations

import re

from .errors import MalformedError
from .record import FORMAT, Record, Turn
from .ruleset import MAX_PLAYERS, MIN_PLAYERS, Ruleset
from .tiles import KINDS, MONASTERY, Meeple, TileType, parse_tile
from .tilesets import SPECS

_TURN = re.compile(
    r"(?P<tile>[A-Z]+)(?:(?P<discard>-)|(?P<rot>[0-3])@(?P<x>-?\d{1,5}),(?P<y>-?\d{1,5})"
    r"(?::(?:(?P<feature>[a-z]+)\.)?(?P<spot>[A-Z]+))?)"
)
_MONK = "M"

_TYPES: dict[str, TileType] = {name: parse_tile(name, 1, spec) for name, (spec, _) in SPECS.items()}


def _inferred(tile: str, rotation: int, spot: str) -> str | None:
    """The feature a spot names on a tile, or None if the tile has nothing there."""
    ttype = _TYPES.get(tile)
    if ttype is None:
        return None
    orient = ttype.orientations[rotation]
    index = orient.spots.get(spot)
    return None if index is None else orient.segments[index].kind


def format_turn(turn: Turn) -> str:
    """A turn in the notation."""
    if turn.discard:
        return f"{turn.tile}-"
    text = f"{turn.tile}{turn.rotation}@{turn.x},{turn.y}"
    meeple = turn.meeple
    if meeple is None:
        return text
    if meeple.feature == MONASTERY and meeple.spot == MONASTERY:
        return text + ":" + _MONK
    if _inferred(turn.tile, turn.rotation, meeple.spot) == meeple.feature:
        return f"{text}:{meeple.spot}"
    return f"{text}:{meeple.feature}.{meeple.spot}"


def parse_turn(text: str) -> Turn:
    """Read a turn written by `format_turn`."""
    match = _TURN.fullmatch(text.strip())
    if match is None:
        raise MalformedError("bad_notation", f"not a turn: {text!r} (e.g. Q1@0,-1 or I2@0,1:E)")
    tile = match["tile"]
    if match["discard"]:
        return Turn(tile, discard=True)
    rotation, x, y = int(match["rot"]), int(match["x"]), int(match["y"])
    spot, feature = match["spot"], match["feature"]
    meeple = None
    if spot is not None:
        if feature is None and spot == _MONK:
            meeple = Meeple(MONASTERY, MONASTERY)
        else:
            feature = feature or _inferred(tile, rotation, spot)
            if feature not in KINDS:
                raise MalformedError("bad_notation", f"{text!r}: no feature at {spot} on this tile")
            meeple = Meeple(feature, spot)
    return Turn(tile, x, y, rotation, meeple)


def format_record(record: Record, per_line: int = 10) -> str:
    """A whole record: header line, then the turns, `per_line` to a line."""
    rules = record.ruleset
    head = [
        FORMAT,
        rules.tileset,
        f"players={record.players}",
        f"farmers={'on' if rules.farmers else 'off'}",
        f"farm={rules.farm_scoring}",
        f"incomplete={'on' if rules.incomplete_score else 'off'}",
    ]
    if rules.meeples is not None:
        head.append(f"meeples={rules.meeples}")
    if rules.unplaceable != "discard":
        head.append(f"unplaceable={rules.unplaceable}")
    if rules.area is not None:
        head.append(f"area={rules.area[0]}x{rules.area[1]}")
    turns = [format_turn(t) for t in record.turns]
    lines = [" ".join(head)] + [
        " ".join(turns[i : i + per_line]) for i in range(0, len(turns), per_line)
    ]
    return "\n".join(lines) + "\n"


_ON_OFF = {"on": True, "off": False}


def parse_record(text: str) -> Record:
    """Read a record written by `format_record`."""
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise MalformedError("bad_notation", "empty record")
    fmt, *words = lines[0].split()
    if fmt != FORMAT or not words:
        raise MalformedError("bad_notation", f"a record starts with '{FORMAT} TILESET'")
    tileset, pairs = words[0], [w.partition("=")[::2] for w in words[1:]]
    options = dict(pairs)
    if len(options) != len(pairs):
        raise MalformedError("bad_notation", f"a header option is given twice: {lines[0]!r}")
    try:
        area = None
        if "area" in options:
            w, _, h = options.pop("area").partition("x")
            area = (int(w), int(h))
        meeples = options.pop("meeples", None)
        ruleset = Ruleset(
            tileset=tileset,
            farmers=_ON_OFF[options.pop("farmers", "on")],
            farm_scoring=options.pop("farm", "3rd"),
            incomplete_score=_ON_OFF[options.pop("incomplete", "on")],
            meeples=None if meeples is None else int(meeples),
            unplaceable=options.pop("unplaceable", "discard"),
            area=area,
        )
        players = int(options.pop("players"))
    except (KeyError, ValueError) as exc:
        raise MalformedError("bad_notation", f"bad record header: {lines[0]!r}") from exc
    if options:
        raise MalformedError("bad_notation", f"unknown header options: {sorted(options)}")
    if not MIN_PLAYERS <= players <= MAX_PLAYERS:
        raise MalformedError("bad_players", "players must be 2 to 6", "R1.3")
    turns = tuple(parse_turn(word) for line in lines[1:] for word in line.split())
    return Record(ruleset, players, turns)
