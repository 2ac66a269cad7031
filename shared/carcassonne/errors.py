"""Errors by cause, each with a stable machine-readable code and the rule it enforces."""

from __future__ import annotations

from typing import Any


class GameError(Exception):
    """Base class: `code` is stable (clients switch on it), `rule` names the R-number."""

    status = 422

    def __init__(self, code: str, message: str, rule: str | None = None, **details: Any) -> None:
        super().__init__(f"{message} ({rule})" if rule else message)
        self.code = code
        self.message = message
        self.rule = rule
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The error as the project's one JSON error shape."""
        return {
            "code": self.code,
            "message": self.message,
            "rule": self.rule,
            "details": self.details,
        }


class MalformedError(GameError):
    """Input that is not a well-formed command, event or record (wrong type, unknown name)."""


class IllegalMoveError(GameError):
    """A well-formed move that the rules forbid (R4 placement, R5 meeple)."""


class OutOfTurnError(GameError):
    """A move made at the wrong moment: not this player's turn, no tile drawn, game over."""

    status = 409


class UnknownRequestError(GameError):
    """A request number this game never had (an undo request, docs/undo.md)."""

    status = 404


class RecordError(GameError):
    """A game record whose turn `index` is malformed or illegal (None: the record itself)."""

    def __init__(self, index: int | None, cause: GameError) -> None:
        where = "record" if index is None else f"turn {index}"
        super().__init__(cause.code, f"{where}: {cause.message}", cause.rule, **cause.details)
        self.index = index
        self.cause = cause
        self.details["index"] = index
