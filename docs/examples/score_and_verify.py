"""Carcassonne Cloud integration example: score a record, then receive signed webhooks.

    pip install requests
    python docs/examples/score_and_verify.py score game.json      # official scores
    python docs/examples/score_and_verify.py listen --port 9000   # a webhook receiver

Environment: CARCASSONNE_URL (default http://127.0.0.1:8000), CARCASSONNE_API_KEY, and for
`listen` WEBHOOK_SECRET (the secret you registered the hook with). An example only: the
project's tests do not import it.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

import requests

BASE = os.environ.get("CARCASSONNE_URL", "http://127.0.0.1:8000")


def score(path: str) -> int:
    """POST a record to /v1/score and print the result, or the first bad turn."""
    with open(path, "rb") as handle:
        body = handle.read()
    reply = requests.post(
        f"{BASE}/v1/score",
        data=body,
        headers={
            "X-Api-Key": os.environ["CARCASSONNE_API_KEY"],
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    if reply.status_code == 429:
        print(f"rate limited: retry in {reply.headers['Retry-After']} s", file=sys.stderr)
        return 1
    data = reply.json()
    if reply.status_code != 200:
        where = data["details"].get("index")
        print(f"{data['code']} (turn index {where}, {data['rule']}): {data['message']}")
        return 1
    for step in data["timeline"]:
        print(f"turn {step['index']:>2} player {step['player']} {step['tile']:<4} {step['scores']}")
    for event in data["events"] + data["final_scoring"]:
        print("  " + event["explanation"])
    print(f"final {data['final_scores']}, winners {data['winners']}")
    return 0


def verified(secret: str, raw_body: bytes, header: str | None) -> bool:
    """Whether X-Carcassonne-Signature is the HMAC-SHA256 of the raw body under the secret."""
    expected = "sha256=" + hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()
    return header is not None and hmac.compare_digest(expected, header)


def listen(port: int) -> int:
    """Receive deliveries: verify each, de-duplicate on the delivery id, answer 2xx fast."""
    secret = os.environ["WEBHOOK_SECRET"]
    seen: set[str] = set()  # a real receiver keeps this in its database

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not verified(secret, raw, self.headers.get("X-Carcassonne-Signature")):
                self.send_response(401)  # not from us (or a wrong secret): never trust it
                self.end_headers()
                return
            delivery = self.headers["X-Carcassonne-Delivery"]
            if delivery not in seen:  # a retry of something already handled is acknowledged
                seen.add(delivery)
                event = json.loads(raw)
                payload = event["payload"]
                if event["event"] == "GameScored":
                    print(f"game {event['game_id']} over: {payload['final_scores']}")
                else:
                    print(f"#{event['seq']} {payload['kind']} ({payload['rule']}): "
                          f"{payload['awarded']} -> {payload['totals']}")  # fmt: skip
            self.send_response(204)
            self.end_headers()

    print(f"listening on :{port}")
    HTTPServer(("0.0.0.0", port), Handler).serve_forever()
    return 0


def main() -> int:
    """Parse the command line and run `score` or `listen`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("score").add_argument("record")
    sub.add_parser("listen").add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    return score(args.record) if args.command == "score" else listen(args.port)


if __name__ == "__main__":
    sys.exit(main())
