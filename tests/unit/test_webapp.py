"""`ServiceApp.ensure_sync` gives Flask's answer, remembered per function."""

from __future__ import annotations

from typing import Any

from services.common.webapp import ServiceApp


def test_ensure_sync_remembers_flasks_answer_per_function() -> None:
    app = ServiceApp(__name__)
    wrapped: list[Any] = []

    def to_sync(func: Any) -> Any:
        wrapped.append(func)
        return "wrapped"

    app.async_to_sync = to_sync  # type: ignore[method-assign]

    def plain() -> str:
        return "ok"

    async def coroutine() -> str:
        return "ok"

    class View:
        def get(self) -> str:
            return "ok"

    assert app.ensure_sync(plain) is plain
    assert app.ensure_sync(coroutine) == "wrapped" and wrapped == [coroutine]
    first, second = View().get, View().get  # a bound method is new each time
    assert app.ensure_sync(first) is first and app.ensure_sync(second) is second
    assert len(app._coroutine) == 3  # plain, coroutine and View.get: one entry each
    assert app.ensure_sync(coroutine) == "wrapped" and len(wrapped) == 2
