"""Replaying stored messages as events (what session/load and %load show)."""

from __future__ import annotations

from pathlib import Path

from iac_kernel.agent.history import replay
from iac_kernel.config import Settings
from iac_kernel.events import Location, ToolCallInput, ToolCallResult, UserMessage
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.registry import build_tools

TOOLS = {tool.name: tool for tool in build_tools()}


def test_replay_shows_prompts_tool_calls_results_and_edit_diffs(tmp_path: Path):
    edit = {"path": "main.tf", "old_string": 'cidr = "0.0.0.0/0"', "new_string": "cidr = var.x"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "narrow the ingress"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "edit_file", "input": edit},
                {"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "rm -rf /"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "edited"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": "Permission denied.",
                    "is_error": True,
                },
            ],
        },
    ]
    events = list(replay(messages, TOOLS, ToolContext(cwd=tmp_path, settings=Settings())))
    assert isinstance(events[0], UserMessage) and events[0].text == "narrow the ingress"
    inputs = [e for e in events if isinstance(e, ToolCallInput)]
    assert inputs[0].title == "edit_file: main.tf"
    assert (inputs[0].diff.old_text, inputs[0].diff.new_text) == (
        edit["old_string"],
        "cidr = var.x",
    )
    assert inputs[0].locations == [Location(str(tmp_path / "main.tf"), 1)]  # the snippet's
    assert inputs[1].diff is None and inputs[1].locations == []
    assert all(not e.locations for e in replay(messages, TOOLS) if isinstance(e, ToolCallInput))
    assert all(r.checklist is None for r in events if isinstance(r, ToolCallResult))
    results = [e for e in events if isinstance(e, ToolCallResult)]
    assert [(r.name, r.status, r.denied) for r in results] == [
        ("edit_file", "completed", False),
        ("bash", "failed", True),
    ]
