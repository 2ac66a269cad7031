"""The services' gunicorn configs wire the shared server hooks (services/common/gunicorn_hooks)."""

from __future__ import annotations

import gc
import runpy
import weakref
from pathlib import Path

import pytest

from services.common import gunicorn_hooks

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("service", ["command", "query"])
def test_each_worker_freezes_what_it_loaded_before_serving(
    service: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The config names its metrics directory when none is set: give it one of the test's.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    config = runpy.run_path(str(ROOT / "deploy" / "gunicorn" / f"{service}.py"))
    hook = config["post_worker_init"]  # gunicorn looks server hooks up by name
    assert hook is gunicorn_hooks.post_worker_init
    assert "post_worker_init" in config["__all__"]
    gc.unfreeze()
    assert gc.get_freeze_count() == 0

    class Loaded:  # what loading leaves behind: a cycle nobody holds any more
        pass

    cycle = Loaded()
    cycle.me = cycle  # type: ignore[attr-defined]
    left = weakref.ref(cycle)
    del cycle
    try:
        hook(None)
        # Everything alive now (this process's modules, at the least) is out of the
        # collector's generations: a full collection no longer walks it.
        assert gc.get_freeze_count() > 10_000
        assert left() is None  # the garbage was collected first, not frozen for good
    finally:
        gc.unfreeze()
