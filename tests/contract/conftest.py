"""The contract tests' suite: the session's, with games made for them (tests/stack.py)."""

from __future__ import annotations

import random

import pytest

from tests.stack import Stack, new_game, new_subscription, play


@pytest.fixture(scope="package")
def stack(running_suite: Stack) -> Stack:
    """Both services, a scoring worker, an API key with a subscription, and games to aim
    requests at: `live` (3 players, a few turns in, hints allowed), `over` (2 players, played
    to the end), `hand` (R10.3: 2 players with a hand of 3, just started).

    The session's running suite (tests/stack.py), which has a Redis of its own: the fuzzer's
    pings and deliveries to public https URLs stay queued and retried on its broker for a day;
    on the session's broker the next tests' workers took them up and their own deliveries
    waited behind them (CI: webhook and subscription tests timed out after the contract run,
    and passed alone)."""
    rng = random.Random(15)
    base = running_suite.command
    live = new_game(base, ["ann", "bob", "cy"], {"hints": True})
    play(base, live, rng, turns=5)
    over = new_game(base, ["dee", "eve"])
    play(base, over, rng)
    hand = new_game(base, ["fay", "gus"], {"hand": 3})
    running_suite.games.update(live=live, over=over, hand=hand)
    running_suite.subscription_id = new_subscription(base, running_suite.api_key)
    return running_suite
