"""Apply exactly the reviewed plan, against real terraform (state checked afterwards)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from core_support import make_loop, write_script
from iac_kernel.agent.permissions import ALLOW_ONCE, PermissionRequest
from iac_kernel.config import Settings
from iac_kernel.events import ToolCallResult
from iac_kernel.terraform.review import STALE
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_apply import TerraformApplyTool
from iac_kernel.tools.tf_plans import TerraformPlanTool
from terraform_support import (
    SECRET,
    STAGE1,
    STAGE2,
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
    state,
    tf,
)

pytestmark = needs_terraform


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    """Stage 2 planned into p.tfplan; a destroy plan of the same state in other.tfplan."""
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan", destroy_plan="other.tfplan")


def apply_turn(ws: Path, tmp_path: Path, ask: Any, plan: str = "p.tfplan"):
    script = write_script(
        tmp_path / "apply.json",
        [
            {
                "match": "apply",
                "turns": [
                    {"tool_use": [{"name": "terraform_apply", "input": {"plan": plan}}]},
                    {"text": "Done."},
                ],
            }
        ],
    )
    loop, persist = make_loop(script, ws, [TerraformApplyTool(), TerraformPlanTool()])
    events: list[Any] = []
    ended = asyncio.run(
        loop.run_turn([{"type": "text", "text": "apply the plan"}], events.append, ask)
    )
    results = [e for e in events if isinstance(e, ToolCallResult)]
    return ended, results, persist


def test_an_approved_untouched_plan_applies(ws: Path, tmp_path: Path):
    asked: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> str:
        asked.append(request)
        return ALLOW_ONCE

    _ended, results, _persist = apply_turn(ws, tmp_path, ask)
    assert results[0].status == "completed", results[0].output
    assert addresses(ws) == STAGE2
    # The question showed the plan: summary, identity, deletes first; per call only.
    (request,) = asked
    assert request.options == ["allow_once", "reject_once"]
    lines = request.reason.splitlines()
    assert lines[1] == (
        "⚠️ Apply of the saved plan p.tfplan: 2 to destroy (1 of them replaced), "
        "1 to change, 2 to add."
    )
    assert lines[2].startswith("Plan: 2 to add, 1 to change, 2 to destroy")
    assert lines[3].startswith("Plan file: p.tfplan (sha256 ")
    # Counts in review order, replacements first; the rows are the plan card's.
    assert lines[4].startswith("Changes: 1 replace · 1 delete · 1 update · 1 create;")
    assert "terraform_data.cache" not in request.reason
    assert request.review["plan"]["counts"]["delete"] == 1
    # A destroy: an ACP client with form elicitation must type the workspace's name.
    assert request.review["workspace"] == "default"
    assert request.form is not None and request.form.confirms == "default"
    assert "Applied the reviewed plan p.tfplan" in results[0].output
    assert SECRET not in results[0].output and SECRET not in request.reason


def test_a_plan_swapped_while_the_question_waits_is_never_applied(ws: Path, tmp_path: Path):
    serial = state(ws)["serial"]

    async def ask(request: PermissionRequest) -> str:
        # While the user reads the summary, the file is replaced by a destroy plan.
        shutil.copyfile(ws / "other.tfplan", ws / "p.tfplan")
        return ALLOW_ONCE

    _ended, results, persist = apply_turn(ws, tmp_path, ask)
    assert results[0].status == "failed"
    assert results[0].output.startswith("Refused: the plan file p.tfplan changed after it")
    assert "Nothing was applied" in results[0].output
    assert addresses(ws) == STAGE1
    assert state(ws)["serial"] == serial
    stored = persist.messages[-2]["content"][0]
    assert stored["is_error"] is True and "changed after it was reviewed" in stored["content"]


async def test_the_reviewed_bytes_are_applied_even_if_the_file_changes_after_the_check(
    ws: Path,
):
    """The recheck is not the only guard: terraform runs the private copy."""
    ctx = ToolContext(cwd=ws, settings=Settings())
    tool = TerraformApplyTool()
    ctx.review = await tool.review({"plan": "p.tfplan"}, ctx)
    shutil.copyfile(ws / "other.tfplan", ws / "p.tfplan")
    ctx.review.recheck = lambda: None  # as if the swap came right after the check
    result = await tool.run({"plan": "p.tfplan"}, ctx)
    assert not result.is_error, result.content
    assert addresses(ws) == STAGE2  # the reviewed stage-2 plan, not the destroy plan


def test_a_rejected_apply_changes_nothing(ws: Path, tmp_path: Path):
    async def ask(request: PermissionRequest) -> str:
        return "reject_once"

    _ended, results, _persist = apply_turn(ws, tmp_path, ask)
    assert results[0].status == "failed" and results[0].denied
    assert addresses(ws) == STAGE1


def test_nobody_to_ask_means_no_apply(ws: Path, tmp_path: Path):
    _ended, results, _persist = apply_turn(ws, tmp_path, None)
    assert results[0].denied
    assert addresses(ws) == STAGE1


def test_a_stale_plan_fails_clearly(ws: Path, tmp_path: Path):
    tf(ws, "apply", "-auto-approve", "-input=false")  # the state moves on under the plan
    serial = state(ws)["serial"]

    async def ask(request: PermissionRequest) -> str:
        return ALLOW_ONCE

    _ended, results, _persist = apply_turn(ws, tmp_path, ask)
    assert results[0].status == "failed"
    assert results[0].output.startswith(STALE)
    assert state(ws)["serial"] == serial


def test_a_missing_plan_file_is_refused_before_asking(ws: Path, tmp_path: Path):
    asked: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> str:
        asked.append(request)
        return ALLOW_ONCE

    _ended, results, _persist = apply_turn(ws, tmp_path, ask, plan="nope.tfplan")
    assert results[0].status == "failed"
    assert "not a saved plan file: nope.tfplan" in results[0].output
    assert asked == [] and addresses(ws) == STAGE1
