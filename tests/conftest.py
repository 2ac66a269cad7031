"""Shared fixtures: a private redis-server on a free port (never the machine's own Redis), and
how the suite is split and ordered.

Markers (pyproject.toml):
- `integration`: every test under tests/integration and tests/contract (real processes);
  given here, by folder.
- `smoke`: the thin integration check `make test-fast` keeps (a game over HTTP, scored).
- `slow`: fault injection and soak (SIGKILL, outages, failover, slot migration, whole suites, the
  benchmarks run in smoke mode: tests/integration/test_benches_smoke.py).

`make test` runs everything with pytest-xdist (`--dist loadgroup`): each test module is one
group, so its module-scoped servers start once, on one worker. Modules that use a costly
session fixture share one group, so that fixture starts once in the run rather than once per
worker: every module on the session's Redis Cluster is in group `cluster`, every module on the
running suite (the contract tests too) in group `suite`. Groups holding slow tests are handed
out first, so the longest modules do not start last and leave the other workers idle.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from eventstore import port
from tests.redis_server import private_redis
from tests.stack import Stack, running_stack

# Every append in the suite runs each payload through its schema, so an engine event the
# stored schemas refuse fails the test that made it; the services trust the engine's events
# (eventstore.port.CHECK_PAYLOADS). This process, and every one it starts (they inherit the
# environment: gunicorn, Celery workers, the running suite).
port.CHECK_PAYLOADS = True
os.environ["EVENTSTORE_CHECK_PAYLOADS"] = "1"
# Every test client writes from 127.0.0.1 with the tests' API key (tests/integration/
# http_client.py `api_key`), far faster than any real client and from many modules at once on
# the session's Redis: the per-address and per-key rate limits (services/common/access.py)
# are off in the processes the tests start unless a test sets them (tests/integration/
# test_access_limits.py). `make run` as the suite tests run it keeps its own defaults
# (tests/integration/test_suite_run.py `Runner`; the README quick start runs under them).
RELAXED_LIMITS = {"ADDRESS_WRITE_RATE": "0", "API_KEY_RATE": "0"}
for _name, _value in RELAXED_LIMITS.items():
    os.environ.setdefault(_name, _value)

TESTS = Path(__file__).resolve().parent
REAL_PROCESSES = ("integration", "contract")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a redis-server started for this test session, on its own port and directory."""
    with private_redis() as url:
        yield url


@pytest.fixture
def redis_client(redis_url: str) -> redis.Redis:
    """A client of the session's private Redis."""
    return redis.Redis.from_url(redis_url)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/hosts (root, namespaces, minutes) is collected only when named on the command
    line (`make test-hosts`), never by a whole-suite run."""
    hosts = TESTS / "hosts"
    if collection_path != hosts:
        return None
    named = [Path(a.split("::")[0]).resolve() for a in config.args]
    return not any(p == hosts or hosts in p.parents for p in named)


# Session fixtures that start several processes: the modules using one share a group.
SHARED = {"redis_cluster": "cluster", "running_suite": "suite"}


def _where(item: pytest.Item) -> tuple[str, ...]:
    """The test's file, as parts of its path below tests/."""
    return item.path.resolve().relative_to(TESTS).parts


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    where = {item: _where(item) for item in items}  # one path lookup per test
    group: dict[tuple[str, ...], str] = {}  # module -> its xdist group
    for item in items:
        used = getattr(item, "fixturenames", ())  # a Function's; other items use none
        shared = [name for fixture, name in SHARED.items() if fixture in used]
        if shared:
            group[where[item]] = shared[0]
        else:
            group.setdefault(where[item], "/".join(where[item]))
    slow_groups: set[str] = set()
    for item in items:
        if where[item][0] in REAL_PROCESSES:
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group[where[item]]))
        if item.get_closest_marker("slow") is not None:
            slow_groups.add(group[where[item]])
    # Stable: the order inside a module is kept; groups with slow tests go first.
    items.sort(key=lambda item: group[where[item]] not in slow_groups)


@pytest.fixture(scope="session")
def running_suite() -> Iterator[Stack]:
    """The session's running suite (tests/stack.py), on a Redis of its own: the contract
    fuzzer's pings and deliveries to public https URLs stay queued on its broker, and no other
    test's worker takes its tasks (or it theirs)."""
    with private_redis() as url, running_stack(url) as stack:
        yield stack
