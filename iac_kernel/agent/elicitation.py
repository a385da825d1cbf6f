"""An MCP server's elicitations (``elicitation/create`` during a tool call), forwarded to
the user through the one permission/question channel (``ask``), and the answer the
server gets (the spec's ``ElicitResult``).

* **form** mode: the server's flat ``requestedSchema`` becomes a
  :class:`~iac_kernel.agent.forms.Form` asked as a question
  (:mod:`iac_kernel.agent.questions`): a front that renders forms answers it (ACP clients
  declaring ``elicitation.form`` get ``elicitation/create`` form); others get the choices
  of a single choice field, or a question they can only dismiss. Only values that fit
  the form are accepted; an approval without values (a headless policy) is a decline. A
  schema we cannot show (nested or multi-select properties) is declined.
* **url** mode: a request of kind :data:`URL` carrying :class:`UrlElicitation`; ACP
  clients declaring ``elicitation.url`` get ``elicitation/create`` url (and
  ``elicitation/complete`` when the server says it completed); other ACP clients decline.
  It is ``danger``: no headless policy consents to open a URL for the user.

The server's words and labels are shown inert (:mod:`iac_kernel.textsafe`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from iac_kernel.agent import questions
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

#: The ``PermissionRequest.kind`` of a URL elicitation.
URL = "url"
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
    request = questions.question_request(call_id, tool_name, message or form.title, form)
    request.title = f"{tool_name} asks: {printable(_first_line(message, 80))}"
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


def asker(
    call_id: str, tool_name: str, ask: AskPermission | None
) -> Callable[[dict[str, Any], asyncio.Event | None], Awaitable[dict[str, Any]]]:
    """The ``ToolContext.elicit`` of one tool call."""

    async def forward(params: dict[str, Any], completed: asyncio.Event | None) -> dict[str, Any]:
        return await elicit(ask, call_id, tool_name, params, completed)

    return forward


def _first_line(text: str, width: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"
