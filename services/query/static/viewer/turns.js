// What the page shows at one turn (a "frame"): the board, the scores and the board picture
// after N placements, fetched together and kept, so that stepping to a turn already fetched
// is a swap of DOM nodes, not a request. Neighbouring turns are fetched ahead of time.
//
// A frame can still change while the game is played: the latest turn gains moves (the next
// draw), and any turn's scores gain events while the scoring worker catches up
// (`unscored_moves` > 0). Such frames are fetched again when the live stream says something
// happened; the others never change (a past turn of the log is fixed).

import { gamePath, getJSON, getText } from "./api.js";

function parseSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  if (root.localName !== "svg" || doc.getElementsByTagName("parsererror").length) {
    throw new Error("the board picture is not SVG");
  }
  // Scripts and event handlers never run from it: it is data (and the page's CSP forbids
  // inline script anyway).
  for (const bad of root.querySelectorAll("script, foreignObject")) bad.remove();
  return document.adoptNode(root);
}

export class Turns {
  constructor(gameId) {
    this.base = gamePath(gameId);
    this.pending = new Map(); // key(turn) -> Promise<frame>
    this.ready = new Map(); // key(turn) -> frame
    this.latest = 0; // turns (placements, undone ones too) in the game as last seen
    this.over = false;
    this.status = "in_progress"; // in_progress, over or abandoned (the latest board's)
    this.generation = 0; // bumped when changing frames are forgotten
    this.open = false; // pictures with the open features outlined (board.svg?open=1)
  }

  key(turn) {
    return this.open ? `${turn}+open` : String(turn);
  }

  /** The latest position: how many turns the game has and whether it is over. */
  async refreshLatest() {
    const board = await getJSON(`${this.base}/board`);
    this.latest = board.turns; // placements in the log, undone ones too (docs/undo.md)
    this.over = board.over;
    this.status = board.status;
    return board;
  }

  /** The frame of `turn`, fetched once. */
  get(turn) {
    const key = this.key(turn);
    const done = this.ready.get(key);
    if (done) return Promise.resolve(done);
    let pending = this.pending.get(key);
    if (!pending) {
      const fetching = this.fetchFrame(turn).finally(() => {
        if (this.pending.get(key) === fetching) this.pending.delete(key);
      });
      pending = fetching;
      this.pending.set(key, pending);
    }
    return pending;
  }

  /** The frame of `turn` if it is here already (a step then needs no wait at all). */
  peek(turn) {
    return this.ready.get(this.key(turn)) || null;
  }

  /** Fetch the turns around `turn` ahead of a step, quietly. */
  prefetch(turn) {
    for (const near of [turn + 1, turn - 1, turn + 2]) {
      if (near >= 0 && near <= this.latest && !this.ready.has(this.key(near))) {
        this.get(near).catch(() => {}); // fetched again when stepped to
      }
    }
  }

  /** Forget the frames that may have changed (see the top of this file). */
  forgetChanging() {
    this.generation += 1;
    this.pending.clear(); // a fetch under way may have read the old state
    for (const [key, frame] of this.ready) {
      if (!this.isFixed(frame)) this.ready.delete(key);
    }
  }

  isFixed(frame) {
    const boardFixed = frame.turn < this.latest || frame.board.over;
    return boardFixed && frame.scores.unscored_moves === 0;
  }

  async fetchFrame(turn) {
    const generation = this.generation;
    const key = this.key(turn);
    const query = `?turn=${turn}`;
    const [board, scores, svgText] = await Promise.all([
      getJSON(`${this.base}/board${query}`),
      getJSON(`${this.base}/scores${query}`),
      getText(`${this.base}/board.svg${query}${this.open ? "&open=1" : ""}`),
    ]);
    const frame = { turn, board, scores, svg: parseSvg(svgText) };
    if (generation === this.generation) this.ready.set(key, frame);
    return frame;
  }
}
