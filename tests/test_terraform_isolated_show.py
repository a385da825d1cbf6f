"""The agent's own ``terraform show -json PLANFILE`` never runs workspace plugins outside
the sandbox (real terraform, real bwrap): sandboxed with a read-only working directory,
or, without bubblewrap, with no plugin discovery at all."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from iac_kernel.config import Settings
from iac_kernel.guard import confine as confine_module
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.terraform.cli import TerraformError, prepared_show, show_json, show_json_sync
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_apply import TerraformApplyTool
from terraform_support import TERRAFORM, evil_plan_workspace, needs_terraform, tf

pytestmark = needs_terraform
needs_bwrap = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

PLUGIN = '#!/bin/sh\necho escaped > {outside}\necho escaped > "$PWD/pwned"\nexit 1\n'


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(workspace, outside marker): ``good.tfplan`` (builtin resource only) and
    ``evil.tfplan`` (its config and lock file require a "provider" that is a script)."""
    root = tmp_path_factory.mktemp("isolated-show")
    outside = root / "outside" / "escaped"
    outside.parent.mkdir()
    ws = root / "ws"
    evil_plan_workspace(ws, PLUGIN.format(outside=outside))
    return ws, outside


def _host_show_runs_the_plugin(ws: Path, outside: Path) -> None:
    """Control: the plain host-side show starts the plugin (what the guard must avoid)."""
    env = {**os.environ, "TF_CLI_CONFIG_FILE": "/dev/null", "CHECKPOINT_DISABLE": "1"}
    subprocess.run(
        [TERRAFORM, "show", "-json", "evil.tfplan"], cwd=ws, env=env, capture_output=True
    )
    assert outside.exists() and (ws / "pwned").exists()
    outside.unlink()
    (ws / "pwned").unlink()


def _no_trace(ws: Path, outside: Path) -> None:
    assert not outside.exists(), "a workspace plugin wrote outside the sandbox"
    assert not (ws / "pwned").exists(), "a workspace plugin wrote into the workspace"


@needs_bwrap
async def test_sandboxed_show_contains_the_plugin_and_shows_builtin_plans(workspaces):
    ws, outside = workspaces
    _host_show_runs_the_plugin(ws, outside)
    with pytest.raises(TerraformError):
        show_json_sync(TERRAFORM, ws / "evil.tfplan", ws)
    with pytest.raises(TerraformError):
        await show_json(TERRAFORM, ws / "evil.tfplan", ws)
    _no_trace(ws, outside)
    doc = await show_json(TERRAFORM, ws / "good.tfplan", ws)
    assert [r["address"] for r in doc["resource_changes"]] == ["terraform_data.a"]
    assert show_json_sync(TERRAFORM, ws / "good.tfplan", ws)["resource_changes"]
    with prepared_show(TERRAFORM, ws / "good.tfplan", ws, dict(os.environ)) as show:
        assert show.sandboxed and "--remount-ro" in show.argv
        assert "IAC_GUARD_SOCKET" not in show.env


async def test_reduced_mode_show_discovers_no_plugins(workspaces, monkeypatch):
    ws, outside = workspaces
    monkeypatch.setattr(confine_module, "unusable_reason", lambda: "no bwrap (test)")
    monkeypatch.setenv("TF_PLUGIN_CACHE_DIR", str(ws / "mirror"))
    monkeypatch.setenv("TF_DATA_DIR", str(ws / ".terraform"))
    with prepared_show(TERRAFORM, ws / "evil.tfplan", ws, dict(os.environ)) as show:
        assert not show.sandboxed and show.argv[0] == TERRAFORM
        assert show.env["TF_DATA_DIR"] != str(ws / ".terraform")
        assert not str(show.cwd).startswith(str(ws))
    with pytest.raises(TerraformError, match="bubblewrap is unusable"):
        show_json_sync(TERRAFORM, ws / "evil.tfplan", ws)
    with pytest.raises(TerraformError, match="bubblewrap is unusable"):
        await show_json(TERRAFORM, ws / "evil.tfplan", ws)
    _no_trace(ws, outside)
    doc = show_json_sync(TERRAFORM, ws / "good.tfplan", ws)
    assert [r["address"] for r in doc["resource_changes"]] == ["terraform_data.a"]


@needs_bwrap
async def test_terraform_apply_tool_applies_inside_the_sandbox(tmp_path: Path):
    """The approved apply runs the workspace's code in the sandbox (cwd writable, the
    host's /tmp not), like an apply through bash."""
    outside = tmp_path / "outside-apply"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.tf").write_text(
        'resource "terraform_data" "a" {\n  input = "x"\n  provisioner "local-exec" {\n'
        f'    command = "echo ran > applied.txt; echo ran > {outside} || true"\n  }}\n}}\n'
    )
    tf(ws, "plan", "-input=false", "-out=p.tfplan")
    ctx = ToolContext(cwd=ws, settings=Settings())
    tool = TerraformApplyTool()
    ctx.review = await tool.review({"plan": "p.tfplan"}, ctx)
    result = await tool.run({"plan": "p.tfplan"}, ctx)
    assert not result.is_error, result.content
    assert result.raw_output["outcome"] == "applied"
    assert (ws / "applied.txt").read_text() == "ran\n"  # the provisioner ran, in the cwd
    resources = json.loads((ws / "terraform.tfstate").read_text())["resources"]
    assert [(r["type"], r["name"]) for r in resources] == [("terraform_data", "a")]
    assert not outside.exists(), "the apply ran on the host, outside the sandbox"
