// Reading the query service's public views, as any app would.

export class HttpError extends Error {
  constructor(url, status, body) {
    super(body && body.message ? `${status} ${body.code}: ${body.message}` : `${status} from ${url}`);
    this.status = status;
    this.body = body;
  }
}

async function fetched(url, accept) {
  const reply = await fetch(url, { headers: { Accept: accept } });
  if (!reply.ok) {
    let body = null;
    try {
      body = await reply.json();
    } catch {
      // not the API's error shape: the status says enough
    }
    throw new HttpError(url, reply.status, body);
  }
  return reply;
}

export async function getJSON(url) {
  return (await fetched(url, "application/json")).json();
}

export async function getText(url) {
  return (await fetched(url, "image/svg+xml, text/plain")).text();
}

/** The base path of a game's views. */
export function gamePath(gameId) {
  return `/games/${encodeURIComponent(gameId)}`;
}
