"""ACP ``plan`` updates: the model's ``update_plan`` checklist, sent when the call
completes (live and on replay, where the agent's stored history sets it); nothing else
becomes a plan."""

from __future__ import annotations

import pytest
from acp.utils import serialize_params

from iac_kernel.acp.protocol.updates import replay_updates
from iac_kernel.acp.session.turn import TurnRelay
from iac_kernel.agent.history import replay
from iac_kernel.config import Settings
from iac_kernel.events import ToolCallInput, ToolCallResult, ToolCallStarted
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.registry import build_tools
from iac_kernel.tools.update_plan import UpdatePlanTool
from test_acp_schema125 import RecordingChannel, _settle

STEPS = [
    {"step": "Read main.tf", "status": "completed"},
    {"step": "Run terraform plan", "status": "in_progress", "priority": "high"},
]


def _call(call_id: str, args: dict, status: str = "completed") -> list:
    """A call's events as the agent sends them (the checklist of a completed call)."""
    tool = UpdatePlanTool()
    checklist = tool.checklist(args) if status == "completed" else None
    return [
        ToolCallStarted(call_id, tool.name, tool.title(args), tool.kind),
        ToolCallInput(call_id, tool.name, tool.title(args), tool.kind, args),
        ToolCallResult(call_id, tool.name, status, "Plan updated.", checklist=checklist),
    ]


def _stored(call_id: str, args: dict, failed: bool = False) -> list[dict]:
    """A call as the session store keeps it."""
    use = {"type": "tool_use", "id": call_id, "name": UpdatePlanTool.name, "input": args}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": "Plan updated."}
    return [
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [{**result, "is_error": failed}]},
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


def test_replay_shows_the_stored_plans_and_skips_malformed_and_failed_ones(tmp_path):
    messages = [{"role": "user", "content": "plan"}, *_stored("p1", {"steps": STEPS})]
    messages += _stored("p2", {"steps": "not a list"})
    messages += _stored("p3", {"steps": STEPS[:1]}, failed=True)
    tools = {tool.name: tool for tool in build_tools()}
    history = list(replay(messages, tools, ToolContext(cwd=tmp_path, settings=Settings())))
    plans = [u for u, _ in replay_updates(history, "s1") if u.session_update == "plan"]
    assert len(plans) == 1
    assert serialize_params(plans[0])["entries"][1]["status"] == "in_progress"
