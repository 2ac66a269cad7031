"""schemathesis against both services (issue 15, "Proof that it is true"): every operation of
docs/openapi.json is fuzzed on real gunicorn servers (deploy configs) with every check —
no server error, status codes, content types, body schemas and headers as documented, data
the document rejects rejected — and must give 0 failures.

Bounded and reproducible: a fixed seed, derandomized generation, MAX_EXAMPLES per operation
and phase. Requests are aimed at real resources: a path's `game_id` is mostly one of the
stack's games (a live one with hints allowed and a finished one, a hand game for `/hand`;
some stay random, for the 404s), a turn or a hint is sent with the token of the seat whose
turn it is, the API key is a real one, a `sub_id` is mostly the key's own subscription (a
delete takes one made for it), and half the subscription bodies get a public https URL so
creation succeeds until the key's limit (then 422 too_many_subscriptions, documented).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, defaultdict
from typing import Any

import pytest
import schemathesis
from schemathesis import Case

from services.common.api_doc import DOC_FILE
from tests.integration.http_client import call
from tests.stack import RECEIVER, Stack

MAX_EXAMPLES = int(os.environ.get("CONTRACT_MAX_EXAMPLES", "50"))
SEED = 15
# Which service answers each operation (both serve the same document).
COMMAND_OPS = {
    "createGame",
    "playTurn",
    "getTurn",
    "scoreRecord",
    "importGame",
    "exportRecord",
    "registerWebhook",
    "listDeliveries",
    "listWebhooks",
    "deleteWebhook",
    "rotateWebhookSecret",
    "resign",
    "reissueToken",
    "getHand",
    "getHint",
    "createSubscription",
    "listSubscriptions",
    "getSubscription",
    "deleteSubscription",
    "rotateSubscriptionSecret",
    "pingSubscription",
    "listSubscriptionDeliveries",
    "requestUndo",
    "acceptUndo",
    "refuseUndo",
    "openLobby",
    "listLobbies",
    "getLobby",
    "joinLobby",
    "leaveLobby",
    "startLobby",
    "rematchGame",
    "takeTicket",
    "listTickets",
    "getTicket",
    "cancelTicket",
    "declareVacation",
    "listVacations",
    "endVacation",
}
QUERY_OPS = {
    "listGames",
    "getBoard",
    "getBoardSvg",
    "getScores",
    "getEvents",
    "streamLive",
    "listTilesets",
    "getTileset",
    "viewGames",
    "viewGame",
    "getLeaderboard",
    "getPlayerRatings",
}


def _config(base_url: str, stack: Stack) -> schemathesis.Config:
    live = stack.games["live"]
    return schemathesis.Config.from_dict(
        {
            "base-url": base_url,
            "seed": SEED,
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "mode": "all",  # valid data and data the document rejects
                "database": "none",  # nothing kept between runs: each run the same
            },
            "checks": {
                "enabled": True,
                # A request the document allows may still break a game rule or name what
                # does not exist: 409/422 are judged by `well_formed_is_understood` instead.
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "401", "403", "404", "409", "422"]
                },
            },
            "continue-on-failure": True,
            "auth": {
                "openapi": {
                    "apiKey": {"api_key": stack.api_key},
                    "bearerAuth": {"bearer": live.tokens[0]},
                }
            },
            "request-timeout": 10,
            "max-stream-events": 3,
        }
    )


def service_document(service: str) -> dict[str, Any]:
    """The document as one service serves it: the operations whose `x-service` names that
    service. A path both serve (`/games`) then lists only this service's methods, which is
    what its 405s and OPTIONS answer in `Allow`."""
    doc = json.loads(DOC_FILE.read_text(encoding="utf-8"))
    paths = {}
    for path, item in doc["paths"].items():
        mine = {
            method: op
            for method, op in item.items()
            if method == "parameters" or op["x-service"] == service
        }
        if set(mine) - {"parameters"}:
            paths[path] = mine
    return {**doc, "paths": paths}


def _schema(stack: Stack, service: str, base_url: str) -> Any:
    return schemathesis.openapi.from_dict(
        service_document(service), config=_config(base_url, stack)
    )


@pytest.fixture(scope="module")
def command_schema(stack: Stack) -> Any:
    return _schema(stack, "command", stack.command)


@pytest.fixture(scope="module")
def query_schema(stack: Stack) -> Any:
    return _schema(stack, "query", stack.query)


def test_every_operation_is_fuzzed() -> None:
    doc = json.loads(DOC_FILE.read_text(encoding="utf-8"))
    ids = {
        op["operationId"]
        for item in doc["paths"].values()
        for method, op in item.items()
        if method != "parameters"
    }
    assert ids == COMMAND_OPS | QUERY_OPS
    for service, ops in (("command", COMMAND_OPS), ("query", QUERY_OPS)):
        served = {
            op["operationId"]
            for item in service_document(service)["paths"].values()
            for method, op in item.items()
            if method != "parameters"
        }
        assert served == ops, service


def _pick(case: Case, choices: int) -> int:
    """A choice that depends only on the generated case (so a derandomized run repeats)."""
    digest = hashlib.sha256(repr(case.path_parameters).encode()).digest()
    return digest[0] % choices


def _operation(case: Case) -> str:
    return str(case.operation.definition.raw.get("operationId"))


def aim(case: Case, stack: Stack) -> None:
    """Point a generated request at the stack's resources: its games, with the token of the
    seat to move for a turn or a hint (the fuzzer's request is then judged by the rules, not
    refused at the door), and the API key's subscriptions."""
    _aim_subscription(case, stack)
    _aim_lobby(case, stack)
    params = case.path_parameters
    if not params or "game_id" not in params:
        return
    which = _pick(case, 4)
    if which == 3:
        return  # a random id: 404
    game = stack.games["over" if which == 2 else "live"]
    operation = _operation(case)
    if operation == "resign":
        game = stack.games["over"]  # resigning the live game would end it for the others
    if operation == "getHand" and which != 2:
        game = stack.games["hand"]  # the finished game has no hand: 409 no_hand
    params["game_id"] = game.game_id
    headers = case.headers
    sent = "" if headers is None else headers.get("Authorization", "")
    if headers is None or not sent.startswith("Bearer "):
        return  # no token or a malformed one: the 401/403 the fuzzer meant
    if operation in ("playTurn", "getHint"):
        status, view = call(stack.command, "GET", f"/games/{game.game_id}/turn")
        if status == 200 and view["player"] is not None:
            headers["Authorization"] = f"Bearer {game.tokens[view['player']]}"
    elif operation == "getHand":
        seats = sorted(game.tokens)
        headers["Authorization"] = f"Bearer {game.tokens[seats[_pick(case, len(seats))]]}"


