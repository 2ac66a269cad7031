"""The `Archive` port: finished games' whole logs, out of the hot event store, and an
in-memory adapter. The PostgreSQL and SQLite adapters live in `services/archive`.

Everything that goes into the archive for one game is an `ArchivedGame`: both streams' events
exactly as stored (envelope and payload text untouched: no upcasting, no re-encoding, so a
read gives back the same bytes an export gave before), what a restore needs to put the game
back (the stream markers, and the command records that the events alone do not imply), and
`GameMeta`, the secrets-free facts lists need (status, creation, end, names, player ids, the
owner API key). Its canonical serialisation (`canonical`) is laid out by column; its digest
(`digest`, sha256) and event counts are what `verify` compares after reading a copy back. A
stored copy is `pack`ed: those bytes, compressed with a dictionary; `unpack` gives the game
back.

Two stored formats, both read for ever: **format 2** (written since issue 28's rate work) is
the byte 0x02, then a Zstandard frame (level 4, checksummed, the raw-content dictionary
``archive_v2.zdict``) of a one-line JSON header (the columns but the payloads) and the payload
texts as they are, one per line; **format 1** (copies made before) is zlib (level 9, preset
dictionary ``archive_v1.zdict``) of one JSON document with the payload texts inside it as
JSON strings, and no prefix byte (a zlib stream begins 0x78). Format 2 takes ~1/4 of format
1's CPU to make (no payload escaped, runs found in C loops, zstd at ~1/8 of zlib 9's time)
and is no bigger (~2,980 B against ~3,030 for bench_archive's games).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import operator
import re
import threading
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import zstandard

from .envelope import MOVES, SCORES, STREAMS

FORMAT = 2  # of the canonical document written; `unpack` reads 1 and 2, refuses others
LEVEL = 4  # format 2's zstd level (3: ~1/2 the CPU, ~6 % more bytes; 6: ~2.5x, ~4 % fewer)


class RawEvent(NamedTuple):
    """A stored event as the hot store holds it: `data` is the payload's JSON text, as is."""

    stream: str
    seq: int
    type: str
    version: int
    time_ms: int
    command_id: str
    data: str


@dataclass(frozen=True)
class GameMeta:
    """What lists show of a game, without its secrets (no tokens, no seed): `record` is the
    rest of its secrets record (names, player_ids, key_id, bots, imported) as it was."""

    status: str  # "over" or "abandoned"
    created_ms: int
    ended_ms: int
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """The players' names, in seat order."""
        names = self.record.get("names")
        return [str(n) for n in names] if isinstance(names, list) else []

    @property
    def player_ids(self) -> list[str]:
        """The player ids given (None seats left out), in seat order."""
        ids = self.record.get("player_ids")
        return [str(i) for i in ids if i is not None] if isinstance(ids, list) else []

    @property
    def key_id(self) -> str | None:
        """The API key that created (or imported) the game, if any."""
        key = self.record.get("key_id") or (self.record.get("imported") or {}).get("key_id")
        return str(key) if key else None


@dataclass(frozen=True)
class ArchivedGame:
    """One game's whole log and what goes with it (see the module docstring)."""

    game_id: str
    meta: GameMeta
    events: tuple[RawEvent, ...]  # the move stream, then the score stream, each by seq
    markers: dict[str, str] = field(default_factory=dict)  # stream -> marker value
    commands: dict[str, dict[str, str]] = field(default_factory=dict)  # see `extra_commands`

    def count(self, stream: str | None = None) -> int:
        """Events in the log (of one stream)."""
        return len(self.events) if stream is None else self._counts.get(stream, 0)

    @cached_property
    def _counts(self) -> dict[str, int]:
        return Counter(map(operator.itemgetter(0), self.events))

    @cached_property
    def canonical(self) -> bytes:
        """`canonical(self)`, made once."""
        return _canonical(self)


def _unrun(runs: Sequence[Sequence[Any]]) -> list[Any]:
    return [value for value, times in runs for _ in range(times)]


_HEX_ID = re.compile(r"[0-9a-f]{32}")
_HEX_SHA = re.compile(r"[0-9a-f]{64}")
_EMPTY = re.compile(r"([0-9]+):([0-9]+)")


def _hex_out(value: str, pattern: re.Pattern[str]) -> str | list[str]:
    """A hex id (a uuid, a sha256) as [its bytes in base64], anything else as is."""
    if pattern.fullmatch(value):
        return [binascii.b2a_base64(bytes.fromhex(value), newline=False).decode().rstrip("=")]
    return value


