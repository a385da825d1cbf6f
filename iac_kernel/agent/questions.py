"""The agent's own questions to the user (the ``ask_user`` tool), asked through the one
permission/question channel (``ask``), so every front gets them.

A question is a :class:`~iac_kernel.agent.permissions.PermissionRequest` of kind
:data:`QUESTION` with its :class:`~iac_kernel.agent.forms.Form` and the options
``allow_once`` ("Answer") and ``reject_once`` ("Decline"):

* a front that renders forms answers ``allow_once`` with the values filled in
  (``Answer.values``); they are the answer once they fit the form;
* a front that cannot, shows the choices of a single choice field as options
  (:func:`plain_choices`) and answers with the picked one's values; a question it can
  only show (free-form values) it answers :data:`UNSUPPORTED` when the user dismisses it,
  and the model is told to ask in its reply;
* an approval without values (a headless policy of ``allow``) is not an answer: an
  unanswered question is never taken as one;
* ``ask`` of ``None`` (nobody there): the tool says so.

The question and every label come from the model: they are shown inert (one line for
titles, control and invisible characters escaped, :mod:`iac_kernel.textsafe`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from iac_kernel.agent.forms import CHOICE, Form, FormField
from iac_kernel.agent.permissions import (
    ALLOW_ONCE,
    CANCELLED,
    REJECT_ONCE,
    AskPermission,
    PermissionRequest,
    answered,
)
from iac_kernel.textsafe import printable, shown_lines
from iac_kernel.tools.ask_user import NOBODY
from iac_kernel.tools.base import ToolResult

#: The ``PermissionRequest.kind`` of a question.
QUESTION = "question"
#: The answer of a front that showed a question it cannot take values for (free-form
#: fields without form support), once the user dismissed it.
UNSUPPORTED = "unsupported"
LABELS = {ALLOW_ONCE: "Answer", REJECT_ONCE: "Decline"}

NOT_ANSWERED = (
    "Not answered: {by} approved without giving values (a policy deciding without a "
    "person, or a front that cannot show this question), and an approval is not an "
    "answer. Do not guess anything that matters: say in your reply what you need to know."
)
DECLINED = (
    "The user declined to answer{note}. Do not guess the answer: go on without it if "
    "you can, or say in your reply what you need."
)
UNSUPPORTED_TEXT = (
    "The user's client cannot answer free-form questions. Ask the question in your "
    "reply instead (and end your turn there), so the user can answer in their next message."
)


def question_form(question: str, fields: list[dict[str, Any]]) -> Form:
    """The form of a question, its labels made inert."""
    return Form(
        title=printable(_first_line(question, 120)),
        fields=[
            FormField(
                name=f["name"],
                title=printable(f.get("title") or f["name"]),
                kind=f.get("kind", "text"),
                description=printable(f.get("description", "")),
                choices=[printable(c) for c in f.get("choices", [])],
                required=bool(f.get("required", True)),
            )
            for f in fields
        ],
    )


def question_request(call_id: str, tool_name: str, question: str, form: Form) -> PermissionRequest:
    """The question as the channel carries it (see the module docstring)."""
    text = shown_lines(question)
    return PermissionRequest(
        call_id=call_id,
        tool_name=tool_name,
        title=f"Question: {printable(_first_line(question, 80))}",
        kind=QUESTION,
        input={"question": text, "fields": [f.name for f in form.fields]},
        options=[ALLOW_ONCE, REJECT_ONCE],
        reason=text,
        labels=dict(LABELS),
        form=form,
    )


def plain_choices(request: PermissionRequest) -> list[str] | None:
    """For a front without forms: the choices of a question whose form is one choice
    field (each can be an option), else ``None``."""
    form = request.form
    if request.kind != QUESTION or form is None or len(form.fields) != 1:
        return None
    field = form.fields[0]
    return list(field.choices) if field.kind == CHOICE and field.choices else None


def choice_values(request: PermissionRequest, choice: str) -> dict[str, Any]:
    """The values a picked choice gives (the form's one choice field)."""
    assert request.form is not None
    return {request.form.fields[0].name: choice}


async def ask_question(
    ask: AskPermission | None,
    call_id: str,
    tool_name: str,
    question: str,
    fields: list[dict[str, Any]],
) -> ToolResult:
    """Ask ``question`` and say what came of it, as the tool's result."""
    if ask is None:
        return ToolResult(NOBODY, raw_output={"answered": False, "why": "nobody"})
    form = question_form(question, fields)
    request = question_request(call_id, tool_name, question, form)
    answer = await ask(request)
    request.asked = answered(request, answer)
    by = getattr(answer, "by", "") or "the front end"
    if answer == CANCELLED:
        raise asyncio.CancelledError
    values = getattr(answer, "values", None)
    if answer == UNSUPPORTED:
        return ToolResult(UNSUPPORTED_TEXT, raw_output={"answered": False, "why": "unsupported"})
    if answer == ALLOW_ONCE and values is not None:
        problem = form.mismatch(values)
        if problem is None:
            given = {f.name: values.get(f.name) for f in form.fields if f.name in values}
            return ToolResult(
                "The user answered: " + json.dumps(given, ensure_ascii=False),
                raw_output={"answered": True, "values": given, "by": by},
            )
        return ToolResult(
            f"The answer did not fit the question ({problem}). Ask again, more simply, or "
            "ask in your reply.",
            raw_output={"answered": False, "why": "mismatch", "problem": problem},
        )
    if answer == ALLOW_ONCE:  # an approval without values: a policy, not a person
        return ToolResult(
            NOT_ANSWERED.format(by=by), raw_output={"answered": False, "why": "policy", "by": by}
        )
    note = getattr(answer, "note", "")
    return ToolResult(
        DECLINED.format(note=f" (they say: {note})" if note else ""),
        raw_output={"answered": False, "why": "declined", "by": by},
    )


def asker(
    call_id: str, tool_name: str, ask: AskPermission | None
) -> Callable[[str, list[dict[str, Any]]], Awaitable[ToolResult]]:
    """The ``ToolContext.ask_user`` of one tool call."""

    async def ask_user(question: str, fields: list[dict[str, Any]]) -> ToolResult:
        return await ask_question(ask, call_id, tool_name, question, fields)

    return ask_user


def _first_line(text: str, width: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"
