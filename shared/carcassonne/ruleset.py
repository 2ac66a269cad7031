"""Rulesets: the options chosen per game and recorded with it (R1, R7.4, R10)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import MalformedError
from .tiles import TileSet
from .tilesets import TILE_EDITIONS, TILESETS, tile_set

FARM_EDITIONS = ("3rd", "2nd", "1st")  # R7.3 (default), R7.4
UNPLACEABLE = ("discard", "return")  # R4.4, R10.4
UNDO_MODES = ("off", "consent", "free")  # R11-style table option: undoing one's last placement
HAND_SIZES = (1, 3)  # R10.3: 1 is the base game (the drawn tile), 3 the three-tile hand
MIN_PLAYERS, MAX_PLAYERS = 2, 6  # R1.3
MAX_TURN_SECONDS = 30 * 86_400  # a month: asynchronous play
# `on_leave` (docs/takeover.md): what becomes of a seat that is out (resigned or timed out):
# "skip" (skipped from then on) or "bot:<level>" (a bot of that level plays its turns). The
# levels are `carcassonne.bots.LEVELS` (not imported: the bots import the engine's state).
ON_LEAVE_SKIP, ON_LEAVE_BOT = "skip", "bot:"
TAKEOVER_LEVELS = ("random", "greedy", "mcts")
# Fischer time banks (docs/clocks.md): a seat's initial bank and what each move adds, at most
# 30 days each (blitz 300 + 5 and correspondence 3 days + 1 day both fit).
MAX_BANK_SECONDS = 30 * 86_400


@dataclass(frozen=True)
class Ruleset:
    """The rules a game is played by. Defaults are the base game with farmers, 3rd edition."""

    tileset: str = "base"
    farmers: bool = True
    farm_scoring: str = "3rd"
    incomplete_score: bool = True  # False is house rule R10.1
    meeples: int | None = None  # per player; None: the tile set's number (7, or 5 in the demo)
    unplaceable: str = "discard"  # "return" is house rule R10.4
    area: tuple[int, int] | None = None  # (width, height) around the start tile, R10.5
    border_closes: bool = False  # R10.5 variant: the table border closes roads and cities
    hole_extra_turn: bool = False  # R10.6: filling a hole grants another turn
    river: bool = False  # R9.1 The River: placed first, from the spring to the lake
    # Lifecycle (docs/lifecycle.md): seconds a player has for a turn (None: no limit), and
    # how many timed-out turns put a seat out of the game.
    turn_seconds: int | None = None
    max_timeouts: int = 3
    hints: bool = False  # players may ask for a bot's suggested move (docs/bots.md)
    undo: str = "off"  # "consent": the others must accept; "free": granted at once (undo.md)
    abbot: bool = False  # R9.2 The Abbot: one abbot per player, monasteries and gardens
    tile_edition: str = "1st"  # "2nd": the tiles with gardens (R9.2, TILES.md §4)
    hand: int = 1  # R10.3: tiles each player holds (3: the three-tile hand, hidden)
    on_leave: str = ON_LEAVE_SKIP  # "skip", or "bot:<level>": a bot plays a seat that is out
    # Fischer clock (docs/clocks.md): each seat's time bank in seconds at the start (None: no
    # bank), and the seconds each move played adds to the mover's bank.
    initial_seconds: int | None = None
    increment_seconds: int = 0

    def __post_init__(self) -> None:
        if self.tileset not in TILESETS:
            raise MalformedError("unknown_tileset", f"unknown tile set {self.tileset!r}", "R1")
        if self.farm_scoring not in FARM_EDITIONS:
            raise MalformedError(
                "unknown_farm_scoring",
                f"farm_scoring must be one of {', '.join(FARM_EDITIONS)}",
                "R7.4",
            )
        if self.unplaceable not in UNPLACEABLE:
            raise MalformedError(
                "unknown_unplaceable", "unplaceable must be 'discard' or 'return'", "R10.4"
            )
        if self.undo not in UNDO_MODES:
            raise MalformedError("unknown_undo", "undo must be 'off', 'consent' or 'free'")
        if self.meeples is not None and not (type(self.meeples) is int and 0 <= self.meeples <= 99):
            raise MalformedError("bad_meeples", "meeples must be an integer 0-99", "R1.3")
        if self.area is not None:
            w, h = self.area
            if not all(type(v) is int and 1 <= v <= 1000 for v in (w, h)):
                raise MalformedError("bad_area", "area must be two integers 1-1000", "R10.5")
        if self.border_closes is True:
            if self.area is None:
                raise MalformedError(
                    "border_without_area", "border_closes needs a bounded table (area)", "R10.5"
                )
            if min(self.area) < 3:
                # Decision: else the border would close the start tile's features before play.
                raise MalformedError(
                    "border_area_too_small", "border_closes needs an area of at least 3x3", "R10.5"
                )
        if self.turn_seconds is not None and not (
            type(self.turn_seconds) is int and 1 <= self.turn_seconds <= MAX_TURN_SECONDS
        ):
            raise MalformedError(
                "bad_turn_seconds", f"turn_seconds must be null or an integer 1-{MAX_TURN_SECONDS}"
            )
        self._check_hand()
        self._check_on_leave()
        self._check_bank()
        if not (type(self.max_timeouts) is int and 1 <= self.max_timeouts <= 99):
            raise MalformedError("bad_max_timeouts", "max_timeouts must be an integer 1-99")
        if self.tile_edition not in TILE_EDITIONS:
            raise MalformedError(
                "unknown_tile_edition", "tile_edition must be '1st' or '2nd'", "R9.2"
            )
        if self.tile_edition == "2nd" and self.tileset == "demo":
            raise MalformedError(
                "edition_not_in_tileset",
                "the demo set has one edition only: tile_edition '2nd' needs the base set",
                "R1.2",
            )
        for name in (
            "farmers",
            "incomplete_score",
            "border_closes",
            "hole_extra_turn",
            "river",
            "hints",
            "abbot",
        ):
            if type(getattr(self, name)) is not bool:
                raise MalformedError("bad_ruleset", f"{name} must be true or false")

    def _check_on_leave(self) -> None:
        """`on_leave` is "skip" or "bot:<level>" with a level the bot worker plays."""
        if self.on_leave == ON_LEAVE_SKIP:
            return
        text = self.on_leave if isinstance(self.on_leave, str) else ""
        if not (text.startswith(ON_LEAVE_BOT) and text[len(ON_LEAVE_BOT) :] in TAKEOVER_LEVELS):
            choices = [ON_LEAVE_SKIP, *(ON_LEAVE_BOT + name for name in TAKEOVER_LEVELS)]
            raise MalformedError(
                "unknown_on_leave",
                f"on_leave must be one of {', '.join(choices)}: {self.on_leave!r} names no bot",
                None,
                choices=choices,
            )

    @property
    def takeover(self) -> str | None:
        """The bot level that takes over a seat that is out, or None ("skip")."""
        if self.on_leave == ON_LEAVE_SKIP:
            return None
        return self.on_leave[len(ON_LEAVE_BOT) :]

    def _check_hand(self) -> None:
        """R10.3 and the options it is not combined with (docs/rules.md, decisions)."""
        if type(self.hand) is not int or self.hand not in HAND_SIZES:
            raise MalformedError("bad_hand", "hand must be 1 or 3", "R10.3")
        if self.hand == 1:
            return
        if self.river is True:
            # The river's tiles are drawn and placed one at a time in order (R9.1).
            raise MalformedError("hand_with_river", "the river is played without a hand", "R10.3")
        if self.abbot is True:
            # Not built together yet: the abbot's actions read the one drawn tile.
            raise MalformedError("hand_with_abbot", "the abbot is played without a hand", "R10.3")
        if self.undo != "off":
            # An undone placement would have revealed its tile, and the redrawn refill would
            # log a second commitment of one draw: not combined.
            raise MalformedError("hand_with_undo", "a hand game has no undo", "R10.3")
        if self.turn_seconds is not None:
            # A hand's turn may begin without a draw (the bag empty), so no draw carries
            # its deadline: not combined for now.
            raise MalformedError(
                "hand_with_turn_limit", "a hand game has no turn limit (turn_seconds)", "R10.3"
            )
        if self.initial_seconds is not None:
            # Same reason as the turn limit: no draw would carry the bank's deadline.
            raise MalformedError(
                "hand_with_bank", "a hand game has no time bank (initial_seconds)", "R10.3"
            )

    def _check_bank(self) -> None:
        """The Fischer bank's range and the options it is not combined with (docs/clocks.md)."""
        bank, step = self.initial_seconds, self.increment_seconds
        if bank is not None and not (type(bank) is int and 1 <= bank <= MAX_BANK_SECONDS):
            raise MalformedError(
                "bad_initial_seconds",
                f"initial_seconds (a seat's time bank) must be null or an integer "
                f"1-{MAX_BANK_SECONDS}",
                None,
                initial_seconds=bank if type(bank) is int else None,
            )
        if not (type(step) is int and 0 <= step <= MAX_BANK_SECONDS):
            raise MalformedError(
                "bad_increment_seconds",
                f"increment_seconds must be an integer 0-{MAX_BANK_SECONDS}",
                None,
                increment_seconds=step if type(step) is int else None,
            )
        if bank is None:
            if step:
                raise MalformedError(
                    "increment_without_bank",
                    "increment_seconds needs a time bank (initial_seconds)",
                )
            return
        if self.turn_seconds is not None:
            raise MalformedError(
                "bank_with_turn_limit",
                "a game has a time bank (initial_seconds) or a fixed turn limit "
                "(turn_seconds), not both",
            )
        if self.undo != "off":
            # An undone placement would have to give back time already charged: not yet.
            raise MalformedError("bank_with_undo", "a game with a time bank has no undo")

    @property
    def tiles(self) -> TileSet:
        """The tile set this ruleset plays with."""
        return tile_set(self.tileset, self.river, self.tile_edition, self.abbot)

    @property
    def meeples_per_player(self) -> int:
        """Meeples each player starts with (R1.3, R1.2)."""
        return self.tiles.meeples if self.meeples is None else self.meeples

    def bounds(self) -> tuple[int, int, int, int] | None:
        """(min_x, max_x, min_y, max_y) of the bounded table (R10.5), centred on the start.

        **Decision**: with an even width the extra column lies east (extra row south).
        """
        if self.area is None:
            return None
        w, h = self.area
        return (-((w - 1) // 2), w // 2, -((h - 1) // 2), h // 2)

    def to_dict(self) -> dict[str, Any]:
        """The ruleset as recorded with a game (defaults of the optional house rules left out)."""
        out: dict[str, Any] = {
            "tileset": self.tileset,
            "farmers": self.farmers,
            "farm_scoring": self.farm_scoring,
            "incomplete_score": self.incomplete_score,
        }
        if self.meeples is not None:
            out["meeples"] = self.meeples
        if self.unplaceable != "discard":
            out["unplaceable"] = self.unplaceable
        if self.area is not None:
            out["area"] = {"width": self.area[0], "height": self.area[1]}
            if self.border_closes:
                out["area"]["border_closes"] = True
        if self.hole_extra_turn:
            out["hole_extra_turn"] = True
        if self.river:
            out["river"] = True
        if self.turn_seconds is not None:
            out["turn_seconds"] = self.turn_seconds
        if self.max_timeouts != 3:
            out["max_timeouts"] = self.max_timeouts
        if self.hints:
            out["hints"] = True
        if self.undo != "off":
            out["undo"] = self.undo
        if self.abbot:
            out["abbot"] = True
        if self.tile_edition != "1st":
            out["tile_edition"] = self.tile_edition
        if self.hand != 1:
            out["hand"] = self.hand
        if self.on_leave != ON_LEAVE_SKIP:
            out["on_leave"] = self.on_leave
        if self.initial_seconds is not None:
            out["initial_seconds"] = self.initial_seconds
            out["increment_seconds"] = self.increment_seconds
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Ruleset:
        """Read a recorded ruleset; unknown keys and wrong types are rejected."""
        if not isinstance(data, dict):
            raise MalformedError("bad_ruleset", "ruleset must be an object")
        known = {
            "tileset",
            "farmers",
            "farm_scoring",
            "incomplete_score",
            "meeples",
            "unplaceable",
            "area",
            "hole_extra_turn",
            "river",
            "turn_seconds",
            "max_timeouts",
            "hints",
            "undo",
            "abbot",
            "tile_edition",
            "hand",
            "on_leave",
            "initial_seconds",
            "increment_seconds",
        }
        extra = set(data) - known
        if extra:
            raise MalformedError("bad_ruleset", f"unknown ruleset keys: {sorted(extra)}")
        kwargs = {k: v for k, v in data.items() if k != "area"}
        for key in ("tileset", "farm_scoring", "unplaceable", "undo", "tile_edition", "on_leave"):
            if key in kwargs and not isinstance(kwargs[key], str):
                raise MalformedError("bad_ruleset", f"{key} must be a string")
        area = data.get("area")
        if area is not None:
            if not isinstance(area, dict) or not (
                {"width", "height"} <= set(area) <= {"width", "height", "border_closes"}
            ):
                raise MalformedError(
                    "bad_area",
                    'area must be {"width": W, "height": H} (and optionally "border_closes")',
                    "R10.5",
                )
            kwargs["area"] = (area["width"], area["height"])
            if "border_closes" in area:
                kwargs["border_closes"] = area["border_closes"]
        return cls(**kwargs)
