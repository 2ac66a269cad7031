"""Webhook pieces that need no Redis: URL normalisation and the address policy, secret checks,
signatures, bodies, the backoff, the one-lookup delivery connection (finding 9 of issue 13)
and the key layout the command service and the worker must agree on."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eventstore.envelope import SCORES, StoredEvent
from services.command import hooks as command_hooks
from services.command.hooks import BadWebhook, check_secret, check_url
from services.common.signing import SIGNATURE_HEADER, hook_signature, verify
from services.common.webhook_url import normalise, public
from services.redis_store.keys import subscription_keys
from services.scoring import delivery, process, webhooks
from services.scoring.posting import HttpPoster

PUBLIC = "93.184.216.34"  # never connected to: the tests below refuse any non-loopback connect


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hooks/carcassonne",
        "http://scores.example.org:8080/in?token=abc",
        "https://[2606:4700::1111]/x",
    ],
)
def test_public_http_urls_are_accepted(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("HTTPS://Example.COM:443/a?b=c#frag", "https://example.com/a?b=c"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com.:8080/x", "http://example.com:8080/x"),
        ("http://1572395042/in", f"http://{PUBLIC}/in"),  # a public address in decimal
        ("http://0x5db8d822/", f"http://{PUBLIC}/"),
        ("https://[2606:4700:0:0::1111]/", "https://[2606:4700::1111]/"),
        ("https://bücher.example/ä", "https://xn--bcher-kva.example/%C3%A4"),
    ],
)
def test_urls_are_normalised_once_at_registration(url: str, normal: str) -> None:
    assert check_url(url) == normal
    assert check_url(normal) == normal  # idempotent: the worker parses what was stored


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("ftp://example.com/x", "bad_webhook_url"),
        ("javascript:alert(1)", "bad_webhook_url"),
        ("https://", "bad_webhook_url"),
        ("https://user:pw@example.com/", "bad_webhook_url"),
        ("https://example.com:99999/", "bad_webhook_url"),
        ("https://exa mple.com/", "bad_webhook_url"),
        ("https://example.com/" + "a" * 2048, "bad_webhook_url"),
        ("http://1.2.3.4.5/", "bad_webhook_url"),  # numeric last label: must be an IPv4
        ("http://08.1.2.3/", "bad_webhook_url"),  # 08 is no octal number
        ("http://exa%6dple.com/", "bad_webhook_url"),
        ("http://[fe80::1%25eth0]/", "bad_webhook_url"),
        (42, "bad_webhook_url"),
        (["http://example.com/"], "bad_webhook_url"),
        ("http://127.0.0.1:8080/", "webhook_url_not_public"),
        ("http://localhost/", "webhook_url_not_public"),
        ("http://api.localhost./", "webhook_url_not_public"),
        ("http://10.1.2.3/", "webhook_url_not_public"),
        ("http://169.254.169.254/latest/meta-data", "webhook_url_not_public"),
        ("http://[::1]/", "webhook_url_not_public"),
        ("http://0.0.0.0/", "webhook_url_not_public"),
        ("http://224.0.0.1/", "webhook_url_not_public"),
        ("http://[ff02::1]/", "webhook_url_not_public"),
    ],
)
def test_bad_urls_are_refused(url: object, code: str) -> None:
    with pytest.raises(BadWebhook) as info:
        check_url(url)
    assert info.value.code == code and info.value.status == 422


# Finding 9: loopback in spellings that resolvers (inet_aton) and browsers accept.
ODD_LOOPBACK = [
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0X7F000001/",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://0x7f.0.0.1/",
    "http://017700000001/",
    "http://127.0.0.1./",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[64:ff9b::127.0.0.1]/",
    "http://[2002:7f00:1::]/",
    "http://0xa9fea9fe/latest/meta-data",  # 169.254.169.254
    "http://3232235777/",  # 192.168.1.1
]


@pytest.mark.parametrize("url", ODD_LOOPBACK)
def test_odd_spellings_of_private_addresses_are_refused(url: str) -> None:
    with pytest.raises(BadWebhook) as info:
        check_url(url)
    assert (info.value.code, info.value.status) == ("webhook_url_not_public", 422)
    resolved = ipaddress.ip_address(info.value.details["host"])
    assert not public(resolved)


def test_odd_spellings_resolve_like_the_system_resolver_does() -> None:
    """The normalised address is the one getaddrinfo (inet_aton) would connect to."""
    for url in ODD_LOOPBACK[:7]:
        host = url.split("//", 1)[1].rstrip("/")
        system = socket.getaddrinfo(host, 80, type=socket.SOCK_STREAM)[0][4][0]
        assert normalise(url).host == system == "127.0.0.1"


def test_private_addresses_are_allowed_when_configured_and_still_normalised() -> None:
    assert check_url("http://127.0.0.1:8080/in", allow_private=True) == "http://127.0.0.1:8080/in"
    assert check_url("http://127.1:8080/in", allow_private=True) == "http://127.0.0.1:8080/in"


def test_secrets_must_be_long_enough_and_bounded() -> None:
    assert check_secret("s" * 16) == "s" * 16
    for bad in ("short", "s" * 257, None, 1234567890123456):
        with pytest.raises(BadWebhook):
            check_secret(bad)


def test_both_services_use_one_key_layout() -> None:
    """The command service writes hooks where the worker reads them (one shared key module):
    a hook is a subscription filtered to its game, kept in the game's slot."""
    assert command_hooks.game_subscriptions_key("g1") == "{g:g1}:subs"
    assert command_hooks.subscription_keys("g1", "h_1") == subscription_keys("g1", "h_1")
    assert all(k.startswith("{g:g1}:") for k in subscription_keys("g1", "h_1"))


