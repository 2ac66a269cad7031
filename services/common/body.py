"""Request bodies, read whole and decoded strictly: the one way every JSON route gets its body.

Every hostile body ends in a documented 4xx with the one error shape, never a 500:

- no `Content-Type`, or another one: 415 `unsupported_media_type` (the message names the type);
- more than the route's limit: 413 `body_too_large`;
- fewer bytes than `Content-Length` (the client went away): 400 `incomplete_body`;
- empty, not UTF-8, not JSON, `NaN`/`Infinity`, a duplicate key, an integer of more than 4300
  digits, a lone surrogate: 400 `invalid_json`;
- nested deeper than `MAX_DEPTH`: 400 `json_too_deep`.

The short-body check matters under gunicorn: it marks its input as terminated
(`wsgi.input_terminated`), so werkzeug reads to the end of the stream, and gunicorn ends a
`Content-Length` body early, without an error, when the client closes. A command must never be
executed from part of a body (a truncated JSON body can still parse: `{"x": 1}` + 40 missing
bytes of padding).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, NoReturn, TypeVar, cast

from flask import Request
from werkzeug.exceptions import ClientDisconnected, HTTPException, RequestEntityTooLarge
from werkzeug.local import LocalProxy

from carcassonne.errors import GameError

# Deeper than any body the services take (a record nests 4 levels, an import 5, a new game 3):
# refusing it early keeps hostile bodies cheap. The C decoder's own limit is the interpreter's
# recursion limit (~1000, less on a deep stack): beyond it json.loads raises RecursionError.
MAX_DEPTH = 16
JSON_TYPE = "application/json"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
T = TypeVar("T")


class BodyError(GameError):
    """A request body that cannot be taken: 400 (`invalid_json`, `json_too_deep`,
    `incomplete_body`)."""

    status = 400


class UnsupportedMediaType(GameError):
    """A body in a type the route does not take: 415 `unsupported_media_type`."""

    status = 415


class TooLarge(GameError):
    """A body beyond the route's limit: 413 `body_too_large`."""

    status = 413


def is_json(mimetype: str) -> bool:
    """`application/json`, or a structured type with the `+json` suffix (RFC 6839)."""
    return mimetype == JSON_TYPE or (
        mimetype.startswith("application/") and mimetype.endswith("+json")
    )


def unsupported(request: Request, expected: str) -> NoReturn:
    """Refuse the request's Content-Type (or its absence), saying what is `expected`."""
    sent = request.mimetype[:100]
    got = f"Content-Type {sent}" if sent else "no Content-Type"
    raise UnsupportedMediaType(
        "unsupported_media_type",
        f"the request body must be sent as {expected} (got {got})",
        None,
        expected=expected,
        got=sent or None,
    )


def unproxied(obj: T) -> T:
    """The object itself rather than flask's proxy of it (`request`, which webargs passes, or
    `current_app`): each attribute read through a proxy costs a context-variable lookup and an
    AttributeError raised and caught before the proxy's `__getattr__` forwards it (~2 µs)."""
    return cast(T, obj._get_current_object()) if isinstance(obj, LocalProxy) else obj


def read_body(request: Request, limit: int | None = None) -> bytes:
    """The whole body: `TooLarge` beyond `limit` (the app's MAX_CONTENT_LENGTH by default;
    refused before reading when Content-Length says so), `BodyError("incomplete_body")` when
    fewer bytes came than Content-Length announced or the chunked stream broke off."""
    request = unproxied(request)
    # Each read of `content_length` parses the headers again (and raises and catches a
    # KeyError for an absent Transfer-Encoding): read once.
    expected = request.content_length
    if limit is not None:
        if expected is not None and expected > limit:
            _too_large(limit)
        request.max_content_length = limit  # a body without Content-Length is cut off there
    # Read once and pinned on the request: werkzeug reads it again to bound the stream, and
    # flask's property looks it up in the app's config through the `current_app` proxy.
    most = request.max_content_length = request.max_content_length
    beyond = b""
    try:
        raw = request.get_data(cache=True)
        if expected is None and most is not None and len(raw) >= most:
            # A stream without Content-Length (chunked) is cut off at the maximum without an
            # error: one more byte from the server's input tells a body of exactly the
            # maximum from a longer one.
            beyond = request.environ["wsgi.input"].read(1)
    except RequestEntityTooLarge:
        _too_large(most)
    except ClientDisconnected:  # werkzeug's own length check (servers that do not terminate)
        _incomplete(expected, None)
    except HTTPException:
        raise
    except Exception:  # the server's reader: a broken chunked stream, a reset
        _incomplete(None, None)
    if beyond:
        _too_large(most)
    if expected is not None and len(raw) != expected:
        _incomplete(expected, len(raw))
    return raw


