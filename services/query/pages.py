"""The game viewer's web pages: `/` (recent games) and `/games/{id}/view` (one game).

The pages are static HTML shells; their scripts (plain ES modules under `static/viewer/`,
served at `/viewer/…` by this service, nothing built and nothing from another host) read the
public views — `/games`, `/board`, `/scores`, `board.svg`, `/live` — as any app would. So the
pages add no second way to compute a view, and everything they show is what the API says.

Player names are user input: the scripts only ever set them as text, and the pages carry a
Content-Security-Policy that runs no inline script and loads nothing from elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flask
from flask import Response, current_app
from flask.views import MethodView
from flask_smorest import Blueprint

from services.common.webapp import checked_game_id

VIEWER_DIR = Path(__file__).parent / "static" / "viewer"
VIEWER_URL = "/viewer"
# Self only: no inline script or style, no other host, no plugins, not framed elsewhere.
# `data:` images are for the board's own pictures, should a tile use one.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HTML_PAGE: dict[str, Any] = {
    "content": {"text/html": {"schema": {"type": "string", "description": "an HTML page"}}}
}

blp = Blueprint("pages", __name__, description="Web pages: the game list and the game viewer")
# The pages' scripts and styles: files from the repository, outside the API document (as
# /docs' Swagger UI files are).
assets = flask.Blueprint("viewer", __name__, static_folder=VIEWER_DIR, static_url_path=VIEWER_URL)


def page(name: str) -> Response:
    """One of the viewer's HTML files, with the headers every page carries."""
    resp = Response((VIEWER_DIR / name).read_bytes(), mimetype="text/html")
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-cache"
    return resp


@blp.route("/")
class Index(MethodView):
    @blp.doc(responses={"200": {"description": "the recent games, as a web page", **HTML_PAGE}})
    def get(self) -> Response:
        """A web page listing the recent games (newest first), each linked to its viewer."""
        return page("index.html")


@blp.route("/games/<game_id>/view")
class View(MethodView):
    @blp.doc(responses={"200": {"description": "the game viewer, as a web page", **HTML_PAGE}})
    def get(self, game_id: str) -> Response:
        """A web page showing a game: the board (pan and zoom), players, the score track
        (R8.1), stepping turn by turn (`?turn=N` keeps the turn), each score explained and
        its feature highlighted, and live updates while the game is played."""
        current_app.extensions["query_service"].require(checked_game_id(game_id))
        return page("view.html")


def register(app: flask.Flask, api: Any) -> None:
    """Serve the pages (in the API document) and their files on `app`."""
    api.register_blueprint(blp)
    app.register_blueprint(assets)
