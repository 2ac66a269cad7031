"""`/metrics` in multiprocess mode while a worker's metrics file is still being created."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from services.common.observability import metrics_response


def test_a_file_not_yet_sized_is_skipped_and_the_others_are_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    for pid, value in ((101, 2.0), (102, 3.0)):
        written = MmapedDict(str(tmp_path / f"counter_{pid}.db"))
        key = mmap_key("cc_done", "cc_done_total", ["route"], ["/x"], "Things done")
        written.write_value(key, value, 0.0)
        written.close()
    (tmp_path / "counter_103.db").touch()  # created, not yet sized: a worker booting
    body = metrics_response().get_data(as_text=True)
    assert 'cc_done_total{route="/x"} 5.0' in body
