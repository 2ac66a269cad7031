"""The incremental board (union-find, open-edge counts, frontier) against from-scratch scans.

A reference implementation recomputes, from the placed tiles alone, the features (flood fill
over touching slots), whether each road/city is closed, and the legal placements (scan of
every empty square). After every turn of random games, the engine must agree with it.
"""

from __future__ import annotations

import random
from collections import deque

import pytest

from carcassonne.board import FACING, Board
from carcassonne.game import meeple_spots, placements
from carcassonne.geometry import DELTA
from carcassonne.ruleset import Ruleset
from carcassonne.simulate import random_game
from carcassonne.state import GameState
from carcassonne.tiles import CITY, MONASTERY, ROAD

Node = tuple[tuple[int, int], int]  # (square, local segment index)


def reference_features(board: Board) -> list[set[Node]]:
    """Connected segments by flood fill over facing slots of neighbouring tiles (R6, R7.3)."""
    seen: set[Node] = set()
    groups = []
    for pos, placed in board.tiles.items():
        for index in range(len(placed.orientation.segments)):
            if (pos, index) in seen:
                continue
            group, todo = set(), deque([(pos, index)])
            seen.add((pos, index))
            while todo:
                here, seg = todo.popleft()
                group.add((here, seg))
                orient = board.tiles[here].orientation
                for d, (dx, dy) in enumerate(DELTA):
                    nb = board.tiles.get((here[0] + dx, here[1] + dy))
                    if nb is None:
                        continue
                    for mine, theirs in FACING[d]:
                        if orient.slot_segment[mine] != seg:
                            continue
                        other = ((here[0] + dx, here[1] + dy), nb.orientation.slot_segment[theirs])
                        if other not in seen:
                            seen.add(other)
                            todo.append(other)
            groups.append(group)
    return groups


def closed(board: Board, group: set[Node]) -> bool:
    """A road or city is closed when every edge of its segments has a neighbour (R6.1, R6.2)."""
    for pos, seg in group:
        orient = board.tiles[pos].orientation
        for edge in orient.segments[seg].slots:
            if edge < 4:
                dx, dy = DELTA[edge]
                if (pos[0] + dx, pos[1] + dy) not in board.tiles:
                    return False
    return True


def naive_placements(state: GameState, tile: str) -> set[tuple[int, int, int]]:
    """Scan every empty square next to the board for each rotation (R4.1, R4.2)."""
    tiles = state.board.tiles
    out = set()
    candidates = {(x + dx, y + dy) for x, y in tiles for dx, dy in DELTA} - set(tiles)
    for x, y in candidates:
        if not state.board.in_bounds((x, y)):
            continue
        for rotation, orient in enumerate(state.tiles.types[tile].orientations):
            if all(
                (nb := tiles.get((x + dx, y + dy))) is None
                or nb.orientation.edges[d ^ 2] == orient.edges[d]
                for d, (dx, dy) in enumerate(DELTA)
            ):
                out.add((x, y, rotation))
    return out


def check_board(state: GameState) -> None:
    board = state.board
    for group in reference_features(board):
        roots = {board.find(board.tiles[pos].base + seg) for pos, seg in group}
        assert len(roots) == 1, "segments the flood fill joins must share one root"
        feat = board.feats[roots.pop()]
        assert feat is not None
        assert feat.tiles == {pos for pos, _ in group}
        if feat.kind in (ROAD, CITY):
            assert (feat.open == 0) == closed(board, group)
            assert feat.done == (feat.open == 0)  # closed features are scored at once (R6)
        if feat.kind == CITY:
            pennants = sum(
                board.tiles[pos].orientation.segments[seg].pennants for pos, seg in group
            )
            assert feat.pennants == pennants
        if feat.kind == MONASTERY:
            (pos,) = feat.tiles
            assert feat.done == (board.neighbours(pos) == 8)
    sizes = sum(len(g) for g in reference_features(board))
    assert sizes == sum(len(p.orientation.segments) for p in board.tiles.values())


@pytest.mark.parametrize("seed", range(6))
def test_features_and_frontier_match_a_rescan_after_every_turn(seed: int) -> None:
    rules = Ruleset(area=(7, 7)) if seed % 3 == 2 else Ruleset()  # R10.5 bounds one in three
    _, events = random_game(random.Random(seed), players=2 + seed % 3, ruleset=rules)
    state = GameState()
    names = None
    for event in events[:-1]:  # the last event is GameEnded
        state.apply(event)
        if state.phase != "draw":
            continue
        check_board(state)
        names = names or sorted(state.tiles.types)
        for name in names[seed::4]:
            assert set(placements(state, name)) == naive_placements(state, name)


@pytest.mark.parametrize("seed", range(3))
def test_meeple_spots_match_placing_the_tile_and_looking(seed: int) -> None:
    """R5.3: a spot is free iff, once the tile lies there, its joined feature holds no meeple."""

    _, events = random_game(random.Random(100 + seed), players=3)
    state = GameState()
    checked = 0
    for event in events[:-1]:
        state.apply(event)
        if state.phase != "place" or state.supply[state.current] == 0:
            continue
        assert state.drawn is not None
        for x, y, rotation in placements(state)[::3]:
            after = state.copy()
            after.board.place(state.tiles.types[state.drawn], (x, y), rotation)
            placed = after.board.tiles[(x, y)]
            expected = {
                seg.meeple
                for index, seg in enumerate(placed.orientation.segments)
                if not after.board.feature(placed.base + index).meeples
            }
            assert set(meeple_spots(state, x, y, rotation)) == expected
            checked += 1
    assert checked > 50