def _aim_subscription(case: Case, stack: Stack) -> None:
    """A `sub_id` mostly names the key's subscription (a delete gets one of its own, so the
    others keep theirs); a valid creation body mostly names a URL the service accepts."""
    operation = _operation(case)
    body = case.body
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    # A negative body stays as made: its URL may be what makes it invalid.
    creation = operation == "createSubscription" and positive and _pick_body(case, 2) == 0
    if creation and isinstance(body, dict) and "url" in body:
        body["url"] = RECEIVER
    params = case.path_parameters
    if not params or "sub_id" not in params or _pick(case, 4) == 3:
        return  # none, or a random id: 404
    if operation == "deleteSubscription":
        params["sub_id"] = _spare_subscription(stack)
    else:
        params["sub_id"] = stack.subscription_id


def _aim_lobby(case: Case, stack: Stack) -> None:
    """A `lobby_id` mostly names a lobby of the key, opened for this request (a join then
    takes one of its 5 seats rather than finding it full)."""
    params = case.path_parameters
    if not params or "lobby_id" not in params or _pick(case, 4) == 3:
        return  # none, or a random id: 404
    body = {"ruleset": "classic", "seats": 5, "host": {"player_id": "fuzz-host"}}
    status, opened = call(stack.command, "POST", "/lobbies", body, {"X-Api-Key": stack.api_key})
    assert status == 201, opened
    params["lobby_id"] = opened["lobby_id"]


