"""agent: delegate to the loop's sub-agent runner."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from iac_kernel.tools.agent import AgentTool
from iac_kernel.tools.base import ToolContext, ToolError

tool = AgentTool()


async def test_runs_the_subagent_and_returns_its_answer(tool_ctx: ToolContext):
    prompts: list[str] = []

    async def run_subagent(prompt: str) -> str:
        prompts.append(prompt)
        return "  Found 3 modules pinning aws < 5.0.\n"

    ctx = dataclasses.replace(tool_ctx, run_subagent=run_subagent)
    result = await tool.run({"prompt": "Survey provider pins", "description": "pins"}, ctx)
    assert prompts == ["Survey provider pins"]
    assert result.content == "Found 3 modules pinning aws < 5.0."
    assert not result.is_error


async def test_without_a_runner_is_a_tool_error(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="sub-agents are not available"):
        await tool.run({"prompt": "x"}, tool_ctx)


async def test_subagent_failure_becomes_a_tool_error(tool_ctx: ToolContext):
    async def broken(prompt: str) -> str:
        raise RuntimeError("model overloaded")

    ctx = dataclasses.replace(tool_ctx, run_subagent=broken)
    with pytest.raises(ToolError, match="the sub-agent failed: RuntimeError: model overloaded"):
        await tool.run({"prompt": "x"}, ctx)


async def test_empty_answer_is_reported(tool_ctx: ToolContext):
    async def silent(prompt: str) -> str:
        return ""

    ctx = dataclasses.replace(tool_ctx, run_subagent=silent)
    result = await tool.run({"prompt": "x"}, ctx)
    assert "without a final answer" in result.content


async def test_cancellation_propagates(tool_ctx: ToolContext):
    started = asyncio.Event()

    async def slow(prompt: str) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    ctx = dataclasses.replace(tool_ctx, run_subagent=slow)
    task = asyncio.create_task(tool.run({"prompt": "x"}, ctx))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_schema_errors(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="missing required field 'prompt'"):
        await tool.run({"description": "x"}, tool_ctx)
    with pytest.raises(ToolError, match="'prompt' must not be empty"):
        await tool.run({"prompt": ""}, tool_ctx)


def test_title_prefers_description():
    assert tool.title({"prompt": "long task", "description": "audit modules"}) == (
        "agent: audit modules"
    )
    assert tool.title({"prompt": "check every module"}) == "agent: check every module"
