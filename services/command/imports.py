"""Importing a checked record as a game: the import command (`POST /games/import`).

The game is stored in one conditional append through the one write path
(`services.common.moves.append_moves`); its secrets record names the seats and holds no
token, so nobody can play it. With an Idempotency-Key the game's id is derived from
(API key, key), so a retry meets the first attempt's game.

An import is the one append whose events come from a client: the record was replayed by the
engine, and its events are checked against the stored schemas here, before anything is
written (the event store trusts what it is given: eventstore.port.CHECK_PAYLOADS).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from carcassonne.errors import MalformedError
from carcassonne.events import Event, with_seats
from eventstore.envelope import MOVES
from eventstore.errors import CommandReused, GameArchived, SchemaError
from eventstore.schemas import to_new, validate_payload
from services.common.body import fingerprint
from services.common.moves import append_moves
from services.redis_store.keys import derived_game_id, new_game_id

from .cache import archived_game
from .errors import IdempotencyKeyReused, check_reuse
from .records import Replayed
from .service import GameService

IMPORT_COMMAND = "import"  # the command id of an import's one append


@dataclass(frozen=True)
class Imported:
    """Where an import landed: the game, its last sequence, and whether this request only
    found the game an earlier request with the same Idempotency-Key made."""

    game_id: str
    seq: int
    replayed: bool = False


def import_game_id(key_id: str, idempotency_key: str) -> str:
    """The game an import with this (API key, Idempotency-Key) makes: always the same one, so
    a retry meets the first attempt's game instead of making another. 32 hex digits like a
    played game's id (services/common/webapp.py); another key cannot reach it (its id
    is part of the hash). Drawn from sha256 of them until it lands on an index shard's slot
    (services/redis_store/keys.py), like every new game's id."""
    return derived_game_id(f"import\n{key_id}\n{idempotency_key}".encode())


def import_fingerprint(
    key_id: str, replayed: Replayed, names: list[str], rated: bool = False, public: bool = False
) -> str:
    """What an import's Idempotency-Key is bound to: the record as read (the same game sent as
    JSON or as notation is the same request), the names, whether it is rated and whether it
    is public (each only when it is: a private unrated import's fingerprint is what it was
    before either existed). `public` left out, a retry asking another listing was answered
    as a replay of the first and its flag silently dropped."""
    body: dict[str, Any] = {"key": key_id, "record": replayed.record.to_dict(), "names": names}
    if rated:
        body["rated"] = True
    if public:
        body["public"] = True
    return fingerprint("POST", "/games/import", body)


def check_stored_schemas(events: Sequence[Event]) -> None:
    """`bad_record` (422) unless every event fits its stored schema. The engine's replay
    checks the rules, not every bound the log keeps: a hand record's draw with a nonce of more
    than 64 characters replays, and its `TilePlaced` does not fit the log."""
    for event in events:
        new = to_new(event)
        try:
            validate_payload(new.type, new.version, new.payload)
        except SchemaError as exc:
            raise MalformedError("bad_record", f"the record does not fit the log: {exc}") from None


def archived_import(service: GameService, game_id: str, request: str) -> Imported:
    """The import an Idempotency-Key made before its game was archived (services/archive):
    the same game, if this request is the one its key is bound to (the fingerprint kept in
    the archived copy's record); `IdempotencyKeyReused` otherwise. Nothing is written: the
    game is never made again beside its archived copy."""
    reads = service.archive_reads
    if reads is None:
        raise archived_game(game_id)
    seq = reads.last_seq(game_id, MOVES)  # reads the copy (503 when the archive is down)
    record = reads.record(game_id) or {}
    check_reuse(record.get("imported", {}).get("fingerprint", "?"), request)
    return Imported(game_id, seq, replayed=True)


def import_game(
    service: GameService,
    replayed: Replayed,
    names: list[str],
    key_id: str,
    idempotency_key: str | None = None,
    player_ids: Sequence[str | None] | None = None,
    public: bool = False,
    rated: bool = False,
) -> Imported:
    """Store a checked record as a new game in one conditional append (`public`: listed to
    everyone, GET /games without a key; otherwise only to `key_id`; `rated`: its players'
    ratings count it, docs/ratings.md — an import is unrated unless the platform asks).

    Its `GameStarted` names the seats and carries the record's `player_ids` (the log says who
    played); the secrets record holds the same names and ids, which the append script indexes
    (`GET /games?player=`, `?player_id=`) as it does a created game's.

    With an `idempotency_key` the game's id is derived from (API key, key) and the request's
    fingerprint is bound to it twice, both atomically: in the secrets record (written only if
    absent, SET NX: the first request to get there owns the game and its names) and with the
    append's command id. A later request with the same key and the same record gets the same
    game (its append, if the first one never happened, or the first append's result); with
    another record `IdempotencyKeyReused`, and nothing is written.
    """
    events = with_seats(replayed.events, names, player_ids)
    check_stored_schemas(events)  # before anything is written
    request = import_fingerprint(key_id, replayed, names, rated, public) if idempotency_key else ""
    game_id = import_game_id(key_id, idempotency_key) if idempotency_key else new_game_id()
    imported: dict[str, Any] = {"key_id": key_id, "time_ms": int(time.time() * 1000)}
    if rated:
        imported["rated"] = True
    secrets: dict[str, Any] = {
        "names": names,
        "seed": None,  # the record came with its draws: there is no seed to reveal
        "tokens": {},  # no seat can play
        "imported": imported,
    }
    if player_ids is not None and any(i is not None for i in player_ids):
        secrets["player_ids"] = list(player_ids)  # seat order, as a created game's
    if public:  # as a created game's: the games directory lists it without a key
        secrets["public"] = True
    # Written first: once the move stream exists the game is listed, names and all. If the
    # append fails, this record alone names no game (every reader starts from the stream).
    if not idempotency_key:
        service.secrets.put(game_id, secrets)
    elif service.secrets.archived(game_id):
        return archived_import(service, game_id, request)
    else:
        imported["fingerprint"] = request
        if not service.secrets.put_new(game_id, secrets):
            found = service.secrets.get(game_id)
            if found is None:  # archived since the check above (put_new refuses it then)
                return archived_import(service, game_id, request)
            check_reuse(found.get("imported", {}).get("fingerprint", "?"), request)
    try:
        # Scored like any other moves: the worker follows the change feed.
        result = append_moves(
            service.store,
            game_id,
            events,
            expected=0,
            command_id=IMPORT_COMMAND,
            fingerprint=request,
        ).result
    except CommandReused:
        raise IdempotencyKeyReused from None
    except GameArchived:  # archived since its claim was read: answered from the archive
        return archived_import(service, game_id, request)
    return Imported(game_id, result.last_seq, replayed=result.duplicate)
