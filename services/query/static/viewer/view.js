// The game viewer: /games/{id}/view[?turn=N].
//
// It shows one turn at a time (a frame of turns.js), steps with buttons, arrow keys and a
// slider, keeps the turn in the URL, explains and highlights each score of the turn, and
// follows the game's /live stream while it is played (each new turn is shown as it comes,
// unless the reader stepped back; "live" brings them back to the latest turn).

import { gamePath } from "./api.js";
import { BoardView } from "./board.js";
import { el, seatClass } from "./dom.js";
import { trackSvg } from "./track.js";
import { Turns } from "./turns.js";

const $ = (id) => document.getElementById(id);
const gameId = decodeURIComponent(location.pathname.split("/")[2] || "");
const turns = new Turns(gameId);
const board = new BoardView($("board"));
const slider = $("slider");

let shown = null; // the frame on screen
let wanted = null; // the turn asked for last: a slow fetch never overrides a newer ask
let follow = false; // show each new turn as it arrives
let live = null; // the EventSource while the game is played
let updating = null;
let again = false;
let scoringTimer = null; // a read again while the worker catches up with a game over

// -- stepping ---------------------------------------------------------------------------

async function go(turn) {
  const target = Math.max(0, Math.min(turns.latest, turn));
  wanted = target;
  const frame = turns.peek(target) || (await turns.get(target));
  if (wanted !== target) return;
  render(frame);
  turns.prefetch(target);
}

function step(delta) {
  if (shown !== null) jump(shown.turn + delta);
}

/** Show `turn` as the reader asked: reaching the latest turn of a game being played follows
 * it again, any other turn stops following. */
function jump(turn) {
  follow = !turns.over && turn >= turns.latest;
  go(turn).catch(failed);
}

function keepTurnInUrl(turn) {
  // Following a game being played: no turn, so that a reload follows it too.
  const search = follow ? "" : `?turn=${turn}`;
  if (location.search !== search) history.replaceState(null, "", location.pathname + search);
}

// -- drawing a frame --------------------------------------------------------------------

function render(frame) {
  shown = frame;
  board.show(frame.svg);
  renderPlayers(frame);
  $("track").replaceChildren(trackSvg(frame.scores.players));
  renderEvents(frame);
  renderStepper(frame);
  keepTurnInUrl(frame.turn);
  document.body.dataset.turn = String(frame.turn); // what the browser tests wait for
}

function renderStepper(frame) {
  slider.max = String(turns.latest);
  slider.value = String(frame.turn);
  $("first").disabled = $("prev").disabled = frame.turn <= 0;
  $("next").disabled = $("last").disabled = frame.turn >= turns.latest;
  const { board: view } = frame;
  $("turn-label").textContent = `Turn ${frame.turn} of ${turns.latest}${view.undone ? " · undone" : ""}`;
  let info = `${view.tiles_left} tiles left`;
  if (view.undone && view.undo) {
    // The placement is taken back: its player holds the same tile again (docs/undo.md).
    const tile = view.tiles[view.tiles.length - 1].tile;
    info = `${view.players[view.undo.player].name} to play tile ${tile} again · ${info}`;
  } else if (view.turn) {
    const bot = view.players[view.turn.player].bot ? " (bot)" : "";
    info = `${view.turn.name}${bot} to play${view.turn.tile ? ` tile ${view.turn.tile}` : ""} · ${info}`;
  } else if (view.status === "abandoned") info = "game abandoned";
  else if (view.over) info = "game over";
  $("turn-info").textContent = info;
  const note = turnNote(view);
  $("turn-note").textContent = note;
  $("turn-note").hidden = !note;
  const liveButton = $("live");
  liveButton.hidden = turns.over;
  liveButton.classList.toggle("on", follow);
  liveButton.textContent = follow ? "● live" : "go live";
  let status = turns.over ? (turns.status === "abandoned" ? "abandoned" : "game over") : follow ? "live" : "in progress";
  if (frame.scores.unscored_moves > 0) status += ` · scoring ${frame.scores.unscored_moves} move(s)…`;
  $("status").textContent = status;
}

/** What happened to this turn's placement, in words: taken back, or asked to be. */
function turnNote(view) {
  const undo = view.undo;
  if (!undo) return "";
  const asker = view.players[undo.player].name;
  if (view.undone) return `↶ ${asker} took this placement back (undo): the next turn places the tile again.`;
  if (undo.refused_by !== null) return `${view.players[undo.refused_by].name} refused ${asker}'s undo: the placement stands.`;
  if (!view.over && (undo.deadline_ms === null || undo.deadline_ms > Date.now())) {
    return `${asker} asks to take this placement back (undo).`;
  }
  return "";
}

