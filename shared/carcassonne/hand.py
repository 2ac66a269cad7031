"""R10.3 three-tile hand: the hidden information, kept in a public log by commitments.

A hand tile is drawn by `HandDrawn(player, commitment, tile, nonce)`. The commitment is
SHA-256 of ``"<tile>:<nonce>"``: it binds the draw to one tile without telling which. The
log everybody reads holds the *sealed* form (`seal`: player and commitment only); the event
that plays, discards or returns the tile names it with its nonce, and `HandsRevealed` opens
the tiles still in hands when the game ends. So the log alone is the whole game once it is
over (`verify` checks every commitment), and before that it shows nobody's hand.

Whoever knows a draw's nonce (the command service derives it from the game's secret seed,
services/common/draws.py) opens the sealed event again (`unseal`) to know the hand.
Pure functions: hashlib only, no clock, no randomness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

from .errors import MalformedError
from .events import Event, HandDrawn, HandsRevealed, TileDiscarded, TilePlaced, TileReturned


def commit(tile: str, nonce: str) -> str:
    """The commitment to a hand tile: SHA-256 of ``"<tile>:<nonce>"`` in hex."""
    return hashlib.sha256(f"{tile}:{nonce}".encode()).hexdigest()


def seal(event: Event) -> Event:
    """The public form of `event`: a `HandDrawn` without its tile and nonce; others as they are."""
    if isinstance(event, HandDrawn) and event.tile is not None:
        return HandDrawn(event.player, event.commitment)
    return event


def unseal(event: HandDrawn, nonce: str, tiles: Iterable[str]) -> HandDrawn:
    """A sealed `HandDrawn` with its tile found again from its nonce: the one tile name among
    `tiles` whose commitment it is (a tile set has a few dozen names)."""
    for tile in tiles:
        if commit(tile, nonce) == event.commitment:
            return HandDrawn(event.player, event.commitment, tile, nonce)
    raise MalformedError("bad_commitment", "no tile matches this draw's commitment", "R10.3")


def unseal_all(
    events: Iterable[Event], nonce_for: Callable[[int], str], tiles: Iterable[str]
) -> list[Event]:
    """`events` with every sealed `HandDrawn` opened; `nonce_for(n)` is the nonce of the
    n-th draw of the game (counting every draw, `GameState.drawn_count`, from 0)."""
    names = sorted(tiles)
    out: list[Event] = []
    draws = 0
    for event in events:
        if isinstance(event, HandDrawn):
            if event.tile is None:
                event = unseal(event, nonce_for(draws), names)
            draws += 1
        out.append(event)
    return out


def open_all(events: list[Event]) -> list[Event]:
    """A finished hand game's log with every sealed `HandDrawn` opened by the event that
    opened its commitment later (a play, discard, return or the final reveal): folded, every
    position then knows every hand, as a replay after the end shows it."""
    openings: dict[str, list[tuple[str, str]]] = {}
    for event in events:
        pairs: list[tuple[str, str]] = []
        match event:
            case TilePlaced() | TileDiscarded() | TileReturned() if event.nonce is not None:
                pairs = [(event.tile, event.nonce)]
            case HandsRevealed():
                pairs = [pair for hand in event.hands for pair in hand]
        for tile, nonce in pairs:
            openings.setdefault(commit(tile, nonce), []).append((tile, nonce))
    out: list[Event] = []
    for event in events:
        if isinstance(event, HandDrawn) and event.tile is None and openings.get(event.commitment):
            tile, nonce = openings[event.commitment][0]
            event = HandDrawn(event.player, event.commitment, tile, nonce)
        out.append(event)
    return out


def verify(events: Iterable[Event]) -> list[str]:
    """Every commitment of a hand game's log checked: a list of faults, empty when each
    `HandDrawn` is opened exactly once (by a play, discard, return or the final reveal) with
    a tile and nonce that match it. A finished hand game's log must verify (self-verifying)."""
    open_: dict[str, int] = {}  # commitment -> how many drawn and not yet opened
    faults: list[str] = []

    def opened(tile: str, nonce: str | None, where: str) -> None:
        if nonce is None:
            faults.append(f"{where}: {tile} has no nonce")
            return
        key = commit(tile, nonce)
        if not open_.get(key):
            faults.append(f"{where}: {tile} opens no commitment drawn before")
            return
        open_[key] -= 1

    for index, event in enumerate(events):
        match event:
            case HandDrawn():
                known = event.tile is not None and event.nonce is not None
                if known and commit(event.tile or "", event.nonce or "") != event.commitment:
                    faults.append(f"event {index}: the draw's tile does not match it")
                open_[event.commitment] = open_.get(event.commitment, 0) + 1
            case TilePlaced() | TileDiscarded() | TileReturned():
                if event.nonce is not None or open_:
                    opened(event.tile, event.nonce, f"event {index}")
            case HandsRevealed():
                for hand in event.hands:
                    for tile, nonce in hand:
                        opened(tile, nonce, f"event {index}")
    left = sum(open_.values())
    if left:
        faults.append(f"{left} drawn tile(s) never revealed")
    return faults
