"""Forms over ACP elicitation (schema 1.25): a question's :class:`~iac_kernel.agent.forms.Form`
as an ``elicitation/create`` form, for clients that declared ``elicitation.form``.

The typed confirmation of a destroy or a production apply (which the gate attaches as
``request.form``, :func:`iac_kernel.agent.forms.typed_confirmation`) is asked this way:
the user types the workspace's name, which a reflexive click cannot give. Only the exact
name approves (once); anything else, a decline or a cancel rejects. Other clients, and
other questions, get ``session/request_permission`` as before.
"""

from __future__ import annotations

from typing import Any

from acp.meta import CLIENT_METHODS

from iac_kernel.agent.forms import Form
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE, Answer, PermissionRequest

METHOD = CLIENT_METHODS["elicitation_create"]


def confirmation_target(request: PermissionRequest) -> str | None:
    """The workspace name to type for ``request``, or ``None`` when it needs none."""
    return request.form.confirms if request.form is not None else None


def elicitation_params(session_id: str, request: PermissionRequest, form: Form) -> dict:
    """The ``elicitation/create`` params (form mode, tied to the tool call)."""
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
