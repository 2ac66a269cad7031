// The board picture (the service's board.svg) with pan and zoom, and score highlights.
//
// Pan and zoom change the picture's viewBox, in the picture's own coordinates, which are the
// same at every turn (a tile at x, y is drawn at the same place whatever the board's size):
// so the view stays put while stepping. Until the reader pans or zooms, each turn is shown
// whole (its own viewBox).

import { svgEl } from "./dom.js";

const MIN_ZOOM = 0.5; // of the whole board
const MAX_ZOOM = 12;
// A meeple of the picture is 18 units tall (docs/pictures.md): below MEEPLE_PX on screen it is
// drawn larger, about its own spot, so that it stays readable at any zoom on any screen.
const MEEPLE_UNITS = 18;
const MEEPLE_PX = 18;

// The picture's word for a kind of feature in the score events' words.
const SEGMENT_KIND = { road: "road", city: "city", monastery: "monastery", farm: "field" };

function viewBoxOf(svg) {
  const box = (svg.getAttribute("viewBox") || "").trim().split(/[\s,]+/).map(Number);
  return box.length === 4 && box.every(Number.isFinite) ? box : null;
}

export class BoardView {
  constructor(host) {
    this.host = host;
    this.svg = null;
    this.fit = null; // the shown turn's own viewBox
    this.view = null; // the reader's viewBox, once they pan or zoom
    this.pointers = new Map(); // pointerId -> last client position
    host.addEventListener("pointerdown", (e) => this.down(e));
    host.addEventListener("pointermove", (e) => this.move(e));
    for (const end of ["pointerup", "pointercancel", "pointerleave"]) {
      host.addEventListener(end, (e) => this.pointers.delete(e.pointerId));
    }
    host.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    // The meeples' size depends on the board's size on screen too.
    if (typeof ResizeObserver === "function") new ResizeObserver(() => this.apply()).observe(host);
  }

  /** Show a turn's picture (a parsed <svg>, kept by the caller for later steps). */
  show(svg) {
    if (!svg.dataset.fit) svg.dataset.fit = svg.getAttribute("viewBox") || "";
    if (!svg.dataset.marked) markMeeples(svg);
    for (const old of svg.querySelectorAll(".hl, .hl-tile")) old.classList.remove("hl", "hl-tile");
    this.svg = svg;
    this.fit = viewBoxOf(svg) && svg.dataset.fit.split(/[\s,]+/).map(Number);
    this.apply();
    if (this.host.firstChild !== svg) this.host.replaceChildren(svg);
  }

  apply() {
    if (!this.svg) return;
    const box = this.view || this.fit;
    if (!box) return;
    this.svg.setAttribute("viewBox", box.join(" "));
    // Screen pixels per picture unit ("meet": the whole view box fits the board).
    const perUnit = Math.min(this.host.clientWidth / box[2], this.host.clientHeight / box[3]);
    const grow = perUnit > 0 ? Math.max(1, MEEPLE_PX / (MEEPLE_UNITS * perUnit)) : 1;
    const scale = `scale(${grow.toFixed(3)})`;
    if (this.svg.dataset.meepleScale === scale) return;
    this.svg.dataset.meepleScale = scale;
    for (const body of this.svg.querySelectorAll("g.meeple > g.meeple-body")) {
      body.setAttribute("transform", scale);
    }
  }

  /** Back to the whole board, following its growth again. */
  reset() {
    this.view = null;
    this.apply();
  }

  /** Zoom by `factor` (> 1: closer) about a point on screen (default: the middle). */
  zoom(factor, clientX, clientY) {
    const box = this.view || this.fit;
    if (!box || !this.svg) return;
    const rect = this.svg.getBoundingClientRect();
    const at = this.toUser(clientX ?? rect.left + rect.width / 2, clientY ?? rect.top + rect.height / 2);
    const fitWidth = this.fit ? this.fit[2] : box[2];
    let width = box[2] / factor;
    width = Math.min(fitWidth / MIN_ZOOM, Math.max(fitWidth / MAX_ZOOM, width));
    const scale = width / box[2];
    this.view = [
      at.x - (at.x - box[0]) * scale,
      at.y - (at.y - box[1]) * scale,
      box[2] * scale,
      box[3] * scale,
    ];
    this.apply();
  }

  /** Move the view by a distance on screen. */
  pan(dx, dy) {
    const box = this.view || this.fit;
    const matrix = this.svg && this.svg.getScreenCTM();
    if (!box || !matrix || !matrix.a) return;
    this.view = [box[0] - dx / matrix.a, box[1] - dy / matrix.d, box[2], box[3]];
    this.apply();
  }

