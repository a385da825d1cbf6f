"""A typed confirmation for a destroy or a production apply, through ACP elicitation.

For a client that declared ``elicitation.form`` (schema 1.25), a per-call question about
a Terraform apply that destroys something (the plan deletes or replaces resources, or a
``destroy``/``apply -destroy`` without a saved plan), or that applies to a production
workspace (a workspace named ``prod``, ``production`` or ``prd``, alone or as a ``-``,
``_`` or ``.`` separated part), is asked as an ``elicitation/create`` form: the user types
the workspace's name, which a reflexive click cannot give. Only the exact name approves
(once); anything else, a decline or a cancel rejects. Other clients, and other questions,
get ``session/request_permission`` as before.
"""

from __future__ import annotations

import re
from typing import Any

from acp.meta import CLIENT_METHODS

from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE, PermissionRequest

METHOD = CLIENT_METHODS["elicitation_create"]
FIELD = "workspace"
PRODUCTION = re.compile(r"(^|[-_.])(prod|production|prd)([-_.]|$)", re.IGNORECASE)


def confirmation_target(request: PermissionRequest) -> str | None:
    """The workspace name to type for ``request``, or ``None`` when it needs no typed
    confirmation (not a per-call Terraform apply, or neither a destroy nor production)."""
    review = request.review if isinstance(request.review, dict) else None
    if not request.danger or review is None:
        return None
    if review.get("kind") not in ("terraform_apply", "terraform_destroy"):
        return None
    workspace = review.get("workspace") or "default"
    if not isinstance(workspace, str):
        return None
    plan = review.get("plan") if isinstance(review.get("plan"), dict) else {}
    counts = plan.get("counts") if isinstance(plan.get("counts"), dict) else {}
    destroys = review.get("kind") == "terraform_destroy" or bool(
        counts.get("delete") or counts.get("replace")
    )
    return workspace if destroys or PRODUCTION.search(workspace) else None


def elicitation_params(session_id: str, request: PermissionRequest, target: str) -> dict:
    """The ``elicitation/create`` params (form mode, tied to the tool call)."""
    text = request.review.get("text") if isinstance(request.review, dict) else None
    message = "\n\n".join(
        part
        for part in (
            request.title,
            request.reason,
            text,
            f"To approve this one call, type the workspace name `{target}`.",
        )
        if part
    )
    return {
        "sessionId": session_id,
        "toolCallId": request.call_id,
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "title": "Typed confirmation",
            "properties": {
                FIELD: {
                    "type": "string",
                    "title": "Workspace name",
                    "description": f"Type {target} to approve; anything else rejects.",
                }
            },
            "required": [FIELD],
        },
    }


def parse_confirmation(result: Any, target: str) -> str:
    """``allow_once`` for an accepted form holding exactly ``target``; else ``reject_once``."""
    if not isinstance(result, dict) or result.get("action") != "accept":
        return REJECT_ONCE
    content = result.get("content")
    typed = content.get(FIELD) if isinstance(content, dict) else None
    return ALLOW_ONCE if isinstance(typed, str) and typed.strip() == target else REJECT_ONCE
