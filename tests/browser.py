"""A real headless browser for tests and benchmarks: the system's Chromium (Debian package
`chromium`), installed with apt-get when missing and we run as root (as CI does), driven by
Playwright for Python pointed at it (`executable_path`: Playwright never downloads a browser
of its own here).

Without a browser (not root, no apt-get, or the install failed) or without Playwright, the
callers skip with the reason shown (`chromium_or_skip`, `playwright_or_skip`).
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from deploy.local.host import installed

if TYPE_CHECKING:
    from playwright.sync_api import Browser

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Root in CI, a throwaway profile: no sandbox; nothing from the browser's own services.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    # Autofill asks Google about the forms of a page (Swagger UI's inputs) on the page's
    # behalf: the browser's traffic, not the page's, and not wanted in a test either.
    "--disable-features=AutofillServerCommunication",
)
_INSTALL_TRIED: list[str] = []  # the outcome of this process's one install attempt


def _browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def find_chromium() -> tuple[str | None, str]:
    """(the browser binary, "") or (None, why there is none). Installs it once if we may."""
    return installed(
        "chromium", _browser, _INSTALL_TRIED, "CI installs it: apt-get install chromium"
    )


def skip_visibly(why: str) -> None:
    """Skip the test with `why` shown in the summary (pytest -q lists skips without their
    reasons; a warning shows)."""
    warnings.warn(f"headless browser test skipped: {why}", stacklevel=2)
    pytest.skip(why)


def chromium_or_skip() -> str:
    """The system Chromium's path, or skip the calling test with the reason."""
    found, why = find_chromium()
    if found is None:
        skip_visibly(why)
    assert found is not None
    return found


@contextmanager
def playwright_chromium(executable: str) -> Iterator[Browser]:
    """Headless `executable` driven by Playwright; closed (with Playwright's driver) after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
        )
        try:
            yield browser
        finally:
            browser.close()


def playwright_or_skip() -> None:
    """Skip the calling test when Playwright for Python is not installed (`make install`
    installs it: the `dev` extras)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        skip_visibly("playwright is not installed (make install installs the dev extras)")