def test_signature_is_hmac_sha256_of_the_raw_body() -> None:
    payload = {"points": 4, "kind": "road"}
    event = StoredEvent("g", SCORES, 3, "FeatureScored", 1, 1700, "c", payload)
    body = webhooks.delivery_body("g", "h_1", event)
    assert body == webhooks.delivery_body("g", "h_1", event)  # the same bytes on every attempt
    data = json.loads(body)
    assert data["delivery"] == "h_1.3" == webhooks.delivery_id("h_1", 3)
    assert (data["seq"], data["event"], data["payload"]["points"]) == (3, "FeatureScored", 4)
    expected = hmac.new(b"k" * 16, body, hashlib.sha256).hexdigest()
    assert hook_signature("k" * 16, body) == "sha256=" + expected


def test_a_hook_is_signed_with_a_timestamp_and_a_legacy_hook_keeps_its_old_header_too() -> None:
    """Issue 32, finding 6: a per-game webhook's body was signed without a timestamp, so a
    captured delivery could be replayed for ever. A hook registered now is signed as
    subscriptions are (`Carcassonne-Signature: t=…,v1=…`, checked by `verify`, which refuses
    an old timestamp); one registered before (no `signature` in its configuration) gets the
    timed header and its old one, so its receiver keeps working while it moves over."""
    event = StoredEvent("g", SCORES, 1, "FeatureScored", 1, 1700, "c", {"points": 4})
    config = {"id": "h_1", "url": "https://example.com/in", "signature": "v1",
              "secrets": [{"secret": "k" * 16, "until_ms": None}]}  # fmt: skip
    entry = {"seq": 1, "delivery": "h_1.1"}
    sent = webhooks.request(None, "g", config, entry, 1, {("score", 1): event})  # type: ignore[arg-type]
    header = sent.headers[SIGNATURE_HEADER]
    assert verify(header, sent.body, "k" * 16, time.time())
    assert not verify(header, sent.body, "k" * 16, time.time() + 3_600)  # a replay, later
    assert "X-Carcassonne-Signature" not in sent.headers
    legacy = {k: v for k, v in config.items() if k != "signature"}
    sent = webhooks.request(None, "g", legacy, entry, 1, {("score", 1): event})  # type: ignore[arg-type]
    assert verify(sent.headers[SIGNATURE_HEADER], sent.body, "k" * 16, time.time())
    assert sent.headers["X-Carcassonne-Signature"] == hook_signature("k" * 16, sent.body)


def test_backoff_is_celerys_exponential_backoff_with_full_jitter() -> None:
    for tries in range(1, 12):
        bound = min(45_000, 1_000 * 2 ** (tries - 1))
        draws = [delivery.backoff_ms(tries, 1_000, 45_000) for _ in range(300)]
        assert all(0 <= d <= bound for d in draws)
        assert max(draws) > bound * 0.8 and min(draws) < bound * 0.2  # spread over the range
    assert delivery.backoff_ms(10_000, 1_000, 45_000) <= 45_000


