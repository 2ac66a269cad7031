"""The Redis users' rules (services/redis_store/acl.py) against the key names of
services/redis_store/keys.py: the query's patterns match every key it reads and no key that
holds a secret, whatever the game; the broker's match no key of the event store; the ACL file
has the default user off and hashes for passwords (tests/integration/test_redis_acl.py loads
it into real servers)."""

from __future__ import annotations

import random
from fnmatch import fnmatchcase

from services.redis_store.acl import (
    BROKER_KEYS,
    QUERY_KEYS,
    ROLES,
    acl_file,
    new_passwords,
    rules,
)
from services.redis_store.apikeys import KEYS as API_KEYS
from services.redis_store.changes import changes_key, positions_key
from services.redis_store.keys import (
    archive_used_key,
    archived_key,
    game_keys,
    game_subscriptions_key,
    games_key,
    key_hooks_key,
    new_game_id,
    player_key,
    seats_key,
    secrets_key,
    subscription_keys,
    subscriptions_key,
    vacations_key,
)
from services.redis_store.ratings import board_key, history_key
from services.redis_store.ratings import pool_key as ratings_pool_key


def patterns(found: tuple[str, ...]) -> list[str]:
    """The glob of each key pattern (`~x`, `%R~x`, `%RW~x`)."""
    return [p.split("~", 1)[1] for p in found]


def matched(key: str, globs: list[str]) -> bool:
    """Whether Redis would let a user with these patterns touch `key` (Redis's glob: `*`,
    `?`, `[...]`; braces are plain characters, as in fnmatch)."""
    return any(fnmatchcase(key, g) for g in globs)


def test_the_query_reads_its_keys_and_no_secret_of_any_game() -> None:
    query, rng = patterns(QUERY_KEYS), random.Random(32)
    for game_id in [new_game_id(rng) for _ in range(50)]:
        moves, moves_cmd, moves_marker = game_keys(game_id, "moves")
        scores, scores_cmd, scores_marker = game_keys(game_id, "scores")
        public = [moves, moves_marker, scores, scores_marker, seats_key(game_id),
                  archived_key(game_id)]  # fmt: skip
        secret = [secrets_key(game_id), game_subscriptions_key(game_id), moves_cmd, scores_cmd,
                  *subscription_keys(game_id, "s_1")]  # fmt: skip
        assert all(matched(k, query) for k in public), game_id
        assert not any(matched(k, query) for k in secret), game_id
    shared = [games_key(3), player_key(7, "ann"), changes_key(5), positions_key(5),
              archive_used_key(), API_KEYS, ratings_pool_key("k_1", "classic"),
              board_key("k_1", "hand"), history_key("k_1", "classic", "bot:greedy")]  # fmt: skip
    assert all(matched(k, query) for k in shared)
    assert not matched(subscriptions_key("k_1"), query) and not matched(key_hooks_key("k_1"), query)
    # a player's vacations (docs/clocks.md) are the command service's: the query reads none
    assert not matched(vacations_key("k_1", "u-1"), query)
    assert not matched(vacations_key("k_1", "u-1"), patterns(BROKER_KEYS))


def test_the_broker_touches_no_key_of_the_event_store() -> None:
    broker, game_id = patterns(BROKER_KEYS), new_game_id(random.Random(1))
    store = [secrets_key(game_id), seats_key(game_id), *game_keys(game_id, "moves"),
             games_key(0), changes_key(0), API_KEYS, subscriptions_key("k_1")]  # fmt: skip
    assert not any(matched(k, broker) for k in store)
    assert all(matched(k, broker) for k in ("scoring", "bots\x06\x163", "_kombu.binding.bots",
                                            "unacked", "w@h.celery.pidbox"))  # fmt: skip


def test_the_acl_file_turns_the_default_user_off_and_keeps_no_password() -> None:
    passwords = new_passwords()
    for version in ((6, 2), (7, 0)):
        text = acl_file(passwords, version)
        lines = text.splitlines()
        assert lines[0].startswith("user default off")
        assert [line.split()[1] for line in lines[1:]] == list(ROLES)
        assert not any(p in text for p in passwords.values())
        assert ("%R~" in text) == (version >= (7, 0))
    assert "%R~" not in rules("query", (6, 2)) and "~{g:*}:seats" in rules("query", (6, 2))


def test_the_broker_may_touch_every_queue_the_celery_apps_declare() -> None:
    """A queue added to a Celery app without a broker pattern would be NOPERM on every
    deployment with users (each queue's list and its priority lists `<queue>\\x06\\x16<n>`)."""
    from tests.unit.test_deployments import celery_apps

    queues = {q for app in celery_apps() for q in app.queues}
    assert {"scoring", "webhooks", "bots"} <= queues
    broker = patterns(BROKER_KEYS)
    assert all(matched(q, broker) and matched(q + "\x06\x169", broker) for q in queues)
