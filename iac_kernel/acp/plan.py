"""The model's ``update_plan`` checklist as ACP ``plan`` updates.

A ``plan`` update carries the whole plan (the client replaces what it shows). It is sent
when an ``update_plan`` call completes, from the input the model gave it, live and on
``session/load`` replay; a failed or refused call changes nothing. No other tool's
output becomes a plan: the plan is only what the model stated.
"""

from __future__ import annotations

from typing import Any

from acp.schema import AgentPlanUpdate, PlanEntry

from iac_kernel.events import AgentEvent, ToolCallInput, ToolCallResult
from iac_kernel.tools.update_plan import plan_steps

PLAN_TOOL = "update_plan"


class PlanTracker:
    """Follows one turn's (or one replay's) ``update_plan`` calls."""

    def __init__(self) -> None:
        self._inputs: dict[str, Any] = {}

    @property
    def waiting(self) -> bool:
        """True while a plan call's input has no result yet."""
        return bool(self._inputs)

    def see(self, event: AgentEvent) -> AgentPlanUpdate | None:
        """The plan update an event completes, if any."""
        if isinstance(event, ToolCallInput) and event.name == PLAN_TOOL:
            self._inputs[event.call_id] = event.input
        elif isinstance(event, ToolCallResult) and event.call_id in self._inputs:
            args = self._inputs.pop(event.call_id)
            if event.status == "completed":
                return plan_update(args)
        return None


def plan_update(args: Any) -> AgentPlanUpdate | None:
    """The ``plan`` update for an ``update_plan`` input; ``None`` if it is malformed."""
    steps = plan_steps(args)
    if not steps:
        return None
    entries = [
        PlanEntry(content=s["step"], status=s["status"], priority=s["priority"]) for s in steps
    ]
    return AgentPlanUpdate(session_update="plan", entries=entries)
