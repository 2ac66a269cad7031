"""Errors as RFC 9457 problem details, and the page their `type` URIs point to.

Every error the services answer is ``application/problem+json``: ``type`` (``/errors#<code>``,
a section of the `/errors` page both services serve), ``title`` (the problem's kind, the same
for every occurrence), ``status``, ``detail`` (this occurrence, for people), and our own
members: the stable ``code`` clients switch on, ``message`` (= ``detail``, kept for clients
written before), ``rule`` (the R-number broken, or null), ``details`` (machine-readable
specifics) and ``hint``: the request that helps, with the game's id filled in when the failed
request named one (a move refused → `GET /games/{id}/turn`, which lists the legal moves).
"""

from __future__ import annotations

import html
from typing import Any

import flask

MEDIA_TYPE = "application/problem+json"
PAGE = "/errors"

# Per family of codes: what a client should do (`{game}` is the failed request's game id).
HINTS: dict[str, str] = {
    "move": "GET /games/{game}/turn lists the tile to place, every legal placement and, for "
    "each, the meeple spots with their features: choose one of those.",
    "turn": "GET /games/{game}/turn says whose turn it is, the game's sequence (send it as "
    "If-Match) and what may be done now.",
    "undo": "GET /games/{game}/turn shows the undo request pending, if any; docs/undo.md "
    "explains who may ask, answer and when.",
    "auth": "Send the token your seat got when the game was created, as `Authorization: "
    "Bearer <token>`; a lost one is re-issued by POST /games/{game}/players/{seat}/token "
    "with the API key that created the game.",
    "key": "Send your platform's API key as `X-Api-Key` (created by an operator with "
    "`python -m services.command.apikeys create --name <who>`) from your platform's server, "
    "never from an app; only the key that created a game may manage it or list it by player.",
    "create": "The body of POST /games is described in the API document at /docs (schema "
    "CreateGameIn); GET /tilesets lists the tile sets and editions.",
    "record": "The record formats are in docs/integration.md and the API document at /docs; "
    "GET /games/{game}/record exports a valid one to compare with.",
    "body": "Send a JSON body (`Content-Type: application/json`) that matches the "
    "schema in the API document at /docs; `details.fields` names what is wrong.",
    "lookup": "Check the id in the path: GET /games lists games (with your API key, yours); "
    "every list is described in the API document at /docs.",
    "notify": "Webhooks and subscriptions are described in docs/integration.md and "
    "docs/subscriptions.md: an https URL on a public address, a secret of 32+ characters.",
    "http": "The `Allow` header lists the methods this path takes, and the API document at "
    "/docs every path, its methods and the media types it answers with.",
    "retry": "Retry after the number of seconds in the Retry-After header; a command retried "
    "with the same Idempotency-Key is never applied twice.",
    "bots": "A game with no human seat may let its mcts bots think at most "
    "details.max_think_ms a move: lower think_ms of the players in details.players, or seat a "
    "human (a player without `bot`); docs/bots.md.",
    "ratings": "Ratings count the finished games created with your API key whose seats have a "
    "player_id (or are bots), per pool: classic, hand, demo (docs/ratings.md). GET "
    "/v1/ratings/classic lists a pool's players.",
    "vacation": "A player's vacation days per calendar year (UTC) are capped by the platform "
    "(VACATION_DAYS_PER_YEAR); GET /v1/players/{player_id}/vacations shows the days used and "
    "left, docs/clocks.md explains how a vacation pauses the player's clocks; DELETE "
    "/v1/players/{player_id}/vacations/{vacation_id} ends a running one early.",
    "budget": "Bot seats and hints cost CPU: details.budget names the budget used up and "
    "details.limit_seconds its size (in_flight: the API key's games in progress and hints "
    "being worked out; day: its bot seconds today, UTC; seat: this seat's hints in this "
    "game; hints_in_flight: its hints at once). Wait Retry-After seconds (for games to end, "
    "or resign or abandon some), or seat fewer or faster bots, or ask a greedy hint "
    "(details.asked_seconds is what was asked); docs/bots.md.",
    "lobby": "GET /lobbies/{id} shows a lobby's state and players, GET /tickets/{id} a "
    "ticket's (a key sees only its own); docs/lobby.md says who may join, leave, start and "
    "wait, and the named rulesets.",
}

