"""An asyncio HTTP/1.1 client for many live (SSE) streams and views at once, for tests and
benchmarks: one event loop and raw sockets, so 5,000 streams do not need 5,000 threads.
Standard library only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import time
from typing import Any


def raise_fd_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 65_536)
    if soft != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def host_port(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


async def _head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status and headers (lower-case names) of a response."""
    line = await reader.readline()
    if not line:
        raise ConnectionError("connection closed before the status line")
    status = int(line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while (size := int((await reader.readline()).split(b";")[0], 16)) > 0:
            out += (await reader.readexactly(size + 2))[:-2]
        await reader.readline()
        return out
    return await reader.readexactly(int(headers.get("content-length", "0")))


class Views:
    """GETs over one keep-alive connection (reopened when the server closes it)."""

    def __init__(self, base: str) -> None:
        self.host, self.port = host_port(base)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> tuple[int, dict[str, str], bytes, float]:
        """Status, headers, body and the seconds it took (from sending to the last byte)."""
        for attempt in (1, 2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            assert self.reader is not None
            started = time.perf_counter()
            try:
                self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
                await self.writer.drain()
                status, headers = await _head(self.reader)
                body = await _body(self.reader, headers)
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if attempt == 2:
                    raise
                continue  # a keep-alive connection the server had just closed
            if headers.get("connection", "").lower() == "close":
                await self.close()
            return status, headers, body, time.perf_counter() - started
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


class Stream:
    """One `GET /games/{id}/live`, read as Server-Sent Events."""

    def __init__(self, base: str, game_id: str, last_id: str | None = None) -> None:
        self.host, self.port = host_port(base)
        self.game_id = game_id
        self.last_id = last_id
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""  # of a refused stream
        self.events: list[dict[str, Any]] = []  # with "id" and "event" beside the data
        self.comments: list[str] = []
        self.ended = False  # the server ended the response (terminating chunk or EOF)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._text = ""
        self._fields: dict[str, str] = {}

    async def open(self) -> int:
        """Send the request and read the response head; the status (the body if not 200)."""
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        extra = f"Last-Event-ID: {self.last_id}\r\n" if self.last_id else ""
        self._writer.write(
            f"GET /games/{self.game_id}/live HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Accept: text/event-stream\r\n{extra}\r\n".encode()
        )
        await self._writer.drain()
        self.status, self.headers = await _head(self._reader)
        if self.status != 200:
            self.body = await _body(self._reader, self.headers)
            await self.close()
        return self.status

    def json(self) -> Any:
        return json.loads(self.body)

    async def _chunk(self) -> bool:
        """Read one chunk of the body into the text buffer; False at the end of the body."""
        assert self._reader is not None
        line = await self._reader.readline()
        if not line:
            return False
        size = int(line.split(b";")[0], 16)
        if size == 0:
            await self._reader.readline()
            return False
        self._text += (await self._reader.readexactly(size + 2))[:-2].decode()
        return True

    async def next(self) -> tuple[str, Any] | None:
        """The next ("event", dict) or ("comment", text); None when the response ended."""
        while True:
            while "\n" in self._text:
                line, self._text = self._text.split("\n", 1)
                if line.startswith(":"):
                    self.comments.append(line)
                    return "comment", line
                if line:
                    name, _, value = line.partition(": ")
                    self._fields[name] = value
                elif "data" in self._fields:
                    fields, self._fields = self._fields, {}
                    event = {"id": fields.get("id"), "event": fields.get("event")}
                    event.update(json.loads(fields["data"]))
                    self.events.append(event)
                    return "event", event
                else:
                    self._fields = {}
            if self.ended:
                return None
            try:
                more = await self._chunk()
            except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                more = False
            if not more:
                self.ended = True

    async def until_end(self) -> None:
        """Read everything until the server ends the response."""
        while await self.next() is not None:
            pass

    async def close(self) -> None:
        """Drop the connection (a client that goes away)."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
            self._writer = None