/** A seat's mark: its colour and its number, the second cue (the board's meeples wear the
 * same number). */
function seatMark(seat) {
  return el("span", { class: `dot mark ${seatClass(seat)}`, "aria-hidden": "true" }, String(Number(seat) + 1));
}

/** The facts about a seat as short labels, always shown (no hover needed). */
function seatTags(seat, view, toPlay) {
  const facts = view.players[seat] || {};
  const tags = [];
  if (toPlay) tags.push(el("span", { class: "tag to-play" }, "▶ to play"));
  if (facts.bot) tags.push(el("span", { class: "tag bot" }, `bot · ${facts.bot.level}`));
  const timedOut = `${facts.timeouts} ${facts.timeouts === 1 ? "turn" : "turns"} timed out`;
  if (facts.out === "resigned") tags.push(el("span", { class: "tag out resigned" }, "resigned"));
  else if (facts.out === "timed_out") tags.push(el("span", { class: "tag out timed-out" }, `out: ${timedOut}`));
  else if (facts.timeouts > 0) tags.push(el("span", { class: "tag timeouts" }, timedOut));
  // A bot plays on for the seat since it left (ruleset on_leave, docs/takeover.md).
  if (facts.taken_over) tags.push(el("span", { class: "tag bot taken-over" }, `bot · ${facts.taken_over} plays on`));
  return tags;
}

/** The seat to play in this frame: the one whose turn it is, or at the turn of a placement
 * taken back, its player (who places the tile again). */
function playing(view) {
  if (view.undone && view.undo) return view.undo.player;
  return view.turn ? view.turn.player : null;
}

function renderPlayers(frame) {
  const { board: view, scores } = frame;
  // "If the game ended now" (the board view's engine scoring) for any turn before the end.
  const ended = !view.over;
  document.body.classList.toggle("in-progress", ended);
  $("if-ended-head").textContent = turns.over || frame.turn < turns.latest ? "If it ended here" : "If ended now";
  const rows = scores.players.map((player) => {
    const seat = player.seat;
    const toPlay = seat === playing(view);
    const facts = view.players[seat] || {};
    const tiles = player.track.point_tiles.map((face) =>
      el("span", { class: "point-tile", title: `point tile (R8.1): ${face}` }, String(face)),
    );
    const tags = seatTags(seat, view, toPlay);
    if (player.rank === 1) tags.unshift(el("span", { class: "tag winner", title: "winner (R7.5)" }, "★ winner"));
    const name = el(
      "th",
      { scope: "row", class: "name" },
      el(
        "div",
        { class: "who" },
        seatMark(seat),
        el("span", { class: "player-name", title: player.name }, player.name),
      ),
      tags.length ? el("div", { class: "tags" }, ...tags) : null,
    );
    const classes = [toPlay ? "current" : null, facts.out ? "out" : null].filter(Boolean).join(" ");
    return el(
      "tr",
      { "data-seat": seat, class: classes || null },
      name,
      el("td", { class: "score" }, el("span", { class: "score-value" }, String(player.score)), ...tiles),
      el(
        "td",
        { class: "meeples", title: "in supply / on the board" },
        el("span", { class: "supply" }, String(player.meeples.supply)),
        ` / ${player.meeples.on_board}`,
      ),
      el("td", { class: "if-ended" }, ended ? String(view.scores_if_ended[seat]) : "–"),
    );
  });
  $("players").tBodies[0].replaceChildren(...rows);
}

function renderEvents(frame) {
  const events = frame.scores.events.filter((event) => event.turn === frame.turn);
  board.clearHighlight();
  const items = events.map((event) => {
    const found = board.highlight(event);
    const item = el(
      "li",
      { tabindex: 0, class: `event kind-${event.kind}`, "data-kind": event.kind, "data-found": found },
      el("span", { class: "points" }, `+${event.points}`),
      " ",
      el("span", { class: "explanation" }, event.explanation),
    );
    const only = () => {
      board.clearHighlight();
      board.highlight(event);
      for (const other of $("events").children) other.classList.toggle("selected", other === item);
    };
    item.addEventListener("mouseenter", only);
    item.addEventListener("focus", only);
    item.addEventListener("click", only);
    return item;
  });
  if (!items.length) items.push(el("li", { class: "muted none" }, "nothing scored"));
  $("events").replaceChildren(...items);
  const result = frame.scores.result;
  let line = "";
  if (frame.board.status === "abandoned") {
    line = "Abandoned: nobody moved for too long. No final scoring, nobody wins.";
  } else if (result && frame.board.over) {
    line = `Final scores: ${frame.scores.players.map((p) => `${p.name} ${p.score}`).join(", ")}`;
  }
  $("result").textContent = line;
}