FAMILIES: dict[str, tuple[str, ...]] = {
    "move": ("abbot_disabled", "abbot_in_play", "abbot_spot", "bad_coordinate", "bad_meeple",
             "bad_overlap", "bad_rotation", "bad_turn", "edge_mismatch", "farmers_disabled",
             "feature_occupied", "garden_abbot_only", "lake_last", "no_meeple_left",
             "no_such_feature", "not_adjacent", "not_playable", "out_of_bounds",
             "recall_with_meeple", "river_blocked", "river_first", "river_not_continued",
             "river_u_turn", "square_taken",
             "tile_fits", "tile_not_in_hand", "tile_required", "unreachable"),
    "turn": ("bad_if_match", "bot_seat", "game_not_over", "game_not_started", "game_over",
             "game_started",
             "hand_not_revealed", "hints_disabled", "no_hand", "no_tile_drawn", "not_your_turn",
             "player_out", "stale_sequence", "tile_already_drawn", "tile_not_drawn",
             "turn_not_expired"),
    "undo": ("no_such_request", "not_a_voter", "own_undo_request", "undo_answered",
             "undo_closed", "undo_disabled", "undo_expired", "undo_not_allowed",
             "undo_pending", "undo_same_tile", "unknown_undo"),
    "auth": ("bad_token", "missing_token", "seat_not_found"),
    "key": ("bad_api_key", "missing_api_key", "not_game_owner"),
    "create": ("bad_area", "bad_bots", "bad_draws", "bad_hand", "bad_idle", "bad_max_timeouts",
               "bad_increment_seconds", "bad_initial_seconds", "bank_with_turn_limit",
               "bank_with_undo", "hand_with_bank", "increment_without_bank",
               "bad_meeples", "bad_names", "bad_player", "bad_player_ids", "bad_players",
               "bad_ruleset", "bad_seat_order", "bad_start", "bad_turn_seconds",
               "border_area_too_small", "border_without_area", "draws_short",
               "duplicate_player_name", "edition_not_in_tileset", "hand_with_abbot",
               "hand_with_river", "hand_with_turn_limit", "hand_with_undo", "tile_not_in_bag",
               "tileset_not_found", "unknown_farm_scoring", "unknown_on_leave", "unknown_tile",
               "unknown_tile_edition", "unknown_tileset", "unknown_unplaceable"),
    "record": ("at_and_turn", "at_out_of_range", "bad_commitment", "bad_cursor", "bad_event",
               "cursor_and_offset",
               "bad_export", "bad_format", "bad_nonce", "bad_notation", "bad_record",
               "cursor_beyond_log", "invalid_notation", "no_takeover_to_refuse",
               "too_many_turns", "turn_out_of_range", "unknown_command"),
    "body": ("bad_idempotency_key", "bad_request", "body_too_large", "idempotency_key_reused",
             "incomplete_body", "invalid_body", "invalid_json", "invalid_query",
             "json_too_deep", "unsupported_media_type"),
    "http": ("method_not_allowed", "not_acceptable"),
    "lookup": ("game_not_found", "hook_not_found", "not_found", "subscription_not_found"),
    "notify": ("bad_event_kinds", "bad_webhook_secret", "bad_webhook_url", "too_many_webhooks",
               "too_many_subscriptions", "unknown_event_kind", "webhook_url_not_https",
               "webhook_url_not_public"),
    "retry": ("archive_unavailable", "bad_gateway", "gateway_timeout", "not_replicated",
              "hint_unavailable", "rate_limited", "store_unavailable", "too_many_streams",
              "worker_unreachable"),
    "bots": ("bot_only_think_ms",),
    "budget": ("bot_budget_exceeded", "bot_day_budget_exceeded", "hint_budget_exceeded"),
    "ratings": ("player_not_rated", "pool_not_found"),
    "vacation": ("bad_player_id", "bad_vacation", "bad_vacation_start",
                 "vacation_allowance_exceeded",
                 "vacation_overlaps", "vacation_not_found", "vacation_over",
                 "too_many_vacations"),
    "lobby": ("already_joined", "bad_invite_code", "lobby_closed", "lobby_expired",
              "lobby_full", "lobby_not_found", "lobby_started", "lobby_too_small", "name_taken",
              "not_in_lobby", "not_lobby_host", "unknown_ruleset", "already_waiting",
              "ticket_matched", "ticket_not_found"),
}  # fmt: skip

