"""A permission question as the notebook shows it, and the questions waiting for an answer.

The words (the reason naming the command or file, labels that say what "always" covers,
Reject first for a per-call question) and the payload the card and the status comm show.

A question asked with buttons waits in :class:`PendingQuestions`, where any client can
answer it: the buttons (the same widget models in every view), a ``%permissions`` cell
(the same buttons under the same display id), or the status comm's ``answer`` request.
An answered or cancelled question is gone from it: stale buttons or ids do nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iac_kernel.agent.forms import Form
from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    CATEGORY_REASONS,
    REJECT_ALWAYS,
    REJECT_ONCE,
    Answer,
    PermissionRequest,
)


def reason_text(request: PermissionRequest) -> str:
    """The reason, naming the command or the file when the gate gave only its category's
    generic words ("It runs a command or a sub-agent.")."""
    if request.reason not in CATEGORY_REASONS.values():
        return request.reason
    args = request.input if isinstance(request.input, dict) else {}
    command, path = args.get("command"), args.get("path") or args.get("file_path")
    if isinstance(command, str) and command.strip():
        return f"It runs `{_short(command)}` in this folder."
    if isinstance(path, str) and path.strip():
        return f"It changes `{path}`."
    return request.reason


def _short(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def button_label(request: PermissionRequest, option: str) -> str:
    """A button's label that says what "always" covers: "Always allow `terraform plan`",
    "Always allow edits in this folder"."""
    custom = request.labels.get(option, "")
    if option not in (ALLOW_ALWAYS, REJECT_ALWAYS):
        return request.label(option)
    verb = "Always allow" if option == ALLOW_ALWAYS else "Always reject"
    if ":" in custom:  # the gate's "Allow always: `terraform plan`" (a command prefix)
        return f"{verb} {custom.split(':', 1)[1].strip()} …"
    if request.kind == "edit":
        return f"{verb} edits in this folder"
    return f"{verb} {request.tool_name} (this session)"


def button_order(request: PermissionRequest) -> list[str]:
    """Danger questions put Reject first; routine ones keep the gate's order."""
    if not request.danger:
        return list(request.options)
    return sorted(request.options, key=lambda o: 0 if o.startswith("reject") else 1)


def answers_form(option: str) -> bool:
    """Whether choosing ``option`` answers the form (carries its values): every option but
    a rejection (Allow once, Allow always, or an option of the agent's own question)."""
    return not option.startswith("reject")


def form_payload(form: Form | None) -> dict[str, Any] | None:
    """The form as the tool card's ``question.form`` (the extension renders it)."""
    if form is None:
        return None
    return {
        "title": form.title,
        "fields": [
            {
                "name": f.name,
                "title": f.title,
                "kind": f.kind,
                "description": f.description,
                "choices": list(f.choices),
                "required": f.required,
                "default": f.default,
                "mustEqual": f.must_equal,
            }
            for f in form.fields
        ],
    }


def question_state(
    question_id: str, request: PermissionRequest, state: str, answer: str | None = None
) -> dict[str, Any]:
    """The card's ``question`` field."""
    return {
        "id": question_id,
        "state": state,
        "danger": request.danger,
        "reason": reason_text(request),
        "options": button_order(request),
        "answer": str(answer) if answer is not None else None,
        "note": getattr(answer, "note", None) or None,
        "form": form_payload(request.form),
        "labels": {o: button_label(request, o) for o in request.options},
        "kind": request.kind,
    }


@dataclass
class Question:
    """One pending question."""

    id: str
    request: PermissionRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[str]
    display_id: str
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

    def bundles(self) -> list[tuple[dict[str, Any], str]]:
        """The buttons of the questions that have them, with their display ids."""
        return [(q.bundle(), q.display_id) for q in list(self.questions.values()) if q.bundle]

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
        else:
            values = None
        question.resolve(option, note, values)
        return None

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()
