"""Streamed text: each stretch of the agent's text (or thinking) is its own display.

A stretch starts with the first delta after a tool call (or at the start of the turn) and
ends when the next tool call starts or the turn ends. Its display is created when it
starts and updated in place (``update_display_data``) while it streams; once it ends it
gets one last update with the whole text and is never touched again.

Targets (``bench/bench_iopub.py`` measures them through a real kernel; the figures are
explained in ``docs/notebook-ui.md``, "The answer as it is written"): IOPub at most 3x
the text plus 6 KB a second of streaming; with the extension the visible text at most
150 ms behind the model; without it no stall over a second while the model writes.

The streaming updates of a turn share a :class:`ByteBudget` that grows with the text
shown and with time from the turn's first text; the text of the final updates is not
charged. An update the budget cannot pay for yet waits for the time that pays for it.

* Without the extension (nbclient, papermill, VS Code) every update resends the open
  display's Markdown, at most every :data:`UPDATE_INTERVAL`; a long stretch is split
  into a finished display past :data:`SPLIT_CHARS` (:func:`split_point`), so an update
  never resends more than a few KB. The final update has Markdown and plain text.
* With deltas (a client that renders :data:`DELTA_MIME` opened the status comm) each
  update carries only the new text and its offset, and goes out when the oldest unsent
  text is :data:`LIVE_LAG` old. Each is charged its real size on the wire (content as
  packed, and the envelope the publisher measured), and the final update's exact cost
  besides its text is kept back, so the text displays stay within the target whenever the
  turn ends (:meth:`ByteBudget.live`). The final update carries the whole Markdown and no
  session metadata (the status comm sends that info as the turn ends).
"""

from __future__ import annotations

import asyncio
import html
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, Protocol

from iac_kernel.kernel.io.publish import ENVELOPE, Publisher

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


#: Without deltas, updates may cost ALLOWANCE + RATIO x the text shown + PER_SECOND a
#: second (the rest of 3x the text + 6 KB a second pays the finals and the footer).
ALLOWANCE = 2000
RATIO = 0.9
PER_SECOND = 5400
#: With deltas the text travels twice (deltas, final): the third share pays messages.
LIVE_RATIO = 2.0
#: With deltas, bytes a second after the first second (6,000 less a margin for clocks).
LIVE_PER_SECOND = 5900
#: With deltas, bytes the updates may spend by the end of the first second.
LIVE_FIRST_SECOND = 6000
#: With deltas, the first update's content besides its text (offset 0, the display id),
#: paid at once with the final update's FINAL_BASE; the time share then ramps to
#: LIVE_FIRST_SECOND (see ByteBudget.ramp).
FIRST_DELTA = 170
#: With deltas, a final update's content besides its text (the Markdown key, the display
#: id; each update keeps back the exact figure, escapes included: TextStream._final_cost).
FINAL_BASE = 110


