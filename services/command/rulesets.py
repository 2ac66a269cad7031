"""Named rulesets for finding opponents: a lobby and a matchmaking ticket name one, and two
players meet only on the same name (their games must be played by the same rules).

`POST /games` takes any ruleset (schema `RulesetIn`); these presets are `RulesetIn` bodies,
loaded through the same schema, so a preset is always a ruleset `POST /games` would accept.
A name not here is refused with 422 `unknown_ruleset` (`details.known` lists the names).
"""

from __future__ import annotations

from typing import Any

from carcassonne.errors import MalformedError
from carcassonne.ruleset import Ruleset

from .schemas import RulesetIn

# name -> the RulesetIn body it stands for (documented in docs/lobby.md).
PRESETS: dict[str, dict[str, Any]] = {
    "classic": {},  # the base game, 3rd edition farms (R7.3)
    "classic-async": {"turn_seconds": 86_400},  # a day per move (docs/lifecycle.md)
    # Fischer time banks (docs/clocks.md): 5 minutes + 5 s a move; 3 days + a day a move
    "blitz": {"initial_seconds": 300, "increment_seconds": 5},
    "correspondence": {"initial_seconds": 3 * 86_400, "increment_seconds": 86_400},
    "demo": {"tileset": "demo"},  # the 48-tile print-and-play set (R1.2)
    "river": {"river": True},  # R9.1
    "abbot": {"tile_edition": "2nd", "abbot": True},  # R9.2
    # a day per move, and a greedy bot plays on for a seat that leaves (docs/takeover.md)
    "classic-async-bots": {"turn_seconds": 86_400, "on_leave": "bot:greedy"},
}
NAMES = tuple(PRESETS)


def to_ruleset(rules: dict[str, Any]) -> Ruleset:
    """The engine's ruleset of a loaded `RulesetIn` body (its `area` as the engine takes it)."""
    rules = dict(rules)
    area = rules.pop("area")
    if area is not None:
        rules["area"] = (area["width"], area["height"])
        rules["border_closes"] = area["border_closes"]
    return Ruleset(**rules)


def checked_name(name: Any) -> str:
    """`name` if it names a preset, else 422 `unknown_ruleset`."""
    if not isinstance(name, str) or name not in PRESETS:
        shown = name[:40] if isinstance(name, str) else type(name).__name__
        raise MalformedError(
            "unknown_ruleset",
            f"unknown ruleset {shown!r}: one of {', '.join(NAMES)}",
            None,
            ruleset=shown,
            known=list(NAMES),
        )
    return name


def preset(name: str) -> Ruleset:
    """The engine's ruleset of a preset (422 `unknown_ruleset` for another name)."""
    return to_ruleset(RulesetIn().load(PRESETS[checked_name(name)]))
