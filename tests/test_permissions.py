"""The permission gate: categories, modes, remembered answers, per-call rules."""

from __future__ import annotations

import unicodedata
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

    def gate_reason(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        return "apply" in args.get("command", ""), None


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


# -- bash: "always" remembers command prefixes; exec-time checks ----------------------


def bash_request(command: str, **extra) -> tuple[Any, dict[str, Any], PermissionRequest]:
    from iac_kernel.tools.bash import BashTool

    tool = BashTool()
    args = {"command": command, **extra}
    return tool, args, PermissionRequest("call-1", "bash", command, "execute", args, [], "")


async def gate_check(gate: PermissionGate, command: str, ask, cwd: Path, **extra):
    tool, args, request = bash_request(command, **extra)
    ctx = ToolContext(cwd=cwd, settings=Settings())
    return await gate.check(tool, args, ctx, request, ask), request


async def test_bash_allow_always_remembers_the_command_prefix_not_the_tool(tmp_path: Path):
    gate = PermissionGate()
    ask = Asker("allow_always")
    decision, request = await gate_check(gate, "terraform plan -out=x", ask, tmp_path)
    assert decision.allowed
    assert request.label("allow_always") == "Allow always: `terraform plan`"
    assert gate.remembered == {}
    assert gate.remembered_prefixes() == [
        {"tool": "bash", "prefix": "terraform plan", "answer": "allow"}
    ]
    assert "bash `terraform plan`: always allow" in gate.remembered_summary()
    # The same prefix runs unasked; anything else is asked again.
    never = Asker("reject_once")
    assert (await gate_check(gate, "terraform plan -out=y", never, tmp_path))[0].allowed
    assert never.requests == []
    assert not (await gate_check(gate, "terraform init", never, tmp_path))[0].allowed
    assert not (await gate_check(gate, "terraform plan; rm x", never, tmp_path))[0].allowed
    assert not (await gate_check(gate, "t=1; terraform plan", never, tmp_path))[0].allowed
    assert len(never.requests) == 3
    gate.forget()
    assert gate.remembered_prefixes() == []


async def test_bash_without_a_clear_prefix_remembers_the_exact_command(tmp_path: Path):
    gate = PermissionGate()
    ask = Asker("allow_always")
    await gate_check(gate, "$(echo terraform)  plan", ask, tmp_path)
    assert ask.requests[0].options == ALL_OPTIONS
    assert ask.requests[0].label("allow_always") == "Allow always: `$(echo terraform) plan`"
    never = Asker("reject_once")
    assert (await gate_check(gate, "$(echo terraform) plan", never, tmp_path))[0].allowed
    assert not (await gate_check(gate, "$(echo terraform) apply", never, tmp_path))[0].allowed
    assert not (await gate_check(gate, "$(echo terraform)", never, tmp_path))[0].allowed
    assert len(never.requests) == 2


async def test_bash_reject_always_rejects_the_prefix_only(tmp_path: Path):
    gate = PermissionGate()
    await gate_check(gate, "kubectl get pods", Asker("reject_always"), tmp_path)
    again = Asker("allow_once")
    assert not (await gate_check(gate, "kubectl get pods -A", again, tmp_path))[0].allowed
    assert again.requests == []
    assert (await gate_check(gate, "ls", again, tmp_path))[0].allowed


async def test_sandbox_false_is_per_call_even_in_bypass(tmp_path: Path):
    gate = PermissionGate(mode="bypass")
    ask = Asker("allow_once")
    decision, request = await gate_check(gate, "ls", ask, tmp_path, sandbox=False)
    assert decision.allowed and request.options == PER_CALL_OPTIONS
    assert "OUTSIDE the sandbox" in request.reason


def exec_request(argv: list[str], review=None):
    from iac_kernel.guard.approval.request import ExecRequest
    from iac_kernel.guard.policy.rules import classify

    return ExecRequest(argv[0], argv, "/work", classify(argv[0], argv), review)


@pytest.mark.parametrize("mode", ["default", "accept_edits", "bypass"])
async def test_changing_execs_are_asked_per_call_in_every_mode(mode: str):
    gate = PermissionGate(mode=mode)
    ask = Asker("allow_always")  # not offered: never an approval
    decision = await gate.check_exec(exec_request(["helm", "un", "web"]), "c1", "bash", ask)
    assert not decision.allowed
    question = ask.requests[0]
    assert question.options == PER_CALL_OPTIONS
    assert question.input == {
        "command": "helm un web",
        "argv": ["helm", "un", "web"],
        "cwd": "/work",
    }
    assert "helm un" in question.reason and "/work" in question.reason
    read = Asker("reject_once")
    assert (await gate.check_exec(exec_request(["helm", "list"]), "c1", "bash", read)).allowed
    assert read.requests == []


async def test_a_literal_per_call_approval_covers_exactly_that_exec_once(tmp_path: Path):
    gate = PermissionGate()
    decision, _ = await gate_check(gate, "kubectl delete pod web", Asker("allow_once"), tmp_path)
    assert decision.allowed
    never = Asker("reject_once")
    apply = exec_request(["kubectl", "delete", "pod", "web"])
    assert (await gate.check_exec(apply, "call-1", "bash", never)).allowed
    assert never.requests == []
    # Only once, only that argv, only that call.
    assert not (await gate.check_exec(apply, "call-1", "bash", never)).allowed
    assert not (await gate.check_exec(apply, "call-2", "bash", never)).allowed
    assert len(never.requests) == 2


@pytest.mark.parametrize(
    ("command", "covered"),
    [
        ("echo kubectl delete pod web && sh x.sh", False),  # echo's arguments run nothing
        ("grep -n kubectl delete pod web", False),
        ("KUBECONFIG=x kubectl delete pod web", True),
        ("env KUBECONFIG=x kubectl delete pod web", True),
        ("nohup kubectl delete pod web", True),
    ],
)
async def test_a_literal_covers_only_the_program_in_command_position(
    tmp_path: Path, command: str, covered: bool
):
    gate = PermissionGate()
    decision, _ = await gate_check(gate, command, Asker("allow_once"), tmp_path)
    assert decision.allowed
    never = Asker("reject_once")
    apply = exec_request(["kubectl", "delete", "pod", "web"])
    assert (await gate.check_exec(apply, "call-1", "bash", never)).allowed is covered
    assert len(never.requests) == (0 if covered else 1)


async def test_a_terraform_plan_question_says_what_it_runs(tmp_path: Path):
    from iac_kernel.agent.permissions import CATEGORY_REASONS
    from iac_kernel.tools.tf_plans import TerraformPlanTool

    ask = Asker("reject_once")
    args = {"dir": "infra", "out": "prod.tfplan", "mode": "destroy", "program": "tofu"}
    decision = await check(PermissionGate(), TerraformPlanTool(), args, tmp_path, ask)
    assert not decision.allowed
    reason = ask.requests[0].reason
    assert reason not in CATEGORY_REASONS.values()
    assert reason.startswith("It runs `tofu plan -out=prod.tfplan -destroy` in `infra`: ")
    assert "It changes no infrastructure" in reason
    ask = Asker("reject_once")
    await check(PermissionGate(), TerraformPlanTool(), {}, tmp_path, ask)
    assert ask.requests[0].reason.startswith("It runs `terraform plan -out=tfplan` in this folder")


async def test_a_refused_exec_is_noted_with_its_command_a_cancel_is_not():
    from iac_kernel.agent.tool_calls import refused_exec

    answers = iter([(False, "Rejected by the user, who says: not now"), (False, "Cancelled.")])

    async def ask_exec(_request) -> tuple[bool, str]:
        return next(answers)

    refusals: list[str] = []
    ask = refused_exec(ask_exec, refusals)
    request = exec_request(["terraform", "apply", "tfplan"])
    assert await ask(request) == (False, "Rejected by the user, who says: not now")
    assert await ask(request) == (False, "Cancelled.")
    assert refusals == [
        "Rejected by the user, who says: not now. `terraform apply tfplan` was not run."
    ]


@pytest.mark.parametrize("name", ["x\nRisk: none", "x\u202eenon", "x\x1b[2Jy", "x\rAction: read"])
async def test_a_path_outside_cannot_forge_a_line_of_the_question(tmp_path: Path, name: str):
    ask = Asker("allow_once")
    await check(PermissionGate(), ReadTool(), {"path": f"/outside/{name}"}, tmp_path, ask)
    reason = ask.requests[0].reason
    assert "\n" not in reason and "\r" not in reason
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in reason)
