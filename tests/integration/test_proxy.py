"""Idle and slow clients against the command service (issue 13, finding 4): real gunicorn with
the deploy config, real Redis, and real nginx from deploy/nginx/ where the test says so.

A sync worker serves one connection at a time. Straight to gunicorn, a client that connects
and sends nothing used to hold a worker until gunicorn killed it for silence (30 s): three
idle connections froze the command service. Now a worker waits at most CLIENT_TIMEOUT for a
client's bytes, and in front of gunicorn nginx reads every request whole before passing it on,
so idle and stalled clients never reach a worker at all.

Behind nginx, each game's requests reach one instance (a consistent hash of its id), so with
one worker per instance a turn trusts that worker's cached state: one conditional append, no
stream read.

The nginx tests need nginx: installed by `tests/nginx.py` when missing and running as root (as
in CI), skipped with the reason otherwise.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from carcassonne.game import placements
from carcassonne.state import GameState
from deploy.local.nginx_conf import NGINX_TEMPLATES, nginx_argv, nginx_servers, render_nginx
from eventstore.envelope import MOVES, StoredEvent
from eventstore.schemas import to_engine
from services.redis_store import RedisEventStore
from tests import nginx as private_nginx
from tests.integration.openapi_client import PROBLEM_KEYS

from .http_client import ROOT, api_key, call, free_port, gunicorn

CONFIG = "deploy/gunicorn/command.py"
WORKERS = 3
GUNICORN_TIMEOUT = 30  # deploy/gunicorn/command.py: a silent worker is killed after this long
CLIENT_TIMEOUT = 2.0  # the default in services/common/gunicorn_worker.py


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    found, why = private_nginx.find_nginx()
    if found is None:
        # pytest -q lists skips without their reasons; a warning shows in the summary.
        warnings.warn(f"nginx tests skipped: {why}", stacklevel=1)
        pytest.skip(why)
    return found


def address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


def idle_connections(base: str, count: int) -> list[socket.socket]:
    """`count` connections that send nothing."""
    return [socket.create_connection(address(base), timeout=5) for _ in range(count)]


def new_game(base: str) -> tuple[str, dict[int, str]]:
    body = {"players": [{"name": "a"}, {"name": "b"}], "seat_order": [0, 1]}
    status, created = call(base, "POST", "/games", body, api_key(base))
    assert status == 201, created
    return created["game_id"], {p["seat"]: p["token"] for p in created["players"]}


class Player:
    """Plays turns of its games through `base`, one after the other (a new game when one ends)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.game_id, self.tokens = new_game(base)

    def turn(self, timeout: float) -> float:
        """Look at the turn and play a legal move; the seconds both requests took together
        (the client gives up after `timeout` seconds for either)."""
        started = time.monotonic()
        try:
            path = f"/games/{self.game_id}"
            status, turn = request(self.base, "GET", f"{path}/turn", timeout)
            assert status == 200, turn
            if turn["over"]:
                self.game_id, self.tokens = new_game(self.base)
                return self.turn(timeout)
            choice = turn["placements"][0]
            body = {"x": choice["x"], "y": choice["y"], "rotation": choice["rotation"]}
            auth = {"Authorization": f"Bearer {self.tokens[turn['player']]}"}
            status, answer = request(
                self.base, "POST", f"{path}/turns", timeout, {**body, "meeple": None}, auth
            )
        except TimeoutError:
            pytest.fail(f"no answer to a turn within {timeout} s")
        assert status == 200, answer
        return time.monotonic() - started