def _pick_body(case: Case, choices: int) -> int:
    digest = hashlib.sha256(repr(case.body).encode()).digest()
    return digest[0] % choices


def _spare_subscription(stack: Stack) -> str:
    """A subscription of the key that is not the stack's own: a new one, or at the key's
    limit (MAX_SUBSCRIPTIONS, which the fuzzer's creations reach) the newest made."""
    key = {"X-Api-Key": stack.api_key}
    body = {"url": RECEIVER, "kinds": ["game_over"]}
    status, created = call(stack.command, "POST", "/v1/subscriptions", body, key)
    if status == 201:
        return str(created["subscription_id"])
    assert status == 422 and created["code"] == "too_many_subscriptions", created
    status, listed = call(stack.command, "GET", "/v1/subscriptions", None, key)
    assert status == 200, listed
    spare = [s["subscription_id"] for s in listed["subscriptions"]]
    spare.remove(stack.subscription_id)
    return str(spare[-1])


# The lazy schema's filters are the ones that count (a fixture's own are replaced).
# Refusals of a request the document allows that are about its meaning, not its shape: a
# game rule (those carry their R-number in `rule`) or what the document cannot say.
SEMANTIC = {
    "at_and_turn",  # `at` and `turn` both given: each is valid alone
    "bad_cursor",  # a cursor is opaque: only the service knows which strings it made
    "cursor_and_offset",  # a leaderboard's `cursor` and `offset` both given: each valid alone
    "bad_notation",  # a record in notation: its grammar is prose, not a schema
    "bad_player_ids",  # a record's player_ids: one per seat (`players` of the same record)
    "bad_webhook_url",  # the URL policy: http(s), a host an HTTP client reads the same way
    "duplicate_player_name",  # names differ ignoring case and spaces (uniqueItems is exact)
    "at_out_of_range",  # `at` or `turn` beyond the game's end: it depends on the game
    "turn_out_of_range",
    "idempotency_key_reused",  # the key was sent before with another request
    "cursor_beyond_log",  # a well-formed cursor past the end of this game's log
    "stale_sequence",  # a well-formed If-Match naming a sequence the game is not at
    # Bot CPU (docs/bots.md): a game with no human seat and an mcts bot thinking more than
    # the ceiling (the document says so in prose: which seats are bots is the whole body);
    # the key's bot seconds in flight, which depend on its other games.
    "bot_only_think_ms",
    "bot_budget_exceeded",
    # A record's lifecycle turns (docs/lifecycle.md), judged against the same record:
    "bad_player",  # {"resign": seat} beyond the record's `players`
    "player_out",  # a seat resigning (or timed out) twice
    "turn_not_expired",  # {"tile", "timeout": true} in a game without a turn limit
    # "takeover_refused": true where the replay has no takeover to refuse (docs/takeover.md:
    # the ruleset's on_leave, the seat's timeouts so far, the seats still in)
    "no_takeover_to_refuse",
    # Undo (docs/undo.md): whether the game allows it and where its last placement stands.
    "undo_disabled",
    "undo_not_allowed",
    "undo_pending",
    "undo_closed",
    "undo_expired",
    "undo_answered",
    "own_undo_request",
    "not_a_voter",
    # Subscriptions (docs/subscriptions.md): the URL policy and the key's limit.
    "webhook_url_not_public",  # a host on this network (loopback, private, link-local)
    "webhook_url_not_https",  # http is accepted only in development
    "too_many_subscriptions",  # the key has MAX_SUBSCRIPTIONS already
    # Lobbies (docs/lobby.md): who is seated, and the lobby's state.
    "already_joined",
    "name_taken",
    "not_in_lobby",
    "lobby_too_small",
    "lobby_full",
    "lobby_started",
    "lobby_expired",
    "lobby_closed",
    "already_waiting",  # the player waits on another ticket
    "ticket_matched",  # cancelling a ticket whose game exists
    # Clocks (docs/clocks.md): ruleset options not combined (each valid alone), and a
    # player's vacations so far (the year's allowance, one vacation at a time).
    "bank_with_turn_limit",
    "bank_with_undo",
    "hand_with_bank",
    "increment_without_bank",
    "vacation_allowance_exceeded",
    "vacation_overlaps",
    "too_many_vacations",  # a player's vacations running or to come, at most 50
    "vacation_over",  # ending a vacation that ran to its end
    "bad_vacation_start",  # a start from now to a year ahead: the document has no clock
}


