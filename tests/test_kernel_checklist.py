"""The model's update_plan checklist in a notebook cell: one task list per turn, updated
in place; nothing for other tools or a failed call."""

from __future__ import annotations

from typing import Any

from iac_kernel.events import ToolCallResult, ToolCallStarted
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.render.turn import TurnView
from iac_kernel.tools.update_plan import UpdatePlanTool

STEPS = [
    {"step": "Read main.tf", "status": "completed", "priority": "medium"},
    {"step": "Run terraform plan", "status": "in_progress", "priority": "high"},
    {"step": "Summarize", "status": "pending", "priority": "low"},
]


def _plan(view: TurnView, call_id: str, steps: list, status: str = "completed") -> None:
    view.emit(ToolCallStarted(call_id, "update_plan", "update_plan: 3 steps", "think"))
    steps = UpdatePlanTool().checklist({"steps": steps}) if status == "completed" else None
    view.emit(ToolCallResult(call_id, "update_plan", status, "Plan updated.", checklist=steps))


def _checklists(sent: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict]]:
    return [
        (kind, content)
        for kind, content in sent
        if content.get("transient", {}).get("display_id", "").startswith("iac-checklist-")
    ]


async def test_the_checklist_shows_once_and_updates_in_place():
    sent: list[tuple[str, dict[str, Any]]] = []
    view = TurnView(Publisher(lambda t, c: sent.append((t, c))), "s1")
    _plan(view, "p1", STEPS)
    _plan(view, "p2", [{**s, "status": "completed"} for s in STEPS])
    _plan(view, "p3", STEPS, status="failed")  # changes nothing
    view.emit(ToolCallResult("x", "read_file", "completed", "text", raw_output={"steps": STEPS}))
    shown = _checklists(sent)
    assert [kind for kind, _ in shown] == ["display_data", "update_display_data"]
    assert len({c["transient"]["display_id"] for _, c in shown}) == 1
    first = shown[0][1]["data"]["text/markdown"].splitlines()
    assert first[0] == "**Plan** (1 of 3 done)"
    assert first[2:] == [
        "- [x] Read main.tf",
        "- [ ] **Run terraform plan** _(in progress)_",
        "- [ ] Summarize",
    ]
    assert shown[1][1]["data"]["text/markdown"].startswith("**Plan** (3 of 3 done)")
    assert "→ Run terraform plan" in shown[0][1]["data"]["text/plain"]