def _hex_in(stored: str | list[str]) -> str:
    return stored if isinstance(stored, str) else base64.b64decode(stored[0] + "==").hex()


# Dictionaries (format 1: zlib's preset dictionary, RFC 1950's FDICT; format 2: zstd's raw
# content dictionary): one game's log laid out as its format lays it out (the same game in
# both). A copy is small (~1/6 of its text) because most of a game reads like another
# game. Part of their format for ever: these files never change (a new one would be a new
# format).
_ZDICT = (Path(__file__).with_name("archive_v1.zdict")).read_bytes()
_ZDICT2 = zstandard.ZstdCompressionDict(
    (Path(__file__).with_name("archive_v2.zdict")).read_bytes(),
    dict_type=zstandard.DICT_TYPE_RAWCONTENT,
)
_V2 = b"\x02"  # the first byte of a format 2 copy (never the first byte of a zlib stream)
_zstd = threading.local()  # a zstd (de)compressor is for one thread at a time


def _packer() -> zstandard.ZstdCompressor:
    if not hasattr(_zstd, "packer"):
        _zstd.packer = zstandard.ZstdCompressor(
            level=LEVEL, dict_data=_ZDICT2, write_checksum=True, write_dict_id=False
        )
    return _zstd.packer


def _unpacker() -> zstandard.ZstdDecompressor:
    if not hasattr(_zstd, "unpacker"):
        _zstd.unpacker = zstandard.ZstdDecompressor(dict_data=_ZDICT2)
    return _zstd.unpacker


def _records_out(game: ArchivedGame, stream: str) -> list[list[Any]]:
    """A stream's extra command records, each [id, kind, data]: kind 1, the implied
    "first:last" and a sha256 fingerprint (data: its bytes in base64); 2, the implied span
    and another fingerprint; 3, a progress save without events ("s+1:s"; data: s); 0, the
    value as is."""
    implied = implied_commands(game.events, stream)
    out: list[list[Any]] = []
    for cmd, value in sorted(game.commands.get(stream, {}).items()):
        span = implied.get(cmd)
        empty = _EMPTY.fullmatch(value)
        item: list[Any]
        if span and value.startswith(span + ":"):
            rest = value[len(span) + 1 :]
            item = [1, _hex_out(rest, _HEX_SHA)] if _HEX_SHA.fullmatch(rest) else [2, rest]
        elif empty and value == f"{int(empty[2]) + 1}:{int(empty[2])}":
            item = [3, int(empty[2])]
        else:
            item = [0, value]
        out.append([_hex_out(cmd, _HEX_ID), *item])
    return out


def _records_in(events: Sequence[RawEvent], stream: str, stored: Any) -> dict[str, str]:
    implied = implied_commands(events, stream)
    out: dict[str, str] = {}
    for cmd_out, kind, data in stored:
        cmd = _hex_in(cmd_out)
        if kind in (1, 2):
            out[cmd] = implied[cmd] + ":" + (_hex_in(data) if kind == 1 else data)
        elif kind == 3:
            out[cmd] = f"{data + 1}:{data}"
        else:
            out[cmd] = data
    return out


def canonical(game: ArchivedGame) -> bytes:
    """The one serialisation of a game that digests and copies are made of (format 2): a
    JSON header of one line laid out by column (per stream: the payload types as one letter
    each, versions and command ids as runs, times as differences; seqs and streams implied),
    then the payload texts exactly as stored, one per line, each stream's grouped by type
    (alike texts side by side: they compress well), the move stream's first. A stream whose
    texts hold a newline has them in the header instead. `unpack` of its copy gives back the
    very same `ArchivedGame`. Made once per game value (kept with it)."""
    return game.canonical


_NOTHING = object()  # equal to no value: the one before a column's first


def _column_runs(values: list[Any]) -> list[list[Any]]:
    """[the value of each run, how many in a row], found with C loops (no Python per event)."""
    n = len(values)
    starts = list(itertools.compress(range(n), map(operator.ne, values, [_NOTHING, *values[:-1]])))
    lengths = list(map(operator.sub, [*starts[1:], n], starts))
    return [list(map(values.__getitem__, starts)), lengths]


