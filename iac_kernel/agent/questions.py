"""The questions the agent and its tools' servers ask the user, through the one
permission/question channel (``ask``), so every front gets them.

**The agent's own questions** (the ``ask_user`` tool): a
:class:`~iac_kernel.agent.permissions.PermissionRequest` of kind :data:`QUESTION` with
its :class:`~iac_kernel.agent.forms.Form` and the options ``allow_once`` ("Answer") and
``reject_once`` ("Decline"):

* a front that renders forms answers ``allow_once`` with the values filled in
  (``Answer.values``); they are the answer once they fit the form;
* a front that cannot, shows the choices of a single choice field as options
  (:func:`plain_choices`) and answers with the picked one's values; a question it can
  only show (free-form values) it answers :data:`UNSUPPORTED` when the user dismisses it,
  and the model is told to ask in its reply;
* an approval without values (a headless policy of ``allow``) is not an answer: an
  unanswered question is never taken as one;
* ``ask`` of ``None`` (nobody there): the tool says so.

**An MCP server's elicitations** (``elicitation/create`` during a tool call), answered
with the spec's ``ElicitResult``:

* **form** mode: the server's flat ``requestedSchema`` becomes a form asked as a question
  like the agent's own (ACP clients declaring ``elicitation.form`` get
  ``elicitation/create`` form). Only values that fit the form are accepted; an approval
  without values (a headless policy) is a decline. A schema we cannot show (nested or
  multi-select properties) is declined.
* **url** mode: a request of kind :data:`URL` carrying :class:`UrlElicitation`; ACP
  clients declaring ``elicitation.url`` get ``elicitation/create`` url (and
  ``elicitation/complete`` when the server says it completed); other ACP clients decline.
  It is ``danger``: no headless policy consents to open a URL for the user.

The question, the server's words and every label are shown inert (one line for titles,
control and invisible characters escaped, :mod:`iac_kernel.textsafe`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, TEXT, Form, FormField
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
from iac_kernel.tools.base import ToolResult, short

#: The ``PermissionRequest.kind`` of a question.
QUESTION = "question"
#: The ``PermissionRequest.kind`` of a URL elicitation.
URL = "url"
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
        title=printable(short(question, 120)),
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
        title=f"Question: {printable(short(question, 80))}",
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


def user_asker(
    call_id: str, tool_name: str, ask: AskPermission | None
) -> Callable[[str, list[dict[str, Any]]], Awaitable[ToolResult]]:
    """The ``ToolContext.ask_user`` of one tool call."""

    async def ask_user(question: str, fields: list[dict[str, Any]]) -> ToolResult:
        return await ask_question(ask, call_id, tool_name, question, fields)

    return ask_user


# -- an MCP server's elicitations ------------------------------------------------------

DECLINE = {"action": "decline"}
CANCEL = {"action": "cancel"}


@dataclass
class UrlElicitation:
    """A URL an MCP server asks the user to open, as the front sends it on."""

    #: Our id for it (ACP ``elicitationId``); the server's stays with the server.
    elicitation_id: str
    url: str
    message: str
    #: Set when the server says the interaction completed (``notifications/elicitation/
    #: complete``); None when it cannot say.
    completed: asyncio.Event | None = None


def schema_form(title: str, schema: Any) -> Form | None:
    """A form for an elicitation's ``requestedSchema`` (flat: strings, enums, numbers,
    integers, booleans), or ``None`` when it asks for anything else."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    fields: list[FormField] = []
    for name, prop in schema["properties"].items():
        if not isinstance(name, str) or not isinstance(prop, dict):
            return None
        kind, choices = _kind(prop)
        if kind is None:
            return None
        label = prop.get("title") if isinstance(prop.get("title"), str) else name
        description = prop.get("description") if isinstance(prop.get("description"), str) else ""
        default = prop.get("default")
        fields.append(
            FormField(
                name=name,
                title=printable(label),
                kind=kind,
                description=printable(description),
                choices=choices,
                required=name in required,
                default=default if isinstance(default, str | int | float | bool) else None,
            )
        )
    return Form(title=printable(title), fields=fields)


def _kind(prop: dict[str, Any]) -> tuple[str | None, list[str]]:
    kind = prop.get("type")
    if kind == "string":
        values = prop.get("enum")
        if values is None and isinstance(prop.get("oneOf"), list):
            values = [o.get("const") for o in prop["oneOf"] if isinstance(o, dict)]
        if values is None:
            return TEXT, []
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            return CHOICE, list(values)
        return None, []
    if kind in ("number", "integer"):
        return NUMBER, []
    if kind == "boolean":
        return BOOLEAN, []
    return None, []


async def elicit(
    ask: AskPermission | None,
    call_id: str,
    tool_name: str,
    params: dict[str, Any],
    completed: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Ask the user what an MCP server's ``elicitation/create`` asks; its answer."""
    if ask is None:
        return DECLINE
    message = params.get("message") if isinstance(params.get("message"), str) else ""
    if params.get("mode") == "url":
        return await _url(ask, call_id, tool_name, message, params, completed)
    form = schema_form(f"{tool_name} asks", params.get("requestedSchema"))
    if form is None or not form.fields:
        return DECLINE
    request = question_request(call_id, tool_name, message or form.title, form)
    request.title = f"{tool_name} asks: {printable(short(message, 80))}"
    answer = await ask(request)
    request.asked = answered(request, answer)
    if answer == CANCELLED:
        return CANCEL
    values = getattr(answer, "values", None)
    if answer != ALLOW_ONCE or values is None or form.mismatch(values) is not None:
        return DECLINE
    return {
        "action": "accept",
        "content": {f.name: values[f.name] for f in form.fields if f.name in values},
    }


async def _url(
    ask: AskPermission,
    call_id: str,
    tool_name: str,
    message: str,
    params: dict[str, Any],
    completed: asyncio.Event | None,
) -> dict[str, Any]:
    url = params.get("url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return DECLINE
    link = UrlElicitation(f"elicit-{uuid.uuid4().hex[:16]}", url, message, completed)
    shown = printable(url)
    request = PermissionRequest(
        call_id=call_id,
        tool_name=tool_name,
        title=f"{tool_name} asks you to open {shown}",
        kind=URL,
        input={"url": shown, "message": shown_lines(message)},
        options=[ALLOW_ONCE, REJECT_ONCE],
        reason=(
            f"{shown_lines(message)}\n\nThe MCP server asks you to open this page in your "
            f"browser: {shown}"
        ).strip(),
        labels={ALLOW_ONCE: "Open the page", REJECT_ONCE: "Decline"},
        danger=True,
        url=link,
    )
    answer = await ask(request)
    request.asked = answered(request, answer)
    if answer == CANCELLED:
        return CANCEL
    return {"action": "accept"} if answer == ALLOW_ONCE else DECLINE


def elicit_asker(
    call_id: str, tool_name: str, ask: AskPermission | None
) -> Callable[[dict[str, Any], asyncio.Event | None], Awaitable[dict[str, Any]]]:
    """The ``ToolContext.elicit`` of one tool call."""

    async def forward(params: dict[str, Any], completed: asyncio.Event | None) -> dict[str, Any]:
        return await elicit(ask, call_id, tool_name, params, completed)

    return forward
