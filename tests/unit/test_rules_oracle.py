"""An independent model of the rules, checked against the engine over random games.

The model knows only the tile table (each segment's edges and half-edges in the tile's own
orientation) and RULES.md. It puts each segment's edge and half-edge midpoints on a grid
(a square is 4 units wide; y grows south), rotates them itself, and finds every feature
afresh after each placement by joining segments that share a midpoint: no union-find, no
open-edge counts, no frontier. From that it checks, move by move:

- the legal placements (R4.1-R4.3, R10.5; R9.1's open end, no immediate U-turn, no river
  flowing into a tile or off the table),
- the legal meeple spots (R5.1-R5.3: the feature with everything it joins after placement
  holds no meeple; R5.5; R9.2 the abbot),
- every score: completions (R6.1-R6.6, R5.6), the abbot taken back (R9.2), the final
  scoring (R7.2, R10.1) and farms in each edition (R7.3, R7.4).

Run over a thousand games, it found the R5.3 defect of two fields of one tile joined through a
field of the board (test_rules_meeples); the few games here are a standing cross-check.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import NamedTuple

import pytest

from carcassonne.events import AbbotRecalled, Event, GameEnded, TileDrawn, TilePlaced
from carcassonne.game import meeple_spots, placements
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from carcassonne.tiles import Segment, TileType

from .boards import state_after

Point = tuple[int, int]
Pos = tuple[int, int]
Node = tuple[Pos, int]  # a segment on the board: its square and its index on the tile

EDGE_POINT: dict[int, Point] = {0: (2, 0), 1: (4, 2), 2: (2, 4), 3: (0, 2)}
HALF_POINT: dict[int, Point] = {
    0: (1, 0), 1: (3, 0), 2: (4, 1), 3: (4, 3), 4: (3, 4), 5: (1, 4), 6: (0, 3), 7: (0, 1)
}  # fmt: skip
SPOT_POINT = dict(zip(("N", "E", "S", "W"), EDGE_POINT.values(), strict=True))
SPOT_POINT.update(
    zip(("NNW", "NNE", "ENE", "ESE", "SSE", "SSW", "WSW", "WNW"), HALF_POINT.values(), strict=True)
)
STEP: dict[int, Pos] = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}
SURROUNDED = ("monastery", "garden")


def turned(point: Point, rotation: int) -> Point:
    """A midpoint after `rotation` clockwise quarter turns (y grows south)."""
    x, y = point
    for _ in range(rotation):
        x, y = 4 - y, x
    return x, y


def points(seg: Segment) -> list[Point]:
    return [EDGE_POINT[e] for e in seg.edges] + [HALF_POINT[h] for h in seg.halves]


class Figure(NamedTuple):
    player: int
    node: Node
    abbot: bool


class Model:
    """The board as placed tiles only; features recomputed from scratch when asked."""

    def __init__(self, state: GameState) -> None:
        self.rules, self.players = state.ruleset, state.players
        self.types = state.tiles.types
        self.board: dict[Pos, tuple[TileType, int]] = {(0, 0): (self.types[state.tiles.start], 0)}
        self.figures: list[Figure] = []
        self.scores = [0] * state.players
        self.bounds = state.ruleset.bounds()
        start = self.types[state.tiles.start]
        self.river_end: Pos | None = (1, 0) if start.river else None  # the spring flows east
        self.heading, self.last_turn = 1, 0

    # -- features ---------------------------------------------------------------------
    def on_table(self, pos: Pos) -> bool:
        if self.bounds is None:
            return True
        x0, x1, y0, y1 = self.bounds
        return x0 <= pos[0] <= x1 and y0 <= pos[1] <= y1

    def segment(self, node: Node) -> Segment:
        return self.board[node[0]][0].segments[node[1]]

    def features(self) -> tuple[dict[Node, list[Node]], dict[Point, list[Node]]]:
        """Each node's feature (all its nodes) and the nodes at each board midpoint."""
        at: dict[Point, list[Node]] = defaultdict(list)
        for (x, y), (tile, rotation) in self.board.items():
            for index, seg in enumerate(tile.segments):
                for px, py in (turned(p, rotation) for p in points(seg)):
                    at[(4 * x + px, 4 * y + py)].append(((x, y), index))
        links: dict[Node, set[Node]] = defaultdict(set)
        for nodes in at.values():
            for a in nodes:
                links[a].update(nodes)
        feature: dict[Node, list[Node]] = {}
        for pos, (tile, _) in self.board.items():
            for index in range(len(tile.segments)):
                start = (pos, index)
                if start in feature:
                    continue
                group, todo = [start], [start]
                seen = {start}
                while todo:
                    for other in links[todo.pop()]:
                        if other not in seen:
                            seen.add(other)
                            group.append(other)
                            todo.append(other)
                for node in group:
                    feature[node] = group
        return feature, at

    def ring(self, pos: Pos) -> int:
        x, y = pos
        return sum(
            (x + dx, y + dy) in self.board for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy
        )

    def complete(self, group: list[Node], at: dict[Point, list[Node]]) -> bool:
        kind = self.segment(group[0]).kind
        if kind in SURROUNDED:
            return self.ring(group[0][0]) == 8
        if kind == "field":
            return False
        for (x, y), index in group:
            tile, rotation = self.board[(x, y)]
            for edge in tile.segments[index].edges:
                px, py = turned(EDGE_POINT[edge], rotation)
                if len(at[(4 * x + px, 4 * y + py)]) == 2:
                    continue
                dx, dy = STEP[(edge + rotation) % 4]
                if self.rules.border_closes and not self.on_table((x + dx, y + dy)):
                    continue  # R10.5 variant
                return False
        return True

    def counts(self, group: list[Node]) -> list[int]:
        nodes = set(group)
        out = [0] * self.players
        for figure in self.figures:
            if figure.node in nodes:
                out[figure.player] += 1
        return out

    def award(self, counts: list[int], value: int) -> None:
        top = max(counts)
        for player, count in enumerate(counts):
            if top and count == top:  # R6.4
                self.scores[player] += value

    # -- legal moves --------------------------------------------------------------------
    def placements(self, name: str) -> set[tuple[int, int, int]]:
        tile = self.types[name]
        squares = {(x + dx, y + dy) for x, y in self.board for dx, dy in STEP.values()} - set(
            self.board
        )
        out = set()
        for x, y in squares:
            if not self.on_table((x, y)):
                continue
            for rotation in range(4):
                if self.fits(tile, (x, y), rotation):
                    out.add((x, y, rotation))
        return out

    def fits(self, tile: TileType, pos: Pos, rotation: int) -> bool:
        for d, (dx, dy) in STEP.items():
            other = self.board.get((pos[0] + dx, pos[1] + dy))
            if other is not None:
                theirs = other[0].edges[((d + 2) % 4 - other[1]) % 4]
                if tile.edges[(d - rotation) % 4] != theirs:  # R4.2
                    return False
        if not tile.river:
            return True
        if pos != self.river_end:  # R9.1: the river's open end
            return False
        out = self.river_out(tile, rotation)
        if out is None:
            return True  # the lake
        turn = self.turn_of(out)
        if turn and turn == self.last_turn:  # no immediate U-turn
            return False
        ahead = (pos[0] + STEP[out][0], pos[1] + STEP[out][1])
        return ahead not in self.board and self.on_table(ahead)

    def river_out(self, tile: TileType, rotation: int) -> int | None:
        ends = [d for d in range(4) if tile.edges[(d - rotation) % 4] == "I"]
        assert (self.heading + 2) % 4 in ends
        outs = [d for d in ends if d != (self.heading + 2) % 4]
        return outs[0] if outs else None

    def turn_of(self, out: int) -> int:
        return 0 if out == self.heading else 1 if out == (self.heading + 1) % 4 else -1

    def spots(self, state: GameState, e: TilePlaced) -> set[tuple[int, bool]]:
        """(segment index, abbot) of every figure the player may put on the tile (R5, R9.2)."""
        tile, pos = self.types[e.tile], (e.x, e.y)
        self.board[pos] = (tile, e.rotation)
        feature, _ = self.features()
        del self.board[pos]
        out = set()
        for index, seg in enumerate(tile.segments):
            if seg.kind in SURROUNDED and self.rules.abbot and state.abbots[e.player]:
                out.add((index, True))
            if seg.kind == "garden" or (seg.kind == "field" and not self.rules.farmers):
                continue
            if state.supply[e.player] and not any(self.counts(feature[(pos, index)])):
                out.add((index, False))
        return out

    # -- moves and scoring --------------------------------------------------------------
    def placed(self, e: TilePlaced) -> None:
        tile, pos = self.types[e.tile], (e.x, e.y)
        self.board[pos] = (tile, e.rotation)
        if e.meeple is not None:
            if e.meeple.spot in SURROUNDED:
                index = next(i for i, s in enumerate(tile.segments) if s.kind in SURROUNDED)
            else:
                want = turned(SPOT_POINT[e.meeple.spot], (4 - e.rotation) % 4)
                index = next(i for i, s in enumerate(tile.segments) if want in points(s))
            assert tile.segments[index].kind == e.meeple.feature
            self.figures.append(Figure(e.player, (pos, index), e.meeple.abbot))
        feature, at = self.features()
        seen: list[list[Node]] = []
        for node, group in feature.items():
            if group in seen:
                continue
            seen.append(group)
            kind = self.segment(node).kind
            if kind == "field" or not self.complete(group, at):
                continue
            if kind in SURROUNDED:
                (square, _), *_ = group
                if max(abs(square[0] - pos[0]), abs(square[1] - pos[1])) > 1:
                    continue
            elif all(square != pos for square, _ in group):
                continue
            tiles = {square for square, _ in group}
            pennants = sum(self.segment(n).pennants for n in group)
            value = {"road": len(tiles), "city": 2 * len(tiles) + 2 * pennants}.get(kind, 9)
            self.award(self.counts(group), value)  # R6.1-R6.4
            members = set(group)
            self.figures = [f for f in self.figures if f.node not in members]  # R6.6
        if tile.river:
            out = self.river_out(tile, e.rotation)
            if out is None:
                self.river_end = None
            else:
                self.last_turn, self.heading = self.turn_of(out), out
                self.river_end = (pos[0] + STEP[out][0], pos[1] + STEP[out][1])

    def recalled(self, e: AbbotRecalled) -> None:
        abbot = next(f for f in self.figures if f.player == e.player and f.abbot)
        self.scores[e.player] += 1 + self.ring(abbot.node[0])  # R9.2
        self.figures.remove(abbot)

    def ended(self) -> None:
        feature, at = self.features()
        groups: list[list[Node]] = []
        for group in feature.values():
            if group not in groups:
                groups.append(group)
        for group in groups:
            kind = self.segment(group[0]).kind
            if kind == "field" or self.complete(group, at) or not self.rules.incomplete_score:
                continue
            tiles = {square for square, _ in group}
            pennants = sum(self.segment(n).pennants for n in group)
            if kind in SURROUNDED:
                value = 1 + self.ring(group[0][0])
            else:
                value = len(tiles) + (pennants if kind == "city" else 0)
            self.award(self.counts(group), value)  # R7.2
        if self.rules.farmers:
            self.farms(groups, feature, at)

    def farms(
        self,
        groups: list[list[Node]],
        feature: dict[Node, list[Node]],
        at: dict[Point, list[Node]],
    ) -> None:
        farms: list[tuple[list[int], set[Node]]] = []
        for group in groups:
            counts = self.counts(group)
            if self.segment(group[0]).kind != "field" or not any(counts):
                continue
            cities = set()
            for pos, index in group:
                for local in self.segment((pos, index)).cities:
                    city = feature[(pos, local)]
                    if self.complete(city, at):
                        cities.add(min(city))
            farms.append((counts, cities))
        edition = self.rules.farm_scoring
        if edition == "3rd":  # R7.3
            for counts, cities in farms:
                self.award(counts, 3 * len(cities))
        elif edition == "2nd":  # R7.4: a city pays a player once
            paid: list[set[Node]] = [set() for _ in range(self.players)]
            for counts, cities in farms:
                for player, count in enumerate(counts):
                    if count == max(counts):
                        self.scores[player] += 3 * len(cities - paid[player])
                        paid[player] |= cities
        else:  # R7.4 1st edition: per city, the farmers of every farm touching it
            for key in set().union(*(cities for _, cities in farms)):
                total = [0] * self.players
                for counts, cities in farms:
                    if key in cities:
                        total = [a + b for a, b in zip(total, counts, strict=True)]
                self.award(total, 4)


