"""Drift: a refresh-only plan after something changed behind the workspace's back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iac_kernel.config import Settings
from iac_kernel.kernel.render import plan_card
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_plans import TerraformPlanTool
from terraform_support import needs_terraform, no_checkov_by_default  # noqa: F401

pytestmark = needs_terraform

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SAMPLE = NOTEBOOKS / "workspaces" / "drift-check"
CHANGE = NOTEBOOKS / "tools" / "change_upstream.py"


def change_upstream(ws: Path) -> None:
    """The network team's change, made to their state file (not through app)."""
    subprocess.run(
        [sys.executable, str(CHANGE), str(ws / "network" / "terraform.tfstate"), "10.99.0.0/16"],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    os.environ["TF_CLI_CONFIG_FILE"] = "/dev/null"
    return Path(shutil.copytree(SAMPLE, tmp_path / "drift-check"))


async def test_refresh_only_plan_reports_what_changed_outside(ws: Path):
    ctx = ToolContext(cwd=ws, settings=Settings())
    tool = TerraformPlanTool()
    clean = await tool.run({"dir": "app", "mode": "refresh-only", "out": "drift.tfplan"}, ctx)
    assert clean.content.splitlines()[0] == "Drift: 0 resources changed outside Terraform."
    change_upstream(ws)
    drift = await tool.run({"dir": "app", "mode": "refresh-only", "out": "drift.tfplan"}, ctx)
    plan = drift.raw_output["plan"]
    assert plan["refresh_only"] is True
    assert plan["summary"] == (
        "Drift: 0 resources changed outside Terraform; 1 output changed (allowed_cidr)."
    )
    (output,) = [o for o in plan["outputs"] if o["action"] != "no-op"]
    assert (output["before"], output["after"]) == ("10.20.0.0/16", "10.99.0.0/16")
    assert "allowed_cidr" in plan_card.bundle(plan)["text/html"]
    follow = await tool.run({"dir": "app", "out": "fix.tfplan"}, ctx)
    assert follow.content.startswith("Plan: 0 to add, 1 to change, 0 to destroy.")
    assert "| ~ update | terraform_data.firewall |" in follow.content
