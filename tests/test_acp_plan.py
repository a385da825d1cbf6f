"""ACP ``plan`` updates: the model's ``update_plan`` checklist, sent when the call
completes (live and on replay); nothing else becomes a plan."""

from __future__ import annotations

import pytest
from acp.utils import serialize_params

from iac_kernel.acp.turn import TurnRelay
from iac_kernel.acp.updates import replay_updates
from iac_kernel.events import ToolCallInput, ToolCallResult, ToolCallStarted, UserMessage
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.update_plan import UpdatePlanTool
from test_acp_schema125 import RecordingChannel, _settle

STEPS = [
    {"step": "Read main.tf", "status": "completed"},
    {"step": "Run terraform plan", "status": "in_progress", "priority": "high"},
]


def _call(call_id: str, args: dict, status: str = "completed") -> list:
    title = UpdatePlanTool().title(args)
    return [
        ToolCallStarted(call_id, "update_plan", title, "think"),
        ToolCallInput(call_id, "update_plan", title, "think", args),
        ToolCallResult(call_id, "update_plan", status, "Plan updated."),
    ]


async def test_the_tool_checks_the_steps_and_changes_nothing(workspace):
    ctx = ToolContext(cwd=workspace, settings=None)
    result = await UpdatePlanTool().run({"steps": STEPS}, ctx)
    assert result.raw_output["steps"][0] == {
        "step": "Read main.tf",
        "status": "completed",
        "priority": "medium",
    }
    assert "1 of 2" in result.content and list(workspace.iterdir()) == []
    for bad in ([], [{"step": "x", "status": "done"}], [{"step": " ", "status": "pending"}]):
        with pytest.raises(ToolError, match="update_plan"):
            await UpdatePlanTool().run({"steps": bad}, ctx)


async def test_a_completed_call_sends_the_whole_plan_after_its_result():
    channel = RecordingChannel()
    relay = TurnRelay(channel, "s1")
    for event in _call("p1", {"steps": STEPS}) + _call("p2", {"steps": STEPS}, "failed"):
        await relay(event)
    await relay.finish()
    await _settle()
    kinds = [u["sessionUpdate"] for u in channel.sent]
    assert kinds.count("plan") == 1  # the failed call changes nothing
    plan = channel.sent[kinds.index("plan")]
    assert kinds.index("plan") == 3  # after p1's tool_call, input and result
    assert plan["entries"] == [
        {"content": "Read main.tf", "priority": "medium", "status": "completed"},
        {"content": "Run terraform plan", "priority": "high", "status": "in_progress"},
    ]


def test_replay_shows_the_stored_plans_and_skips_malformed_ones():
    history = [UserMessage("plan"), *_call("p1", {"steps": STEPS})]
    history += _call("p2", {"steps": "not a list"})
    plans = [u for u, _ in replay_updates(history, "s1") if u.session_update == "plan"]
    assert len(plans) == 1
    assert serialize_params(plans[0])["entries"][1]["status"] == "in_progress"