  toUser(clientX, clientY) {
    const matrix = this.svg.getScreenCTM();
    if (!matrix) return { x: 0, y: 0 };
    const point = new DOMPoint(clientX, clientY).matrixTransform(matrix.inverse());
    return { x: point.x, y: point.y };
  }

  down(event) {
    this.pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
    try {
      this.host.setPointerCapture(event.pointerId); // keep the drag when it leaves the board
    } catch {
      // not an active pointer (a synthetic event): the drag works without the capture
    }
  }

  move(event) {
    const last = this.pointers.get(event.pointerId);
    if (!last) return;
    const now = { x: event.clientX, y: event.clientY };
    if (this.pointers.size === 1) {
      this.pan(now.x - last.x, now.y - last.y);
    } else if (this.pointers.size === 2) {
      // Pinch: zoom by the change of the distance between the two fingers, about their middle.
      const other = [...this.pointers].find(([id]) => id !== event.pointerId)[1];
      const before = Math.hypot(last.x - other.x, last.y - other.y);
      const after = Math.hypot(now.x - other.x, now.y - other.y);
      if (before > 0 && after > 0) {
        this.zoom(after / before, (now.x + other.x) / 2, (now.y + other.y) / 2);
      }
    }
    this.pointers.set(event.pointerId, now);
  }

  wheel(event) {
    event.preventDefault(); // the page does not scroll under the board
    this.zoom(Math.exp(-event.deltaY / 300), event.clientX, event.clientY);
  }

  /** Mark a score event's feature: its segments (the picture's feature made of exactly the
   * event's tiles, of its kind) and its tiles. Returns the number of segments marked. */
  highlight(event) {
    if (!this.svg) return 0;
    const wanted = new Set(event.tiles.map(([x, y]) => `${x},${y}`));
    for (const tile of this.svg.querySelectorAll("g.tile")) {
      if (wanted.has(`${tile.dataset.x},${tile.dataset.y}`)) tile.classList.add("hl-tile");
    }
    const segments = this.featureSegments(event, wanted);
    for (const segment of segments) segment.classList.add("hl");
    return segments.length;
  }

  clearHighlight() {
    if (!this.svg) return;
    for (const old of this.svg.querySelectorAll(".hl, .hl-tile")) old.classList.remove("hl", "hl-tile");
  }

  featureSegments(event, wanted) {
    const kind = SEGMENT_KIND[event.kind] || event.kind;
    const byFeature = new Map(); // data-feature -> {segments, tiles}
    for (const segment of this.svg.querySelectorAll(`.seg-${kind}[data-feature]`)) {
      const tile = segment.closest("g.tile");
      if (!tile) continue;
      const id = segment.getAttribute("data-feature");
      let feature = byFeature.get(id);
      if (!feature) byFeature.set(id, (feature = { segments: [], tiles: new Set() }));
      feature.segments.push(segment);
      feature.tiles.add(`${tile.dataset.x},${tile.dataset.y}`);
    }
    const same = (a, b) => a.size === b.size && [...a].every((t) => b.has(t));
    const placed = new Set(
      [...this.svg.querySelectorAll("g.tile")].map((t) => `${t.dataset.x},${t.dataset.y}`),
    );
    for (const feature of byFeature.values()) {
      // A monastery's score counts the tiles around it too: its tiles are its 3×3 square.
      const tiles = event.kind === "monastery" ? around(feature.tiles, placed) : feature.tiles;
      if (same(tiles, wanted)) return feature.segments;
    }
    return [];
  }
}

/** Give each meeple of a picture its seat's number (the cue besides its colour, the same as
 * beside the player's name) and a body that `apply` can scale about the meeple's spot. */
function markMeeples(svg) {
  for (const meeple of svg.querySelectorAll("g.meeple")) {
    const body = svgEl("g", { class: "meeple-body" });
    body.append(...meeple.childNodes);
    const seat = Number(meeple.dataset.player);
    body.append(svgEl("text", { class: "meeple-mark", x: 0, y: 2, text: String(seat + 1) }));
    meeple.append(body);
  }
  svg.dataset.marked = "true";
}

/** The placed tiles of the 3×3 square around a one-tile feature (a monastery). */
function around(tiles, placed) {
  const out = new Set();
  if (tiles.size !== 1) return out;
  const [x, y] = [...tiles][0].split(",").map(Number);
  for (let dx = -1; dx <= 1; dx += 1) {
    for (let dy = -1; dy <= 1; dy += 1) {
      if (placed.has(`${x + dx},${y + dy}`)) out.add(`${x + dx},${y + dy}`);
    }
  }
  return out;
}
