"""Where everything of a game lives in Redis: one hash tag, ``{g:<id>}``, for all its keys, so
a game lives on one Redis Cluster shard and one Lua script may touch any of them; and the
cross-game indexes, 64 sorted sets per kind, each under a shard tag whose slot is the slot of
every game of that shard (see "index shards" below). Every service takes its key names from
here (services never import each other).
"""

from __future__ import annotations

import binascii
import hashlib
import random
import zlib


def _tag(game_id: str) -> str:
    return "{g:" + game_id + "}"


def game_keys(game_id: str, stream: str) -> tuple[str, str, str]:
    """(stream key, command-id hash, marker key) of a game's stream."""
    tag = _tag(game_id)
    return f"{tag}:{stream}", f"{tag}:cmd:{stream}", f"{tag}:marker:{stream}"


def secrets_key(game_id: str) -> str:
    """The command service's secrets record of a game (names, token hashes, draw seed). Only
    the command and worker roles may read it (services/redis_store/acl.py)."""
    return _tag(game_id) + ":secrets"


def seats_key(game_id: str) -> str:
    """The public part of a game's secrets record (names, player ids, bot seats, owner key
    id, public flag: services/redis_store/seats.py), written with it: what the query role
    reads instead of the secrets."""
    return _tag(game_id) + ":seats"


# ------------------------------------------------------------------------ index shards
#
# Structures that span games (the indexes below) are split into SHARDS sorted sets per kind,
# one per shard hash tag. Each tag was chosen (a one-off search: ``ix<i>-<n>`` for n = 0, 1, …
# until it fits) so that its Redis Cluster slot is the middle of the i-th 64th of the slot
# range: CRC16(tag) % 16384 == floor((i + 0.5) * 16384 / 64). Any contiguous assignment of
# slots to up to 64 primaries therefore gives each primary its share of the shards.
#
# A game's keys keep their tag ``{g:<id>}``; new game ids are drawn so that the slot of
# ``g:<id>`` is one of these 64 slots (`new_game_id`, `derived_game_id`). A game and its
# shard's indexes then share a slot, so the one Lua script that appends to a game updates its
# indexes in the same atomic step, on a single Redis and on a cluster alike.

SHARDS = 64
SLOTS = 16384
SHARD_TAGS: tuple[str, ...] = (
    "ix00-2402", "ix01-2157", "ix02-29237", "ix03-8518", "ix04-69343", "ix05-5068",
    "ix06-14807", "ix07-29274", "ix08-3762", "ix09-3237", "ix10-5796", "ix11-19725",
    "ix12-11742", "ix13-4383", "ix14-13983", "ix15-18441", "ix16-21313", "ix17-4238",
    "ix18-17866", "ix19-6298", "ix20-1894", "ix21-22269", "ix22-125", "ix23-4019",
    "ix24-11624", "ix25-6833", "ix26-16719", "ix27-6299", "ix28-12745", "ix29-13462",
    "ix30-9297", "ix31-3927", "ix32-1348", "ix33-52593", "ix34-2445", "ix35-2110",
    "ix36-3505", "ix37-3050", "ix38-43955", "ix39-4782", "ix40-14668", "ix41-3498",
    "ix42-9582", "ix43-6940", "ix44-1780", "ix45-11159", "ix46-12431", "ix47-13716",
    "ix48-27358", "ix49-53391", "ix50-3610", "ix51-3345", "ix52-2750", "ix53-2205",
    "ix54-45290", "ix55-1508", "ix56-11894", "ix57-29595", "ix58-2570", "ix59-2025",
    "ix60-66927", "ix61-68397", "ix62-5083", "ix63-26810",
)  # fmt: skip
_SPAN = SLOTS // SHARDS  # 256 slots per shard; its slot is the middle one
_system = random.SystemRandom()
_MAX_DRAWS = 100_000  # ~256 expected; a bound so a broken rng cannot spin forever
IN_PROGRESS, OVER, ABANDONED = "in_progress", "over", "abandoned"


def shard_slot(shard: int) -> int:
    """The Redis Cluster slot of a shard's tag (and of every game of that shard)."""
    return shard * _SPAN + _SPAN // 2


def key_slot(tag: str) -> int:
    """Redis Cluster's slot of a hash tag's content (CRC16/XMODEM, as `CLUSTER KEYSLOT`)."""
    return binascii.crc_hqx(tag.encode(), 0) % SLOTS


def shard_of(game_id: str) -> int | None:
    """The index shard of a game, or None for an id not on a shard slot (a game created
    before the indexes: only `services.redis_store.backfill` indexes those)."""
    slot = key_slot("g:" + game_id)
    return slot // _SPAN if slot % _SPAN == _SPAN // 2 else None