def mismatch(events: list[Event]) -> str | None:
    """The first move where the engine and the model disagree, or None."""
    state = GameState()
    state.apply(events[0])
    model = Model(state)
    for index, event in enumerate(events[1:], 1):
        if isinstance(event, TilePlaced):
            spots = meeple_spots(state, event.x, event.y, event.rotation, event.tile)
            orient = model.types[event.tile].orientations[event.rotation]
            engine = {(orient.spots[m.spot], m.abbot) for m in spots}
            if engine != model.spots(state, event):
                return f"#{index} {event}: spots {engine} != {model.spots(state, event)}"
        state.apply(event)
        if isinstance(event, TileDrawn):
            if set(placements(state)) != model.placements(event.tile):
                return f"#{index} {event}: placements differ"
        elif isinstance(event, TilePlaced):
            model.placed(event)
        elif isinstance(event, AbbotRecalled):
            model.recalled(event)
        elif isinstance(event, GameEnded):
            model.ended()
        if state.scores != model.scores:
            return f"#{index} {event}: scores {state.scores} != {model.scores}"
    return None


RULESETS = [
    Ruleset(),
    Ruleset(farm_scoring="1st", meeples=3),
    Ruleset(farm_scoring="2nd", incomplete_score=False),
    Ruleset(tileset="demo", area=(5, 5), border_closes=True),
    Ruleset(river=True, abbot=True, tile_edition="2nd"),
    Ruleset(hole_extra_turn=True, unplaceable="return", area=(5, 4)),
]


