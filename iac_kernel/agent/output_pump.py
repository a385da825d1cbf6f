"""Live tool output: chunks a running tool prints become coalesced ``ToolCallOutput`` events.

The tool calls ``push(text)`` (``ToolContext.on_output``) from the loop's thread or any
other; chunks are buffered and sent as one event at most every ``interval`` seconds, in
order. :meth:`OutputPump.close` sends what is left before the call's result event, so a
front end always sees the output before the end of the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from iac_kernel.events import OUTPUT_TAIL_CHARS, AgentEvent, ToolCallOutput
from iac_kernel.redact import redact

#: Seconds between two output events of one call.
OUTPUT_INTERVAL = 0.1

Send = Callable[[AgentEvent], Awaitable[None]]


class OutputPump:
    """Buffers one call's live output and emits it as coalesced events."""

    def __init__(
        self,
        send: Send,
        call_id: str,
        *,
        interval: float = OUTPUT_INTERVAL,
        masker: Any = None,
    ):
        self.send = send
        #: Masks Terraform's sensitive values (``feed(text) -> str``, ``flush() -> str``;
        #: iac_kernel.terraform.sensitive.StreamMasker); it may hold text back until close.
        self.masker = masker
        self.call_id = call_id
        self.interval = interval
        self.loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._buffer: list[str] = []
        self._tail = ""
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: Everything printed (redacted), for a front end that wants it after a cancel.
        self.printed: list[str] = []

    def push(self, text: str) -> None:
        """``ToolContext.on_output``: safe to call from any thread."""
        if not text or self._closed:
            return
        if threading.get_ident() == self._thread:
            self._push(text)
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self._push, text)

    def _push(self, text: str) -> None:
        if self._closed:
            return
        self._buffer.append(text)
        if self._timer is None and (self._task is None or self._task.done()):
            self._timer = self.loop.call_later(0, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if not self._buffer:
            return
        self._task = self.loop.create_task(self._emit_and_rest())

    async def _emit_and_rest(self) -> None:
        await self._emit()
        if not self._closed and self._timer is None:
            # Hold the next chunks for the interval: a chatty command is coalesced.
            self._timer = self.loop.call_later(self.interval, self._flush)

    async def _emit(self, final: bool = False) -> None:
        if not self._buffer and not (final and self.masker is not None):
            return
        text = "".join(self._buffer)
        self._buffer.clear()
        if self.masker is None:
            text = redact(text)
        else:  # the masker redacts too, on text held across chunks
            # In a thread: the masker may rescan the workspace for values the call created.
            text = await asyncio.to_thread(self._mask, text, final)
            if not text:
                return
        self.printed.append(text)
        self._tail = (self._tail + text)[-OUTPUT_TAIL_CHARS:]
        await self.send(ToolCallOutput(self.call_id, text, self._tail))

    def _mask(self, text: str, final: bool) -> str:
        return self.masker.feed(text) + (self.masker.flush() if final else "")

    async def close(self) -> None:
        """Send what is left (once); later chunks are dropped."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)
        await self._emit(final=True)
