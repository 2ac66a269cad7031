"""Webhook URLs: one normalisation and one address policy, used when a hook is registered
(command service) and when a delivery is made (worker), so both judge a URL the same way.

- `normalise` parses a URL once into a `Target` with a canonical URL: scheme and host in lower
  case, a host that is a number in any spelling an HTTP client or resolver would accept
  (``2130706433``, ``0x7f000001``, ``127.1``, ``0177.0.0.1``: the WHATWG URL standard's IPv4
  parser, which is what ``inet_aton`` and browsers do) written as a dotted IPv4 address, IPv6
  compressed, a non-ASCII name in IDNA form, the default port dropped. The registration stores
  this URL, so what was checked is what is called.
- `public` is the address policy: only globally routable unicast addresses, with the IPv4
  inside an IPv6 address judged as IPv4 (``::ffff:127.0.0.1``, 6to4, Teredo, NAT64,
  ``::127.0.0.1``).
- `resolve` (at delivery) looks the host up once and checks every address it gets; the worker
  then connects to one of exactly those addresses (no second lookup, so no DNS-rebinding
  window between the check and the connection).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class RefusedUrl(ValueError):
    """A URL that cannot be a webhook: `code` is `bad_webhook_url` or `webhook_url_not_public`."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


@dataclass(frozen=True)
class Target:
    """A parsed, normalised webhook URL."""

    url: str  # the canonical URL (what registration stores)
    scheme: str  # http or https
    host: str  # a name (ASCII, lower case), a dotted IPv4 or an IPv6 (no brackets)
    port: int
    path: str  # path and query, at least "/" (what the request line carries)
    literal: Address | None  # the host, when it is an address


def public(address: Address) -> bool:
    """Whether an address is on the public internet (a webhook may be delivered to it)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d is a.b.c.d
            return public(address.ipv4_mapped)
        if address.sixtofour is not None:  # 2002:aabb:ccdd:: tunnels to a.b.c.d
            return public(address.sixtofour)
        if address.teredo is not None:
            server, client = address.teredo
            return public(server) and public(client)
        if any(address in net for net in _NAT64):  # a NAT64 gateway reaches the IPv4 inside
            return public(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if int(address) >> 32 == 0:  # ::a.b.c.d (deprecated IPv4-compatible), ::1, ::
            return False
    return bool(address.is_global) and not address.is_multicast


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host names in any numeric spelling, or None if it is a name.

    The WHATWG URL standard's rule: a host whose last label is a number is an IPv4 address
    (1-4 parts, each decimal, octal with a leading 0, or hex with 0x; the last part fills the
    remaining bytes) or invalid. Raises `RefusedUrl` for an invalid one (``1.2.3.4.5``).
    """
    labels = host.split(".")
    if not _NUMBER.match(labels[-1]):
        return None
    if len(labels) > 4:
        raise RefusedUrl("bad_webhook_url", f"host {host!r} is not a valid IPv4 address")
    numbers = []
    for label in labels:
        if not _NUMBER.match(label):
            raise RefusedUrl("bad_webhook_url", f"host {host!r} is not a valid IPv4 address")
        if label[:2].lower() == "0x":
            numbers.append(int(label[2:] or "0", 16))
        elif len(label) > 1 and label.startswith("0"):
            if any(c in "89" for c in label):
                raise RefusedUrl("bad_webhook_url", f"host {host!r} is not a valid IPv4 address")
            numbers.append(int(label, 8))
        else:
            numbers.append(int(label))
    *first, last = numbers
    if any(n > 255 for n in first) or last >= 256 ** (5 - len(numbers)):
        raise RefusedUrl("bad_webhook_url", f"host {host!r} is not a valid IPv4 address")
    value = last
    for i, n in enumerate(first):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _ascii(text: str) -> str:
    """Non-ASCII characters of a path or query percent-encoded as UTF-8 (the rest untouched)."""
    return "".join(c if ord(c) < 128 else quote(c, safe="") for c in text)


@functools.lru_cache(maxsize=4096)  # the worker parses each hook's URL once, not per delivery
def normalise(url: str) -> Target:
    """Parse and normalise a webhook URL; raises `RefusedUrl` (`bad_webhook_url`)."""
    if not isinstance(url, str) or not 1 <= len(url) <= MAX_URL:
        raise RefusedUrl("bad_webhook_url", f"url must be a string of 1-{MAX_URL} characters")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise RefusedUrl("bad_webhook_url", "url must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range
        raw_host = parts.hostname  # lower case, brackets removed
    except ValueError:
        raise RefusedUrl("bad_webhook_url", "url is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise RefusedUrl("bad_webhook_url", "url must start with http:// or https://")
    if not raw_host:
        raise RefusedUrl("bad_webhook_url", "url must name a host")
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl("bad_webhook_url", "url must not carry credentials: use the secret")
    if port == 0:
        raise RefusedUrl("bad_webhook_url", "url has port 0")
    literal: Address | None
    if "[" in parts.netloc:  # an IPv6 literal (urlsplit checked the brackets' content)
        if "%" in raw_host:
            raise RefusedUrl("bad_webhook_url", "url must not carry an IPv6 zone id")
        try:
            literal = ipaddress.IPv6Address(raw_host)
        except ValueError:
            raise RefusedUrl("bad_webhook_url", "url has an invalid IPv6 address") from None
        host, shown = literal.compressed, f"[{literal.compressed}]"
    else:
        host = raw_host[:-1] if raw_host.endswith(".") else raw_host  # "a.example." = "a.example"
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                raise RefusedUrl("bad_webhook_url", "url has an invalid host name") from None
        if not _NAME.match(host) or len(host) > 253:
            raise RefusedUrl("bad_webhook_url", "url has an invalid host name")
        literal = parse_ipv4(host)
        if literal is not None:
            host = str(literal)
        shown = host
    port = port or _DEFAULT_PORTS[scheme]
    netloc = shown if port == _DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    path = _ascii(parts.path or "/")
    if parts.query:
        path += "?" + _ascii(parts.query)
    return Target(f"{scheme}://{netloc}{path}", scheme, host, port, path, literal)


def is_local_name(host: str) -> bool:
    """`localhost` and its subdomains (RFC 6761: always loopback, never looked up)."""
    return host == "localhost" or host.endswith(".localhost")


def check(target: Target, allow_private: bool = False) -> Target:
    """Refuse (`webhook_url_not_public`) a URL whose host is a non-public address or localhost.
    A name is checked when it is resolved, before each delivery (`resolve`)."""
    if allow_private:
        return target
    if is_local_name(target.host) or (target.literal is not None and not public(target.literal)):
        raise RefusedUrl(
            "webhook_url_not_public",
            "url must point to a public address, not this network",
            host=target.host,
        )
    return target


def resolve(target: Target, allow_private: bool = False) -> list[Address]:
    """The addresses to connect to, each one checked: looked up once (``socket.getaddrinfo``).

    Raises `RefusedUrl` if any address is not public (unless `allow_private`), and `OSError`
    if the name does not resolve now (the delivery is retried).
    """
    check(target, allow_private)
    if target.literal is not None:
        return [target.literal]
    infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    bad = [a for a in addresses if not public(a)]
    if bad and not allow_private:
        raise RefusedUrl(
            "webhook_url_not_public",
            f"{target.host} resolves to a non-public address ({bad[0]})",
            host=target.host,
        )
    if not addresses:
        raise OSError(f"{target.host} resolves to no address")
    return addresses
