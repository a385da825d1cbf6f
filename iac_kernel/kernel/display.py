"""Streamed text: each stretch of the agent's text (or thinking) is its own display.

A stretch starts with the first delta after a tool call (or at the start of the turn) and
ends when the next tool call starts or the turn ends. Its display is created when it
starts and then updated in place (``update_display_data``) while it streams; once it ends
it gets one last update with the whole text in ``text/markdown`` and ``text/plain`` and is
never touched again. Streaming updates carry ``text/markdown`` only.

Targets (``bench/bench_iopub.py`` measures them through a real kernel): IOPub at most
3x the text plus 6 KB a second of streaming; with the extension the visible text is at
most 150 ms behind the model (:data:`LIVE_LAG` and the budget, see below); without it the
text never stands still for more than a second while the model writes, even on one long
line. The budget is :class:`~iac_kernel.kernel.budget.ByteBudget`.

* Only the open display is updated, and a long stretch is split into a finished display
  once it passes :data:`SPLIT_CHARS` (at a blank line, else a line break, else a space;
  never inside a code fence), so an update never resends more than a few KB.
* The streaming updates of a turn share a byte budget (``ByteBudget``) that grows
  with the text shown (``ratio`` x its bytes) and with time (``per_second`` from the
  turn's first text). The text of the final updates is not charged (2x the text without
  the extension: Markdown and plain; 1x with it), so a whole answer costs at most 3x its
  size plus a fixed cost per second of streaming, at any pace. An update the budget cannot
  pay for yet waits for the time that pays for it, never for more text.

Without the extension (nbclient, papermill, VS Code), every update resends the open
display's text, at most every :data:`UPDATE_INTERVAL` and as often as the budget pays.

**Deltas** (``deltas=True``: a client with the extension's renderer is connected, see
:mod:`~iac_kernel.kernel.status`): each streaming update carries only the new text and its
offset under :data:`DELTA_MIME`; the extension's renderer appends it. The final update
carries the whole Markdown (no ``text/plain``), for other frontends and the saved file. An
update goes out when the oldest text not yet sent is :data:`LIVE_LAG` old (at once when
nothing was sent for that long), so the text is never further behind than that and a
steady model costs about one message per ``LIVE_LAG``; a long stretch is never split.
Each update is charged what it takes on the wire (its content as the kernel packs it, and
the envelope the publisher measured: topic, signature, header, parent header), and the
final update's exact cost besides its text (envelope, display id, the text's JSON
escapes) is kept back, so the turn's text displays stay within the target at whatever
moment the turn ends (:meth:`ByteBudget.live`). The final update carries no session
metadata: the extension gets the session info over its status comm as the turn ends. An
update is mostly envelope (about 540 of its 720 bytes with the kernel's compact JSON,
:mod:`~iac_kernel.kernel.wire`), so the delta is kept small (``{"offset", "text"}``,
``kind`` only for thinking). A slow model is paced by the budget, not by ``LIVE_LAG``:
the first second's 6 KB, less the first update and the final's reserve (about 1.3 KB),
is paid evenly over that second, about one update every 0.145 s; after it, about every
0.12 s. While an update waits for the budget, new text tries again at once (it pays
twice its bytes).
"""

from __future__ import annotations

import asyncio
import html
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, Protocol

from iac_kernel.kernel.budget import ByteBudget
from iac_kernel.kernel.publish import ENVELOPE, Publisher

#: Seconds between two updates of the open display without deltas (at the least): each
#: resends the open text, and the target there is no stall over a second.
UPDATE_INTERVAL = 0.4
#: Bytes a display message costs besides its text (header, parent header, signature).
MESSAGE_OVERHEAD = ENVELOPE
#: A stretch longer than this is split into a finished display (see split_point).
SPLIT_CHARS = 3000
CURSOR = " ▍"
#: Streaming updates for the extension's renderer: ``{"offset", "text"}`` (and
#: ``"kind": "thinking"`` for thinking), ``offset`` in code points from the start of the
#: display's text.
DELTA_MIME = "application/vnd.iac-kernel.text-delta+json"
#: With deltas, the longest the model's text waits before it is sent (seconds).
LIVE_LAG = 0.1
#: Seconds between two looks at the budget while an update waits for it.
BUDGET_POLL = 0.02
EMPTY_ANSWER = "_(no text in this answer)_"
FENCE = re.compile(r"^\s*(```|~~~)")

Kind = Literal["text", "thinking"]


class Handle(Protocol):
    def cancel(self) -> None: ...


#: ``schedule(delay, callback)``; defaults to the running loop's ``call_later``.
Schedule = Callable[[float, Callable[[], None]], Handle]


