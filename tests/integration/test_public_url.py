"""One public base URL (issue 33, finding 3): nginx routes each path and method to the
service that serves it (deploy/nginx/public.conf), so an app knows one host. Real gunicorn
servers of both services (deploy configs), real Redis, real nginx from deploy/nginx/.

Every route of both apps (their url_maps: nothing listed by hand here) is asked through the
public URL and straight at the service that serves it, and must get the same answer, never
the other service's "no such path" (404 not_found) or "no such method" (405).

Needs nginx: installed when missing and running as root (deploy/local/host.py), skipped with
the reason otherwise.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask
from werkzeug.routing import Rule

from tests import nginx as private_nginx

from .http_client import api_key, call, gunicorn

COMMAND = ("services.command.wsgi:app", "deploy/gunicorn/command.py")
QUERY = ("services.query.wsgi:app", "deploy/gunicorn/query.py")
# A value for each path variable: no such game, hook or subscription (answered 404 by the
# service that has the route, with its own code), real files for the file routes.
SAMPLES = {"game_id": "g-none", "seat": "0", "request": "1", "hook_id": "h-none",
           "sub_id": "s-none", "name": "base", "pool": "classic", "lobby_id": "l-none",
           "ticket_id": "t-none", "player_id": "u-none", "vacation_id": "0" * 32}  # fmt: skip
FILES = {"/viewer/": "list.js", "/static/": "viewer/list.js", "/docs/swagger-ui/": "swagger-ui.css"}
MISSES = {(404, "not_found"), (405, "method_not_allowed")}  # a route the service does not have
OPERATORS_ONLY = {"/metrics", "/readyz"}  # not through the public URL (issue 32, finding 9)


@dataclass
class Servers:
    public: str  # the API's one base URL (nginx)
    command: str  # each service straight (gunicorn)
    query: str


@pytest.fixture(scope="module")
def servers(redis_url: str) -> Iterator[Servers]:
    binary, why = private_nginx.find_nginx()
    if binary is None:
        warnings.warn(f"public URL tests skipped: {why}", stacklevel=1)
        pytest.skip(why)
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0", "SSE_HEARTBEAT_SECONDS": "0.2"}
    with (
        gunicorn(*COMMAND, env, 1) as command,
        gunicorn(*QUERY, env, 1) as query,
        private_nginx.nginx(
            {"command": command.removeprefix("http://"), "query": query.removeprefix("http://")}
        ) as proxy,
    ):
        yield Servers(proxy["public"], command, query)


def routes() -> list[tuple[str, str, str, bool]]:
    """(service, method, a path of the rule, whether the other service has it too) for every
    route of both apps (HEAD and OPTIONS: Flask's own, for every rule; not Flask's `/static`
    of an app without a static folder, the command service's)."""
    from services.command.wsgi import app as command
    from services.query.wsgi import app as query

    apps = {"command": command, "query": query}
    rules = {
        name: [r for r in app.url_map.iter_rules() if r.endpoint != "static" or has_static(app)]
        for name, app in apps.items()
    }
    served = {(s, r.rule, m) for s, rs in rules.items() for r in rs for m in r.methods or ()}
    found = []
    for service, other in (("command", "query"), ("query", "command")):
        for rule in rules[service]:
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                shared = (other, rule.rule, method) in served
                found.append((service, method, sample_path(rule), shared))
    return found


def has_static(app: Flask) -> bool:
    return app.static_folder is not None and Path(app.static_folder).is_dir()


def sample_path(rule: Rule) -> str:
    """The rule's path with a sample value in each variable."""
    path = rule.rule
    for prefix, file in FILES.items():
        if path.startswith(prefix):
            return prefix + file
    return re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLES[m.group(1)], path)


def answer(base: str, method: str, path: str) -> tuple[int, str | None]:
    """(status, the error's code or None); not checked against the API document (`call`
    would: `/errors`, `/docs`, `/metrics` are pages, not operations)."""
    conn = http.client.HTTPConnection(*address(base), timeout=30)
    try:
        conn.request(method, path)
        reply = conn.getresponse()
        payload = reply.read()
    finally:
        conn.close()
    problem = reply.getheader("Content-Type", "").startswith("application/problem+json")
    return reply.status, json.loads(payload)["code"] if problem else None


def test_every_route_of_both_services_reaches_its_service_through_the_public_url(
    servers: Servers,
) -> None:
    listed = routes()
    # The routes that made the two base URLs matter are among them.
    assert ("query", "GET", "/games/g-none/board", False) in listed
    assert ("query", "GET", "/games", False) in listed
    assert ("command", "POST", "/games", False) in listed
    wrong = []
    for service, method, path, shared in listed:
        if shared and service == "query":  # served by both: the public URL asks the command
            continue
        public = answer(servers.public, method, path)
        direct = answer(getattr(servers, service), method, path)
        assert direct not in MISSES, (service, method, path, direct)
        if path in OPERATORS_ONLY:  # an operator's, on each instance's own port only
            assert public == (404, "not_found") and direct != public, (path, direct)
            continue
        if public != direct:
            wrong.append((method, path, f"{service}: {direct}", f"public: {public}"))
    assert not wrong, wrong
    assert len(listed) > 40


def test_a_game_through_the_public_url_alone(servers: Servers) -> None:
    """Create (POST /games: command), list (GET /games, the same path: query), play a turn
    (command), read the board (query), the errors page, the API document and its docs."""
    base = servers.public
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}], "seat_order": [0, 1]}
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    game_id, tokens = created["game_id"], {p["seat"]: p["token"] for p in created["players"]}
    status, turn = call(base, "GET", f"/games/{game_id}/turn")
    assert status == 200, turn
    place = turn["placements"][0]
    body = {"x": place["x"], "y": place["y"], "rotation": place["rotation"], "meeple": None}
    auth = {"Authorization": f"Bearer {tokens[turn['player']]}"}
    status, played = call(base, "POST", f"/games/{game_id}/turns", body, auth)
    assert status == 200, played
    deadline = time.monotonic() + 10
    while True:  # the query service's projection follows the moves
        status, board = call(base, "GET", f"/games/{game_id}/board")
        if (status == 200 and len(board["tiles"]) == 2) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status == 200 and len(board["tiles"]) == 2, board
    status, games = call(base, "GET", "/games?limit=100", None, api_key(base))  # the key's
    assert status == 200 and game_id in {g["game_id"] for g in games["games"]}, games
    for path, media in (("/errors", "text/html"), ("/openapi.json", "application/json"),
                        ("/docs", "text/html")):  # fmt: skip
        conn = http.client.HTTPConnection(*address(base), timeout=10)
        try:
            conn.request("GET", path)
            reply = conn.getresponse()
            reply.read()
            assert reply.status == 200, path
            assert reply.getheader("Content-Type", "").startswith(media), path
        finally:
            conn.close()


def test_a_method_the_path_does_not_take_is_answered_by_the_service_of_the_path(
    servers: Servers,
) -> None:
    """405 with the path's `Allow`, not the other service's 404."""
    for method, path, allow in (("POST", "/games/g-none/board", "GET"),
                                ("DELETE", "/games", "POST"),  # both serve /games: the command
                                ("GET", "/games/g-none/turns", "POST")):  # fmt: skip
        conn = http.client.HTTPConnection(*address(servers.public), timeout=10)
        try:
            conn.request(method, path)
            reply = conn.getresponse()
            reply.read()
            assert reply.status == 405, (method, path, reply.status)
            assert allow in (reply.getheader("Allow") or ""), (method, path)
        finally:
            conn.close()


def address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)
