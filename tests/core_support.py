"""Helpers for driving the agent core directly in unit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iac_kernel.agent.loop import AgentLoop, Conversation
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.models.scripted import Script, ScriptedModel
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolResult


def write_script(path: Path, exchanges: list[dict[str, Any]], **extra: Any) -> Path:
    path.write_text(json.dumps({"name": path.stem, "exchanges": exchanges, **extra}))
    return path


class RecordingPersist:
    """Persist target that keeps what the loop wrote."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.compactions: list[tuple[str, int]] = []
        self.results: list[dict[str, Any]] = []

    def append_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._in_results = False

    def append_tool_result(self, block: dict[str, Any], **extra: Any) -> None:
        """One result record; consecutive ones form one user message, as the store reads."""
        self.results.append({"block": block, **extra})
        if getattr(self, "_in_results", False):
            self.messages[-1]["content"].append(block)
        else:
            self.messages.append({"role": "user", "content": [block]})
        self._in_results = True

    def append_compaction(self, summary: str, keep_from: int) -> None:
        self.compactions.append((summary, keep_from))


class TouchTool(Tool):
    """A write tool that creates a marker file, so tests can see whether it really ran."""

    name = "touch"
    description = "Create a file."
    input_schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    kind = "edit"
    category = Category.WRITE

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [ctx.cwd / args["path"]]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        (ctx.cwd / args["path"]).write_text("touched")
        return ToolResult(f"created {args['path']}")


def make_loop(
    script_path: Path,
    cwd: Path,
    tools: list[Tool],
    settings: Settings | None = None,
    gate: PermissionGate | None = None,
) -> tuple[AgentLoop, RecordingPersist]:
    persist = RecordingPersist()
    loop = AgentLoop(
        model=ScriptedModel(Script.load(script_path)),
        tools=tools,
        gate=gate or PermissionGate(),
        settings=settings or Settings(),
        cwd=cwd,
        system_prompt="test system prompt",
        conversation=Conversation(),
        persist=persist,
    )
    return loop, persist


def assert_history_valid(messages: list[dict[str, Any]]) -> None:
    """Every tool_use is answered by a tool_result in the next message."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if message["role"] != "assistant" or not isinstance(content, list):
            continue
        ids = {b["id"] for b in content if b.get("type") == "tool_use"}
        if not ids:
            continue
        assert i + 1 < len(messages), f"tool_use {ids} has no following message"
        following = messages[i + 1]["content"]
        answered = {b["tool_use_id"] for b in following if b.get("type") == "tool_result"}
        assert ids <= answered, f"tool_use {ids - answered} has no tool_result"
