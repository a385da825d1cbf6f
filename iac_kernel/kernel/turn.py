"""One turn's cell output: the streamed answer, a card per tool call, notes and errors.

:class:`TurnView` is the ``emit`` callback given to ``AgentSession.prompt``. The answer
display is created when the turn starts, so the answer stays at the top of the cell and
the tool cards follow it in call order; the answer's final update carries the whole text.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from iac_kernel.agent.events import (
    AgentEvent,
    Compacted,
    ErrorNotice,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
)
from iac_kernel.agent.loop import CANCELLED_RESULT
from iac_kernel.kernel.cards import ToolCard
from iac_kernel.kernel.display import AnswerDisplay
from iac_kernel.kernel.publish import Publisher

STOP_NOTES = {
    "max_tokens": "✂️ The answer was cut off by the output token limit "
    "(`%config max_tokens N` raises it).",
    "max_turn_requests": "⏸ The turn stopped after the most model calls one turn may make "
    "(`%config max_turn_requests N`). Send another prompt to continue.",
    "refusal": "🚫 The model declined to answer.",
}


class TurnView:
    """Renders a turn's events into the cell."""

    def __init__(
        self,
        out: Publisher,
        session_id: str,
        answer: AnswerDisplay | None = None,
        end_metadata: Callable[[TurnEnded], dict[str, Any]] | None = None,
    ):
        self.out = out
        self.session_id = session_id
        self.answer = answer or AnswerDisplay(out)
        #: Metadata for the answer's final update (the kernel adds the session info).
        self.end_metadata = end_metadata or (lambda _ended: {})
        self.cards: dict[str, ToolCard] = {}
        self._display_ids: dict[str, str] = {}
        self.errors: list[str] = []
        self.ended: TurnEnded | None = None
        self._after_tool = False

    def start(self) -> None:
        self.answer.start()

    def emit(self, event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            if self._after_tool and self.answer.text and not self.answer.text[-1].isspace():
                # The text of the next model call: a new paragraph, not a run-on sentence.
                self.answer.add_text("\n\n")
            self._after_tool = False
            self.answer.add_text(event.text)
        elif isinstance(event, ThinkingDelta):
            self.answer.add_thinking(event.text)
        elif isinstance(event, ToolCallStarted):
            self._after_tool = True
            self.answer.flush()
            self._card(event.call_id, event.name, event.title, event.kind)
        elif isinstance(event, ToolCallInput):
            card = self._card(event.call_id, event.name, event.title, event.kind)
            card.title, card.kind, card.input = event.title, event.kind, event.input
            card.locations = list(event.locations)
            card.diff = event.diff
            self._show(card)
        elif isinstance(event, ToolCallResult):
            card = self._card(event.call_id, event.name, event.name, "other")
            card.status = result_status(event)
            card.set_output(event.output)
            if event.diff is not None:
                card.diff = event.diff
            self._show(card)
        elif isinstance(event, Compacted):
            self.out.markdown(f"ℹ️ {event.notice}")
        elif isinstance(event, ErrorNotice):
            self.errors.append(event.message)
            self.out.stream(event.message.rstrip("\n") + "\n", "stderr")
        elif isinstance(event, TurnEnded):
            self.finish(event, self.end_metadata(event))

    def set_status(self, call_id: str, status: str) -> None:
        """For the permission UI: show "awaiting_permission", then "running" again."""
        card = self.cards.get(call_id)
        if card is not None and card.status != status:
            card.status = status
            self._show(card)

    def finish(self, ended: TurnEnded, metadata: dict[str, Any] | None = None) -> None:
        """Send the whole answer (``metadata`` rides on it) and the stop note, once."""
        if self.ended is not None:
            return
        self.ended = ended
        if self.failed:
            self.answer.finish(
                empty="⚠️ _No answer: the model failed (the error is below)._", metadata=metadata
            )
        else:
            self.answer.finish(metadata=metadata)
        note = STOP_NOTES.get(ended.stop_reason)
        if note:
            self.out.markdown(note)

    @property
    def failed(self) -> bool:
        """The turn produced nothing but errors (e.g. no API key): the cell is an error."""
        return bool(self.errors) and not self.answer.text.strip() and not self.cards

    def _card(self, call_id: str, name: str, title: str, kind: str) -> ToolCard:
        card = self.cards.get(call_id)
        if card is None:  # a new call (or one whose start we never saw): show it
            card = ToolCard(call_id, name, title, kind, self.session_id)
            self.cards[call_id] = card
            self._display_ids[call_id] = f"iac-tool-{uuid.uuid4().hex}"
            self._show(card, update=False)
        return card

    def _show(self, card: ToolCard, *, update: bool = True) -> None:
        self.out.display(card.bundle(), self._display_ids[card.call_id], update=update)


def result_status(event: ToolCallResult) -> str:
    if event.denied:
        return "denied"
    if event.status == "completed":
        return "done"
    if event.output == CANCELLED_RESULT:
        return "cancelled"
    return "failed"
