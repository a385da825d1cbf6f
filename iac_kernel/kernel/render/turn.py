"""One turn's cell output, in the order things happened.

:class:`TurnView` is the ``emit`` callback given to ``AgentSession.prompt``. Each stretch
of text (or thinking) is its own display, created when the stretch starts
(:mod:`~iac_kernel.kernel.render.display`); a tool call ends the open stretch and gets its card
(:mod:`~iac_kernel.kernel.render.cards`) right there, so text written after the call appears
below its card. Finished text displays are never updated again.

A running call's card shows the output printed so far (``ToolCallOutput``), coalesced to
at most :data:`CARD_INTERVAL` per update, with its elapsed time; a heartbeat refreshes
the elapsed time every :data:`HEARTBEAT` seconds while nothing is printed. On interrupt the
card keeps what was printed.

The model's ``update_plan`` checklist is one Markdown task list per turn, updated in place
as the model updates its plan (ACP clients get it as ``plan`` updates); only what the
model sent is shown.

:class:`CallDisplays` keeps every display of each tool call of a running turn in its
latest form, in creation order (the tool card, the plan card shown with an apply's
question, the question's buttons then the record of the answer, a plan card after the
result): a page loaded mid-turn (a reload without a save, another tab) never saw them,
and asks for them with the status comm's ``call_card`` request
(:mod:`~iac_kernel.kernel.session.status`) to put the whole card back in its cell.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.agent.loop import CANCELLED_RESULT
from iac_kernel.events import (
    AgentEvent,
    Compacted,
    ErrorNotice,
    ModelCallDone,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallOutput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    Usage,
)
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.render import footer, plan_card
from iac_kernel.kernel.render.cards import ToolCard
from iac_kernel.kernel.render.display import (
    EMPTY_ANSWER,
    ByteBudget,
    Handle,
    Kind,
    Schedule,
    TextStream,
)

#: Seconds between two updates of a running card's live output.
CARD_INTERVAL = 0.5
#: Seconds between elapsed-time refreshes of a running card that prints nothing.
HEARTBEAT = 5.0
FAILED_NOTE = "⚠️ _No answer: the model failed (the error is below)._"

#: A checklist step's task-list box, by its status.
MARKS = {"completed": "[x]", "in_progress": "[ ]", "pending": "[ ]"}

STOP_NOTES = {
    "max_tokens": "✂️ The answer was cut off by the output token limit "
    "(`%config max_tokens N` raises it).",
    "max_turn_requests": "⏸ The turn stopped after the most model calls one turn may make "
    "(`%config max_turn_requests N`). Send another prompt to continue.",
    "refusal": "🚫 The model declined to answer.",
}


@dataclass
class Shown:
    """One display in its latest form."""

    display_id: str
    data: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    def output(self) -> dict[str, Any]:
        """As a notebook output, with the display id it is updated by."""
        return {
            "output_type": "display_data",
            "data": copy.deepcopy(self.data),
            "metadata": copy.deepcopy(self.metadata),
            "displayId": self.display_id,
        }


class CallDisplays:
    """Per tool call of one turn: its displays, by creation order, latest form of each."""

    def __init__(self) -> None:
        self._calls: dict[str, list[Shown]] = {}
        self._owner: dict[str, str] = {}

    def shown(
        self,
        call_id: str,
        display_id: str,
        data: dict[str, Any],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Record a display of ``call_id`` as it was just sent (created or updated)."""
        owner = self._owner.get(display_id)
        if owner is not None:
            for item in self._calls.get(owner, []):
                if item.display_id == display_id:
                    item.data, item.metadata = data, dict(metadata or {})
                    return
        self._owner[display_id] = call_id
        self._calls.setdefault(call_id, []).append(Shown(display_id, data, dict(metadata or {})))

    def find(
        self, call_id: str | None = None, display_id: str | None = None
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """The call named by ``call_id`` or owning ``display_id``, and every display of it
        as outputs in creation order; None for an unknown call."""
        call_id = call_id or (self._owner.get(display_id) if display_id else None)
        shown = self._calls.get(call_id) if call_id else None
        return None if shown is None or not call_id else (call_id, [s.output() for s in shown])


class TurnView:
    """Renders a turn's events into the cell."""

    def __init__(
        self,
        out: Publisher,
        session_id: str,
        end_metadata: Callable[[TurnEnded], dict[str, Any]] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        schedule: Schedule | None = None,
        on_card: Callable[[ToolCard, str], None] | None = None,
        deltas: bool = False,
        on_usage: Callable[[Usage], None] | None = None,
        model: str | None = None,
        cost: Callable[[Usage], float | None] | None = None,
        displays: CallDisplays | None = None,
    ):
        self.out = out
        self.session_id = session_id
        #: Metadata for the last text display of the turn (the kernel adds the session info;
        #: not with deltas, see :meth:`finish`).
        self.end_metadata = end_metadata or (lambda _ended: {})
        self.clock = clock
        self._schedule = schedule
        #: Called with each card and its display id whenever it is (re)sent.
        self.on_card = on_card or (lambda _card, _display_id: None)
        #: Stream text as deltas for the extension's renderer (kernel/display.py).
        self.deltas = deltas
        #: Called with the turn's usage so far after each model call.
        self.on_usage = on_usage or (lambda _usage: None)
        #: The model as the user reads it; with it, the turn ends with a footer display.
        self.model = model
        #: The turn's cost from its usage (list price), or None where none is known.
        self.cost = cost or (lambda _usage: None)
        #: Each call's displays in their latest form (a page loaded mid-turn asks for them).
        self.call_displays = displays if displays is not None else CallDisplays()
        self.started = clock()
        self.budget = (
            ByteBudget.live(envelope=out.envelope("update_display_data"))
            if deltas
            else ByteBudget()
        )
        self.streams: list[TextStream] = []
        self.cards: dict[str, ToolCard] = {}
        self.display_ids: dict[str, str] = {}
        self.errors: list[str] = []
        self.ended: TurnEnded | None = None
        self._open: TextStream | None = None
        self._card_timers: dict[str, Handle] = {}
        self._card_sent: dict[str, float] = {}
        self._card_due: dict[str, float] = {}
        #: The display of the model's update_plan checklist, once shown.
        self._checklist_id: str | None = None

    @property
    def text(self) -> str:
        """Everything the agent said this turn (not its thinking), stretches joined."""
        return "\n\n".join(
            s.whole.strip("\n") for s in self.streams if s.kind == "text" and s.whole.strip()
        )

    def emit(self, event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            self._stream("text").add(event.text)
        elif isinstance(event, ThinkingDelta):
            self._stream("thinking").add(event.text)
        elif isinstance(event, ToolCallStarted):
            self._close()
            self._card(event.call_id, event.name, event.title, event.kind)
        elif isinstance(event, ToolCallInput):
            card = self._card(event.call_id, event.name, event.title, event.kind)
            card.title, card.kind, card.input = event.title, event.kind, event.input
            card.locations = [location.path for location in event.locations]
            card.diff = event.diff
            self._show(card)
        elif isinstance(event, ToolCallOutput):
            card = self._card(event.call_id, event.call_id, event.call_id, "other")
            card.live += event.text
            self._show_soon(card)
        elif isinstance(event, ToolCallResult):
            self._result(event)
        elif isinstance(event, Compacted):
            self._close()
            self.out.markdown(f"ℹ️ {event.notice}")
        elif isinstance(event, ErrorNotice):
            self._close()
            self.errors.append(event.message)
            self.out.stream(event.message.rstrip("\n") + "\n", "stderr")
        elif isinstance(event, ModelCallDone):
            self.on_usage(event.usage)
        elif isinstance(event, TurnEnded):
            self.finish(event, self.end_metadata(event))

    def set_status(self, call_id: str, status: str) -> None:
        """For the permission UI: show "awaiting_permission", then "running" again."""
        card = self.cards.get(call_id)
        if card is not None and card.status != status:
            card.status = status
            if status == "running":
                card.started_at, card.elapsed = time.time(), 0.0
            self._show(card)

    def set_question(self, call_id: str, question: dict[str, Any] | None) -> None:
        """For the permission UI: the card's question and its state."""
        card = self.cards.get(call_id)
        if card is not None:
            card.question = question
            self._show(card)

    def finish(self, ended: TurnEnded, metadata: dict[str, Any] | None = None) -> None:
        """Close the open stretch (``metadata`` rides on it) and add the stop note, once.

        With deltas the metadata (the session info) is left out: the extension that
        asked for deltas gets the same info over its status comm as the turn ends
        (:mod:`~iac_kernel.kernel.session.status`), and the bytes it saves pay for updates."""
        if self.ended is not None:
            return
        self.ended = ended
        for timer in self._card_timers.values():
            timer.cancel()
        self._card_timers.clear()
        if self._open is not None:
            self._close(None if self.deltas else metadata)
        elif self.failed:
            self.out.markdown(FAILED_NOTE)
        elif not self.text and not self.cards and ended.stop_reason != "cancelled":
            self.out.display({"text/markdown": EMPTY_ANSWER, "text/plain": "(no text)"})
        note = STOP_NOTES.get(ended.stop_reason)
        if note:
            self.out.markdown(note)
        if self.model is not None and not self.failed:
            elapsed = max(self.clock() - self.started, 0.0)
            data = footer.bundle(
                self.model, ended.usage, elapsed, ended.stop_reason, self.cost(ended.usage)
            )
            self.out.display(data, f"iac-footer-{uuid.uuid4().hex[:16]}")

    @property
    def failed(self) -> bool:
        """The turn produced nothing but errors (e.g. no API key): the cell is an error."""
        return bool(self.errors) and not self.text.strip() and not self.cards

    # -- text ------------------------------------------------------------------------------

    def _stream(self, kind: Kind) -> TextStream:
        if self._open is not None and self._open.kind != kind:
            self._close()
        if self._open is None:
            self._open = TextStream(
                self.out,
                self.budget,
                kind,
                clock=self.clock,
                schedule=self._schedule,
                deltas=self.deltas,
            )
            self.streams.append(self._open)
        return self._open

    def _close(self, metadata: dict[str, Any] | None = None) -> None:
        if self._open is not None:
            self._open.finish(metadata)
            self._open = None

    # -- cards -----------------------------------------------------------------------------

    def _result(self, event: ToolCallResult) -> None:
        card = self._card(event.call_id, event.name, event.name, "other")
        self._cancel_timer(card.call_id)
        card.status = result_status(event)
        if card.started_at is not None:
            card.elapsed = max(time.time() - card.started_at, 0.0)
        if card.status == "cancelled" and card.live:
            card.output = card.live.rstrip("\n") + "\n\n[interrupted: " + CANCELLED_RESULT + "]"
        else:
            card.output = event.output
        if event.diff is not None:
            card.diff = event.diff
        self._show(card)
        steps = event.checklist  # the tool's (update_plan): set by a completed call
        if steps is not None:  # the model's checklist: one per turn, updated in place
            first = self._checklist_id is None
            self._checklist_id = self._checklist_id or f"iac-checklist-{uuid.uuid4().hex[:16]}"
            self.out.display(checklist_bundle(steps), self._checklist_id, update=not first)
        plan = plan_card.plan_of(event.raw_output)
        if plan is not None:  # a Terraform plan or drift check: its card below the tool card
            # With every row (the tool's plan_rows), as an apply's question shows them.
            data = plan_card.bundle(plan, event.call_id, self.session_id, event.plan_rows)
            display_id = f"iac-plan-{uuid.uuid4().hex}"
            self.out.display(data, display_id)
            self.call_displays.shown(event.call_id, display_id, data)

    def _card(self, call_id: str, name: str, title: str, kind: str) -> ToolCard:
        card = self.cards.get(call_id)
        if card is None:  # a new call (or one whose start we never saw): show it
            self._close()
            card = ToolCard(call_id, name, title, kind, self.session_id)
            card.started_at, card.elapsed = time.time(), 0.0
            self.cards[call_id] = card
            self.display_ids[call_id] = f"iac-tool-{uuid.uuid4().hex[:16]}"
            self._show(card, update=False)
        return card

    def _show(self, card: ToolCard, *, update: bool = True) -> None:
        if card.output is None and card.started_at is not None and card.status == "running":
            card.elapsed = max(time.time() - card.started_at, 0.0)
        self._card_sent[card.call_id] = self.clock()
        display_id = self.display_ids[card.call_id]
        bundle = card.bundle()
        self.out.display(bundle, display_id, update=update)
        self.call_displays.shown(card.call_id, display_id, bundle)
        self.on_card(card, display_id)
        if card.status == "running" and card.output is None and self.ended is None:
            self._arm(card, HEARTBEAT)

    def _show_soon(self, card: ToolCard) -> None:
        """Live output: update now, or once CARD_INTERVAL has passed since the last one."""
        wait = self._card_sent.get(card.call_id, float("-inf")) + CARD_INTERVAL - self.clock()
        if wait <= 0:
            self._cancel_timer(card.call_id)
            self._show(card)
        else:
            self._arm(card, wait, replace=False)

    def _arm(self, card: ToolCard, delay: float, *, replace: bool = True) -> None:
        """Schedule a refresh of ``card``; without ``replace`` an earlier one is kept."""
        due = self.clock() + delay
        existing = self._card_timers.get(card.call_id)
        if existing is not None:
            if not replace and self._card_due[card.call_id] <= due:
                return
            existing.cancel()

        def fire() -> None:
            self._card_timers.pop(card.call_id, None)
            if self.ended is None and card.output is None:
                self._show(card)

        self._card_timers[card.call_id] = self._later(delay, fire)
        self._card_due[card.call_id] = due

    def _cancel_timer(self, call_id: str) -> None:
        timer = self._card_timers.pop(call_id, None)
        if timer is not None:
            timer.cancel()

    def _later(self, delay: float, callback: Callable[[], None]) -> Handle:
        if self._schedule is not None:
            return self._schedule(delay, callback)
        return asyncio.get_running_loop().call_later(delay, callback)


def result_status(event: ToolCallResult) -> str:
    if event.denied:
        return "denied"
    if event.status == "completed":
        return "done"
    if event.output == CANCELLED_RESULT:
        return "cancelled"
    return "failed"


def checklist_bundle(steps: list[dict[str, Any]]) -> dict[str, str]:
    """``text/markdown`` (a task list; the running step in bold) and ``text/plain``."""
    done = sum(1 for s in steps if s.get("status") == "completed")
    head = f"**Plan** ({done} of {len(steps)} done)"
    lines, plain = [head, ""], [f"Plan ({done} of {len(steps)} done)"]
    for step in steps:
        status, text = str(step.get("status")), str(step.get("step", "")).replace("\n", " ")
        shown = f"**{text}** _(in progress)_" if status == "in_progress" else text
        lines.append(f"- {MARKS.get(status, '[ ]')} {shown}")
        plain.append(
            f"{'✓' if status == 'completed' else '→' if status == 'in_progress' else '·'} {text}"
        )
    return {"text/markdown": "\n".join(lines), "text/plain": "\n".join(plain)}