def delta_bundle(kind: Kind, offset: int, text: str) -> dict[str, Any]:
    """A streaming update for the extension: ``text`` goes at code point ``offset``
    (``kind`` only when it is not text: most of an update is envelope already)."""
    delta: dict[str, Any] = {"offset": offset, "text": text}
    if kind != "text":
        delta["kind"] = kind
    return {DELTA_MIME: delta}


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
    """Where to finish a long stretch's display: just after the last blank line at or
    after ``minimum``; when that leaves ``minimum`` or more after it (or there is none),
    just after the last line break, else the last space, there. Never inside a fenced code
    block, and always with text after the cut; ``None`` when there is no such place."""
    blank = line_end = space = None
    fence: str | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        match = FENCE.match(line)
        start = pos
        pos += len(line)
        if fence is not None:
            if match and match.group(1) == fence:
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        more = bool(text[pos:].strip())
        if not line.strip():
            if pos >= minimum and more:
                blank = pos
            continue
        if pos >= minimum and more and line.endswith("\n"):
            line_end = pos
        cut = line.rstrip().rfind(" ")
        if cut >= 0 and start + cut + 1 >= minimum:
            space = start + cut + 1
    for cut in (blank, line_end, space):
        if cut is not None and len(text) - cut < minimum:
            return cut
    return blank or line_end or space


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
        self.interval = interval or UPDATE_INTERVAL
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
        self._upcoming: str | None = None
        self._sent = ""
        self._last_sent = float("-inf")
        self._pending: Handle | None = None
        #: Whether ``_pending`` waits for the budget (not for LIVE_LAG or the interval).
        self._for_budget = False
        self._closed = False

    @property
    def whole(self) -> str:
        """Everything this stretch said."""
        return "".join(self.finished) + self.text

    def add(self, delta: str) -> None:
        if self._closed or not delta:
            return
        if self.deltas and self.budget.started is None:
            self._open_budget()
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
            if not (self.deltas and self._for_budget):
                return  # a send is scheduled; it will carry this delta
            # An update waits for the budget: this text pays for some of it, so it may go
            # now (with this text: the next update's wait then starts after it).
            self._cancel_pending()
        if self.deltas:
            # The text waiting now is the oldest unsent: it goes out LIVE_LAG from now at
            # the latest, at once when nothing was sent for that long.
            if self.clock() - self._last_sent < LIVE_LAG:
                self._pending = self._later(LIVE_LAG, self._on_timer)
            else:
                self._send_delta()
            return
        wait = self._last_sent + self.interval - self.clock()
        if wait > 0:
            self._pending = self._later(wait, self._on_timer)
            return
        self._split()
        if not self.text or self.text == self._sent:
            return
        bundle = render(self.kind, self.text, streaming=True)
        cost = len(bundle["text/markdown"].encode()) + MESSAGE_OVERHEAD
        if self._wait_for_budget(cost):
            return
        self.budget.spend(cost)
        self._send(bundle)
        self._sent = self.text

    def _send_delta(self) -> None:
        new = self.text[len(self._sent) :]
        if not new:
            return
        bundle = delta_bundle(self.kind, len(self._sent), new)
        envelope = self.out.envelope("update_display_data")
        cost = self.out.display_size(bundle, self._display_id or self._next_id()) + envelope
        # Room is kept for the final update (all of it but its text, which is not charged).
        if self._wait_for_budget(cost + self._final_cost()):
            return
        self.budget.spend(cost)
        self._send(bundle)
        self._sent = self.text

    def _open_budget(self) -> None:
        """The turn's first text: the budget pays at once for this display's first update
        and its final one's reserve (as the publisher packs them; thinking's are larger)."""
        first = self.out.display_size(delta_bundle(self.kind, 0, ""), self._next_id())
        final = render(self.kind, "", streaming=False, with_plain=False)
        size = first + self.out.display_size(final, self._next_id())
        self.budget.open(size + 2 * self.out.envelope("update_display_data"))

    def _final_cost(self) -> int:
        """Bytes the open display's final update will cost besides its text's own bytes:
        its envelope and its content with the text's JSON escapes (no metadata: with the
        extension the session info comes over the status comm, see turn.TurnView.finish)."""
        bundle = render(self.kind, self.text, streaming=False, with_plain=False)
        size = self.out.display_size(bundle, self._display_id or self._next_id())
        return size - len(self.text.encode()) + self.out.envelope("update_display_data")

    def _wait_for_budget(self, cost: int) -> bool:
        """When the budget cannot pay ``cost`` yet, retry once time has paid for it (with
        deltas, new text tries again at once, see :meth:`_maybe_send`; without, at most
        :data:`BUDGET_POLL` later: new text pays too)."""
        wait = self.budget.wait_for(cost)
        if wait <= 0:
            return False
        self._pending = self._later(wait if self.deltas else min(wait, BUDGET_POLL), self._on_timer)
        self._for_budget = True
        return True

    def _on_timer(self) -> None:
        self._pending = None
        self._for_budget = False
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
        if self.deltas:  # all but the text of the final form, as sent
            msg_type = "update_display_data" if update else "display_data"
            size = self.out.display_size(bundle, self._display_id, metadata)
            self.budget.spend(size - len(text.encode()) + self.out.envelope(msg_type))
        else:
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

    def _next_id(self) -> str:
        """The id the next new display will get (the same one :meth:`_new_id` uses)."""
        if self._upcoming is None:
            self._upcoming = f"iac-{self.kind}-{uuid.uuid4().hex[:16]}"
        return self._upcoming

    def _new_id(self) -> str:
        display_id, self._upcoming = self._next_id(), None
        self.display_ids.append(display_id)
        return display_id

    def _cancel_pending(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._for_budget = False

    def _later(self, delay: float, callback: Callable[[], None]) -> Handle:
        if self._schedule is not None:
            return self._schedule(delay, callback)
        return asyncio.get_running_loop().call_later(delay, callback)