def new_game_id(rng: random.Random | None = None) -> str:
    """A random 32-hex game id on a shard slot (one in 256 draws lands: ~100 µs)."""
    draw = rng or _system
    for _ in range(_MAX_DRAWS):
        game_id = f"{draw.getrandbits(128):032x}"
        if shard_of(game_id) is not None:
            return game_id
    raise RuntimeError("no game id on a shard slot found")  # pragma: no cover


def derived_game_id(seed: bytes) -> str:
    """A 32-hex game id on a shard slot, always the same for the same seed: sha256(seed,
    counter) for counter = 0, 1, … until one lands."""
    for counter in range(_MAX_DRAWS):
        game_id = hashlib.sha256(seed + b"\n" + str(counter).encode()).hexdigest()[:32]
        if shard_of(game_id) is not None:
            return game_id
    raise RuntimeError("no game id on a shard slot found")  # pragma: no cover


def legacy_shard(game_id: str) -> int:
    """The shard the backfill puts a game of an id off the shard slots into (crc32 % 64).
    Its index entries are then not in its slot: not updated atomically with its writes."""
    return zlib.crc32(game_id.encode()) % SHARDS


def index_shard(game_id: str) -> int:
    """The shard whose indexes hold a game: its slot's, else the backfill's choice."""
    shard = shard_of(game_id)
    return legacy_shard(game_id) if shard is None else shard


def _itag(shard: int) -> str:
    return "{" + SHARD_TAGS[shard] + "}"


def games_key(shard: int) -> str:
    """Sorted set: every game of the shard -> its creation time (ms)."""
    return _itag(shard) + ":idx:games"


def status_key(shard: int, status: str) -> str:
    """Sorted set: games of a status (`IN_PROGRESS`, `OVER` or `ABANDONED`) -> creation
    time (ms)."""
    return _itag(shard) + ":idx:status:" + status


def deadlines_key(shard: int) -> str:
    """Sorted set: games in progress whose turn has a deadline -> that deadline (Unix ms).
    The turn timer reads only the due part (scores up to now): no scan."""
    return _itag(shard) + ":idx:deadlines"


def idle_key(shard: int) -> str:
    """Sorted set: games in progress -> time (ms) of their last move append. The abandon
    sweep reads only those idle longer than ABANDON_AFTER."""
    return _itag(shard) + ":idx:idle"


def player_key(shard: int, name: str) -> str:
    """Sorted set: games with a player of this name (any case) -> creation time (ms)."""
    return _itag(shard) + ":idx:player:" + name.casefold()


def player_id_key(shard: int, player_id: str) -> str:
    """Sorted set: games with a seat of this player id (an app's opaque user id, compared
    exactly) -> creation time (ms)."""
    return _itag(shard) + ":idx:pid:" + player_id


def public_key(shard: int) -> str:
    """Sorted set: games created public (listed without an API key) -> creation time (ms)."""
    return _itag(shard) + ":idx:public"


def key_games_key(shard: int, key_id: str) -> str:
    """Sorted set: games created (or imported) with this API key -> creation time (ms). Only
    that key lists them (GET /games with X-Api-Key)."""
    return _itag(shard) + ":idx:key:" + key_id


def key_player_key(shard: int, key_id: str, name: str) -> str:
    """Sorted set: the API key's games with a player of this name (any case) -> creation ms."""
    return _itag(shard) + ":idx:key:" + key_id + ":player:" + name.casefold()


def key_player_id_key(shard: int, key_id: str, player_id: str) -> str:
    """Sorted set: the API key's games with a seat of this player id -> creation time (ms)."""
    return _itag(shard) + ":idx:key:" + key_id + ":pid:" + player_id


def bots_due_key(shard: int) -> str:
    """Sorted set: games with a bot seat, in progress -> when (ms) the bot sweep should look
    at the game (a bot's turn not played by then is sent to the bot worker again)."""
    return _itag(shard) + ":idx:bots-due"


def archive_due_key(shard: int) -> str:
    """Sorted set: finished games not archived yet -> when (ms) they are due in the archive
    (their end plus ARCHIVE_AFTER; services/archive/archiver.py)."""
    return _itag(shard) + ":idx:archive-due"


def lobby_key(game_id: str) -> str:
    """String: a lobby's JSON (services/command/lobby.py). A lobby's id is the id of the game
    it starts, so the lobby, that game and its shard's indexes share one slot."""
    return _tag(game_id) + ":lobby"


def lobbies_key(shard: int, key_id: str, ruleset: str, seats: int) -> str:
    """Sorted set: the API key's listed open lobbies of a ruleset and size on this shard ->
    when each expires (ms). Only that key lists them (GET /lobbies)."""
    return _itag(shard) + ":idx:key:" + key_id + ":lobbies:" + ruleset + ":" + str(seats)


