"""The command service's own errors (beyond the engine's), each with its code and status."""

from __future__ import annotations

from carcassonne.errors import GameError


class NotFound(GameError):
    """No such game."""

    status = 404


class AuthError(GameError):
    """Missing or unknown player token."""

    status = 401


class Forbidden(GameError):
    """A valid token of another seat."""

    status = 403


class IdempotencyKeyReused(GameError):
    """An Idempotency-Key sent again with a different request: 422, nothing done."""

    def __init__(self) -> None:
        super().__init__(
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different request; "
            "send a new key with a new request",
        )


def check_reuse(stored: str, given: str) -> None:
    """`IdempotencyKeyReused` when a key's stored request fingerprint is not this request's
    (an empty one, from before fingerprints were stored, is taken as a match)."""
    if stored and given and stored != given:
        raise IdempotencyKeyReused
