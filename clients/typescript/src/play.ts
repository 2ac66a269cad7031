// Two phones play one whole game through the public API, as a mobile app would: the
// platform's server creates the game with its API key; each phone holds only its seat's token,
// follows GET /games/{id}/live, and plays (a random legal move) when a draw makes it its turn.
// Prints one JSON report; exits 1 on any surprise. `node dist/play.js --help` says more.
import { randomUUID } from "node:crypto";
import { api, live, problem, type LogItem, type Schemas } from "./api.js";

const HELP = `usage: node dist/play.js
Environment:
  CC_BASE_URL         the API's one base URL (default http://localhost:8000, as make run)
  CC_API_KEY          the platform's API key (X-Api-Key; make run's games need none)
  CC_TIMEOUT_SECONDS  give up after this long (default 300)
  CC_SEED             seed of the random moves (default 1)`;

const BASE = (process.env.CC_BASE_URL ?? "http://localhost:8000").replace(/\/$/, "");
const KEY = process.env.CC_API_KEY;
const TIMEOUT_S = Number(process.env.CC_TIMEOUT_SECONDS ?? "300");

/** A small seeded generator (mulberry32): the same seed plays the same moves. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = random(Number(process.env.CC_SEED ?? "1"));

interface PhoneReport {
  seat: number;
  played: number;
  items: number;
  in_order: boolean;
  end: string;
}

class Phone {
  private readonly client;
  private played = 0;
  private readonly seen: LogItem[] = [];

  constructor(
    readonly seat: number,
    token: string,
    readonly gameId: string,
  ) {
    this.client = api(BASE, { Authorization: `Bearer ${token}` });
  }

  /** Follow the game to its end, playing this seat's turns; what it saw. */
  async run(): Promise<PhoneReport> {
    for await (const event of live(BASE, this.gameId)) {
      if (event.kind === "end") {
        return {
          seat: this.seat,
          played: this.played,
          items: this.seen.length,
          in_order: inOrder(this.seen),
          end: event.reason,
        };
      }
      this.seen.push(event.item);
      if (event.item.stream === "moves" && event.item.type === "TileDrawn") {
        await this.maybePlay(event.item.seq);
      }
    }
    throw new Error(`seat ${this.seat}: the live stream ended without its end event`);
  }

  /** After the draw at move `seq`: if it is this seat's turn, play a random legal move. */
  private async maybePlay(seq: number): Promise<void> {
    const game_id = this.gameId;
    for (let attempt = 0; attempt < 20; attempt++) {
      const turn = await this.client.GET("/games/{game_id}/turn", { params: { path: { game_id } } });
      if (turn.data === undefined) throw problem(turn.error, turn.response.status);
      const view: Schemas["TurnView"] = turn.data;
      if (view.seq < seq) continue; // a view from before the draw we were told of: read again
      if (view.over || view.player !== this.seat) return;
      const placement = view.placements[Math.floor(rand() * view.placements.length)];
      if (placement === undefined) throw new Error(`no placement offered at move ${view.seq}`);
      const spots = placement.meeples;
      const spot = spots.length > 0 && rand() < 0.5 ? spots[Math.floor(rand() * spots.length)] : undefined;
      const played = await this.client.POST("/games/{game_id}/turns", {
        params: {
          path: { game_id },
          // If-Match: refused (409) if the game moved on since the view; the key makes a
          // retry after a lost answer safe.
          header: { "If-Match": String(view.seq), "Idempotency-Key": randomUUID() },
        },
        body: {
          x: placement.x,
          y: placement.y,
          rotation: placement.rotation,
          meeple: spot === undefined ? null : { ...spot },
        },
      });
      if (played.data !== undefined) {
        this.played += 1;
        return;
      }
      if (played.response.status === 409) continue; // stale: read the game again
      throw problem(played.error, played.response.status);
    }
    throw new Error(`seat ${this.seat}: 20 tries at move ${seq} without a fresh view`);
  }
}

/** Each stream's items came once each, numbered 1, 2, 3 … with no gap. */
function inOrder(items: LogItem[]): boolean {
  const next: Record<string, number> = { moves: 1, scores: 1 };
  return items.every((item) => {
    const expected = next[item.stream] ?? 1;
    next[item.stream] = expected + 1;
    return item.seq === expected;
  });
}

async function main(): Promise<void> {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    console.log(HELP);
    return;
  }
  const platform = api(BASE, KEY ? { "X-Api-Key": KEY } : {});
  const created = await platform.POST("/games", {
    body: { players: [{ name: "Ana" }, { name: "Ben" }], seat_order: [0, 1] },
  });
  if (created.data === undefined) throw problem(created.error, created.response.status);
  const game = created.data;
  const phones = game.players.map((seat) => {
    if (seat.token === null) throw new Error(`seat ${seat.seat} has no token (a bot seat?)`);
    return new Phone(seat.seat, seat.token, game.game_id);
  });
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`no end within ${TIMEOUT_S} s`)), TIMEOUT_S * 1000).unref(),
  );
  const reports = await Promise.race([Promise.all(phones.map((p) => p.run())), timeout]);
  const scores = await platform.GET("/games/{game_id}/scores", {
    params: { path: { game_id: game.game_id } },
  });
  if (scores.data === undefined) throw problem(scores.error, scores.response.status);
  console.log(
    JSON.stringify({
      game_id: game.game_id,
      phones: reports,
      over: scores.data.over,
      final_scores: scores.data.result?.final_scores ?? null,
      winners: scores.data.result?.winners ?? null,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
