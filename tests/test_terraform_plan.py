"""Plans as data, against real terraform: counts, summary, detail, bash pick-up, tofu."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from iac_kernel.config import Settings
from iac_kernel.terraform.plan import ACTIONS, action_of
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.bash import BashTool
from iac_kernel.tools.tf_plans import TerraformPlanDetailTool, TerraformPlanTool
from terraform_support import (
    SECRET,
    TERRAFORM,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
    tf,
)

pytestmark = needs_terraform


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    return stage2_copy(applied, tmp_path / "ws")


def ctx_for(workdir: Path) -> ToolContext:
    return ToolContext(cwd=workdir, settings=Settings())


def counts_from_json(workdir: Path, plan_file: str) -> dict[str, int]:
    doc = json.loads(tf(workdir, "show", "-json", plan_file).stdout)
    counts: dict[str, int] = {}
    for change in doc["resource_changes"]:
        actions = change["change"]["actions"]
        word = "replace" if sorted(actions) == ["create", "delete"] else actions[0]
        counts[word] = counts.get(word, 0) + 1
    return counts


async def test_summary_counts_equal_the_plan_json(ws: Path):
    result = await TerraformPlanTool().run({"out": "stage2.tfplan"}, ctx_for(ws))
    assert not result.is_error, result.content
    plan = result.raw_output["plan"]
    expected = counts_from_json(ws, "stage2.tfplan")
    assert {k: v for k, v in plan["counts"].items() if k != "no-op"} == {
        k: v for k, v in expected.items() if k != "no-op"
    }
    assert expected["create"] == expected["update"] == expected["replace"] == 1
    assert expected["delete"] == 1
    # Terraform's own summary line, from the same configuration.
    own = re.search(r"Plan: .*? to destroy\.", tf(ws, "plan", "-input=false").stdout).group(0)
    assert result.content.splitlines()[0].startswith(own.rstrip("."))
    # The table: replacements and deletes first, then updates, then creates, with the
    # reasons terraform gave.
    rows = [line for line in result.content.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[2].strip() for row in rows] == [
        "terraform_data.cache",
        "terraform_data.old[0]",
        "terraform_data.app",
        "terraform_data.new[0]",
    ]
    assert "count index out of range" in rows[1]
    assert "forces replacement: triggers_replace" in rows[0]
    file = plan["file"]
    assert file["path"] == "stage2.tfplan" and len(file["short_hash"]) == 12
    assert SECRET not in result.content and SECRET not in json.dumps(result.raw_output)


async def test_detail_of_one_address(ws: Path):
    ctx = ctx_for(ws)
    await TerraformPlanTool().run({}, ctx)
    detail = await TerraformPlanDetailTool().run({"address": "terraform_data.cache"}, ctx)
    assert "-/+ terraform_data.cache: replace" in detail.content
    assert 'triggers_replace[0]: "small" -> "large"  # forces replacement' in detail.content
    app = await TerraformPlanDetailTool().run({"address": "terraform_data.app"}, ctx)
    assert 'input.size: "small" -> "large"' in app.content
    missing = await TerraformPlanDetailTool().run({"address": "terraform_data.nope"}, ctx)
    assert "is not in the plan" in missing.content


async def test_sensitive_change_is_masked_in_the_detail(ws: Path):
    (ws / "terraform.tfvars").write_text('db_password = "RotatedSecret-91be"\n')
    ctx = ctx_for(ws)
    result = await TerraformPlanTool().run({}, ctx)
    detail = await TerraformPlanDetailTool().run({"address": "terraform_data.db"}, ctx)
    assert "input: (sensitive) -> (sensitive)" in detail.content
    for text in (result.content, detail.content, json.dumps(result.raw_output)):
        assert "RotatedSecret-91be" not in text and SECRET not in text


async def test_a_failing_plan_reports_its_error(ws: Path):
    (ws / "broken.tf").write_text('resource "terraform_data" "x" { input = var.missing }\n')
    result = await TerraformPlanTool().run({}, ctx_for(ws))
    assert result.is_error
    assert result.content.startswith("Plan failed: Reference to undeclared input variable")
    assert result.raw_output["plan"]["errored"] is True


async def test_bad_input_is_a_clear_error(ws: Path):
    with pytest.raises(ToolError, match="not a directory"):
        await TerraformPlanTool().run({"dir": "nowhere"}, ctx_for(ws))
    with pytest.raises(ToolError, match="no plan yet"):
        await TerraformPlanDetailTool().run(
            {"address": "x"}, ctx_for(ws / "..").__class__(cwd=ws.parent, settings=Settings())
        )


async def test_a_bash_plan_out_is_picked_up(ws: Path):
    ctx = ctx_for(ws)
    args = {"command": "terraform plan -input=false -no-color -out=bash.tfplan"}
    result = await BashTool().run(args, ctx)  # the tool picks the plan up itself
    plan = result.raw_output["plan"]
    assert plan["file"]["path"] == "bash.tfplan"
    assert plan["counts"] == {k: v for k, v in counts_from_json(ws, "bash.tfplan").items()}
    assert "| -/+ replace | terraform_data.cache |" in result.content


async def test_tofu_takes_the_same_code_path(ws: Path, tmp_path: Path, monkeypatch):
    """A stand-in ``tofu`` (no OpenTofu binary here): terraform under the name ``tofu``.
    A symlink, not a forwarding script: the agent's ``show`` runs in a sandbox where every
    guarded program (terraform too) is a launcher with no approval channel."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tofu").symlink_to(TERRAFORM)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    result = await TerraformPlanTool().run({"program": "tofu", "out": "t.tfplan"}, ctx_for(ws))
    assert not result.is_error, result.content
    assert result.raw_output["plan"]["program"] == "tofu"
    assert (ws / "t.tfplan").is_file()
    args = {"command": "tofu plan -input=false -out=b.tfplan"}
    ran = await BashTool().run(args, ctx_for(ws))
    assert [os.path.basename(e["argv"][0]) for e in ran.raw_output["guarded"]] == ["tofu"]
    assert ran.raw_output["plan"]["program"] == "tofu"
    assert ran.raw_output["plan"]["file"]["path"] == "b.tfplan"


def test_action_words():
    assert action_of(["delete", "create"]) == action_of(["create", "delete"]) == "replace"
    assert all(action_of([a]) == a for a in ACTIONS if a != "replace")


async def test_a_plan_made_by_a_script_is_picked_up_from_the_guard_log(ws: Path):
    script = ws / "mkplan.sh"
    script.write_text("#!/bin/sh\nterraform plan -input=false -no-color -out=script.tfplan\n")
    script.chmod(0o755)
    args = {"command": "./mkplan.sh > /dev/null && echo planned"}
    result = await BashTool().run(args, ctx_for(ws))
    assert any("plan" in entry["argv"] for entry in result.raw_output.get("guarded", [])), (
        result.raw_output
    )
    assert result.raw_output["plan"]["file"]["path"] == "script.tfplan"
    assert result.content.startswith("planned")
    assert "Plan: 2 to add, 1 to change, 2 to destroy" in result.content
