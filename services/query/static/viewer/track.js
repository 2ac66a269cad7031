// The score track (R8.1): 50 spaces (0–49) in five rows of ten, snaking as on the board, a
// marker per player on their space, and the point tiles (50, turned to 100 on the next lap)
// in front of each player. The positions come from /scores (`players[].track`).

import { seatClass, svgEl } from "./dom.js";

const SPACES = 50;
const COLUMNS = 10;
const CELL = 30;

function cellOf(space) {
  const row = Math.floor(space / COLUMNS);
  const along = space % COLUMNS;
  const column = row % 2 === 0 ? along : COLUMNS - 1 - along; // rows go back and forth
  return { x: column * CELL, y: row * CELL };
}

/** The track as an <svg>, for `players` of the score view. */
export function trackSvg(players) {
  const rows = SPACES / COLUMNS;
  const svg = svgEl("svg", {
    viewBox: `-2 -2 ${COLUMNS * CELL + 4} ${rows * CELL + 4}`,
    class: "track-svg",
    role: "img",
    "aria-label": "score track",
  });
  for (let space = 0; space < SPACES; space += 1) {
    const { x, y } = cellOf(space);
    svg.append(
      svgEl("rect", { x, y, width: CELL, height: CELL, class: space % 5 === 0 ? "space five" : "space" }),
      svgEl("text", { x: x + 3, y: y + 10, class: "space-no", text: space }),
    );
  }
  // Several markers on one space stand side by side.
  const onSpace = new Map();
  for (const player of players) {
    const taken = onSpace.get(player.track.space) || 0;
    onSpace.set(player.track.space, taken + 1);
    const { x, y } = cellOf(player.track.space);
    const dx = 9 + (taken % 3) * 8;
    const dy = 17 + Math.floor(taken / 3) * 8;
    svg.append(
      svgEl(
        "circle",
        {
          cx: x + dx,
          cy: y + dy,
          r: 5,
          class: `marker ${seatClass(player.seat)}`,
          "data-seat": player.seat,
          "data-space": player.track.space,
        },
        svgEl("title", { text: `${player.name}: ${player.score}` }),
      ),
      // The seat's number on its marker, as on its meeples and beside its name.
      svgEl("text", {
        x: x + dx,
        y: y + dy,
        class: `marker-mark mark-${seatClass(player.seat)}`,
        "aria-hidden": "true",
        text: player.seat + 1,
      }),
    );
  }
  return svg;
}
