"""A WebSocket seen as the reader/writer pair that :func:`iac_kernel.acp.server.serve`
takes: one JSON-RPC message per text frame on the socket, one per line on the pair.

Incoming frames are fed to an ``asyncio.StreamReader`` with a newline after each; a
newline or carriage return inside a frame can only be JSON whitespace (inside strings
they are escaped), so they become spaces and a frame never splits into two messages.
Outgoing lines (the line transport writes several at once) go out as one text frame
each.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from iac_kernel.acp.transport import READ_LIMIT

_NEWLINES = bytes.maketrans(b"\r\n", b"  ")


class Socket(Protocol):
    """What the pair needs of the WebSocket (tornado's ``WebSocketHandler``)."""

    def write_message(self, message: str, binary: bool = False) -> Any: ...

    def close(self, code: int | None = None, reason: str | None = None) -> None: ...


class FrameReader:
    """Frames in, lines out."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader(limit=READ_LIMIT)

    def feed(self, message: str) -> None:
        data = message.encode("utf-8", "surrogatepass")
        self.reader.feed_data(data.translate(_NEWLINES) + b"\n")

    def end(self) -> None:
        if not self.reader.at_eof():
            self.reader.feed_eof()


class FrameWriter:
    """Lines in, text frames out (the transport's :class:`~iac_kernel.acp.transport.Writer`)."""

    def __init__(self, socket: Socket) -> None:
        self.socket = socket
        self.closed = False
        self._last: Any = None

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionError("the WebSocket is closed")
        for line in data.split(b"\n"):
            if line:
                try:
                    self._last = self.socket.write_message(line.decode("utf-8", "replace"))
                except Exception as exc:  # tornado's WebSocketClosedError
                    self.closed = True
                    raise ConnectionError(f"the WebSocket is closed: {exc}") from None

    async def drain(self) -> None:
        last, self._last = self._last, None
        if last is not None:
            try:
                await last
            except Exception as exc:
                self.closed = True
                raise ConnectionError(f"the WebSocket is closed: {exc}") from None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                self.socket.close()
