"""Latency between hosts without netem (this kernel has none): a userspace TCP proxy that
holds every chunk it relays for `delay_ms` before passing it on, in each direction, and
also holds each new connection that long before it connects onwards (the SYN's trip).

It runs an asyncio loop on a thread of its own, so it listens in the network namespace of
the thread that starts it (tests/hosts/netns.py `Network.enter`). Bounded: at most
`max_connections` relayed at once (more are closed at once), and each direction holds at
most `MAX_HELD` bytes in flight (reading stops until the far side takes them). When one side
ends its stream, what is held is delivered and the other side's write half is closed (a
half-close, as TCP carries it); a reset or an error on either side closes both.

`delay_ms` may be changed while it runs: chunks read after the change get the new delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

CHUNK = 64 * 1024  # the most read at once
MAX_HELD = 16 * CHUNK  # bytes read and not yet written, per direction of one connection


@dataclass
class DelayProxy:
    """Listens on `listen` (host, port; port 0: any free one) and relays to `target`."""

    listen: tuple[str, int]
    target: tuple[str, int]
    delay_ms: float = 0.0
    max_connections: int = 256
    relayed: int = 0  # connections relayed so far
    refused: int = 0  # connections closed at once: `max_connections` were open
    port: int = 0  # the port it listens on, once started
    _open: set[asyncio.Task[None]] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Start listening (returns once it does); `port` is then set."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._relay, *self.listen, backlog=128)
                )
            except OSError as exc:
                failed.append(exc)
                ready.set()
                loop.close()
                return
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="delay-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the delay proxy did not start listening in {timeout:g} s")
        if failed:
            raise failed[0]

    def stop(self, timeout: float = 10.0) -> None:
        """Stop listening, close every relayed connection (both sides) and end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        done = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        with contextlib.suppress(TimeoutError):
            done.result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    async def _close_all(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._open) >= self.max_connections or task is None:
            self.refused += 1
            writer.close()
            return
        self._open.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            await asyncio.sleep(self.delay_ms / 1000)  # the connection's way there
            far_reader, upstream = await asyncio.open_connection(*self.target)
            self.relayed += 1
            await _together(self._pipe(reader, upstream), self._pipe(far_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass  # the connection ends: both sides are closed below
        finally:
            self._open.discard(task)
            for side in (writer, upstream):
                if side is not None:
                    side.close()
                    with contextlib.suppress(OSError, asyncio.CancelledError):
                        await side.wait_closed()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Relay one direction: each chunk written `delay_ms` after it was read, in order; at
        the end of the stream, what is held, then a half-close."""
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=MAX_HELD // CHUNK)

        async def take() -> None:
            while chunk := await reader.read(CHUNK):
                await held.put((time.monotonic() + self.delay_ms / 1000, chunk))
            await held.put((0.0, b""))  # the end of the stream, after what is held

        async def give() -> None:
            while True:
                due, chunk = await held.get()
                if not chunk:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(chunk)
                await writer.drain()

        await _together(take(), give())


async def _together(*steps: Coroutine[Any, Any, None]) -> None:
    """Run `steps` at once until all end; the first to raise cancels the others (then its
    error is raised)."""
    tasks = [asyncio.ensure_future(step) for step in steps]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