def test_the_pool_bounds_follow_the_task_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    class Worker:
        concurrency = 8

    monkeypatch.setattr(process, "_worker", Worker())
    assert process.task_threads() == 8 and process.pool_bound() == 10
    assert process.wire_bound() == 8
    monkeypatch.setattr(process, "_prefork_child", True)  # one task at a time
    assert (process.pool_bound(), process.wire_bound()) == (3, 1)
    monkeypatch.setitem(process.settings, "WEBHOOK_REDIS_CONNECTIONS", 5)
    assert process.pool_bound() == 5


# ------------------------------------------------------------- one lookup, checked address


class Sink:
    """A loopback HTTP server that records every request it gets."""

    def __init__(self) -> None:
        self.paths: list[tuple[str, str]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                sink.paths.append((self.path, self.headers["Host"]))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink()
    yield server
    server.close()


class Network:
    """socket.getaddrinfo answers from a script (a name that rebinds); socket.create_connection
    records where it was asked to connect and reaches loopback only (the tests never leave
    this machine: any other address is refused)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answers: list[list[str]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []
        self.connects: list[tuple[str, int]] = []

        def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
            self.lookups.append(host)
            addresses = self.answers[min(len(self.lookups), len(self.answers)) - 1]
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, int(port or 0)))
                for a in addresses
            ]  # fmt: skip

        def create_connection(address: tuple[str, int], timeout: Any = None, *_: Any) -> Any:
            host, port = str(address[0]), int(address[1])
            try:
                ips = [ipaddress.ip_address(host)]
            except ValueError:  # a name: looked up as socket.create_connection would
                ips = [ipaddress.ip_address(info[4][0]) for info in getaddrinfo(host, port)]
            for ip in ips:
                self.connects.append((str(ip), port))
                if ip.is_loopback:  # a plain connect to the literal: no lookup
                    sock = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET)
                    sock.settimeout(timeout)
                    sock.connect((str(ip), port))
                    return sock
            raise ConnectionRefusedError(f"test: no route to {host}")

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", create_connection)


HEADERS = {"Content-Type": "application/json"}


def test_delivery_connects_to_the_address_it_checked_not_to_a_second_lookup(
    monkeypatch: pytest.MonkeyPatch, sink: Sink
) -> None:
    """DNS rebinding: the name is public when checked, loopback a moment later. The delivery
    looks it up once and connects to the public address it checked; the loopback receiver
    (what a second lookup would reach) gets nothing. Fails on the code before issue 13: it
    checked with one lookup and let urllib connect after a second one, to 127.0.0.1."""
    net = Network(monkeypatch, [[PUBLIC], ["127.0.0.1"]])
    answer = HttpPoster(timeout=2.0)(f"http://rebind.example:{sink.port}/in", b"{}", HEADERS)
    assert answer.status is None and answer.error and not answer.blocked
    assert net.lookups == ["rebind.example"]
    assert net.connects == [(PUBLIC, sink.port)]
    assert sink.paths == []


def test_every_address_a_name_resolves_to_is_checked(
    monkeypatch: pytest.MonkeyPatch, sink: Sink
) -> None:
    net = Network(monkeypatch, [[PUBLIC, "127.0.0.1"]])
    answer = HttpPoster(timeout=2.0)(f"http://mixed.example:{sink.port}/in", b"{}", HEADERS)
    assert answer.blocked and answer.status is None and "127.0.0.1" in (answer.error or "")
    assert net.connects == [] and sink.paths == []
    net = Network(monkeypatch, [["::ffff:127.0.0.1"]])
    assert HttpPoster(timeout=2.0)(f"http://v6.example:{sink.port}/", b"{}", HEADERS).blocked
    assert net.connects == []


def test_a_stored_odd_spelling_is_refused_at_delivery_too(sink: Sink) -> None:
    """Hooks registered before URLs were normalised: the worker parses them the same way."""
    answer = HttpPoster(timeout=2.0)(f"http://2130706433:{sink.port}/", b"{}", HEADERS)
    assert answer.blocked and sink.paths == []


def test_the_request_carries_the_host_name_and_is_sent_to_the_checked_address(
    monkeypatch: pytest.MonkeyPatch, sink: Sink
) -> None:
    net = Network(monkeypatch, [["127.0.0.1"], [PUBLIC]])
    poster = HttpPoster(timeout=2.0, allow_private=True)
    answer = poster(f"http://hooks.example:{sink.port}/in?x=1", b"{}", HEADERS)
    assert answer.status == 204
    assert net.lookups == ["hooks.example"] and net.connects == [("127.0.0.1", sink.port)]
    assert sink.paths == [("/in?x=1", f"hooks.example:{sink.port}")]


def test_https_checks_the_certificate_against_the_host_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """TLS to the checked address, with SNI and the certificate check on the URL's name."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=hooks.example",
         "-addext", "subjectAltName=DNS:hooks.example"],
        check=True, capture_output=True,
    )  # fmt: skip
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    names: list[str | None] = []

    def sni(sock: Any, name: str | None, ctx: Any) -> None:
        names.append(name)

    server_tls.sni_callback = sni

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = server_tls.wrap_socket(server.socket, server_side=True)
    port = int(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        Network(monkeypatch, [["127.0.0.1"]])
        trusted = ssl.create_default_context(cafile=str(cert))
        poster = HttpPoster(timeout=3.0, allow_private=True, tls=trusted)
        assert poster(f"https://hooks.example:{port}/in", b"{}", HEADERS).status == 200
        assert names == ["hooks.example"]
        # The same server under another name: the certificate does not match, no POST.
        Network(monkeypatch, [["127.0.0.1"]])
        wrong = poster(f"https://other.example:{port}/in", b"{}", HEADERS)
        assert wrong.status is None and "certificate" in (wrong.error or "").lower()
    finally:
        server.shutdown()
        server.server_close()


def test_a_receiver_that_drips_its_status_line_is_cut_at_the_attempts_deadline() -> None:
    """Review finding: the socket timeout bounded each read, so a receiver sending one byte
    of its status line every 0.5 s held the thread for a minute (past the hook's lease and
    the broker's visibility timeout). The whole attempt now ends at `timeout`."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    stop = threading.Event()

    def drip() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK" + b"X" * 500:
                if stop.wait(0.5):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    poster = HttpPoster(timeout=1.0, allow_private=True)
    started = time.monotonic()
    try:
        answer = poster(f"http://127.0.0.1:{port}/hook", b"{}", {"Content-Type": "text/plain"})
    finally:
        stop.set()
        server.close()
    elapsed = time.monotonic() - started
    assert answer.status is None and "deadline" in (answer.error or "")
    assert elapsed < 3.0, elapsed  # the old code took one read timeout per byte: ~60 s


# Forged headers a receiver must refuse, not raise on: Unicode digits and a stamp too long for
# int(), a non-ASCII mac that compare_digest will not take.
FORGED = ("t=²,v1=00", "t=" + "1" * 5000 + ",v1=00", "t=١٧٠٠٠٠٠٠٠٠,v1=00", "t={now},v1=é")


def _docs_receiver(doc: str, name: str) -> Any:
    """The receivers' check in `doc`, as written there (our own docs)."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / doc).read_text()
    code = re.search(r"```python\n(import hashlib, hmac, re, time\n.*?)```", text, re.S)
    assert code is not None, doc
    scope: dict[str, Any] = {}
    exec(code.group(1), scope)
    return scope[name]


def test_the_receivers_check_in_the_docs_accepts_our_signature_and_refuses_a_replay() -> None:
    """docs/integration.md's `verified` and docs/subscriptions.md's `verify` (what receivers
    copy) run as written: our signature passes, another secret, a replay and a forged header
    are refused — a forged one without an exception (a receiver's 500)."""
    from services.common.signing import sign

    verified = _docs_receiver("integration.md", "verified")
    subscriptions = _docs_receiver("subscriptions.md", "verify")
    body, now = b'{"seq":1}', int(time.time())
    header = sign(["new" * 6, "old" * 6], body, now)  # a rotation's overlap: two secrets
    assert verified("new" * 6, body, header) and verified("old" * 6, body, header)
    assert subscriptions(header, body, "new" * 6) and subscriptions(header, body, "old" * 6)
    assert not verified("other" * 4, body, header)
    assert not subscriptions(header, body, "other" * 4)
    replayed = sign(["new" * 6], body, now - 3_600)
    assert not verified("new" * 6, body, replayed)
    assert not subscriptions(replayed, body, "new" * 6)
    for forged in (f.format(now=now) for f in FORGED):
        assert not verified("new" * 6, body, forged), forged
        assert not subscriptions(forged, body, "new" * 6), forged


def test_the_services_verify_refuses_a_forged_header_without_raising() -> None:
    """`services.common.signing.verify`, which docs/subscriptions.md says receivers may copy."""
    now = 1_800_000_000
    for forged in (f.format(now=now) for f in FORGED):
        assert not verify(forged, b"{}", "secret", now=now), forged
