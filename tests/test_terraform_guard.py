"""terraform/tofu apply through bash: the guard's exec-time review (real terraform)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from iac_kernel.guard.approval.reviews import ExecInfo
from iac_kernel.tools.tf_guard import review_exec
from terraform_support import (
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
    tf,
)

pytestmark = needs_terraform


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan", destroy_plan="other.tfplan")


def info(ws: Path, private: Path, *argv: str) -> ExecInfo:
    private.mkdir(exist_ok=True)
    return ExecInfo("terraform", list(argv), str(ws), private, "/guard", {})


def test_apply_of_a_plan_file_shows_its_summary_and_runs_a_private_copy(ws: Path, tmp_path):
    private = tmp_path / "private"
    review = review_exec(info(ws, private, "terraform", "apply", "-input=false", "p.tfplan"))
    assert review is not None and review.refuse is None
    first, command, state, plan, _identity, row = review.text.splitlines()[:6]
    assert first == (
        "⚠️ Apply of the saved plan p.tfplan: 2 to destroy (1 of them replaced), "
        "1 to change, 2 to add."
    )
    assert command == "Terraform reads: `terraform apply -input=false p.tfplan`."
    assert state.startswith("State: terraform.tfstate (workspace default; serial ")
    assert plan.startswith("Plan: 2 to add, 1 to change, 2 to destroy")
    assert row.startswith("Changes: 1 replace · 1 delete")  # replacements first; no rows
    assert review.summary["plan"]["file"]["path"] == "p.tfplan"
    assert review.summary["workspace"] == "default"  # a typed confirmation names it
    assert review.argv[:4] == ["terraform", f"-chdir={ws}", "apply", "-input=false"]
    copy = review.argv[4]
    assert copy.startswith("/guard/approved-plan-") and copy.endswith("/approved.tfplan")
    host_copy = private / os.path.relpath(copy, "/guard")
    assert host_copy.read_bytes() == (ws / "p.tfplan").read_bytes()
    assert review.recheck() is None
    # Swapped after the question: the recheck refuses, and the copy keeps the old bytes.
    shutil.copyfile(ws / "other.tfplan", ws / "p.tfplan")
    assert review.recheck().startswith("Refused: the plan file p.tfplan changed")
    assert host_copy.read_bytes() != (ws / "p.tfplan").read_bytes()
    # Applying the argv the review gives applies the reviewed (stage 2) plan.
    tf(ws, "apply", "-input=false", str(host_copy))
    assert "terraform_data.new[0]" in addresses(ws)


def test_chdir_and_value_flags_are_understood(ws: Path, tmp_path):
    argv = ["terraform", "-chdir=ws", "apply", "-var", "stage=2", "p.tfplan"]
    review = review_exec(info(ws.parent, tmp_path / "private", *argv))
    assert review.argv[:5] == ["terraform", f"-chdir={ws}", *argv[2:5]]
    assert review.argv[5].startswith("/guard/")


def test_the_program_as_invoked_is_kept(ws: Path, tmp_path):
    argv = ["/opt/tf-1.11/terraform", "apply", "p.tfplan"]  # the guard picks the real one by it
    review = review_exec(info(ws, tmp_path / "private", *argv))
    assert review.argv[:3] == [argv[0], f"-chdir={ws}", argv[1]]
    assert review.argv[3].startswith("/guard/")


def test_apply_without_a_plan_file_warns(ws: Path, tmp_path):
    review = review_exec(info(ws, tmp_path / "p", "terraform", "apply", "-auto-approve"))
    assert review.text.startswith("⚠️ No reviewed plan backs this apply")
    assert "-auto-approve: terraform applies without showing its plan" in review.text
    # Bound: run in the folder the question named, with its workspace and data folder.
    assert review.argv == ["terraform", f"-chdir={ws}", "apply", "-auto-approve"]
    assert review.env["TF_WORKSPACE"] == "default"
    assert review.env["TF_DATA_DIR"] == f"{ws}/.terraform"
    assert review.recheck() is None
    destroy = review_exec(info(ws, tmp_path / "p", "terraform", "destroy", "-auto-approve"))
    assert destroy.text.startswith("⚠️ DESTROY: destroys every resource")


def test_state_commands_are_bound_and_other_commands_get_no_review(ws: Path, tmp_path):
    review = review_exec(info(ws, tmp_path / "p", "terraform", "state", "rm", "x"))
    assert review.argv == ["terraform", f"-chdir={ws}", "state", "rm", "x"]
    assert review.covered_by_literal and review.text.startswith(f"Runs in: {ws} ")
    assert review_exec(info(ws, tmp_path / "p", "terraform", "plan", "-out=x")) is None


def run_bash(ws: Path, command: str, swap: bool) -> tuple[object, list]:
    """``command`` through the bash tool and the real guard; the user approves."""
    import asyncio

    from iac_kernel.agent.permissions import ALLOW_ONCE, PermissionGate
    from iac_kernel.config import Settings
    from iac_kernel.tools.base import ToolContext
    from iac_kernel.tools.bash import BashTool
    from iac_kernel.tools.tf_guard import register

    register()
    asked = []

    async def ask(request):
        asked.append(request)
        if swap:  # the file is replaced while the user reads the question
            shutil.copyfile(ws / "other.tfplan", ws / "p.tfplan")
        return ALLOW_ONCE

    ctx = ToolContext(
        cwd=ws, settings=Settings(), ask_exec=PermissionGate().exec_asker("c1", "bash", ask)
    )
    result = asyncio.run(BashTool().run({"command": command}, ctx))
    return result, asked


def test_bash_apply_of_an_approved_plan_applies_it(ws: Path):
    result, asked = run_bash(ws, "terraform apply -input=false -no-color p.tfplan", swap=False)
    assert not result.is_error, result.content
    assert "Apply complete! Resources: 2 added, 1 changed, 2 destroyed." in result.content
    (request,) = asked
    assert "Plan: 2 to add, 1 to change, 2 to destroy" in request.reason
    assert request.review["plan"]["counts"]["replace"] == 1
    assert "terraform_data.new[0]" in addresses(ws)


def test_bash_apply_of_a_plan_swapped_during_the_question_is_refused(ws: Path):
    before = addresses(ws)
    result, asked = run_bash(ws, "terraform apply -input=false -no-color p.tfplan", swap=True)
    assert result.is_error and len(asked) == 1
    assert "Refused: the plan file p.tfplan changed after it was reviewed" in result.content
    assert addresses(ws) == before


def test_bash_apply_of_a_stale_plan_fails_clearly(ws: Path):
    from iac_kernel.terraform.review import STALE

    tf(ws, "apply", "-auto-approve", "-input=false")  # the state moves on under p.tfplan
    before = addresses(ws)
    command = "terraform apply -input=false -no-color p.tfplan"
    result, _asked = run_bash(ws, command, swap=False)
    assert result.is_error and result.content.startswith(STALE)
    assert addresses(ws) == before
