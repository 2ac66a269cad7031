"""Text pictures of a board, for `carcassonne show` and bug reports."""

from __future__ import annotations

from .state import GameState

CELL_W, CELL_H = 5, 3


def render_board(state: GameState) -> str:
    """The board as text: each tile a 5x3 cell with its edges (C/R/F) and name+rotation.

    A digit in a cell's corner is the player of a meeple on that tile (NW corner first).
    """
    tiles = state.board.tiles
    if not tiles:
        return "(empty board)\n"
    xs = [x for x, _ in tiles]
    ys = [y for _, y in tiles]
    owners: dict[tuple[int, int], list[int]] = {}
    for m in state.meeples.values():
        owners.setdefault(m.pos, []).append(m.player)
    lines = ["     " + "".join(f"{x:^{CELL_W}}" for x in range(min(xs), max(xs) + 1))]
    for y in range(min(ys), max(ys) + 1):
        rows = [f"{y:>4} ", "     ", "     "]
        for x in range(min(xs), max(xs) + 1):
            placed = tiles.get((x, y))
            if placed is None:
                for i in range(CELL_H):
                    rows[i] += " " * CELL_W
                continue
            n, e, s, w = tuple(placed.orientation.edges)
            corners = [str(p) for p in owners.get((x, y), [])] + ["+"] * 4
            name = placed.tile.name
            # River tiles (RIVA…RIVL) show as ~A…~L: "RIV" would hide which one it is.
            label = f"~{name[3:]}" if placed.tile.river else f"{name}{placed.rotation}"[:3]
            rows[0] += f"{corners[0]}-{n}-{corners[1]}"
            rows[1] += f"{w}{label:^3}{e}"
            rows[2] += f"{corners[2]}-{s}-{corners[3]}"
        lines.extend(r.rstrip() for r in rows)
    return "\n".join(lines) + "\n"


def render_scores(state: GameState) -> str:
    """One line per player: score, meeples in supply."""
    return "".join(
        f"player {p}: {score:>3} points, {state.supply[p]} meeples in supply\n"
        for p, score in enumerate(state.scores)
    )
