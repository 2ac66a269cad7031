"""`make run` and nginx (issue 33): with nginx, one public base URL; nginx missing is
installed when `make run` runs as root (as the tests do), otherwise the suite keeps two base
URLs and says so. (The suite itself, with nginx: tests/integration/test_suite_run.py.)"""

from __future__ import annotations

import pytest

from deploy.local import host, run


def said(nginx: str | None, why: str, *args: str) -> tuple[str, list[str]]:
    lines: list[str] = []
    urls = run.served_at(
        run.parse_args(["--command-port", "8100", *args]), nginx, why, lines.append
    )
    return urls, lines


def test_with_nginx_the_banner_gives_one_base_url_for_every_path() -> None:
    urls, lines = said("/usr/sbin/nginx", "")
    assert (
        urls == "API http://127.0.0.1:8100 (every path), query service alone http://127.0.0.1:8001"
    )
    assert lines == []


def test_without_nginx_the_suite_keeps_two_base_urls_and_says_so() -> None:
    urls, lines = said(None, "--no-proxy", "--no-proxy")
    assert urls == "command http://127.0.0.1:8100, query http://127.0.0.1:8001"
    assert "nginx not started (--no-proxy): TWO base URLs" in lines[0]


def test_nginx_missing_is_installed_as_root_and_named_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run, "nginx_binary", lambda explicit=None: None)
    monkeypatch.setattr(host, "nginx_binary", lambda explicit=None: None)
    installs: list[list[str]] = []

    def apt(argv: list[str], **_: object) -> object:
        installs.append(argv)
        return type("Done", (), {"returncode": 100, "stderr": b"E: no nginx here"})()

    monkeypatch.setattr(host.subprocess, "run", apt)
    monkeypatch.setattr(host.shutil, "which", lambda name: f"/usr/bin/{name}")
    for euid, installed in ((1000, False), (0, True)):
        monkeypatch.setattr(host, "_INSTALL_TRIED", [])
        monkeypatch.setattr(run.os, "geteuid", lambda euid=euid: euid)
        monkeypatch.setattr(host.os, "geteuid", lambda euid=euid: euid)
        installs.clear()
        lines: list[str] = []
        found, why = run.proxy_binary(None, lines.append)
        assert found is None
        if installed:
            assert ["apt-get", "install", "-y", "--no-install-recommends", "nginx"] in installs
            assert lines == [
                "make run: nginx is not installed: installing it (apt-get install nginx)"
            ]
            assert why.startswith("nginx is not installed and apt-get could not install it")
        else:
            assert installs == [] and lines == []
            assert "this is not root" in why and "apt-get install nginx" in why
