"""The index shard tags and game ids (services/redis_store/keys.py): every tag sits on its
shard's slot, and new and derived game ids land on a shard slot."""

from __future__ import annotations

import binascii
import random

from services.redis_store.changes import changes_key, positions_key
from services.redis_store.keys import (
    SHARD_TAGS,
    SHARDS,
    deadlines_key,
    derived_game_id,
    games_key,
    idle_key,
    index_shard,
    legacy_shard,
    new_game_id,
    player_key,
    shard_of,
    shard_slot,
    status_key,
    subs_due_key,
)


def slot(text: str) -> int:
    """Redis Cluster's keyslot of a hash tag's content, computed here independently."""
    return binascii.crc_hqx(text.encode(), 0) % 16384


def test_every_shard_tag_sits_in_the_middle_of_its_64th_of_the_slots() -> None:
    assert len(SHARD_TAGS) == SHARDS == 64 and len(set(SHARD_TAGS)) == 64
    for i, tag in enumerate(SHARD_TAGS):
        assert slot(tag) == int((i + 0.5) * 16384 / 64) == shard_slot(i), tag


def test_index_keys_of_a_shard_share_its_slot() -> None:
    for i in (0, 17, 63):
        keys = [changes_key(i), positions_key(i), games_key(i), status_key(i, "over"),
                deadlines_key(i), idle_key(i), subs_due_key(i), player_key(i, "Émile")]  # fmt: skip
        for key in keys:
            tag = key[key.index("{") + 1 : key.index("}")]
            assert slot(tag) == shard_slot(i), key
    assert player_key(3, "ÉMILE") == player_key(3, "émile")  # names match ignoring case


def test_new_game_ids_land_on_their_shard_slot() -> None:
    rng = random.Random(5)
    seen = set()
    for _ in range(300):
        game_id = new_game_id(rng)
        assert len(game_id) == 32 and int(game_id, 16) >= 0
        shard = shard_of(game_id)
        assert shard is not None and slot("g:" + game_id) == shard_slot(shard)
        seen.add(shard)
    assert len(seen) > 50  # spread over the shards, not stuck on a few
    assert new_game_id() != new_game_id()  # system randomness by default


def test_derived_ids_are_deterministic_and_on_a_shard_slot() -> None:
    a, b = derived_game_id(b"import\nk_1\nkey-9"), derived_game_id(b"import\nk_1\nkey-9")
    assert a == b and shard_of(a) is not None
    assert derived_game_id(b"import\nk_2\nkey-9") != a


def test_old_ids_are_off_the_shard_slots_and_go_to_crc32_shards() -> None:
    old = "0" * 31 + "1"
    assert shard_of(old) is None and slot("g:" + old) % 256 != 128
    assert index_shard(old) == legacy_shard(old) and 0 <= legacy_shard(old) < 64
    game_id = new_game_id(random.Random(1))
    assert index_shard(game_id) == shard_of(game_id)
