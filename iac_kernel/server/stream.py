"""Client frames as the reader that :func:`iac_kernel.acp.serve.server.serve` takes: one
JSON-RPC message per text frame (or POST body), one per line on the reader.

Incoming frames are fed to an ``asyncio.StreamReader`` with a newline after each; a
newline or carriage return inside a frame can only be JSON whitespace (inside strings
they are escaped), so they become spaces and a frame never splits into two messages.
The way back is :class:`iac_kernel.server.link.Link` (one frame per line written).
"""

from __future__ import annotations

import asyncio

from iac_kernel.acp.wire.transport import READ_LIMIT

_NEWLINES = bytes.maketrans(b"\r\n", b"  ")


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
