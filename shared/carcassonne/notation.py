r"""A compact text notation for turns and whole records (as UCI and PGN are for chess).

Turn: ``TILE ROTATION @ X , Y [: SPOT]``, e.g. ``Q1@0,-1``, ``I2@0,1:E`` (meeple in the city
on the east edge), ``E2@-1,-1:NNW`` (farmer), ``B0@1,0:M`` (monk); a discard is ``C-``;
``undo`` takes back the placement before it (the same tile is then placed again).
The spot's feature is read off the tile; where it would read otherwise (an illegal meeple
in a record), it is spelt out: ``:road.N``.

Record: a header line, then the turns separated by white space; ``#`` starts a comment::

    carcassonne-record/1 base players=2 farmers=on farm=3rd incomplete=on
    Q1@0,-1 I2@0,1:E E2@-1,-1:NNW

House rules that are on add header options: ``area=5x5`` (R10.5) and ``border=closes`` (its
variant), ``hole=extra`` (R10.6), ``river=on`` (R9.1), ``undo=consent`` or ``undo=free``
(docs/undo.md), ``abbot=on`` and ``edition=2nd`` (R9.2). The abbot stands on a monastery as
``:A`` and in a garden as ``:G``; ``~A`` after a placement takes the abbot back
(``U0@2,0~A``). Garden tiles of the 2nd edition are the letter and ``g`` (``Eg``).

The header may end with the seats' names and the apps' player ids, in seat order, as the
JSON record's ``names`` and ``player_ids`` (both optional; a header without them reads as
before). Each value is a JSON array written without spaces between items, so a name may
hold spaces, quotes, ``#`` or ``=`` (JSON escapes them: ``\"``, ``\\``; characters that
are not printable, line separators included, are written ``\uXXXX``). An old parser refuses
a header with names (unknown option); this one reads both::

    carcassonne-record/1 base players=2 … names=["Ann","Bob \"the\" #1"] player_ids=["u-1",null]
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from .errors import MalformedError
from .record import FORMAT, UNDO, Record, Turn, draws_from, seat_ids, seat_names
from .ruleset import MAX_PLAYERS, MIN_PLAYERS, Ruleset
from .tiles import GARDEN, KINDS, MONASTERY, Meeple, TileType, parse_tile
from .tilesets import SPECS, tile_set

_TURN = re.compile(
    r"(?P<tile>[A-Z]+g?)(?:(?P<discard>-)|(?P<rot>[0-3])@(?P<x>-?\d{1,5}),(?P<y>-?\d{1,5})"
    r"(?::(?P<abbot>abbot\.)?(?:(?P<feature>[a-z]+)\.)?(?P<spot>[A-Z]+)|(?P<recall>~A))?)"
)
_MONK = "M"
# R9.2: the abbot on a monastery, in a garden; `~A` after a placement takes the abbot back.
_SHORT = {
    Meeple(MONASTERY, MONASTERY): _MONK,
    Meeple(MONASTERY, MONASTERY, True): "A",
    Meeple(GARDEN, GARDEN, True): "G",
}
_SHORT_READ = {text: meeple for meeple, text in _SHORT.items()}

_TYPES: dict[str, TileType] = {name: parse_tile(name, 1, spec) for name, (spec, _) in SPECS.items()}
# Every name a record may hold: the river's and the 2nd edition's garden tiles too (R9).
_TYPES.update(tile_set("base", river=True, edition="2nd", abbot=True).types)


def _inferred(tile: str, rotation: int, spot: str) -> str | None:
    """The feature a spot names on a tile, or None if the tile has nothing there."""
    ttype = _TYPES.get(tile)
    if ttype is None:
        return None
    orient = ttype.orientations[rotation]
    index = orient.spots.get(spot)
    return None if index is None else orient.segments[index].kind


_RESIGN = "resign:"  # `resign:1`: seat 1 resigned (docs/lifecycle.md)
_TIMEOUT = "!"  # `E!`: the E tile was drawn and not played in time
_REFUSED = "/skip"  # `resign:1/skip`, `E!/skip`: no bot took the seat over (docs/takeover.md)


def format_turn(turn: Turn) -> str:
    """A turn in the notation."""
    if turn.undo:
        return "undo"
    refused = _REFUSED if turn.takeover_refused else ""
    if turn.resign is not None:
        return f"{_RESIGN}{turn.resign}{refused}"
    if turn.timeout:
        return f"{turn.tile}{_TIMEOUT}{refused}"
    if turn.discard:
        return f"{turn.tile}-"
    text = f"{turn.tile}{turn.rotation}@{turn.x},{turn.y}"
    meeple = turn.meeple
    if turn.recall:
        return text + "~A"
    if meeple is None:
        return text
    if meeple in _SHORT:
        return text + ":" + _SHORT[meeple]
    abbot = "abbot." if meeple.abbot else ""  # only in a record that breaks R9.2
    spot = "G" if meeple.spot == GARDEN else meeple.spot
    if spot == meeple.spot and _inferred(turn.tile, turn.rotation, spot) == meeple.feature:
        return f"{text}:{abbot}{spot}"
    return f"{text}:{abbot}{meeple.feature}.{spot}"


def parse_turn(text: str) -> Turn:
    """Read a turn written by `format_turn`."""
    text = text.strip()
    if not text.endswith(_REFUSED):
        return _plain_turn(text)
    body = text[: -len(_REFUSED)]
    # `format_turn` writes the suffix once: a turn read with it twice would print back with
    # it once, a record its own round trip changes.
    left = None if body.endswith(_REFUSED) else _plain_turn(body)
    if left is None or (left.resign is None and not left.timeout):
        raise MalformedError(
            "bad_notation", f"not a turn: {text!r} ({_REFUSED} follows a resign or timeout, once)"
        )
    return replace(left, takeover_refused=True)


def _plain_turn(text: str) -> Turn:
    """A turn without the `/skip` suffix."""
    if text == "undo":
        return UNDO
    if text.startswith(_RESIGN) and text[len(_RESIGN) :] in [str(s) for s in range(6)]:
        return Turn("", resign=int(text[len(_RESIGN) :]))
    if text.endswith(_TIMEOUT) and text[:-1].isalpha() and text[:-1].isupper():
        return Turn(text[:-1], timeout=True)
    match = _TURN.fullmatch(text)
    if match is None:
        raise MalformedError("bad_notation", f"not a turn: {text!r} (e.g. Q1@0,-1 or I2@0,1:E)")
    tile = match["tile"]
    if match["discard"]:
        return Turn(tile, discard=True)
    rotation, x, y = int(match["rot"]), int(match["x"]), int(match["y"])
    spot, feature = match["spot"], match["feature"]
    meeple = None
    if match["recall"]:
        return Turn(tile, x, y, rotation, recall=True)
    if spot is not None:
        if feature is None and match["abbot"] is None and spot in _SHORT_READ:
            meeple = _SHORT_READ[spot]
        else:
            feature = feature or _inferred(tile, rotation, spot)
            if feature not in KINDS:
                raise MalformedError("bad_notation", f"{text!r}: no feature at {spot} on this tile")
            if feature == GARDEN and spot == "G":
                spot = GARDEN
            meeple = Meeple(feature, spot, match["abbot"] is not None)
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
    if rules.hints:
        head.append("hints=on")
    if rules.area is not None:
        head.append(f"area={rules.area[0]}x{rules.area[1]}")
    if rules.border_closes:
        head.append("border=closes")
    if rules.hole_extra_turn:
        head.append("hole=extra")
    if rules.river:
        head.append("river=on")
    if rules.turn_seconds is not None:
        head.append(f"turn={rules.turn_seconds}")
    if rules.initial_seconds is not None:  # a Fischer bank (docs/clocks.md): seconds+seconds
        head.append(f"bank={rules.initial_seconds}+{rules.increment_seconds}")
    if rules.max_timeouts != 3:
        head.append(f"timeouts={rules.max_timeouts}")
    if record.abandoned:
        head.append("end=abandoned")
    if rules.undo != "off":
        head.append(f"undo={rules.undo}")
    if rules.abbot:
        head.append("abbot=on")
    if rules.tile_edition != "1st":
        head.append(f"edition={rules.tile_edition}")
    if rules.hand != 1:
        head.append(f"hand={rules.hand}")
    if rules.on_leave != "skip":
        head.append(f"leave={rules.on_leave}")
    if record.draws is not None:  # R10.3: [[tile, nonce]…], the hand game's draws in order
        head.append("draws=" + _json_list([list(pair) for pair in record.draws]))
    if record.names is not None:
        head.append("names=" + _json_list(record.names))
    if record.player_ids is not None:
        head.append("player_ids=" + _json_list(record.player_ids))
    turns = [format_turn(t) for t in record.turns]
    lines = [" ".join(head)] + [
        " ".join(turns[i : i + per_line]) for i in range(0, len(turns), per_line)
    ]
    return "\n".join(lines) + "\n"


def _json_list(values: Any) -> str:
    """A list as compact JSON on one line: non-ASCII letters kept, anything not printable
    (controls, U+2028 and other line breaks `splitlines` would cut at) escaped."""
    text = json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP: a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_LISTS = ("names=", "player_ids=", "draws=")  # options whose value is a JSON array


def _header_words(line: str) -> tuple[list[str], dict[str, Any]]:
    """The header's words up to a `#` comment, and the JSON arrays of `_LISTS` options by
    name (a `#` or a space inside them is part of a name)."""
    words: list[str] = []
    lists: dict[str, Any] = {}
    decoder, i, size = json.JSONDecoder(), 0, len(line)
    while i < size:
        if line[i].isspace():
            i += 1
            continue
        if line[i] == "#":
            break
        key = next((k for k in _LISTS if line.startswith(k, i)), None)
        if key is not None:
            try:
                value, i = decoder.raw_decode(line, i + len(key))
            except (ValueError, RecursionError):
                example = f'{key}["Ann","Bob"]'
                raise MalformedError(
                    "bad_notation", f"{key[:-1]} must be a JSON array, e.g. {example}"
                ) from None
            if key in lists:
                raise MalformedError("bad_notation", f"a header option is given twice: {key}")
            _check_text(key, value)
            lists[key] = value
            if i < size and not line[i].isspace() and line[i] != "#":
                raise MalformedError("bad_notation", f"a space must follow {key[:-1]}'s list")
            continue
        end = i
        while end < size and not line[end].isspace() and line[end] != "#":
            end += 1
        words.append(line[i:end])
        i = end
    return words, lists


def _check_text(key: str, value: Any) -> None:
    """Refuse a list holding text UTF-8 cannot encode: a JSON escape of a lone UTF-16
    surrogate (``"\\ud800"``) decodes to one. Such a name passes every length rule, then
    fails each store and index that writes it (a JSON body with one is refused likewise)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedError(
                    "bad_notation", f"{key[:-1]} holds a lone UTF-16 surrogate (not text)"
                ) from None


