"""update_plan: the model's own checklist for a multi-step task, shown to the user.

The tool changes nothing: it records the steps the model states, with their status, and
front ends show them (ACP clients as ``plan`` updates, :mod:`iac_kernel.acp.protocol.updates`). The
plan is only ever what the model sent; the agent never makes one up.
"""

from __future__ import annotations

from typing import Any

from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult

STATUSES = ("pending", "in_progress", "completed")
PRIORITIES = ("high", "medium", "low")
MAX_STEPS = 30
STEP_KEYS = {"step", "status", "priority"}


class UpdatePlanTool(Tool):
    name = "update_plan"
    description = (
        "Keep a short checklist of your plan for a task of three or more steps, which the "
        "user sees: send the whole list each time, each step with its status (pending, "
        "in_progress, completed; at most one in_progress), and update it as steps finish. "
        "Skip it for simple tasks. It changes nothing else."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string", "minLength": 1, "maxLength": 300},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "priority": {
                            "type": "string",
                            "enum": list(PRIORITIES),
                            "default": "medium",
                        },
                    },
                    "required": ["step", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["steps"],
        "additionalProperties": False,
    }
    kind = "think"
    category = Category.READ

    def title(self, args: dict[str, Any]) -> str:
        steps = args.get("steps") if isinstance(args, dict) else None
        count = len(steps) if isinstance(steps, list) else 0
        return f"{self.name}: {count} step{'s' if count != 1 else ''}"

    def checklist(self, args: Any) -> list[dict[str, str]] | None:
        return plan_steps(args) or None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        steps = plan_steps(args)
        if not steps or len(steps) > MAX_STEPS:
            raise ToolError(
                f"Invalid input for {self.name}: 'steps' must be 1 to {MAX_STEPS} objects, "
                "each with a non-empty 'step', a 'status' (pending, in_progress, completed) "
                "and optionally a 'priority' (high, medium, low)"
            )
        done = sum(1 for s in steps if s["status"] == "completed")
        return ToolResult(
            f"Plan updated: {done} of {len(steps)} steps completed.", raw_output={"steps": steps}
        )


def plan_steps(args: Any) -> list[dict[str, str]]:
    """The steps of an ``update_plan`` input, with their defaults; ``[]`` for a malformed
    one (a stored history may hold anything)."""
    steps = args.get("steps") if isinstance(args, dict) else None
    if not isinstance(steps, list):
        return []
    out = []
    for item in steps:
        text = item.get("step") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip() or set(item) - STEP_KEYS:
            return []
        status, priority = item.get("status"), item.get("priority", "medium")
        if status not in STATUSES or priority not in PRIORITIES:
            return []
        out.append({"step": text.strip()[:300], "status": status, "priority": priority})
    return out