def _column_unrun(runs: Sequence[Sequence[Any]], n: int) -> list[Any]:
    values, lengths = runs
    if len(values) != len(lengths) or sum(lengths) != n or min(lengths, default=1) < 1:
        raise ValueError("runs that do not add up")
    return list(itertools.chain.from_iterable(map(itertools.repeat, values, lengths)))


_LETTERS = [chr(c) for c in range(ord("A"), ord("Z") + 1)]


def _ids_out(runs: list[list[Any]]) -> list[Any]:
    """Command id runs with each hex id (a uuid) as 0, those ids' bytes in base64 after
    them, all in one string (~1/8 smaller compressed than hex text)."""
    values, lengths = runs
    hexes = list(map(bool, map(_HEX_ID.fullmatch, values)))
    raw = bytes.fromhex("".join(itertools.compress(values, hexes)))
    values = [0 if h else v for v, h in zip(values, hexes, strict=True)]
    return [values, lengths, binascii.b2a_base64(raw, newline=False).decode()]


def _ids_in(stored: Sequence[Any]) -> list[list[Any]]:
    values, lengths, packed = stored
    raw = binascii.a2b_base64(packed).hex()
    ids = iter([raw[i : i + 32] for i in range(0, len(raw), 32)])
    values = [next(ids) if type(v) is int and v == 0 else v for v in values]
    if next(ids, None) is not None:
        raise ValueError("command ids left over")
    return [values, lengths]


def _canonical(game: ArchivedGame) -> bytes:
    check_log(game.events)
    moves = game.count(MOVES)
    streams: dict[str, Any] = {}
    lines: list[str] = []
    for stream in STREAMS:
        events = game.events[:moves] if stream == MOVES else game.events[moves:]
        columns = zip(*events, strict=True) if events else [()] * 7
        _, _, types, versions, times, commands, texts = map(list, columns)
        kinds = sorted(set(types))
        order = sorted(range(len(types)), key=types.__getitem__)  # stable: by type, then seq
        mine = list(map(texts.__getitem__, order))
        letter = dict(zip(kinds, _LETTERS, strict=False))  # more kinds: numbers
        streams[stream] = {
            "n": len(events),
            "kinds": kinds,
            "types": "".join(map(letter.__getitem__, types))
            if len(kinds) <= len(_LETTERS)
            else list(map(kinds.index, types)),
            "versions": _column_runs(versions),
            "commands": _ids_out(_column_runs(commands)),
            "times": list(map(operator.sub, times, [0, *times[:-1]])),
            "records": _records_out(game, stream) if game.commands.get(stream) else [],
        }
        if "\n" in "".join(mine):
            streams[stream]["texts"] = mine
        else:
            lines += mine
    doc = {
        "format": FORMAT,
        "game_id": game.game_id,
        "meta": [game.meta.status, game.meta.created_ms, game.meta.ended_ms, game.meta.record],
        "streams": streams,
        "markers": game.markers,
        "lines": len(lines),
    }
    header = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    try:
        return (header + "\n" + "\n".join(lines)).encode()
    except UnicodeEncodeError:
        # A record's name holding a lone UTF-16 surrogate (stored before notation imports
        # refused one) is no UTF-8: the header escapes it then, and reads back the same.
        header = json.dumps(doc, separators=(",", ":"), sort_keys=True)
        return (header + "\n" + "\n".join(lines)).encode()


def digest(game: ArchivedGame) -> bytes:
    """sha256 of `canonical(game)` (32 bytes)."""
    return hashlib.sha256(canonical(game)).digest()


def pack(game: ArchivedGame) -> bytes:
    """The stored copy (format 2): the byte 0x02, then a zstd frame (level `LEVEL`,
    dictionary `_ZDICT2`, its content size and checksum) of `canonical(game)`: ~3 KB for a
    2-4 player game."""
    return _V2 + _packer().compress(canonical(game))


def copy_digest(blob: bytes) -> bytes:
    """sha256 of the canonical bytes a stored copy holds, in its format (what `verify`
    compares with the digest of the game it was made of; `ValueError` when it does not
    decompress)."""
    try:
        return hashlib.sha256(_decompress(blob)).digest()
    except (zlib.error, zstandard.ZstdError) as e:
        raise ValueError(f"not an archived game: {e}") from e