FAMILY_OF: dict[str, str] = {code: family for family, codes in FAMILIES.items() for code in codes}
TITLES: dict[str, str] = {  # where the code alone reads badly
    "stale_sequence": "The game moved on since the sequence you sent",
    "not_your_turn": "Not this seat's turn",
    "no_such_feature": "No such feature at that meeple spot",
    "invalid_json": "The body is not JSON",
    "rate_limited": "Rate limit used up",
    "store_unavailable": "The event store is unavailable",
    "archive_unavailable": "The archive of finished games is unavailable",
    "bot_only_think_ms": "Bots think too long for a game without a human seat",
    "bot_budget_exceeded": "This API key's bot time in flight is used up",
    "bot_day_budget_exceeded": "This API key's bot time for today (UTC) is used up",
    "hint_budget_exceeded": "This seat's hint time in this game is used up",
    "hint_unavailable": "The bot worker did not work the hint out in time",
    "no_takeover_to_refuse": "The record refuses a takeover where no bot was to take the seat",
}


def title(code: str) -> str:
    """A problem type's title: the same for every occurrence of the code."""
    return TITLES.get(code) or code.replace("_", " ").capitalize()


def type_uri(code: str) -> str:
    """Where the problem type is explained: a section of this service's /errors page."""
    return f"{PAGE}#{code if code in FAMILY_OF else 'other'}"


def hint(code: str) -> str:
    """What to do about it, with the failed request's game id when it named one."""
    text = HINTS.get(FAMILY_OF.get(code, ""), "The API document at /docs describes every "
                     "operation, its input and its errors.")  # fmt: skip
    game = None
    if flask.has_request_context() and flask.request.view_args:
        game = flask.request.view_args.get("game_id")
    return text.replace("{game}", str(game) if game else "{id}")


def problem(
    code: str,
    message: str,
    status: int,
    rule: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The problem details body of an error."""
    return {
        "type": type_uri(code),
        "title": title(code),
        "status": status,
        "detail": message,
        "code": code,
        "message": message,
        "rule": rule,
        "details": details or {},
        "hint": hint(code),
    }


def page() -> str:
    """The /errors page: a section per code (its anchor is the code), grouped by what to do."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Carcassonne Cloud: errors</title></head><body><h1>Errors</h1>"
        "<p>Every error is <code>application/problem+json</code> (RFC 9457) with a stable "
        "<code>code</code>; its <code>type</code> links to its section here.</p>"
    ]
    for family, codes in FAMILIES.items():
        parts.append(f"<h2>{html.escape(family)}</h2><p>{html.escape(HINTS[family])}</p>")
        for code in sorted(codes):
            parts.append(
                f"<section id='{code}'><h3><code>{code}</code>: "
                f"{html.escape(title(code))}</h3></section>"
            )
    parts.append(
        "<section id='other'><h3>Other codes</h3><p>The API document at /docs lists each "
        "operation's errors.</p></section></body></html>"
    )
    return "".join(parts)
