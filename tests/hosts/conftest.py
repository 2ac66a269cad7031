"""tests/hosts runs only when named (`make test-hosts`): it needs root and takes minutes, so
`make test` leaves it out (tests/conftest.py `pytest_ignore_collect`)."""

from __future__ import annotations

import os
import shutil

import pytest

from deploy.local.host import installed
from tests.hosts.netns import why_unavailable

_TRIED: list[str] = []  # this process's one attempt to install nftables


@pytest.fixture(scope="session")
def hosts_possible() -> None:
    """Skip, saying why, unless namespaces and nft work here; as root, nftables is installed
    with apt-get when missing (as the tests install nginx and PostgreSQL)."""
    if os.geteuid() != 0:
        pytest.skip("tests/hosts needs root: network namespaces and nftables rules")
    found, why = installed("nftables", lambda: shutil.which("nft"), _TRIED,
                           "`sudo apt-get install nftables`")  # fmt: skip
    if found is None:
        pytest.skip(why)
    why = why_unavailable()
    if why:
        pytest.skip(why)