def _decompress(blob: bytes) -> bytes:
    """The canonical bytes of a copy of either format."""
    if blob[:1] == _V2:
        return _unpacker().decompress(blob[1:])  # the frame's size and checksum checked
    unpacker = zlib.decompressobj(zdict=_ZDICT)
    text = unpacker.decompress(blob) + unpacker.flush()
    if not unpacker.eof:
        raise zlib.error("truncated")
    return text


def unpack(blob: bytes) -> ArchivedGame:
    """A game from its stored copy, of either format (`ValueError` when it is not one)."""
    try:
        text = _decompress(blob)
        if blob[:1] == _V2:
            return _game_of(text)
        return _game_of_format1(json.loads(text))
    except (zlib.error, zstandard.ZstdError, binascii.Error, UnicodeDecodeError, KeyError,
            TypeError, ValueError, StopIteration, IndexError) as e:  # fmt: skip
        raise ValueError(f"not an archived game: {e}") from e


def _game_of(text: bytes) -> ArchivedGame:
    """A game from its format 2 canonical bytes."""
    raw_header, _, body = text.partition(b"\n")
    doc = json.loads(raw_header)
    if doc.get("format") != 2:
        raise ValueError(f"archive format {doc.get('format')!r} where 2")
    count = doc["lines"]
    lines = body.decode().split("\n") if count else []
    if len(lines) != count:
        raise ValueError(f"{len(lines)} payload lines where {count}")
    events: list[RawEvent] = []
    records: dict[str, dict[str, str]] = {}
    at = 0
    for stream in STREAMS:
        part = doc["streams"][stream]
        n, kinds, letters = part["n"], part["kinds"], part["types"]
        index = letters if isinstance(letters, list) else list(map(_LETTERS.index, letters))
        types = list(map(kinds.__getitem__, index))
        if "texts" in part:
            grouped = part["texts"]
        else:
            grouped, at = lines[at : at + n], at + n
        times = list(itertools.accumulate(part["times"]))
        if not len(types) == len(times) == len(grouped) == n:
            raise ValueError(f"stream {stream}: columns of unequal length")
        texts = [""] * n
        for j, i in enumerate(sorted(range(n), key=types.__getitem__)):
            texts[i] = grouped[j]
        mine = list(map(RawEvent._make, zip(itertools.repeat(stream, n), range(1, n + 1), types,
                                            _column_unrun(part["versions"], n), times,
                                            _column_unrun(_ids_in(part["commands"]), n), texts,
                                            strict=True)))  # fmt: skip
        events += mine
        if part["records"]:
            records[stream] = _records_in(mine, stream, part["records"])
    if at != count:
        raise ValueError(f"{count - at} payload lines left over")
    status, created, ended, record = doc["meta"]
    return ArchivedGame(doc["game_id"], GameMeta(status, int(created), int(ended), record),
                        tuple(events), dict(doc["markers"]), records)  # fmt: skip


def _game_of_format1(doc: dict[str, Any]) -> ArchivedGame:
    """A game from its format 1 canonical document (copies made before format 2)."""
    if doc.get("format") != 1:
        raise ValueError(f"archive format {doc.get('format')!r} unknown")
    events: list[RawEvent] = []
    records: dict[str, dict[str, str]] = {}
    for stream in STREAMS:
        part, n = doc["streams"][stream], doc["streams"][stream]["n"]
        types = _unrun(part["types"])
        queues = {
            t: iter(d if isinstance(d, list) else d.split("\n")) for t, d in part["data"].items()
        }
        columns = [
            types,
            _unrun(part["versions"]),
            list(itertools.accumulate(part["times"])),
            [_hex_in(c) for c in _unrun(part["commands"])],
            [next(queues[t]) for t in types],
        ]
        if any(len(c) != n for c in columns):
            raise ValueError(f"stream {stream}: columns of unequal length")
        types, versions, times, commands, texts = columns
        mine = [
            RawEvent(stream, i + 1, types[i], versions[i], times[i], commands[i], texts[i])
            for i in range(n)
        ]
        events += mine
        if part["records"]:
            records[stream] = _records_in(mine, stream, part["records"])
    status, created, ended, record = doc["meta"]
    return ArchivedGame(
        doc["game_id"],
        GameMeta(status, int(created), int(ended), record),
        tuple(events),
        dict(doc["markers"]),
        records,
    )


_SEQ = operator.itemgetter(1)