@pytest.mark.parametrize("ruleset", RULESETS, ids=lambda r: str(r.to_dict()))
def test_engine_agrees_with_an_independent_model(ruleset: Ruleset) -> None:
    """R4-R7, R9, R10.1/R10.5/R10.6: placements, meeple spots and every score of random
    games, move by move, as the model computes them from the tiles placed alone."""
    for seed in range(3):
        _, events = random_game(random.Random(seed), 2 + seed % 2, ruleset)
        assert mismatch(events) is None, f"seed {seed}"


def test_the_model_sees_the_r5_3_case() -> None:
    """The board of test_r5_3_a_field_taken_through_another_field_of_the_same_tile: the model
    offers V's road only (its two fields are one farm with the farmer once V lies)."""
    state = state_after("U0@-1,0:NNW B0@0,1 A2@1,1", draw="V")
    model = Model(state)
    for pos, placed in state.board.tiles.items():
        model.board[pos] = (placed.tile, placed.rotation)
    for figure in state.meeples.values():
        tile = state.board.tiles[figure.pos]
        index = tile.orientation.spots[figure.meeple.spot]
        model.figures.append(Figure(figure.player, (figure.pos, index), figure.meeple.abbot))
    assert model.spots(state, TilePlaced(1, "V", 1, 0, 0)) == {(0, False)}  # V's road
