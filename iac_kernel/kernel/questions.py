"""Permission questions waiting for an answer, reachable from any view of the kernel.

Each question asked with buttons is registered here while it waits. Any client can then
find and answer it: the buttons themselves (ipywidgets, the same models in every view), a
``%permissions`` cell run while the turn waits (it shows the same buttons under the same
display id, so the answer updates every copy), or the status comm's ``answer`` request
(see :mod:`~iac_kernel.kernel.status`). Only a question that is still pending can be
answered; an answered or cancelled one is gone from the registry and stale buttons or ids
do nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iac_kernel.agent.permissions import REJECT_ONCE, Answer, PermissionRequest
from iac_kernel.kernel.form_ui import answers_form


@dataclass
class Question:
    """One pending question."""

    id: str
    request: PermissionRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[str]
    display_id: str
    danger: bool
    #: The widget bundle (buttons) to show again elsewhere, or None.
    bundle: Callable[[], dict[str, Any]] | None = None

    def resolve(self, option: str, note: str = "", values: dict[str, Any] | None = None) -> None:
        """Answer the question (thread-safe); ignored once it is answered."""

        def settle() -> None:
            if not self.future.done():
                plain = not note and values is None
                self.future.set_result(option if plain else Answer(option, note, values=values))

        self.loop.call_soon_threadsafe(settle)


class PendingQuestions:
    """The kernel's pending questions, by id."""

    def __init__(self) -> None:
        self.questions: dict[str, Question] = {}
        #: Called whenever a question is added or removed (the status bar follows).
        self.listeners: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return len(self.questions)

    def add(self, question: Question) -> None:
        self.questions[question.id] = question
        self._changed()

    def remove(self, question_id: str) -> None:
        if self.questions.pop(question_id, None) is not None:
            self._changed()

    def answer(
        self,
        question_id: str,
        option: str,
        note: str = "",
        values: dict[str, Any] | None = None,
    ) -> str | None:
        """Answer a pending question; returns an error message, or None when accepted.

        Any answer but a rejection of a question with a form needs the form's values, and
        values that answer it (a typed confirmation: the exact name): otherwise the question stays
        pending and the error says what is missing."""
        question = self.questions.get(question_id)
        if question is None:
            return f"no pending question {question_id!r} (answered or cancelled already)"
        if option not in question.request.options:
            return f"{option!r} is not an option of this question: {question.request.options}"
        if note and option != REJECT_ONCE:
            return "a note goes with reject_once only"
        form = question.request.form
        if form is not None and answers_form(option):
            if not isinstance(values, dict):
                return f"this question asks for a form ({form.title}): send its values"
            problem = form.mismatch(values)
            if problem is not None:
                return problem
            question.resolve(option, note, values)
            return None
        question.resolve(option, note)
        return None

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()