# ------------------------------------------------------------------------ matchmaking
#
# An API key's matchmaking lives under its own hash tag ``{mm:<key id>}`` (one slot per key):
# players meet only within a key (a game has one owner key), and a player waits in one queue
# at a time across every ruleset and size, which one script checks where it takes the ticket.


def mm_tag(key_id: str) -> str:
    """The hash tag of a key's matchmaking."""
    return "{mm:" + key_id + "}"


def ticket_key(key_id: str, ticket_id: str) -> str:
    """String: a ticket's JSON (services/command/matchmaking.py)."""
    return mm_tag(key_id) + ":t:" + ticket_id


def queue_key(key_id: str, ruleset: str, players: int) -> str:
    """Sorted set: the key's waiting tickets of a ruleset and game size -> their order
    (oldest first)."""
    return mm_tag(key_id) + ":q:" + ruleset + ":" + str(players)


def waiting_key(key_id: str) -> str:
    """Hash: player id -> its waiting ticket (one per player)."""
    return mm_tag(key_id) + ":waiting"


def match_key(key_id: str, game_id: str) -> str:
    """String: a match's JSON (its game, seed and tickets), kept until its game is made."""
    return mm_tag(key_id) + ":m:" + game_id


def mm_order_key(key_id: str) -> str:
    """Counter: the order of the key's tickets (oldest first, ties impossible)."""
    return mm_tag(key_id) + ":order"


def mm_pending_key(key_id: str) -> str:
    """Set: the key's matches whose game may not be made yet (a matcher cut short)."""
    return mm_tag(key_id) + ":pending"


def mm_queues_key(key_id: str) -> str:
    """Set: "<ruleset>:<players>" of every queue of the key that had a ticket."""
    return mm_tag(key_id) + ":queues"


def mm_keys_key() -> str:
    """Set: API keys that made tickets (the matcher's `drain` walks them)."""
    return "mm:keys"


def archived_key(game_id: str) -> str:
    """The tombstone of a game that left Redis for the archive: the time (ms) it left. The
    only key of the game's tag left after archiving, so "archived" is told from "unknown"."""
    return _tag(game_id) + ":archived"


def archive_used_key() -> str:
    """String: set by the archiver before it first copies a game (and at each batch since):
    lists (GET /games) read the archive too once it exists."""
    return "archive:used"


def split_member(member: str) -> tuple[str, str]:
    """(game, subscription) of a `subs_due_key` member ("<game>:<subscription>")."""
    game_id, _, sub_id = member.partition(":")
    return game_id, sub_id


# ------------------------------------------------------------------------ subscriptions
#
# An API key's subscriptions of all its games live under the key's own hash tag ``{k:<key id>}``
# (one slot per key); those filtered to one game (per-game webhooks) under the game's tag, so
# the per-game limit is checked in the script that adds one; a subscription's delivery queue
# in one game lives under the game's tag.


def vacations_key(key_id: str, player_id: str) -> str:
    """A player's declared vacations under an API key (docs/clocks.md): a JSON list, written
    and read by the command service only."""
    return "{k:" + key_id + "}:vacations:" + player_id


def subscriptions_key(key_id: str) -> str:
    """Hash: subscription id -> its configuration JSON (url, kinds, secrets), of one API key."""
    return "{k:" + key_id + "}:subs"


def key_hooks_key(key_id: str) -> str:
    """Set: ``<game>:<hook>`` of every per-game webhook of one API key (its cap, its list)."""
    return "{k:" + key_id + "}:hooks"


def game_subscriptions_key(game_id: str) -> str:
    """Hash: subscription id -> configuration JSON, of the subscriptions (of any key) filtered
    to this game: the per-game webhooks (services/command/hooks.py)."""
    return _tag(game_id) + ":subs"


def subscription_recent_key(key_id: str, sub_id: str) -> str:
    """List: a subscription's most recent delivery attempts across its games, newest first."""
    return "{k:" + key_id + "}:sub:" + sub_id + ":recent"


def subscription_keys(game_id: str, sub_id: str) -> tuple[str, str, str]:
    """(state hash, delivery log hash, lease) of a subscription's deliveries in one game."""
    base = _tag(game_id) + ":sub:" + sub_id
    return base, base + ":log", base + ":lease"


def subs_due_key(shard: int) -> str:
    """Sorted set: "<game>:<subscription>" -> when (ms) the subscription sweep should look at
    that subscription's deliveries in that game; absent once everything is delivered."""
    return _itag(shard) + ":idx:subs-due"
