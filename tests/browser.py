"""A real headless browser for tests and benchmarks: the system's Chromium (Debian package
`chromium`), installed with apt-get when missing and we run as root (as CI does), driven by
Playwright for Python pointed at it (`executable_path`: Playwright never downloads a browser
of its own here).

Without a browser (not root, no apt-get, or the install failed) or without Playwright, the
callers skip with the reason shown (`chromium_or_skip`, `playwright_or_skip`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

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
)
_INSTALL_TRIED: list[str] = []  # the outcome of this process's one install attempt


def _browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def find_chromium() -> tuple[str | None, str]:
    """(the browser binary, "") or (None, why there is none). Installs it once if we may."""
    found = _browser()
    if found is not None:
        return found, ""
    if _INSTALL_TRIED:
        return None, _INSTALL_TRIED[0]
    if os.geteuid() != 0:
        why = (
            "chromium is not installed and this is not root "
            "(CI installs it: apt-get install chromium)"
        )
    elif shutil.which("apt-get") is None:
        why = "chromium is not installed and there is no apt-get to install it"
    else:
        why = _apt_install()
    _INSTALL_TRIED.append(why)
    found = _browser()
    return (found, "") if found is not None else (None, why)


def _apt_install() -> str:
    """apt-get install chromium (after apt-get update if that fails); "" or why it failed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    done = subprocess.run(install, env=env, capture_output=True, timeout=900)
    if done.returncode != 0:  # no package lists yet, or stale ones
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(install, env=env, capture_output=True, timeout=900)
    if done.returncode == 0 and _browser() is not None:
        return ""
    tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
    return "chromium is not installed and apt-get could not install it: " + " / ".join(tail)


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
