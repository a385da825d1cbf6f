"""The streamed answer: one Markdown display per turn, updated in place and coalesced.

The display is created when the turn starts (``display_data`` with a fresh display id) and
then updated with ``update_display_data``. Re-sending the whole Markdown on every token
would hit Jupyter server's IOPub rate limits on a long answer, so updates are throttled to
at most one per ``interval`` seconds (10/s by default): a delta that arrives sooner is
held and a single flush is scheduled for when the interval is up. :meth:`finish` cancels
any pending flush and sends the whole answer, so the cell's final output is complete.

Thinking is shown collapsed (an HTML ``<details>`` block inside the Markdown); the
``text/plain`` form carries the answer only.
"""

from __future__ import annotations

import asyncio
import html
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from iac_kernel.kernel.publish import Publisher

#: Seconds between two updates of the answer display (<= 10 updates per second).
UPDATE_INTERVAL = 0.1
CURSOR = " ▍"
PLACEHOLDER = "_Working…_"
EMPTY_ANSWER = "_(no text in this answer)_"


class Handle(Protocol):
    def cancel(self) -> None: ...


#: ``schedule(delay, callback)``; defaults to the running loop's ``call_later``.
Schedule = Callable[[float, Callable[[], None]], Handle]


def render_answer(
    text: str, thinking: str, *, streaming: bool, empty: str = EMPTY_ANSWER
) -> dict[str, Any]:
    """The mime bundle of the answer so far (``empty`` stands in for a final empty answer)."""
    parts = []
    if thinking.strip():
        label = "Thinking…" if streaming and not text else "Thinking"
        body = html.escape(thinking.strip()).replace("\n", "<br>\n")
        parts.append(f"<details><summary>{label}</summary>\n\n{body}\n\n</details>\n")
    if text:
        parts.append(text + (CURSOR if streaming else ""))
    elif streaming:
        parts.append(PLACEHOLDER)
    else:
        parts.append(empty)
    plain = text if text else ("…" if streaming else empty.replace("_", ""))
    return {"text/markdown": "\n".join(parts), "text/plain": plain}


class AnswerDisplay:
    """The agent's text for one turn, streamed into one display."""

    def __init__(
        self,
        out: Publisher,
        *,
        interval: float = UPDATE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        schedule: Schedule | None = None,
        display_id: str | None = None,
    ):
        self.out = out
        self.interval = interval
        self.clock = clock
        self._schedule = schedule
        self.display_id = display_id or f"iac-answer-{uuid.uuid4().hex}"
        self.text = ""
        self.thinking = ""
        self.updates = 0
        self._started = False
        self._finished = False
        self._last_sent = float("-inf")
        self._pending: Handle | None = None

    def start(self) -> None:
        """Show the (empty) answer display."""
        if not self._started:
            self._started = True
            self.out.display(render_answer("", "", streaming=True), self.display_id)
            self._last_sent = self.clock()

    def add_text(self, delta: str) -> None:
        self.text += delta
        self._changed()

    def add_thinking(self, delta: str) -> None:
        self.thinking += delta
        self._changed()

    def flush(self) -> None:
        """Send what is pending now (before a tool card, so the text reads in order)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
            self._send(streaming=True)

    def finish(self, empty: str = EMPTY_ANSWER, metadata: dict[str, Any] | None = None) -> None:
        """Send the whole answer (with ``metadata``); later deltas are ignored."""
        if self._finished:
            return
        self.start()
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._finished = True
        self._send(streaming=False, empty=empty, metadata=metadata)

    # -- internals ---------------------------------------------------------------------

    def _changed(self) -> None:
        if self._finished:
            return
        self.start()
        if self._pending is not None:
            return  # a flush is already scheduled; it will carry this delta
        wait = self._last_sent + self.interval - self.clock()
        if wait <= 0:
            self._send(streaming=True)
        else:
            self._pending = self._later(wait, self._flush_pending)

    def _flush_pending(self) -> None:
        self._pending = None
        if not self._finished:
            self._send(streaming=True)

    def _send(
        self,
        *,
        streaming: bool,
        empty: str = EMPTY_ANSWER,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.out.display(
            render_answer(self.text, self.thinking, streaming=streaming, empty=empty),
            self.display_id,
            update=True,
            metadata=metadata,
        )
        self.updates += 1
        self._last_sent = self.clock()

    def _later(self, delay: float, callback: Callable[[], None]) -> Handle:
        if self._schedule is not None:
            return self._schedule(delay, callback)
        return asyncio.get_running_loop().call_later(delay, callback)
