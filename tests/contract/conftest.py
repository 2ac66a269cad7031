"""The contract tests' suite: one per package (starting it costs a few seconds)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.contract.stack import Stack, new_game, new_subscription, play, running_stack
from tests.redis_server import private_redis


@pytest.fixture(scope="package")
def stack() -> Iterator[Stack]:
    """Both services, a scoring worker, an API key with a subscription, and games to aim
    requests at: `live` (3 players, a few turns in, hints allowed), `over` (2 players, played
    to the end), `hand` (R10.3: 2 players with a hand of 3, just started).

    On a Redis of its own: the fuzzer's pings and deliveries to public https URLs stay queued
    and retried on its broker for a day; on the session's broker the next tests' workers took
    them up and their own deliveries waited behind them (CI: webhook and subscription tests
    timed out after the contract run, and passed alone)."""
    with private_redis() as redis_url, running_stack(redis_url) as running:
        rng = random.Random(15)
        live = new_game(running.command, ["ann", "bob", "cy"], {"hints": True})
        play(running.command, live, rng, turns=5)
        over = new_game(running.command, ["dee", "eve"])
        play(running.command, over, rng)
        hand = new_game(running.command, ["fay", "gus"], {"hand": 3})
        running.games.update(live=live, over=over, hand=hand)
        running.subscription_id = new_subscription(running.command, running.api_key)
        yield running
