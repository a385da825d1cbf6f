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

That is the path for frontends without the JupyterLab extension (nbclient, papermill, VS
Code): coarse updates, since every one resends the open display's text. The allowance is
released over the turn's first :data:`RELEASE_SECONDS` (a quarter at once), so a slow
model's text gets regular updates instead of a burst and then a stall.

**Deltas** (``deltas=True``: a client with the extension's renderer is connected, see
:mod:`~iac_kernel.kernel.status`): each streaming update carries only the new text and its
offset under :data:`DELTA_MIME`; the extension's renderer appends it. The final update
carries the whole Markdown (no ``text/plain``), for other frontends and the saved file. So
the text travels twice (deltas, final) and the third share of the 3× bound pays the
messages: the budget allows :data:`LIVE_ALLOWANCE` + :data:`LIVE_RATIO` × the text shown,
deltas' text included. Updates go out every :data:`LIVE_INTERVAL` while the budget has
room for a few more, every :data:`LIVE_SLOW_INTERVAL` when it runs low, so a slow model's
text still moves at least about once a second while the model writes; a long stretch is
never split.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, Protocol

from iac_kernel.kernel.publish import Publisher

#: Seconds between two updates of the open display (<= 10 updates per second).
UPDATE_INTERVAL = 0.1
#: Streaming updates may cost this many bytes, plus RATIO × the text shown so far.
ALLOWANCE = 6000
RATIO = 0.3
#: The plain allowance is released over this many seconds (FIRST_SHARE of it at once).
RELEASE_SECONDS = 6.0
FIRST_SHARE = 0.25
#: Bytes a display message costs besides its text (header, parent header, signature).
MESSAGE_OVERHEAD = 700
#: A stretch longer than this is split at its last blank line into a finished display.
SPLIT_CHARS = 3000
CURSOR = " ▍"
#: Streaming updates for the extension's renderer: ``{"v", "kind", "offset", "text"}``,
#: ``offset`` in code points from the start of the display's text.
DELTA_MIME = "application/vnd.iac-kernel.text-delta+json"
#: Bytes a delta update costs besides its bundle: the message, and the content's metadata
#: and display id around the bundle.
DELTA_OVERHEAD = MESSAGE_OVERHEAD + 100
#: Deltas may cost this many bytes plus LIVE_RATIO × the text shown (their own text included).
LIVE_ALLOWANCE = 6000
LIVE_RATIO = 2.0
#: Seconds between delta updates: at the least, and at the most while the budget lasts.
LIVE_INTERVAL = 0.15
LIVE_SLOW_INTERVAL = 0.9
EMPTY_ANSWER = "_(no text in this answer)_"
FENCE = re.compile(r"^\s*(```|~~~)")

Kind = Literal["text", "thinking"]


class Handle(Protocol):
    def cancel(self) -> None: ...


#: ``schedule(delay, callback)``; defaults to the running loop's ``call_later``.
Schedule = Callable[[float, Callable[[], None]], Handle]


class ByteBudget:
    """How many bytes the streaming updates of one turn may still spend."""

    @classmethod
    def live(cls) -> ByteBudget:
        """The budget of a turn streamed as deltas (paced by :func:`live_interval`)."""
        return cls(LIVE_ALLOWANCE, LIVE_RATIO, release=0.0)

    def __init__(
        self,
        allowance: int = ALLOWANCE,
        ratio: float = RATIO,
        *,
        release: float = RELEASE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.allowance = allowance
        self.ratio = ratio
        self.release = release
        self.clock = clock
        self.started = clock()
        self.shown = 0
        self.spent = 0

    def released(self) -> float:
        """The part of the allowance available now."""
        if self.release <= 0:
            return self.allowance
        share = FIRST_SHARE + (1 - FIRST_SHARE) * (self.clock() - self.started) / self.release
        return self.allowance * min(1.0, share)

    def grow(self, text: str) -> None:
        self.shown += len(text.encode())

    def affords(self, cost: int) -> bool:
        return self.spent + cost <= self.released() + self.ratio * self.shown

    def spend(self, cost: int) -> None:
        self.spent += cost


def live_interval(rate: float) -> float:
    """Seconds between delta updates for text written at ``rate`` bytes a second: the pace
    the text pays for (each update's message out of the budget's ``LIVE_RATIO - 1`` share),
    at least LIVE_INTERVAL, and at most LIVE_SLOW_INTERVAL (a slow model's updates draw on
    the allowance: the text never stands still for long while the budget lasts)."""
    if rate <= 0:
        return LIVE_SLOW_INTERVAL
    paid = DELTA_OVERHEAD / ((LIVE_RATIO - 1) * rate)
    return min(max(LIVE_INTERVAL, paid), LIVE_SLOW_INTERVAL)


def delta_bundle(kind: Kind, offset: int, text: str) -> dict[str, Any]:
    """A streaming update for the extension: ``text`` goes at code point ``offset``."""
    return {DELTA_MIME: {"v": 1, "kind": kind, "offset": offset, "text": text}}


def render(kind: Kind, text: str, *, streaming: bool, with_plain: bool = True) -> dict[str, Any]:
    """The bundle of one display: Markdown while streaming, Markdown and plain at the end
    (without ``with_plain``, Markdown only)."""
    if kind == "thinking":
        body = html.escape(text.strip()).replace("\n", "<br>\n")
        label = "💭 Thinking…" if streaming else "💭 Thinking"
        markdown = (
            f'<details class="iac-thinking"><summary><em>{label}</em></summary>\n'
            f'<blockquote style="opacity:.75;font-style:italic">{body}</blockquote>\n'
            "</details>"
        )
        plain_form = "(thinking) " + text.strip()
    else:
        markdown = text + (CURSOR if streaming else "")
        plain_form = text
    if streaming or not with_plain:
        return {"text/markdown": markdown}
    return {"text/markdown": markdown, "text/plain": plain_form}


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
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        schedule: Schedule | None = None,
        split_chars: int = SPLIT_CHARS,
        deltas: bool = False,
    ):
        self.out = out
        self.budget = budget
        self.kind: Kind = kind
        self.interval = interval or (LIVE_INTERVAL if deltas else UPDATE_INTERVAL)
        self.clock = clock
        self._schedule = schedule
        self.split_chars = split_chars
        #: Stream as deltas for the extension's renderer (see the module docstring).
        self.deltas = deltas
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
        self._started: float | None = None

    @property
    def whole(self) -> str:
        """Everything this stretch said."""
        return "".join(self.finished) + self.text

    def add(self, delta: str) -> None:
        if self._closed or not delta:
            return
        if self._started is None:
            self._started = self.clock()
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
        if self.deltas:
            self._send_delta()
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

    def _send_delta(self) -> None:
        new = self.text[len(self._sent) :]
        if not new:
            return
        bundle = delta_bundle(self.kind, len(self._sent), new)
        cost = len(json.dumps(bundle, ensure_ascii=False).encode()) + DELTA_OVERHEAD
        # Room is kept for the final update's message (its text is not charged).
        if not self.budget.affords(cost + DELTA_OVERHEAD):
            return  # the next delta tries again; the end always sends the whole text
        started = self.clock() if self._started is None else self._started
        elapsed = max(self.clock() - started, 0.25)
        rate = len(self.text.encode()) / elapsed
        wait = self._last_sent + live_interval(rate) - self.clock()
        if wait > 0:  # slow text: space the updates out rather than stall later
            self._pending = self._later(wait, self._on_timer)
            return
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
        bundle = render(self.kind, text, streaming=False, with_plain=not self.deltas)
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