class ByteBudget:
    """How many bytes the streaming updates of one turn may still spend."""

    @classmethod
    def live(
        cls,
        clock: Callable[[], float] = time.monotonic,
        envelope: int = ENVELOPE,
        first: int = FIRST_DELTA + FINAL_BASE,
    ) -> ByteBudget:
        """The budget of a turn streamed as deltas: at most the target (3x the text, 6 KB
        a second, one second at least) less the final update's text, at any moment; each
        update is charged its real size. ``first``: the content of the first update and
        of the final one besides their text (the kernel measures them as it packs)."""
        # At once: the first update (envelope and a short delta) and the final's reserve.
        allowance = 2 * envelope + first
        return cls(
            allowance,
            LIVE_RATIO,
            per_second=LIVE_PER_SECOND,
            clock=clock,
            # Evenly up to where LIVE_PER_SECOND a second reaches the first second's bytes
            # (just after one second): no flat stretch where no update could go out.
            ramp=LIVE_FIRST_SECOND / LIVE_PER_SECOND,
            ceiling=LIVE_FIRST_SECOND,
        )

    def __init__(
        self,
        allowance: int = ALLOWANCE,
        ratio: float = RATIO,
        *,
        per_second: float = PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
        ramp: float = 0.0,
        ceiling: float | None = None,
    ):
        self.allowance = allowance
        self.ratio = ratio
        self.per_second = per_second
        self.clock = clock
        #: With a ramp, the time share goes evenly from ``allowance`` at the first text to
        #: ``ceiling`` (``per_second * ramp`` unless given) at ``ramp`` seconds, then is
        #: the larger of that and ``per_second * t``: it never exceeds ``max(ceiling,
        #: per_second * t)`` and never runs ahead of the time to come (no stall); without
        #: a ramp it is ``allowance + per_second * t``.
        self.ramp = ramp
        self.ceiling = ceiling if ceiling is not None else per_second * ramp
        #: When the turn's first text came (the per-second share counts from there).
        self.started: float | None = None
        self.shown = 0
        self.spent = 0

    def open(self, allowance: int) -> None:
        """Before the first text: what the time share pays at once (with deltas, the
        first display's first update and its final one's reserve, measured as sent)."""
        if self.started is None:
            self.allowance = allowance

    def grow(self, text: str) -> None:
        if self.started is None and text:
            self.started = self.clock()
        self.shown += len(text.encode())

    def room(self) -> float:
        """Bytes the budget can spend now."""
        return self.ratio * self.shown + self.timed() - self.spent

    def timed(self) -> float:
        """The share of the budget time has paid for so far."""
        t = 0.0 if self.started is None else max(self.clock() - self.started, 0.0)
        if self.ramp <= 0:
            return self.allowance + self.per_second * t
        if t >= self.ramp:
            return max(self.ceiling, self.per_second * t)
        return self.allowance + (self.ceiling - self.allowance) * t / self.ramp

    def affords(self, cost: int) -> bool:
        return cost <= self.room()

    def wait_for(self, cost: int) -> float:
        """Seconds until the budget affords ``cost`` with no more text (0 when it does)."""
        short = cost - self.room()
        if short <= 0:
            return 0.0
        t = 0.0 if self.started is None else max(self.clock() - self.started, 0.0)
        return max(self.time_of(self.timed() + short) - t, 0.0)

    def time_of(self, share: float) -> float:
        """Seconds from the first text when the time share reaches ``share``."""
        if self.ramp <= 0:
            return (share - self.allowance) / self.per_second
        if share <= self.ceiling and self.ceiling > self.allowance:
            return self.ramp * max(share - self.allowance, 0.0) / (self.ceiling - self.allowance)
        return max(self.ramp, share / self.per_second)

    def spend(self, cost: int) -> None:
        self.spent += cost


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
        self.text = ""
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
        update = self._send(bundle, metadata)
        if self.deltas:  # all but the text of the final form, as sent
            msg_type = "update_display_data" if update else "display_data"
            size = self.out.display_size(bundle, self._display_id or "", metadata)
            self.budget.spend(size - len(text.encode()) + self.out.envelope(msg_type))
        else:
            self.budget.spend(MESSAGE_OVERHEAD)  # the text of a final form is not charged
        self.finished.append(text)

    def _send(self, bundle: dict[str, Any], metadata: dict[str, Any] | None = None) -> bool:
        """Show ``bundle`` in the open display (created now when there is none); True when
        it was an update."""
        update = self._display_id is not None
        if not update:
            self._display_id, self._upcoming = self._next_id(), None
        self.out.display(bundle, self._display_id, update=update, metadata=metadata)
        self._last_sent = self.clock()
        return update

    def _next_id(self) -> str:
        """The id the next new display will get."""
        if self._upcoming is None:
            self._upcoming = f"iac-{self.kind}-{uuid.uuid4().hex[:16]}"
        return self._upcoming

    def _cancel_pending(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._for_budget = False

    def _later(self, delay: float, callback: Callable[[], None]) -> Handle:
        if self._schedule is not None:
            return self._schedule(delay, callback)
        return asyncio.get_running_loop().call_later(delay, callback)
