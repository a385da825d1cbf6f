"""Forms: what a question asks the user to fill in, whatever front end shows it.

A :class:`Form` rides on a :class:`~iac_kernel.agent.permissions.PermissionRequest`
(``request.form``), so every front keeps one way of asking. Two kinds exist:

* the **typed confirmation** of a destroy or a production apply
  (:func:`typed_confirmation`): one text field that must hold the workspace's name, which
  a reflexive click cannot give;
* the **agent's own questions** (choices, values) it asks the user mid-task.

Fronts that render forms (ACP clients that declared ``elicitation.form``, the notebook)
answer with :class:`~iac_kernel.agent.permissions.Answer` ``values``; the gate checks them
with :meth:`Form.mismatch`. Fronts that cannot render a form answer the plain question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

TEXT, CHOICE, BOOLEAN, NUMBER = "text", "choice", "boolean", "number"
KINDS = (TEXT, CHOICE, BOOLEAN, NUMBER)

#: The field of a typed confirmation.
CONFIRM_FIELD = "workspace"
#: A production workspace: ``prod``, ``production`` or ``prd``, alone or as a ``-``,
#: ``_`` or ``.`` separated part.
PRODUCTION = re.compile(r"(^|[-_.])(prod|production|prd)([-_.]|$)", re.IGNORECASE)


@dataclass
class FormField:
    """One value the user gives."""

    name: str
    title: str
    kind: str = TEXT
    description: str = ""
    #: The allowed values of a ``choice`` field, in display order.
    choices: list[str] = field(default_factory=list)
    required: bool = True
    default: Any = None
    #: A typed confirmation: the only value that approves.
    must_equal: str | None = None

    def schema(self) -> dict[str, Any]:
        """This field as an ACP/MCP elicitation property (a flat JSON Schema)."""
        prop: dict[str, Any] = {"title": self.title}
        if self.description:
            prop["description"] = self.description
        if self.kind == CHOICE:
            prop.update(type="string", enum=list(self.choices))
        elif self.kind == BOOLEAN:
            prop["type"] = "boolean"
        elif self.kind == NUMBER:
            prop["type"] = "number"
        else:
            prop["type"] = "string"
        if self.default is not None:
            prop["default"] = self.default
        return prop

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not an answer to this field, or ``None`` when it is."""
        if value is None or value == "":
            return f"{self.title} is required" if self.required else None
        if self.kind == CHOICE and value not in self.choices:
            return f"{self.title} must be one of: {', '.join(self.choices)}"
        if self.kind == BOOLEAN and not isinstance(value, bool):
            return f"{self.title} must be true or false"
        if self.kind == NUMBER and (isinstance(value, bool) or not isinstance(value, int | float)):
            return f"{self.title} must be a number"
        if self.kind == TEXT and not isinstance(value, str):
            return f"{self.title} must be text"
        if self.must_equal is not None and str(value).strip() != self.must_equal:
            return f"the typed {self.title.lower()} did not match"
        return None


@dataclass
class Form:
    """What a question asks the user to fill in."""

    title: str
    fields: list[FormField]

    def schema(self) -> dict[str, Any]:
        """The ``requestedSchema`` of an ``elicitation/create`` form."""
        return {
            "type": "object",
            "title": self.title,
            "properties": {f.name: f.schema() for f in self.fields},
            "required": [f.name for f in self.fields if f.required],
        }

    def mismatch(self, values: dict[str, Any]) -> str | None:
        """One line saying what is wrong with ``values``, or ``None`` when they answer
        every field (unknown names are ignored)."""
        for f in self.fields:
            problem = f.problem(values.get(f.name))
            if problem:
                return problem
        return None

    @property
    def confirms(self) -> str | None:
        """The text to type, for a typed confirmation."""
        return next((f.must_equal for f in self.fields if f.must_equal is not None), None)


def typed_confirmation(review: Any, danger: bool) -> Form | None:
    """The typed confirmation a per-call Terraform apply needs, or ``None``.

    Needed when the apply destroys something (the plan deletes or replaces resources, or
    a ``destroy``/``apply -destroy`` without a saved plan) or runs in a production
    workspace. The user types the workspace's name."""
    if not danger or not isinstance(review, dict):
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
    if not (destroys or PRODUCTION.search(workspace)):
        return None
    return Form(
        title="Typed confirmation",
        fields=[
            FormField(
                name=CONFIRM_FIELD,
                title="Workspace name",
                # True in every front: the notebook keeps Allow disabled until the name
                # matches; a one-shot form (an editor's, stdin) rejects a different name.
                description=f"Type {workspace} exactly to approve; a different name never "
                "approves this call.",
                must_equal=workspace,
            )
        ],
    )