def check_log(events: Sequence[RawEvent]) -> None:
    """Refuse a log that is not two whole streams, the move stream first: each stream's
    seqs 1, 2, … in order."""
    streams, seqs = list(map(operator.itemgetter(0), events)), list(map(_SEQ, events))
    moves = streams.count(MOVES)
    whole = [*range(1, moves + 1), *range(1, len(streams) - moves + 1)]
    if streams == [MOVES] * moves + [SCORES] * (len(streams) - moves) and seqs == whole:
        return  # the usual case, checked by columns; else found (and said) event by event
    rank_of = {stream: rank for rank, stream in enumerate(STREAMS)}
    at, expected = -1, 1
    for e in events:
        rank = rank_of.get(e.stream)
        if rank is None:
            raise ValueError(f"an event of an unknown stream {e.stream!r}")
        if rank != at:
            if rank < at:
                raise ValueError("the move stream comes first")
            at, expected = rank, 1
        if e.seq != expected:
            raise ValueError(f"stream {e.stream} is not whole: seq {e.seq} where {expected}")
        expected += 1


def implied_commands(events: Sequence[RawEvent], stream: str) -> dict[str, str]:
    """The command records a stream's events imply: command id -> "first:last"."""
    spans: dict[str, list[int]] = {}
    for e in events:
        if e.stream == stream:
            span = spans.setdefault(e.command_id, [e.seq, e.seq])
            span[1] = e.seq
    return {cmd: f"{a}:{b}" for cmd, (a, b) in spans.items()}


def extra_commands(
    events: Sequence[RawEvent], stream: str, records: dict[str, str]
) -> dict[str, str]:
    """The command records of a stream that its events do not imply (a fingerprint, a
    progress save without events): the rest is rebuilt by `all_commands`."""
    implied = implied_commands(events, stream)
    return {cmd: value for cmd, value in records.items() if implied.get(cmd) != value}


def all_commands(game: ArchivedGame, stream: str) -> dict[str, str]:
    """A stream's command records as the hot store held them."""
    return {**implied_commands(game.events, stream), **game.commands.get(stream, {})}


@dataclass(frozen=True)
class Summary:
    """What `verify` compares: events per stream and the digest."""

    moves: int
    scores: int
    digest: bytes

    @classmethod
    def of(cls, game: ArchivedGame) -> Summary:
        """The summary of a game in hand."""
        return cls(game.count(MOVES), game.count(SCORES), digest(game))


Entry = tuple[int, str]  # (creation ms, game id): the order of lists, newest first


def seats_of(record: dict[str, Any]) -> tuple[list[str], list[str | None]]:
    """Names and player ids (None where not given) in seat order, as the games directory
    shows them (services/query/directory.py `_seats`)."""
    names, ids = record.get("names"), record.get("player_ids")
    if not isinstance(names, list):
        return [], []
    if not isinstance(ids, list) or len(ids) != len(names):
        ids = [None] * len(names)
    return [str(n) for n in names], [None if i is None else str(i) for i in ids]


def final_totals(events: Sequence[RawEvent]) -> Any:
    """What the last score event says the totals are (GameScored: the final scores), as a
    directory row shows them; None without score events."""
    scores = [e for e in events if e.stream == SCORES]
    if not scores:
        return None
    payload = json.loads(scores[-1].data)
    return payload.get("final_scores", payload.get("totals"))


def public_of(record: dict[str, Any]) -> bool:
    """Whether the game was created public (listed without an API key)."""
    return record.get("public") is True


def listed(game_id: str, status: str, seats: tuple[list[str], list[str | None]], seq: int,
           updated_ms: int, totals: Any) -> dict[str, Any]:  # fmt: skip
    """A row of `GET /games`, the shape the games directory gives a hot game."""
    names, player_ids = seats
    return {
        "game_id": game_id,
        "status": status,
        "players": names,
        "player_ids": player_ids,
        "seq": seq,
        "updated_ms": updated_ms,
        "scores": totals,
    }


def row_of(game: ArchivedGame) -> dict[str, Any]:
    """The `GET /games` row of an archived game."""
    moves = [e for e in game.events if e.stream == MOVES]
    return listed(
        game.game_id,
        game.meta.status,
        seats_of(game.meta.record),
        len(moves),
        moves[-1].time_ms if moves else game.meta.ended_ms,
        final_totals(game.events),
    )


