"""ask_user: the agent asks the user a question mid-task (choices or named values).

The tool changes nothing. The question goes out through the one permission/question
channel (``ctx.ask_user``, supplied by the agent loop: :mod:`iac_kernel.agent.questions`),
so every front gets it: a form where the front renders forms (ACP ``elicitation/create``,
the notebook), the choices as options where it does not. What the user answered, or
that nobody did, is the tool's result.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult, short

MAX_FIELDS = 8
MAX_CHOICES = 20
FIELD_KINDS = ("text", "choice", "boolean", "number")
NAME_PATTERN = "[A-Za-z_][A-Za-z0-9_]{0,39}"

NOBODY = (
    "Nobody can answer questions in this session (an unattended run). Do not guess "
    "anything that matters: say in your reply what you need to know."
)


class AskUserTool(Tool):
    name = "ask_user"
    description = (
        "Ask the user a question when you cannot go on without their decision or a value "
        "only they know (which environment, a name, a size). Give either `choices` (the "
        "user picks one) or `fields` (named values, each text, choice, boolean or number); "
        "with neither the user types one line. The result is the user's answer, or that "
        "they declined or cannot answer here (then ask in your reply). Do not use it for "
        "approvals of tool calls: those are asked by the tools themselves."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": 2000},
            "choices": {
                "type": "array",
                "minItems": 2,
                "maxItems": MAX_CHOICES,
                "items": {"type": "string", "minLength": 1, "maxLength": 200},
            },
            "fields": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_FIELDS,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "pattern": f"^{NAME_PATTERN}$"},
                        "title": {"type": "string", "maxLength": 200},
                        "kind": {"type": "string", "enum": list(FIELD_KINDS)},
                        "description": {"type": "string", "maxLength": 500},
                        "choices": {
                            "type": "array",
                            "maxItems": MAX_CHOICES,
                            "items": {"type": "string", "minLength": 1, "maxLength": 200},
                        },
                        "required": {"type": "boolean", "default": True},
                    },
                    "required": ["name"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    kind = "think"
    category = Category.READ

    def title(self, args: dict[str, Any]) -> str:
        question = args.get("question") if isinstance(args, dict) else None
        return f"{self.name}: {short(question, 60)}" if isinstance(question, str) else self.name

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        fields = question_fields(args)
        if ctx.ask_user is None:
            return ToolResult(NOBODY, raw_output={"answered": False, "why": "nobody"})
        return await ctx.ask_user(args["question"].strip(), fields)


def question_fields(args: dict[str, Any]) -> list[dict[str, Any]]:
    """The fields an ``ask_user`` input asks for (each a dict: name, title, kind,
    description, choices, required), checked; a ToolError says what is wrong."""
    if args.get("choices") is not None and args.get("fields") is not None:
        _bad("give either 'choices' or 'fields'")
    if args.get("choices") is not None:
        choices = _choices(args["choices"], "'choices'")
        if len(choices) < 2:
            _bad("'choices' needs at least two different choices")
        return [_field("answer", "Answer", "choice", choices=choices)]
    if args.get("fields") is None:
        return [_field("answer", "Answer", "text")]
    items = args["fields"]
    if not items or len(items) > MAX_FIELDS:
        _bad(f"'fields' must hold 1 to {MAX_FIELDS} objects")
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or set(item) - FIELD_KEYS:
            _bad(f"each field is an object with only {', '.join(sorted(FIELD_KEYS))}")
        name = item.get("name")
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            _bad(f"a field name must be a short identifier (got {name!r})")
        if any(f["name"] == name for f in out):
            _bad(f"field name {name!r} is repeated")
        kind = item.get("kind", "text")
        if kind not in FIELD_KINDS:
            _bad(f"field {name!r}: 'kind' must be one of {', '.join(FIELD_KINDS)}")
        choices = _choices(item.get("choices") or [], f"field {name!r}: 'choices'")
        if (kind == "choice") != bool(choices):
            _bad(f"field {name!r}: 'choices' goes with kind 'choice', which needs some")
        title, description = item.get("title", name), item.get("description", "")
        required = item.get("required", True)
        if not isinstance(title, str) or not isinstance(description, str):
            _bad(f"field {name!r}: 'title' and 'description' must be strings")
        if not isinstance(required, bool):
            _bad(f"field {name!r}: 'required' must be true or false")
        field = _field(name, title.strip()[:200] or name, kind, description.strip()[:500])
        out.append({**field, "choices": choices, "required": required})
    return out


FIELD_KEYS = {"name", "title", "kind", "description", "choices", "required"}


def _field(
    name: str, title: str, kind: str, description: str = "", choices: list[str] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "title": title,
        "kind": kind,
        "description": description,
        "choices": choices or [],
        "required": True,
    }


def _choices(value: Any, what: str) -> list[str]:
    """Distinct, non-empty choices in order; a ToolError for anything else."""
    if not isinstance(value, list) or len(value) > MAX_CHOICES:
        _bad(f"{what} must be a list of at most {MAX_CHOICES} strings")
    out: list[str] = []
    for choice in value:
        if not isinstance(choice, str) or not choice.strip() or len(choice) > 200:
            _bad(f"{what} must hold non-empty strings of at most 200 characters")
        if choice.strip() not in out:
            out.append(choice.strip())
    return out


def _bad(problem: str) -> NoReturn:
    raise ToolError(f"Invalid input for {AskUserTool.name}: {problem}.")
