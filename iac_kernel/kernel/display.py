"""Streamed text: each stretch of the agent's text (or thinking) is its own display.

A stretch starts with the first delta after a tool call (or at the start of the turn) and
ends when the next tool call starts or the turn ends. Its display is created when it
starts and then updated in place (``update_display_data``) while it streams; once it ends
it gets one last update with the whole text in ``text/markdown`` and ``text/plain`` and is
never touched again. Streaming updates carry ``text/markdown`` only.

IOPub bytes stay linear in the answer, whatever the pace:

* at most one update per ``interval`` (10 a second);
* only the open display is updated, and a long stretch is split at a blank line (outside
  code fences) once it passes :data:`SPLIT_CHARS`, so an update never resends more than a
  few KB of finished text;
* the streaming updates of a turn share a byte budget (:class:`ByteBudget`): they, and
  the message overhead of every final update, may cost at most :data:`ALLOWANCE` +
  :data:`RATIO` × the text shown so far (a split happens only when the budget affords
  it). Only the text of the final updates (2 × the text) is not counted, so a whole
  answer costs at most about ``(2 + RATIO) ×`` its size plus a constant, at any pace.
  ``bench/bench_iopub.py`` measures it.

The price of that bound is the pace of updates for a slow model: the budget grows with the
text, so a 20 KB answer gets about a dozen streaming updates however long it takes.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, Protocol

from iac_kernel.kernel.publish import Publisher

#: Seconds between two updates of the open display (<= 10 updates per second).
UPDATE_INTERVAL = 0.1
#: Streaming updates may cost this many bytes, plus RATIO × the text shown so far.
ALLOWANCE = 2000
RATIO = 0.6
#: Bytes a display message costs besides its text (header, parent header, signature).
MESSAGE_OVERHEAD = 700
#: A stretch longer than this is split at its last blank line into a finished display.
SPLIT_CHARS = 3000
CURSOR = " ▍"
EMPTY_ANSWER = "_(no text in this answer)_"
FENCE = re.compile(r"^\s*(```|~~~)")

Kind = Literal["text", "thinking"]


class Handle(Protocol):
    def cancel(self) -> None: ...


#: ``schedule(delay, callback)``; defaults to the running loop's ``call_later``.
Schedule = Callable[[float, Callable[[], None]], Handle]


class ByteBudget:
    """How many bytes the streaming updates of one turn may still spend."""

    def __init__(self, allowance: int = ALLOWANCE, ratio: float = RATIO):
        self.allowance = allowance
        self.ratio = ratio
        self.shown = 0
        self.spent = 0

    def grow(self, text: str) -> None:
        self.shown += len(text.encode())

    def affords(self, cost: int) -> bool:
        return self.spent + cost <= self.allowance + self.ratio * self.shown

    def spend(self, cost: int) -> None:
        self.spent += cost


def render(kind: Kind, text: str, *, streaming: bool) -> dict[str, Any]:
    """The bundle of one display: Markdown while streaming, Markdown and plain at the end."""
    if kind == "thinking":
        body = html.escape(text.strip()).replace("\n", "<br>\n")
        label = "💭 Thinking…" if streaming else "💭 Thinking"
        markdown = (
            f'<details class="iac-thinking"><summary><em>{label}</em></summary>\n'
            f'<blockquote style="color:#6e7781;font-style:italic">{body}</blockquote>\n'
            "</details>"
        )
        plain = "(thinking) " + text.strip()
    else:
        markdown = text + (CURSOR if streaming else "")
        plain = text
    if streaming:
        return {"text/markdown": markdown}
    return {"text/markdown": markdown, "text/plain": plain}


def split_point(text: str, minimum: int) -> int | None:
    """The index just after the last blank line at or after ``minimum`` that is outside a
    fenced code block and has text after it, or ``None``."""
    best = None
    fence: str | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        match = FENCE.match(line)
        if fence is not None:
            if match and match.group(1) == fence:
                fence = None
        elif match:
            fence = match.group(1)
        pos += len(line)
        if fence is None and not line.strip() and pos >= minimum and text[pos:].strip():
            best = pos
    return best


class TextStream:
    """One stretch of text or thinking, shown in one display (or a few, when long)."""

    def __init__(
        self,
        out: Publisher,
        budget: ByteBudget,
        kind: Kind = "text",
        *,
        interval: float = UPDATE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        schedule: Schedule | None = None,
        split_chars: int = SPLIT_CHARS,
    ):
        self.out = out
        self.budget = budget
        self.kind: Kind = kind
        self.interval = interval
        self.clock = clock
        self._schedule = schedule
        self.split_chars = split_chars
        #: Text of the displays already finished, in order.
        self.finished: list[str] = []
        #: Display ids used, in order of creation.
        self.display_ids: list[str] = []
        self.text = ""
        self.updates = 0
        self._display_id: str | None = None
        self._sent = ""
        self._last_sent = float("-inf")
        self._pending: Handle | None = None
        self._closed = False

    @property
    def whole(self) -> str:
        """Everything this stretch said."""
        return "".join(self.finished) + self.text

    def add(self, delta: str) -> None:
        if self._closed or not delta:
            return
        self.text += delta
        self.budget.grow(delta)
        self._maybe_send()

    def finish(self, metadata: dict[str, Any] | None = None) -> None:
        """Send the open display's whole text (once); later deltas are ignored."""
        if self._closed:
            return
        self._closed = True
        self._cancel_pending()
        if self.text or self._display_id is not None:
            self._finalize(self.text, metadata)
        self.text = ""

    # -- internals ---------------------------------------------------------------------

    def _maybe_send(self) -> None:
        if self._pending is not None:
            return  # a send is scheduled; it will carry this delta
        wait = self._last_sent + self.interval - self.clock()
        if wait > 0:
            self._pending = self._later(wait, self._on_timer)
            return
        self._split()
        if not self.text or self.text == self._sent:
            return
        bundle = render(self.kind, self.text, streaming=True)
        cost = len(bundle["text/markdown"].encode()) + MESSAGE_OVERHEAD
        if not self.budget.affords(cost):
            return  # the next delta tries again; the end always sends the whole text
        self.budget.spend(cost)
        self._send(bundle)
        self._sent = self.text

    def _on_timer(self) -> None:
        self._pending = None
        if not self._closed:
            self._maybe_send()

    def _split(self) -> None:
        """Finish the open display at its last blank line when it grew long."""
        if len(self.text) < self.split_chars or not self.budget.affords(MESSAGE_OVERHEAD):
            return
        cut = split_point(self.text, self.split_chars // 2)
        if cut is None:
            return
        head, self.text = self.text[:cut], self.text[cut:]
        self._finalize(head.rstrip("\n"), None)
        self.finished[-1] = head  # keep the blank line in what the stretch said
        self._display_id = None
        self._sent = ""

    def _finalize(self, text: str, metadata: dict[str, Any] | None) -> None:
        bundle = render(self.kind, text, streaming=False)
        update = self._display_id is not None
        if self._display_id is None:
            self._display_id = self._new_id()
        self.out.display(bundle, self._display_id, update=update, metadata=metadata)
        self.budget.spend(MESSAGE_OVERHEAD)  # the text of a final form is not charged
        self.updates += 1
        self._last_sent = self.clock()
        self.finished.append(text)

    def _send(self, bundle: dict[str, Any]) -> None:
        update = self._display_id is not None
        if self._display_id is None:
            self._display_id = self._new_id()
        self.out.display(bundle, self._display_id, update=update)
        self.updates += 1
        self._last_sent = self.clock()

    def _new_id(self) -> str:
        display_id = f"iac-{self.kind}-{uuid.uuid4().hex[:16]}"
        self.display_ids.append(display_id)
        return display_id

    def _cancel_pending(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def _later(self, delay: float, callback: Callable[[], None]) -> Handle:
        if self._schedule is not None:
            return self._schedule(delay, callback)
        return asyncio.get_running_loop().call_later(delay, callback)
