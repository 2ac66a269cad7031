"""`make run` picks its instances' private ports before nginx binds the public ones: the
kernel can hand a public port out again in between, so a pick must skip every promised port
(seen in CI: nginx could not bind the command port a gunicorn instance had just taken)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from deploy.local import run


class ScriptedSocket:
    """A socket whose kernel picks come from a list: the collision made deterministic."""

    picks: ClassVar[list[int]] = []

    def __enter__(self) -> ScriptedSocket:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self.port = ScriptedSocket.picks.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_promised_to_nginx_is_never_given_to_an_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run.socket, "socket", ScriptedSocket)
    ScriptedSocket.picks = [8000, 8001, 40123]
    assert run._free_port("127.0.0.1", {8000, 8001}) == 40123
    ScriptedSocket.picks = [8000]
    assert run._free_port("127.0.0.1") == 8000  # nothing promised: the kernel's pick


def test_the_search_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run.socket, "socket", ScriptedSocket)
    ScriptedSocket.picks = [8000] * 100
    with pytest.raises(SystemExit, match="no free port"):
        run._free_port("127.0.0.1", {8000})
