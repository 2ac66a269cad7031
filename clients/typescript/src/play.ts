// Two phones play one whole game through the public API, as a mobile app would: the
// platform's server queues both players for a match with its API key (POST /tickets: each
// ticket's answer holds that player's seat token) and polls the tickets until they are
// matched; each phone holds only its seat's token, follows GET /games/{id}/live, and plays (a
// random legal move) when a draw makes it its turn. After the game the server reads both
// players' new ratings. Prints one JSON report; exits 1 on any surprise. `--help` says more.
import { randomUUID } from "node:crypto";
import { api, live, problem, type LogItem, type Schemas } from "./api.js";

const HELP = `usage: node dist/play.js [--direct]
  --direct            create the game with POST /games instead of matchmaking tickets
Environment:
  CC_BASE_URL         the API's one base URL (default http://localhost:8000, as make run)
  CC_API_KEY          the platform's API key (X-Api-Key; make run's games need none)
  CC_TIMEOUT_SECONDS  give up after this long (default 300)
  CC_SEED             seed of the random moves (default 1)
  CC_PLAYERS          the two players' ids (default: ana-<time>,ben-<time>)`;

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

type Platform = ReturnType<typeof api>;
interface Seated {
  gameId: string;
  seat: number;
  token: string;
  playerId: string;
}

/** Queue both players (one ticket each: its answer holds the seat's token, for this player
 * only) and poll the tickets until they are matched into one game: players who are not
 * online need no more than this. */
async function matched(platform: Platform, players: string[]): Promise<Seated[]> {
  const taken = [];
  for (const player_id of players) {
    const ticket = await platform.POST("/tickets", {
      body: { player_id, ruleset: "classic", players: players.length },
    });
    if (ticket.data === undefined) throw problem(ticket.error, ticket.response.status);
    taken.push({ id: ticket.data.ticket_id, token: ticket.data.token, player_id });
  }
  const seated: Seated[] = [];
  for (const ticket of taken) {
    for (let poll = 0; ; poll++) {
      const seen = await platform.GET("/tickets/{ticket_id}", {
        params: { path: { ticket_id: ticket.id } },
      });
      if (seen.data === undefined) throw problem(seen.error, seen.response.status);
      const { state, game_id, seat } = seen.data;
      if (state === "matched" && game_id !== null && seat !== null) {
        seated.push({ gameId: game_id, seat, token: ticket.token, playerId: ticket.player_id });
        break;
      }
      if (state !== "waiting" || poll >= 100) throw new Error(`ticket ${ticket.id}: ${state}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  if (new Set(seated.map((s) => s.gameId)).size !== 1) throw new Error("matched apart");
  return seated.sort((a, b) => a.seat - b.seat);
}

/** The old way, for comparison: the platform creates the game for players it knows. */
async function created(platform: Platform, players: string[]): Promise<Seated[]> {
  const made = await platform.POST("/games", {
    body: {
      players: players.map((player_id, i) => ({ name: `Player ${i + 1}`, player_id })),
      seat_order: players.map((_, i) => i),
    },
  });
  if (made.data === undefined) throw problem(made.error, made.response.status);
  const game = made.data;
  return game.players.map((seat) => {
    if (seat.token === null) throw new Error(`seat ${seat.seat} has no token (a bot seat?)`);
    return { gameId: game.game_id, seat: seat.seat, token: seat.token, playerId: seat.player_id ?? "" };
  });
}

/** A player's rating in the classic pool once the worker has rated the game (it rates
 * each finished game once, right after its final scoring: a short wait). */
async function rating(platform: Platform, player_id: string, gameId: string): Promise<unknown> {
  for (let poll = 0; poll < 100; poll++) {
    const found = await platform.GET("/v1/ratings", { params: { query: { player_id, history: 1 } } });
    const pool = found.data?.pools.find((p) => p.pool === "classic");
    if (pool !== undefined && pool.history[0]?.game_id === gameId) {
      return { player_id, mu: pool.mu, sigma: pool.sigma, rank: pool.rank, games: pool.games };
    }
    if (found.data === undefined && found.response.status !== 404) {
      throw problem(found.error, found.response.status);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${player_id}: not rated for game ${gameId}`);
}

async function main(): Promise<void> {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    console.log(HELP);
    return;
  }
  const platform = api(BASE, KEY ? { "X-Api-Key": KEY } : {});
  const now = Date.now().toString(36);
  const players = (process.env.CC_PLAYERS ?? `ana-${now},ben-${now}`).split(",");
  const seats = process.argv.includes("--direct")
    ? await created(platform, players)
    : await matched(platform, players);
  const gameId = seats[0]!.gameId;
  const phones = seats.map((s) => new Phone(s.seat, s.token, gameId));
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`no end within ${TIMEOUT_S} s`)), TIMEOUT_S * 1000).unref(),
  );
  const reports = await Promise.race([Promise.all(phones.map((p) => p.run())), timeout]);
  const scores = await platform.GET("/games/{game_id}/scores", {
    params: { path: { game_id: gameId } },
  });
  if (scores.data === undefined) throw problem(scores.error, scores.response.status);
  const ratings = KEY ? await Promise.all(seats.map((s) => rating(platform, s.playerId, gameId))) : null;
  console.log(
    JSON.stringify({
      game_id: gameId,
      matched: !process.argv.includes("--direct"),
      players: seats.map((s) => s.playerId),
      phones: reports,
      over: scores.data.over,
      final_scores: scores.data.result?.final_scores ?? null,
      winners: scores.data.result?.winners ?? null,
      ratings,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
