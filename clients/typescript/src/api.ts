// The typed HTTP client (openapi-fetch over the types openapi-typescript generates from
// docs/openapi.json) and a Server-Sent Events reader for GET /games/{id}/live.
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type Schemas = components["schemas"];
export type Api = Client<paths>;
export type LogItem = Schemas["LogItem"];

/** One client per role: `headers` carries the platform's API key or a seat's token. */
export function api(baseUrl: string, headers: Record<string, string> = {}): Api {
  return createClient<paths>({ baseUrl, headers });
}

/** What a 4xx or 5xx answer says (application/problem+json): its stable `code` and `hint`. */
export function problem(error: unknown, status: number): Error {
  const body = (error ?? {}) as { code?: string; hint?: string; detail?: string };
  return new Error(`${status} ${body.code ?? "?"}: ${body.detail ?? ""} (${body.hint ?? ""})`);
}

export type LiveEvent =
  | { kind: "item"; id: string; item: LogItem }
  | { kind: "end"; id: string; reason: string };

/**
 * Follow a game's live stream from `after` (a cursor; "0-0" is the start): yields every move
 * and score item once, in order, and the final `end`. The server closes a stream now and then
 * (SSE_MAX_SECONDS; a proxy's timeout; a restart): the reader reconnects with Last-Event-ID,
 * waiting the `retry` the server asked for, at most `maxReconnects` times in a row without news.
 */
export async function* live(
  baseUrl: string,
  gameId: string,
  after = "0-0",
  maxReconnects = 50,
): AsyncGenerator<LiveEvent> {
  let cursor = after;
  let retryMs = 500;
  let idle = 0;
  while (idle <= maxReconnects) {
    const response = await fetch(`${baseUrl}/games/${encodeURIComponent(gameId)}/live`, {
      headers: { Accept: "text/event-stream", "Last-Event-ID": cursor },
    });
    if (response.status !== 200 || response.body === null) {
      const text = await response.text();
      throw new Error(`GET /live answered ${response.status}: ${text.slice(0, 200)}`);
    }
    let news = false;
    for await (const event of sseEvents(response.body)) {
      if (event.retry !== undefined) retryMs = event.retry;
      if (event.id === undefined || event.data === undefined) continue; // a heartbeat
      cursor = event.id;
      news = true;
      if (event.event === "end") {
        yield { kind: "end", id: event.id, reason: JSON.parse(event.data).reason };
        return;
      }
      yield { kind: "item", id: event.id, item: JSON.parse(event.data) as LogItem };
    }
    idle = news ? 0 : idle + 1;
    await new Promise((resolve) => setTimeout(resolve, Math.min(retryMs, 2000)));
  }
  throw new Error(`GET /live: ${maxReconnects} reconnects in a row brought nothing`);
}

interface SseEvent {
  event?: string;
  id?: string;
  data?: string;
  retry?: number;
}

/** The events of a text/event-stream body (the WHATWG parsing rules, as far as we use them). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let current: SseEvent = {};
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
      if (line === "") {
        if (current.data !== undefined || current.retry !== undefined) yield current;
        current = {};
        continue;
      }
      if (line.startsWith(":")) continue; // a comment: the server's heartbeat
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") current.data = current.data === undefined ? value : `${current.data}\n${value}`;
      else if (field === "event") current.event = value;
      else if (field === "id") current.id = value;
      else if (field === "retry" && /^\d+$/.test(value)) current.retry = Number(value);
    }
  }
}