def _header_and_turns(text: str) -> tuple[str, list[str]]:
    """The header line (the first with anything but a comment) and the turns' lines."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.split("#", 1)[0].strip():
            turns = [t.split("#", 1)[0].strip() for t in lines[index + 1 :]]
            return line.strip(), [t for t in turns if t]
    raise MalformedError("bad_notation", "empty record")


_ON_OFF = {"on": True, "off": False}
# Header options of the house rules, each with its default spelt out (R10.5 variant, R10.6).
_CHOICE = {"border": {"open": False, "closes": True}, "hole": {"none": False, "extra": True}}


def parse_record(text: str) -> Record:
    """Read a record written by `format_record` (with or without the seats' names)."""
    header, turn_lines = _header_and_turns(text)
    words, lists = _header_words(header)
    fmt, *words = words or [""]
    if fmt != FORMAT or not words:
        raise MalformedError("bad_notation", f"a record starts with '{FORMAT} TILESET'")
    tileset, pairs = words[0], [w.partition("=")[::2] for w in words[1:]]
    options = dict(pairs)
    if len(options) != len(pairs) or set(options) & {k[:-1] for k in lists}:
        raise MalformedError("bad_notation", f"a header option is given twice: {header!r}")
    try:
        area = None
        if "area" in options:
            w, _, h = options.pop("area").partition("x")
            area = (int(w), int(h))
        meeples = options.pop("meeples", None)
        turn_seconds = options.pop("turn", None)
        bank, plus, step = options.pop("bank", "").partition("+")
        if bank and not plus:
            raise ValueError("a bank is written bank=INITIAL+INCREMENT")
        ruleset = Ruleset(
            tileset=tileset,
            farmers=_ON_OFF[options.pop("farmers", "on")],
            farm_scoring=options.pop("farm", "3rd"),
            incomplete_score=_ON_OFF[options.pop("incomplete", "on")],
            meeples=None if meeples is None else int(meeples),
            unplaceable=options.pop("unplaceable", "discard"),
            area=area,
            border_closes=_CHOICE["border"][options.pop("border", "open")],
            hole_extra_turn=_CHOICE["hole"][options.pop("hole", "none")],
            river=_ON_OFF[options.pop("river", "off")],
            turn_seconds=None if turn_seconds is None else int(turn_seconds),
            max_timeouts=int(options.pop("timeouts", "3")),
            hints=_ON_OFF[options.pop("hints", "off")],
            undo=options.pop("undo", "off"),
            abbot=_ON_OFF[options.pop("abbot", "off")],
            tile_edition=options.pop("edition", "1st"),
            hand=int(options.pop("hand", "1")),
            on_leave=options.pop("leave", "skip"),
            initial_seconds=int(bank) if bank else None,
            increment_seconds=int(step) if bank else 0,
        )
        abandoned = {"over": False, "abandoned": True}[options.pop("end", "over")]
        players = int(options.pop("players"))
    except (KeyError, ValueError) as exc:
        raise MalformedError("bad_notation", f"bad record header: {header!r}") from exc
    if options:
        raise MalformedError("bad_notation", f"unknown header options: {sorted(options)}")
    if not MIN_PLAYERS <= players <= MAX_PLAYERS:
        raise MalformedError("bad_players", "players must be 2 to 6", "R1.3")
    names = lists.get("names=")
    ids = lists.get("player_ids=")
    turns = tuple(parse_turn(word) for line in turn_lines for word in line.split())
    draws = lists.get("draws=")
    if draws is not None:  # the JSON record's form is [{tile, nonce}…]; here [[tile, nonce]…]
        if not isinstance(draws, list) or not all(
            isinstance(d, list) and len(d) == 2 for d in draws
        ):
            raise MalformedError("bad_draws", 'draws is [["E","nonce"],…]', "R10.3")
        draws = [{"tile": tile, "nonce": nonce} for tile, nonce in draws]
    return Record(
        ruleset,
        players,
        turns,
        None if names is None else seat_names(names, players),
        None if ids is None else seat_ids(ids, players),
        abandoned,
        draws_from(draws, ruleset),
    )