@dataclass(frozen=True)
class ListQuery:
    """A page of archived games, as `GET /games` asks the games directory for one: whose
    (`key_id`: that API key's games; else with `public` the public games; else all),
    `status`, `player` (a name, any case), `player_id`; strictly after the cursor `after`
    (newest first by creation, ties by id), at most `limit`."""

    status: str | None = None
    player: str | None = None
    player_id: str | None = None
    key_id: str | None = None
    public: bool = False
    after: Entry | None = None
    limit: int = 100

    def admits(self, entry: Entry, status: str, key_id: str | None, public: bool,
               seats: tuple[list[str], list[str | None]]) -> bool:  # fmt: skip
        """Whether a game with these facts belongs on the list (what an index found is
        checked again here: a hashed key that collides shows nothing wrong)."""
        names, ids = seats
        return (
            (self.after is None or entry < self.after)
            and (self.status is None or status == self.status)
            and (self.key_id is None or key_id == self.key_id)
            and (not self.public or public)
            and (self.player is None or self.player.casefold() in [n.casefold() for n in names])
            and (self.player_id is None or self.player_id in ids)
        )


Page = tuple[list[tuple[Entry, dict[str, Any]]], Entry | None]


class Archive(Protocol):
    """Where finished games go when they leave the hot store."""

    def put(self, game: ArchivedGame) -> None:
        """Store a game's copy, committed when this returns; putting the same game again
        replaces its copy (the archiver copies before it removes: a rerun copies again)."""

    def read(self, game_id: str) -> ArchivedGame | None:
        """A game's copy (None if it is not archived)."""

    def put_many(self, games: Sequence[ArchivedGame]) -> None:
        """`put` each game, all in one commit."""

    def summary(self, game_id: str) -> Summary | None:
        """The summary of the copy as stored, computed from the stored bytes read back."""

    def summaries(self, game_ids: Sequence[str]) -> dict[str, Summary]:
        """`summary` of each game that has a copy, in one read."""

    def games(self, after: str = "", limit: int = 100) -> list[str]:
        """Archived game ids in id order, after `after` (a page)."""

    def page(self, query: ListQuery) -> Page:
        """Archived games on a list (`ListQuery`), newest first: each game's entry and its
        `GET /games` row (`row_of`), and the entry down to which the list was read when
        more may follow (None: the list ends here)."""

    def count(self) -> int:
        """How many games are archived."""

    def close(self) -> None:
        """Let go of connections."""


def verify(archive: Archive, expected: Summary, game_id: str) -> bool:
    """Whether the archive holds exactly the game `expected` summarises (read back)."""
    return archive.summary(game_id) == expected


class InMemoryArchive:
    """An `Archive` in a dict (unit tests)."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, game: ArchivedGame) -> None:
        """See `Archive.put`."""
        self.put_many([game])

    def put_many(self, games: Sequence[ArchivedGame]) -> None:
        """See `Archive.put_many`."""
        packed = {game.game_id: pack(game) for game in games}
        with self._lock:
            self._blobs.update(packed)

    def read(self, game_id: str) -> ArchivedGame | None:
        """See `Archive.read`."""
        blob = self._blobs.get(game_id)
        return None if blob is None else unpack(blob)

    def summary(self, game_id: str) -> Summary | None:
        """See `Archive.summary`."""
        blob = self._blobs.get(game_id)
        if blob is None:
            return None
        game = unpack(blob)
        return Summary(game.count(MOVES), game.count(SCORES), copy_digest(blob))

    def summaries(self, game_ids: Sequence[str]) -> dict[str, Summary]:
        """See `Archive.summaries`."""
        found = {g: self.summary(g) for g in game_ids}
        return {g: s for g, s in found.items() if s is not None}

    def games(self, after: str = "", limit: int = 100) -> list[str]:
        """See `Archive.games`."""
        return sorted(g for g in self._blobs if g > after)[:limit]

    def page(self, query: ListQuery) -> Page:
        """See `Archive.page` (reads every copy: for tests)."""
        found = []
        for blob in list(self._blobs.values()):
            game = unpack(blob)
            meta, entry = game.meta, (game.meta.created_ms, game.game_id)
            seats = seats_of(meta.record)
            if query.admits(entry, meta.status, meta.key_id, public_of(meta.record), seats):
                found.append((entry, row_of(game)))
        found.sort(key=lambda f: f[0], reverse=True)
        more = len(found) > query.limit
        return found[: query.limit], found[query.limit - 1][0] if more else None

    def count(self) -> int:
        """See `Archive.count`."""
        return len(self._blobs)

    def close(self) -> None:
        """Nothing to let go of."""
