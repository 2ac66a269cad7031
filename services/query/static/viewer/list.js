// The recent games (/games, newest first), each linked to its viewer; filter by status.

import { getJSON } from "./api.js";
import { el } from "./dom.js";

const body = document.querySelector("#games tbody");
const more = document.getElementById("more");
const STATUS_WORDS = { in_progress: "in progress", over: "over", abandoned: "abandoned" };
let status = "";
let next = null;

function row(game) {
  const link = el("a", { href: `/games/${encodeURIComponent(game.game_id)}/view` }, game.game_id.slice(0, 8));
  const players = el("td", { class: "players" });
  game.players.forEach((name, seat) => {
    if (seat) players.append(", ");
    players.append(el("span", { class: "player-name" }, name));
  });
  const updated = new Date(game.updated_ms);
  return el(
    "tr",
    { "data-game": game.game_id },
    el("td", {}, link),
    players,
    el("td", { class: "scores" }, game.scores ? game.scores.join(" – ") : "–"),
    el("td", { class: `status ${game.status}` }, STATUS_WORDS[game.status] || game.status),
    el("td", {}, el("time", { datetime: updated.toISOString() }, updated.toLocaleString())),
  );
}

async function load(append) {
  const query = new URLSearchParams({ limit: "50" });
  if (status) query.set("status", status);
  if (append && next) query.set("cursor", next);
  const page = await getJSON(`/games?${query}`);
  const rows = page.games.map(row);
  if (append) body.append(...rows);
  else body.replaceChildren(...rows);
  next = page.next;
  more.hidden = !next;
  document.getElementById("empty").hidden = body.children.length > 0;
  document.body.dataset.loaded = "true";
}

for (const button of document.querySelectorAll(".filters button")) {
  button.addEventListener("click", () => {
    status = button.dataset.status;
    for (const other of document.querySelectorAll(".filters button")) {
      other.setAttribute("aria-pressed", String(other === button));
    }
    load(false).catch(failed);
  });
}
more.addEventListener("click", () => load(true).catch(failed));

function failed(error) {
  document.getElementById("empty").hidden = false;
  document.getElementById("empty").textContent = `error: ${error.message}`;
}

load(false).catch(failed);