def _cross_field(error: dict[str, Any]) -> bool:
    """A rule between fields of one object, which the document leaves flat (a oneOf would
    give generated clients a union per meeple): which of `edge`/`half_edge` a meeple's
    feature takes (invalid_body: the object's `_schema` error)."""
    if error.get("code") != "invalid_body":
        return False
    leaves: list[Any] = [error.get("details", {}).get("fields")]
    keys: list[str] = []
    while leaves:
        node = leaves.pop()
        if isinstance(node, dict):
            keys.extend(k for k, v in node.items() if not isinstance(v, dict))
            leaves.extend(v for v in node.values() if isinstance(v, dict))
    return bool(keys) and all(k == "_schema" for k in keys)


def well_formed_is_understood(ctx: Any, response: Any, case: Case) -> bool | None:
    """A request made from the document's schemas is never refused as malformed: a 4xx to
    one must name a rule or a meaning the document cannot express (`SEMANTIC`)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code not in (400, 409, 413, 415, 422):
        return None
    error = response.json()
    if error.get("rule") or error.get("code") in SEMANTIC or _cross_field(error):
        return None
    raise AssertionError(
        f"a request the document allows was refused: {response.status_code} {error}"
    )


# Requests made, by operation and status (printed at the end: the run's figures).
SEEN: dict[str, Counter[int]] = defaultdict(Counter)


def validate(case: Case) -> None:
    try:
        response = case.call_and_validate(additional_checks=[well_formed_is_understood])
    except Exception as exc:
        SEEN[case.operation.label][getattr(exc, "status_code", 0)] += 1
        raise
    SEEN[case.operation.label][response.status_code] += 1


command = schemathesis.pytest.from_fixture("command_schema").include(
    operation_id=sorted(COMMAND_OPS)
)
query = schemathesis.pytest.from_fixture("query_schema").include(operation_id=sorted(QUERY_OPS))


@command.parametrize()
def test_command_service(case: Case, stack: Stack) -> None:
    aim(case, stack)
    validate(case)


@query.parametrize()
def test_query_service(case: Case, stack: Stack) -> None:
    aim(case, stack)
    validate(case)


def test_every_operation_was_exercised(capsys: pytest.CaptureFixture[str]) -> None:
    """Runs after the fuzzing above (pytest keeps file order): prints what was sent and
    holds every operation to a share of it."""
    with capsys.disabled():
        total = sum(sum(statuses.values()) for statuses in SEEN.values())
        print(f"\nschemathesis: {total} requests, seed {SEED}, {MAX_EXAMPLES} examples")
        for label, statuses in sorted(SEEN.items()):
            shown = " ".join(f"{code}x{n}" for code, n in sorted(statuses.items()))
            print(f"  {label:52} {sum(statuses.values()):5}  {shown}")
    assert len(SEEN) == len(COMMAND_OPS | QUERY_OPS)
    # An operation with nothing to vary (no parameters, no body: GET /tilesets) has only a
    # few distinct requests to make; every other one gets its share.
    doc = json.loads(DOC_FILE.read_text(encoding="utf-8"))
    fixed = {
        f"{method.upper()} {path}"
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method != "parameters" and not op.get("parameters") and "requestBody" not in op
    }
    for label, statuses in SEEN.items():
        assert sum(statuses.values()) >= (1 if label in fixed else MAX_EXAMPLES), (label, SEEN)
