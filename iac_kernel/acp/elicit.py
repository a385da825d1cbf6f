"""Forms over ACP elicitation (schema 1.25): a question's :class:`~iac_kernel.agent.forms.Form`
as an ``elicitation/create`` form, for clients that declared ``elicitation.form``.

The typed confirmation of a destroy or a production apply (which the gate attaches as
``request.form``, :func:`iac_kernel.agent.forms.typed_confirmation`) is asked this way:
the user types the workspace's name, which a reflexive click cannot give. Only the exact
name approves (once); anything else, a decline or a cancel rejects. Other clients, and
other questions, get ``session/request_permission`` as before.

The agent's own questions (:mod:`iac_kernel.agent.questions`) and an MCP server's forms
are forms too; an MCP server's URL elicitation is ``mode: "url"`` for clients that
declared ``elicitation.url`` (then ``elicitation/complete`` once the server says it
completed), declined for others (:mod:`iac_kernel.agent.elicitation`).
"""

from __future__ import annotations

from typing import Any

from acp.meta import CLIENT_METHODS

from iac_kernel.agent.forms import Form
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE, Answer, PermissionRequest
from iac_kernel.agent.questions import QUESTION

METHOD = CLIENT_METHODS["elicitation_create"]
#: Agent -> client notification: a URL elicitation completed (schema 1.25).
COMPLETE = "elicitation/complete"
#: How long a forwarded URL elicitation may wait for the server's completion.
COMPLETE_WAIT = 900.0


def confirmation_target(request: PermissionRequest) -> str | None:
    """The workspace name to type for ``request``, or ``None`` when it needs none."""
    return request.form.confirms if request.form is not None else None


def elicitation_params(session_id: str, request: PermissionRequest, form: Form) -> dict:
    """The ``elicitation/create`` params (form mode, tied to the tool call)."""
    if request.kind == QUESTION:  # the agent's own question: its text, as it asked
        return {
            "sessionId": session_id,
            "toolCallId": request.call_id,
            "mode": "form",
            "message": request.reason,
            "requestedSchema": form.schema(),
        }
    text = request.review.get("text") if isinstance(request.review, dict) else None
    target = form.confirms
    ask = f"To approve this one call, type the workspace name `{target}`." if target else ""
    message = "\n\n".join(part for part in (request.title, request.reason, text, ask) if part)
    return {
        "sessionId": session_id,
        "toolCallId": request.call_id,
        "mode": "form",
        "message": message,
        "requestedSchema": form.schema(),
    }


def url_params(session_id: str, request: PermissionRequest) -> dict:
    """The ``elicitation/create`` params (url mode, tied to the tool call) of an MCP
    server's URL elicitation (``request.url``)."""
    link = request.url
    return {
        "sessionId": session_id,
        "toolCallId": request.call_id,
        "mode": "url",
        "elicitationId": link.elicitation_id,
        "url": link.url,
        "message": request.reason,
    }


def parse_values(result: Any, by: str) -> Answer:
    """An accepted form's values as they came (the asker checks them against its form:
    the agent's own question tells the model what did not fit); a decline or cancel
    declines."""
    if not isinstance(result, dict) or result.get("action") != "accept":
        return Answer(REJECT_ONCE, by=by)
    content = result.get("content")
    return Answer(ALLOW_ONCE, by=by, values=dict(content) if isinstance(content, dict) else {})


def parse_form(result: Any, form: Form, by: str) -> Answer:
    """The answer an ``elicitation/create`` result gives: an accepted form carries its
    values (the gate checks them against ``form``); a decline or cancel rejects."""
    if not isinstance(result, dict) or result.get("action") != "accept":
        return Answer(REJECT_ONCE, by=by)
    content = result.get("content")
    values = dict(content) if isinstance(content, dict) else {}
    problem = form.mismatch(values)
    if problem is not None:
        return Answer(REJECT_ONCE, note=problem, by=by)
    return Answer(ALLOW_ONCE, by=by, values=values)