def request(
    base: str,
    method: str,
    path: str,
    timeout: float,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One request with a deadline of its own (`call` waits 30 s)."""
    conn = http.client.HTTPConnection(*address(base), timeout=timeout)
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=sent)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"null")
    finally:
        conn.close()


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` (reads EOF or a reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def wait_for_workers(master: int, count: int, seconds: float = 60) -> None:
    """Wait until gunicorn's master has `count` workers, then give them a moment to boot: a
    sync worker shows no sign of having loaded the app before it accepts."""
    deadline = time.monotonic() + seconds
    while len(Path(f"/proc/{master}/task/{master}/children").read_text().split()) < count:
        assert time.monotonic() < deadline, f"gunicorn {master} has fewer than {count} workers"
        time.sleep(0.1)
    time.sleep(1.0)


# -- straight to gunicorn -----------------------------------------------------------------
def test_idle_connections_straight_to_gunicorn_do_not_freeze_the_command_service(
    redis_url: str,
) -> None:
    """Finding 4: one idle connection per worker, then a turn. It used to wait until gunicorn
    killed the workers (31 s); now each worker closes its idle connection after CLIENT_TIMEOUT."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    started: list[Any] = []
    with gunicorn("services.command.wsgi:app", CONFIG, env, WORKERS, started) as base:
        wait_for_workers(started[0].pid, WORKERS)
        player = Player(base)
        idle = idle_connections(base, WORKERS)
        try:
            took = player.turn(timeout=GUNICORN_TIMEOUT / 2)
            assert took < CLIENT_TIMEOUT + 4, f"a turn took {took:.1f} s behind idle connections"
            # The idle connections were closed by the workers, unanswered.
            assert all(closed_by_server(s, CLIENT_TIMEOUT + 4) for s in idle)
        finally:
            for sock in idle:
                sock.close()


def test_clients_that_keep_their_connection_open_after_the_answer_do_not_hold_the_worker(
    redis_url: str,
) -> None:
    """After each answer gunicorn closes gracefully: it waited for the client's close (up to
    2 s) before taking the next connection, so a one-worker instance (the deployed shape)
    served nobody meanwhile. With the request read whole, the worker moves on at once
    (services/common/gunicorn_worker.py), and every client still reads its whole answer."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    started: list[Any] = []
    with gunicorn("services.command.wsgi:app", CONFIG, env, 1, started) as base:
        wait_for_workers(started[0].pid, 1)
        kept_open: list[socket.socket] = []
        try:
            begun = time.monotonic()
            for _ in range(3):
                sock = socket.create_connection(address(base), timeout=10)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
                answer = b""
                while chunk := sock.recv(4096):  # the whole answer, then the worker's FIN
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"}\n"), answer
                kept_open.append(sock)  # this client never closes its side
            assert call(base, "GET", "/healthz")[0] == 200
            took = time.monotonic() - begun
            # Waiting for each client's close, the three after the first would have waited
            # 2 s each (CLIENT_TIMEOUT bounds the drain too).
            assert took < CLIENT_TIMEOUT, f"four answers took {took:.1f} s"
        finally:
            for sock in kept_open:
                sock.close()


def test_a_body_refused_unread_may_still_come_after_the_answer(redis_url: str) -> None:
    """`Expect: 100-continue`: gunicorn invites the body, the app refuses the request by its
    length before reading it (413), and the client sends the body only then. The worker
    drains it and waits for the client's close rather than closing at once: closed, the
    late bytes would meet a reset."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    with gunicorn("services.command.wsgi:app", CONFIG, env, 1) as base:
        sock = socket.create_connection(address(base), timeout=10)
        try:
            sock.sendall(
                b"POST /games/0123456789abcdef0123456789abcdef/turns HTTP/1.1\r\nHost: test\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100000\r\n"
                b"Expect: 100-continue\r\n\r\n"
            )
            answer = b""
            while chunk := sock.recv(4096):  # the interim answer, the refusal, the FIN
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 100 Continue"), answer
            assert b"HTTP/1.1 413" in answer and b"body_too_large" in answer, answer
            sock.sendall(b"x" * 16384)  # the body, after the answer: the worker drains it
            # ... and waits for this client's close: the next client waits meanwhile (a
            # worker that closed at once would answer it now, and the late bytes be reset).
            other = socket.create_connection(address(base), timeout=0.5)
            try:
                other.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
                with pytest.raises(TimeoutError):
                    other.recv(4096)
                sock.close()  # the drain ends: the next client is served
                other.settimeout(10)
                assert other.recv(4096).startswith(b"HTTP/1.1 200")
            finally:
                other.close()
        finally:
            sock.close()


# -- through nginx ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def proxied(nginx_binary: str, redis_url: str) -> Iterator[tuple[str, str]]:
    """The command service (3 workers, deploy config) and nginx in front: (direct, public)."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    started: list[Any] = []
    with gunicorn("services.command.wsgi:app", CONFIG, env, WORKERS, started) as direct:
        wait_for_workers(started[0].pid, WORKERS)
        upstream = direct.removeprefix("http://")
        with private_nginx.nginx({"command": upstream}) as public:
            yield direct, public["public"]


def test_a_hundred_idle_connections_through_the_proxy_and_turns_answer_normally(
    proxied: tuple[str, str],
) -> None:
    _direct, public = proxied
    player = Player(public)
    idle = idle_connections(public, 100)
    try:
        took = [player.turn(timeout=10) for _ in range(10)]
        # A turn takes milliseconds. Had the 100 reached the 3 workers, each would have held
        # one for CLIENT_TIMEOUT (2 s) in turn: the turns would have waited ~60 s.
        assert max(took) < 2.0, took
        # nginx keeps them open: none reached a worker (which closes an idle one after 2 s).
        assert not any(closed_by_server(s, 0.01) for s in idle)
    finally:
        for sock in idle:
            sock.close()


def test_a_stalled_or_trickled_body_through_the_proxy_holds_no_worker(
    proxied: tuple[str, str],
) -> None:
    """Twice as many clients as workers send their headers and part of the body, then stop
    or trickle a byte at a time; nginx holds them all, and turns are answered meanwhile."""
    _direct, public = proxied
    player = Player(public)
    game_id, tokens = new_game(public)
    head = (
        f"POST /games/{game_id}/turns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {tokens[0]}\r\nContent-Length: 200\r\n\r\n"
    ).encode()
    stalled = idle_connections(public, WORKERS)
    trickled = idle_connections(public, WORKERS)
    stop = threading.Event()

    def trickle() -> None:
        for _ in range(50):  # at most 50 bytes of the 200, one every 0.1 s
            if stop.wait(0.1):
                return
            for sock in trickled:
                sock.sendall(b" ")

    for sock in stalled + trickled:
        sock.sendall(head + b'{"x": 0,')
    dripping = threading.Thread(target=trickle, daemon=True)
    dripping.start()
    try:
        took: list[float] = []
        until = time.monotonic() + 2.0  # while the trickle goes on
        while len(took) < 10 or time.monotonic() < until:
            took.append(player.turn(timeout=10))
        assert max(took) < 2.0, took  # a turn takes milliseconds; stalled, it took 10 s+
        assert dripping.is_alive(), "the trickle was over before the turns were"
    finally:
        stop.set()
        dripping.join(timeout=5)
        for sock in stalled + trickled:
            sock.close()


def test_behind_the_proxy_a_turn_of_a_loaded_game_is_one_append_and_no_stream_read(
    nginx_binary: str, redis_url: str
) -> None:
    """Two instances of one worker each (the deployed shape): the proxy routes each game to
    one of them, whose cached state of the game is then current, so a turn trusts it
    (TRUST_CACHE) and sends one append (EVALSHA) and no catch-up read (XRANGE). Inside
    the append script, the condition reads the stream's newest entry (one XREVRANGE): the
    command at the expected seq (`after_command`)."""
    from .test_command_http import auth
    from .test_command_http import new_game as new_game_of

    client = redis.Redis.from_url(redis_url)
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}  # no scoring tasks: no worker here
    with (
        gunicorn("services.command.wsgi:app", CONFIG, env, 1) as one,
        gunicorn("services.command.wsgi:app", CONFIG, env, 1) as two,
        private_nginx.nginx({"command": [b.removeprefix("http://") for b in (one, two)]}) as ng,
    ):
        public = ng["public"]
        games = [new_game_of(public) for _ in range(6)]
        states: dict[str, GameState] = {}
        for game_id, _ in games:
            states[game_id] = state = GameState()
            for stored in RedisEventStore(client).read(game_id, MOVES):
                state.apply(to_engine(stored))

        def play(game_id: str, tokens: dict[int, str]) -> None:
            state = states[game_id]
            x, y, rotation = placements(state)[0]
            body = {"x": x, "y": y, "rotation": rotation, "meeple": None}
            status, played = call(
                public, "POST", f"/games/{game_id}/turns", body, auth(tokens[state.current])
            )
            assert status == 200, played
            for event in played["events"]:  # follow the game from the replies alone
                state.apply(to_engine(StoredEvent(**event)))

        # POST /games is spread over the instances: each game's first turn loads it in the
        # instance the proxy routes it to.
        for game_id, tokens in games:
            play(game_id, tokens)
        client.config_resetstat()
        for _ in range(10):
            for game_id, tokens in games:
                play(game_id, tokens)
        stats = client.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 60
    assert stats.get("cmdstat_xrange", {"calls": 0})["calls"] == 0
    assert stats["cmdstat_xrevrange"]["calls"] == 60


def test_errors_of_the_proxy_itself_have_the_services_json_shape(nginx_binary: str) -> None:
    """Nothing behind the proxy: 502 bad_gateway; a body over the proxy's limit: 413."""
    with private_nginx.nginx({"command": f"127.0.0.1:{free_port()}"}) as public:
        status, body = call(public["public"], "GET", "/games/0/turn")
        assert status == 502
        assert body["code"] == "bad_gateway" and set(body) == PROBLEM_KEYS
        with socket.create_connection(address(public["public"]), timeout=5) as sock:
            sock.sendall(b"POST /games HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 2000000\r\n\r\n")  # fmt: skip
            reply = http.client.HTTPResponse(sock)
            reply.begin()
            assert reply.status == 413
            assert json.loads(reply.read())["code"] == "body_too_large"


def test_json_is_gzipped_for_clients_that_accept_it(proxied: tuple[str, str]) -> None:
    _direct, public = proxied
    conn = http.client.HTTPConnection(*address(public), timeout=10)
    try:
        conn.request("GET", "/openapi.json", headers={"Accept-Encoding": "gzip"})
        reply = conn.getresponse()
        data = reply.read()
        assert reply.status == 200
        assert reply.getheader("Content-Encoding") == "gzip"
        assert json.loads(gzip.decompress(data))["openapi"]
        # Keep-alive on the client side: the same connection serves the next request.
        conn.request("GET", "/healthz")
        again = conn.getresponse()
        again.read()
        assert again.status == 200
    finally:
        conn.close()


def test_a_live_stream_through_the_proxy_gets_each_event_at_once(
    nginx_binary: str, redis_url: str
) -> None:
    """Server-Sent Events through nginx's one public URL, as through the query service's own
    port: not buffered, not gzipped (although the client accepts gzip); a turn played while
    the stream is open arrives on it at once."""
    env = {"REDIS_URL": redis_url, "NOTIFY_MS": "0"}
    with (
        gunicorn("services.command.wsgi:app", CONFIG, env, 1) as command,
        gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, 1) as query,
        private_nginx.nginx(
            {"command": command.removeprefix("http://"), "query": query.removeprefix("http://")}
        ) as public,
    ):
        for stream_base in (public["public"], public["query"]):
            player = Player(public["public"])
            conn = http.client.HTTPConnection(*address(stream_base), timeout=10)
            try:
                conn.request("GET", f"/games/{player.game_id}/live", headers={
                    "Accept": "text/event-stream", "Accept-Encoding": "gzip"})  # fmt: skip
                stream = conn.getresponse()
                assert stream.status == 200
                assert stream.getheader("Content-Type", "").startswith("text/event-stream")
                assert stream.getheader("Content-Encoding") is None
                player.turn(timeout=10)
                path = f"/games/{player.game_id}/turn"
                played = request(public["public"], "GET", path, 10)[1]
                started = time.monotonic()
                seen = 0
                while seen < played["seq"]:  # event ids are cursors "<move seq>-<score seq>"
                    line = stream.readline().decode()
                    assert line, "the stream ended"
                    if line.startswith("id: "):
                        seen = int(line[4:].split("-")[0])
                assert time.monotonic() - started < 5
            finally:
                conn.close()


