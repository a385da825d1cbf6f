"""The permission gate: categories, modes, remembered answers, per-call rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core_support import TouchTool
from iac_kernel.agent.permissions import (
    ALL_OPTIONS,
    PER_CALL_OPTIONS,
    PermissionGate,
    PermissionRequest,
)
from iac_kernel.config import Settings
from iac_kernel.tools.base import Category, Tool, ToolContext


class ReadTool(Tool):
    name = "peek"
    category = Category.READ

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [Path(args["path"])]


class ApplyTool(Tool):
    name = "shell"
    category = Category.EXECUTE

    def is_dangerous(self, args: dict[str, Any]) -> bool:
        return "apply" in args.get("command", "")


class Asker:
    def __init__(self, answer: str):
        self.answer = answer
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> str:
        self.requests.append(request)
        return self.answer


def request_for(tool: Tool, args: dict[str, Any]) -> PermissionRequest:
    return PermissionRequest("call-1", tool.name, tool.name, tool.kind, args, [], "")


async def check(gate: PermissionGate, tool: Tool, args: dict[str, Any], cwd: Path, ask):
    ctx = ToolContext(cwd=cwd, settings=Settings())
    return await gate.check(tool, args, ctx, request_for(tool, args), ask)


async def test_read_tools_inside_cwd_run_without_asking(tmp_path: Path):
    ask = Asker("reject_once")
    decision = await check(
        PermissionGate(), ReadTool(), {"path": str(tmp_path / "a")}, tmp_path, ask
    )
    assert decision.allowed and ask.requests == []


async def test_reads_outside_cwd_ask_per_call(tmp_path: Path):
    ask = Asker("allow_once")
    decision = await check(PermissionGate(), ReadTool(), {"path": "/etc/passwd"}, tmp_path, ask)
    assert decision.allowed
    assert ask.requests[0].options == PER_CALL_OPTIONS
    assert "outside the working directory" in ask.requests[0].reason


@pytest.mark.parametrize(
    ("answer", "allowed"),
    [
        ("allow_once", True),
        ("allow_always", True),
        ("reject_once", False),
        ("reject_always", False),
        ("something_else", False),
    ],
)
async def test_each_answer(tmp_path: Path, answer: str, allowed: bool):
    ask = Asker(answer)
    decision = await check(PermissionGate(), TouchTool(), {"path": "f"}, tmp_path, ask)
    assert decision.allowed is allowed
    assert ask.requests[0].options == ALL_OPTIONS
    if not allowed:
        assert decision.message.startswith("Permission denied.")


async def test_allow_always_and_reject_always_are_remembered_per_tool(tmp_path: Path):
    gate = PermissionGate()
    await check(gate, TouchTool(), {"path": "f"}, tmp_path, Asker("allow_always"))
    never = Asker("reject_once")
    assert (await check(gate, TouchTool(), {"path": "g"}, tmp_path, never)).allowed
    assert never.requests == []
    other = Asker("reject_always")
    assert not (await check(gate, ApplyTool(), {"command": "ls"}, tmp_path, other)).allowed
    again = Asker("allow_once")
    assert not (await check(gate, ApplyTool(), {"command": "ls"}, tmp_path, again)).allowed
    assert again.requests == []


async def test_cancelled_answer_is_not_a_rejection(tmp_path: Path):
    decision = await check(
        PermissionGate(), TouchTool(), {"path": "f"}, tmp_path, Asker("cancelled")
    )
    assert not decision.allowed and decision.outcome == "cancelled"


async def test_dangerous_commands_need_every_call_approved_even_in_bypass(tmp_path: Path):
    gate = PermissionGate(mode="bypass")
    first = Asker("allow_once")
    assert (await check(gate, ApplyTool(), {"command": "terraform apply"}, tmp_path, first)).allowed
    assert first.requests[0].options == PER_CALL_OPTIONS
    # allow_always is not on offer, so answering it is not an approval.
    sneaky = Asker("allow_always")
    assert not (
        await check(gate, ApplyTool(), {"command": "terraform apply"}, tmp_path, sneaky)
    ).allowed
    assert gate.remembered == {}
    assert (await check(gate, ApplyTool(), {"command": "terraform plan"}, tmp_path, None)).allowed


async def test_modes_change_the_decision(tmp_path: Path):
    nobody = None
    assert not (
        await check(PermissionGate("default"), TouchTool(), {"path": "f"}, tmp_path, nobody)
    ).allowed
    assert (
        await check(PermissionGate("accept_edits"), TouchTool(), {"path": "f"}, tmp_path, nobody)
    ).allowed
    assert not (
        await check(
            PermissionGate("accept_edits"), ApplyTool(), {"command": "ls"}, tmp_path, nobody
        )
    ).allowed
    assert (
        await check(PermissionGate("bypass"), ApplyTool(), {"command": "ls"}, tmp_path, nobody)
    ).allowed
    ask = Asker("allow_once")
    read_only = await check(PermissionGate("read_only"), TouchTool(), {"path": "f"}, tmp_path, ask)
    assert not read_only.allowed and "read_only" in read_only.message and ask.requests == []


async def test_writes_outside_cwd_ask_even_in_accept_edits(tmp_path: Path):
    inside = tmp_path / "work"
    inside.mkdir()
    ask = Asker("reject_once")
    decision = await check(
        PermissionGate("accept_edits"), TouchTool(), {"path": "../x"}, inside, ask
    )
    assert not decision.allowed
    assert ask.requests and ask.requests[0].options == PER_CALL_OPTIONS