def _too_large(limit: int | None) -> NoReturn:
    raise TooLarge(
        "body_too_large", f"the request body is at most {limit} bytes", None, limit=limit
    )


def _incomplete(expected: int | None, received: int | None) -> NoReturn:
    raise BodyError(
        "incomplete_body",
        "the request body ended before its Content-Length: nothing was done",
        None,
        content_length=expected,
        received=received,
    )


def read_json(request: Request, max_depth: int = MAX_DEPTH) -> Any:
    """The request's JSON body, strictly (see the module's table)."""
    request = unproxied(request)
    if not is_json(request.mimetype):
        unsupported(request, JSON_TYPE)
    return parse_json(read_body(request), max_depth)


def parse_json(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Decode a JSON body (RFC 8259 as I-JSON, RFC 7493, has it): `BodyError` for an empty body,
    bad UTF-8, bad JSON, `NaN`/`Infinity`, duplicate keys, integers of more than 4300 digits,
    lone surrogates, and nesting beyond `max_depth`."""
    if not raw.strip():
        raise BodyError("invalid_json", "the request body is empty: a JSON value was expected")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("invalid_json", "the request body is not UTF-8 text") from None
    try:
        data = _DECODER.decode(text)
    except RecursionError:  # the C decoder gives up at the interpreter's recursion limit
        _too_deep(max_depth)
    except BodyError:
        raise
    except ValueError as exc:  # bad JSON, or an integer of more than 4300 digits
        reason = "an integer has too many digits" if "digits" in str(exc) else "not valid JSON"
        raise BodyError("invalid_json", f"the request body is {reason}") from None
    if raw.count(b"[") + raw.count(b"{") > max_depth:  # else it cannot be too deep
        check_depth(data, max_depth)
    if _SURROGATE_ESCAPE.search(raw):  # rare: only then look at every string
        _check_surrogates(data)
    return data


def _number(text: str) -> float | int:
    """A JSON number written with a fraction or an exponent. One with an integral value
    (``2.0``, ``2e0``) is the integer it equals: JSON Schema, and so the published document,
    counts it as an integer, and a client's JSON library may write it so."""
    value = float(text)
    if value.is_integer() and abs(value) <= 2**53:  # exact in a double, so exactly that int
        return int(value)
    return value


def _no_constant(name: str) -> NoReturn:
    raise BodyError("invalid_json", f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A duplicate key means one thing to one parser and another to the next (first or last
    # wins): refused, so what we validate and fingerprint is what the client meant.
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise BodyError("invalid_json", f"the key {key[:64]!r} appears twice in an object")
            seen.add(key)
    return out


def _too_deep(limit: int) -> NoReturn:
    raise BodyError("json_too_deep", f"JSON nested deeper than {limit} levels", None, limit=limit)


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse containers nested deeper than `limit` (iteratively: no recursion to exhaust)."""
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            _too_deep(limit)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def _check_surrogates(value: Any) -> None:
    """Refuse lone surrogates (`"\\ud800"`): text that cannot be encoded as UTF-8 again."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BodyError(
                    "invalid_json", "the request body holds a lone UTF-16 surrogate"
                ) from None


def canonical(value: Any) -> bytes:
    """One byte string per JSON value: keys sorted, no spaces, non-ASCII escaped."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def fingerprint(method: str, path: str, body: Any) -> str:
    """The fingerprint an Idempotency-Key is bound to (IETF draft "The Idempotency-Key HTTP
    Header Field", section 2.4): SHA-256 of the method, the path and the canonical body (the
    caller passes the body as the command means it: validated, defaults filled in, plus
    anything else the request's identity depends on, such as the token's seat)."""
    digest = hashlib.sha256(method.upper().encode() + b" " + path.encode() + b"\n")
    digest.update(canonical(body))
    return digest.hexdigest()


# The strict decoder, made once: `json.loads` with hooks builds a decoder (and its scanner)
# per call, ~1.8 µs of a turn body's ~4 µs. Its state between calls is the scanner's key
# memo, cleared after each document: threads may share it (at worst a key is not interned).
_DECODER = json.JSONDecoder(
    parse_float=_number, parse_constant=_no_constant, object_pairs_hook=_unique_keys
)