def test_the_viewer_pages_and_files_are_gzipped_through_the_proxy(
    nginx_binary: str, redis_url: str
) -> None:
    """The web pages (text/html) and their scripts and styles reach a phone compressed."""
    env = {"REDIS_URL": redis_url}
    with (
        gunicorn("services.query.wsgi:app", "deploy/gunicorn/query.py", env, 1) as query,
        private_nginx.nginx({"query": query.removeprefix("http://")}) as public,
    ):
        for path, media, text in (
            ("/", "text/html", b"/viewer/list.js"),
            ("/viewer/view.js", "text/javascript", b"EventSource"),
            ("/viewer/viewer.css", "text/css", b"@media"),
        ):
            conn = http.client.HTTPConnection(*address(public["public"]), timeout=10)
            try:
                conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
                reply = conn.getresponse()
                data = reply.read()
                assert reply.status == 200, path
                assert reply.getheader("Content-Type", "").startswith(media), path
                assert reply.getheader("Content-Encoding") == "gzip", path
                assert text in gzip.decompress(data), path
            finally:
                conn.close()


# -- the manifests carry the same templates --------------------------------------------------
def test_the_k8s_copies_of_the_nginx_templates_are_the_templates() -> None:
    """kustomize reads files only below deploy/k8s/: it carries copies, which must not drift
    (`cp deploy/nginx/*.template deploy/nginx/sites/*.template deploy/k8s/nginx/`), each in
    the kustomization's configMapGenerator and mounted by proxy.yaml where nginx.conf looks."""
    templates = {p.name: p.read_bytes() for p in NGINX_TEMPLATES.rglob("*.template")}
    copies = {p.name: p.read_bytes() for p in (ROOT / "deploy/k8s/nginx").glob("*.template")}
    assert copies == templates
    kustomization = (ROOT / "deploy/k8s/kustomization.yaml").read_text()
    proxy = (ROOT / "deploy/k8s/proxy.yaml").read_text()
    for path in NGINX_TEMPLATES.rglob("*.template"):
        where = path.relative_to(NGINX_TEMPLATES)
        assert f"- nginx/{path.name}\n" in kustomization, path.name
        assert f"{{key: {path.name}, path: {where}}}" in proxy, path.name


def test_the_templates_render_to_a_configuration_nginx_accepts(
    nginx_binary: str, tmp_path: Path
) -> None:
    """With values like docker-compose.yml's: two instances of each service, by name (`nginx
    -t`). (The k8s values add `resolve`, which needs nginx 1.27.3: the image is 1.28.)"""
    values = {
        "CC_WORKER_PROCESSES": "1",
        "CC_NOFILE": "4096",
        "CC_WORKER_CONNECTIONS": "1024",
        "CC_ACCESS_LOG": "/dev/stdout timed",
        "CC_LISTEN": f"127.0.0.1:{free_port()}",
        "CC_COMMAND_SERVERS": nginx_servers(["localhost:8000", "127.0.0.1:8002"]),
        "CC_QUERY_LISTEN": f"127.0.0.1:{free_port()}",
        "CC_QUERY_SERVERS": "server localhost:8001; server 127.0.0.1:8003;",
    }
    conf = render_nginx(tmp_path / "conf", values, ["command", "query"])
    argv = nginx_argv(nginx_binary, tmp_path, conf, str(tmp_path / "error.log"))
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
