"""`/docs` renders with no network: Swagger UI comes from the service itself (vendored from a
pinned package, services/common/static/swagger-ui/), and a real headless Chromium with every
address but loopback cut off lists the operations.

Chromium comes from the system (the Debian package `chromium`, tests/browser.py): when it is
missing and we run as root (as CI does), it is installed with apt-get; otherwise the browser
test is skipped with the reason shown in the summary.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.webapp import SWAGGER_UI_DIR, SWAGGER_UI_URL
from tests.browser import CHROMIUM_ARGS, chromium_or_skip

from .http_client import call, gunicorn

PAGE_SITE = "http://127.0.0.1 "  # a network isolation key: the top frame's site, then the frame's

SERVICES = {
    "command": (
        "services.command.wsgi:app",
        "deploy/gunicorn/command.py",
        ["/games", "/games/{game_id}/turn", "/games/{game_id}/turns", "/v1/score"],
    ),
    "query": (
        "services.query.wsgi:app",
        "deploy/gunicorn/query.py",
        ["/games/{game_id}/board", "/games/{game_id}/scores", "/games/{game_id}/events"],
    ),
}


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip()


@pytest.fixture(scope="module", params=sorted(SERVICES))
def service(request: pytest.FixtureRequest, redis_url: str) -> Iterator[tuple[str, list[str]]]:
    """(base URL, operation paths its docs must list) of a real gunicorn-served service."""
    app, config, paths = SERVICES[request.param]
    with gunicorn(app, config, {"REDIS_URL": redis_url}, workers=1) as base:
        yield base, paths


def render_offline(browser: str, url: str) -> tuple[str, list[str]]:
    """The DOM of `url` once its scripts ran in headless Chromium that can reach 127.0.0.1
    only, and every URL the page asked for (from Chromium's network log)."""
    profile = Path(tempfile.mkdtemp(prefix="cc-chromium-"))
    netlog = profile / "netlog.json"
    argv = [
        browser,
        "--headless",
        *CHROMIUM_ARGS,
        f"--user-data-dir={profile}",
        # The network cut: no name resolves and anything not on loopback goes to a dead proxy.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=127.0.0.1",
        f"--log-net-log={netlog}",
        # Virtual time runs the page's scripts and waits for its fetches (the spec) then dumps.
        "--virtual-time-budget=20000",
        "--dump-dom",
        url,
    ]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        return done.stdout.decode(errors="replace"), page_requests(netlog)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def page_requests(netlog: Path) -> list[str]:
    """The URLs the page (not the browser's own update and sync services) asked for: the
    requests whose network isolation key is the page's site, loopback."""
    text = netlog.read_text(errors="replace")
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short lacks its closing brackets
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return sorted(
        {
            event["params"]["url"]
            for event in log["events"]
            if event["type"] == start_job
            and event.get("params", {}).get("network_isolation_key", "").startswith(PAGE_SITE)
        }
    )


def test_docs_render_in_a_headless_browser_with_the_network_cut(chromium, service) -> None:
    base, paths = service
    dom, asked = render_offline(chromium, base + "/docs")
    listed = set(re.findall(r'data-path="([^"]+)"', dom))
    assert listed, f"Swagger UI rendered no operation; the page was:\n{dom[:2000]}"
    missing = [p for p in paths if p not in listed]
    assert not missing, f"operations not listed: {missing} (listed: {sorted(listed)})"
    assert base + SWAGGER_UI_URL + "swagger-ui-bundle.js" in asked, asked
    elsewhere = [u for u in asked if not u.startswith(base + "/")]
    assert not elsewhere, f"the page asked for more than its own service: {elsewhere}"


def test_the_docs_page_names_no_other_host(redis_url: str) -> None:
    """No browser needed: the page's own HTML loads everything from the service."""
    app, config, _ = SERVICES["command"]
    with gunicorn(app, config, {"REDIS_URL": redis_url}, workers=1) as base:
        status, page = call(base, "GET", "/docs")
        assert status == 200
        assert re.findall(r'(?:src|href)="(https?:)?//', page) == [], page
        assert '"validatorUrl": null' in page  # no badge fetched from Swagger's validator
        for name in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"):
            status, _ = call(base, "GET", SWAGGER_UI_URL + name)
            assert status == 200, name


def test_the_vendored_files_are_the_pinned_packages() -> None:
    """Each file in static/swagger-ui is byte for byte the one SOURCE.md lists."""
    source = (SWAGGER_UI_DIR / "SOURCE.md").read_text()
    listed = {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", source, re.M)}
    assert "swagger-ui-dist`, exactly **5.35.0**" in source
    on_disk = {p.name for p in SWAGGER_UI_DIR.iterdir()} - {"SOURCE.md"}
    assert on_disk == set(listed), (on_disk, set(listed))
    for name, digest in listed.items():
        assert hashlib.sha256((SWAGGER_UI_DIR / name).read_bytes()).hexdigest() == digest, name
