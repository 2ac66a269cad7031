"""What the command service and the worker agree on about subscriptions (per API key): the
event kinds, the limits, and which of a subscription's secrets sign a delivery now.

A subscription's configuration, stored in ``{k:<key id>}:subs`` (services/redis_store/keys.py):
``{"id", "key_id", "url", "kinds", "secrets": [{"secret", "until_ms"}], "created_ms"}`` —
`secrets` newest first; `until_ms` is null for the current secret and the end of the overlap
window for one replaced by a rotation.

A per-game webhook (``POST /games/{id}/webhooks``) is a subscription of the registering key
filtered to one game, stored in the game's ``{g:G}:subs`` with two more fields: ``"game_id"``
and ``"format": "webhook"`` (the webhook's body, headers and signature, one delivery per
score event from the game's first, positions = score seqs); its one secret is the one its
owner gave.
"""

from __future__ import annotations

from typing import Any

# turn_started: a seat must play (seat, player_id, tile, deadline_ms); move_made: a tile was
# placed or discarded, or a placement undone; score: a feature scored (FeatureScored) or an
# undone placement's scoring taken back (ScoreReverted); game_over: final scoring
# (GameScored); player_out: a seat left the game (resigned, or out after timeouts);
# game_started: a game began (every seat: name, player_id): each player learns of a new game
# made for them (a lobby that filled, a rematch) from one item; match_found: a game made by
# matchmaking (every seat with its ticket), right after its game_started; seat_taken_over: a
# bot plays a seat that left from now on (seat, player_id, level; ruleset on_leave), right
# after its player_out; takeover_refused: in its place, the game's API key could not pay for
# that bot, so the seat is skipped (seat, player_id, level, reason "bot_budget");
# player_away: a seat declared a vacation, now or to come (its clock pauses: seat, player_id,
# from_ms, until_ms, deadline_ms; docs/clocks.md); player_back: that vacation ended early or
# was called off (the clock runs again: seat, player_id, at_ms, deadline_ms).
KINDS = (
    "turn_started",
    "move_made",
    "score",
    "game_over",
    "player_out",
    "game_started",
    "match_found",
    "seat_taken_over",
    "takeover_refused",
    "player_away",
    "player_back",
)
MAX_SUBSCRIPTIONS = 10  # per API key: every event of its games is sent to each
RECENT_KEPT = 200  # attempts a subscription's delivery log keeps (newest first)
MAX_OVERLAP_SECONDS = 7 * 86_400  # the longest a rotated-out secret stays valid
DEFAULT_OVERLAP_SECONDS = 86_400
WEBHOOK_FORMAT = "webhook"  # a per-game webhook's `format`
WEBHOOK_KINDS = ("score", "game_over")  # what a webhook carries: every score event
# A webhook's `signature` since signatures are timed (issue 32, finding 6): only the timed
# `Carcassonne-Signature`; a hook without it also gets the untimed legacy header.
WEBHOOK_SIGNED = "v1"
MAX_HOOKS_PER_KEY = 100  # per-game webhooks of one API key, over all its games


def owner_key(record: dict[str, Any] | None) -> str | None:
    """The API key that created or imported a game, from its secrets record (None: none)."""
    record = record or {}
    return record.get("key_id") or (record.get("imported") or {}).get("key_id") or None


def live_secrets(config: dict[str, Any], now_ms: int) -> list[str]:
    """The secrets that sign a delivery at `now_ms`: the current one, then any rotated-out
    one still inside its overlap window (newest first)."""
    return [
        s["secret"]
        for s in config.get("secrets", [])
        if s.get("until_ms") is None or s["until_ms"] > now_ms
    ]


def public_view(config: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """A subscription as the API shows it: never a secret, only how many are live."""
    return {
        "subscription_id": config["id"],
        "url": config["url"],
        "kinds": list(config["kinds"]),
        "created_ms": config["created_ms"],
        "secrets_live": len(live_secrets(config, now_ms)),
        "overlap_until_ms": max(
            (s["until_ms"] for s in config.get("secrets", []) if (s.get("until_ms") or 0) > now_ms),
            default=None,
        ),
    }