// -- live -------------------------------------------------------------------------------

function startLive() {
  if (live) return;
  live = new EventSource(`${gamePath(gameId)}/live`);
  live.addEventListener("open", () => {
    document.body.dataset.live = "open";
  });
  live.addEventListener("move", changed);
  live.addEventListener("score", changed);
  live.addEventListener("end", () => {
    stopLive();
    changed();
  });
  live.addEventListener("error", () => {
    // A stream that ended is reopened by the browser; one it gave up on (an error status)
    // is opened afresh after a pause, and what was missed is read from the views.
    if (live && live.readyState === EventSource.CLOSED) {
      stopLive();
      setTimeout(() => {
        if (!turns.over) startLive();
        changed();
      }, 2000);
    }
  });
}

function stopLive() {
  if (live) live.close();
  live = null;
  document.body.dataset.live = "closed";
}

/** Something happened in the game: read the latest position again (at most one read at a
 * time; events during a read cause one more). */
function changed() {
  if (updating) {
    again = true;
    return;
  }
  updating = (async () => {
    do {
      again = false;
      await update();
    } while (again);
  })()
    .catch(failed)
    .finally(() => {
      updating = null;
    });
}

async function update() {
  await turns.refreshLatest();
  turns.forgetChanging();
  if (follow) await go(turns.latest);
  else if (shown && !turns.peek(shown.turn)) await go(shown.turn); // it changed: read again
  else if (shown) renderStepper(shown); // the same turn, in a longer game
  if (turns.over && shown && turns.isFixed(shown)) stopLive();
  else if (turns.over && shown) awaitScoring();
}

/** A game over whose last moves the worker has not scored yet: an abandoned game gets no
 * final score event to say when it is done (docs/lifecycle.md), so read again shortly. */
function awaitScoring() {
  if (scoringTimer) return;
  scoringTimer = setTimeout(() => {
    scoringTimer = null;
    changed();
  }, 1000);
}

// -- start ------------------------------------------------------------------------------

function failed(error) {
  $("status").textContent = `error: ${error.message}`;
  document.body.dataset.error = error.message;
}

function wire() {
  $("first").addEventListener("click", () => jump(0));
  $("prev").addEventListener("click", () => step(-1));
  $("next").addEventListener("click", () => step(1));
  $("last").addEventListener("click", () => jump(turns.latest));
  $("live").addEventListener("click", () => jump(turns.latest));
  slider.addEventListener("input", () => jump(Number(slider.value)));
  $("open").addEventListener("change", () => {
    turns.open = $("open").checked;
    if (shown) go(shown.turn).catch(failed);
  });
  $("zoom-in").addEventListener("click", () => board.zoom(1.4));
  $("zoom-out").addEventListener("click", () => board.zoom(1 / 1.4));
  $("zoom-fit").addEventListener("click", () => board.reset());
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.target === slider) return; // the slider steps by itself
    const keys = {
      ArrowLeft: () => step(-1),
      ArrowRight: () => step(1),
      Home: () => jump(0),
      End: () => jump(turns.latest),
      "+": () => board.zoom(1.4),
      "-": () => board.zoom(1 / 1.4),
    };
    const action = keys[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });
}

async function start() {
  wire();
  const latest = await turns.refreshLatest();
  const names = latest.players.map((p) => p.name);
  $("title").textContent = names.join(" · ");
  document.title = `Carcassonne — ${names.join(", ")}`;
  const asked = new URLSearchParams(location.search).get("turn");
  const number = asked === null ? Number.NaN : Number.parseInt(asked, 10);
  follow = !turns.over && Number.isNaN(number);
  if (!turns.over) startLive();
  await go(Number.isNaN(number) ? turns.latest : number);
  // After the next paint: the page's load time (tests/bench/bench_page.py reads it).
  requestAnimationFrame(() => setTimeout(() => performance.mark("viewer-drawn")));
  // A game over but not scored to its end yet: the stream says when the worker is done.
  if (shown && !turns.isFixed(shown)) {
    startLive();
    if (turns.over) awaitScoring();
  }
}

start().catch(failed);
