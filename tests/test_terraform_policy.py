"""checkov on real plans: failed checks by address on the plan and in the apply question.

checkov lives in its own environment (its pins clash with ours); these tests run when it
is found (``IAC_KERNEL_CHECKOV`` or ``checkov`` on PATH). The workspace's
custom check comes from a trusted directory (``IAC_KERNEL_CHECKOV_CHECKS``), so a
terraform_data plan has a known violation; a workspace's own ``.checkov.yaml`` is ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.config import Settings
from iac_kernel.kernel.render import plan_card
from iac_kernel.terraform import policy
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_apply import TerraformApplyTool
from iac_kernel.tools.tf_plans import TerraformPlanTool
from terraform_support import (
    applied_fixture,  # noqa: F401 (the applied fixture)
    copy_workspace,
    needs_terraform,
    tf,
)

pytestmark = needs_terraform

POLICY = """\
metadata:
  id: "CKV2_IACK_1"
  name: "Ensure no firewall rule is open to the world (0.0.0.0/0)"
  category: "NETWORKING"
definition:
  cond_type: "attribute"
  resource_types:
    - "terraform_data"
  attribute: "input.cidr"
  operator: "not_equals"
  value: "0.0.0.0/0"
"""
OPEN = 'resource "terraform_data" "firewall" {\n  input = { cidr = "0.0.0.0/0", port = 22 }\n}\n'
CLOSED = 'resource "terraform_data" "vpn" {\n  input = { cidr = "10.0.0.0/8", port = 22 }\n}\n'


def checkov_found() -> str | None:
    """CI installs checkov in its own venv and names it in ``TEST_CHECKOV``."""
    if os.environ.get("TEST_CHECKOV"):
        return os.environ["TEST_CHECKOV"]
    saved = os.environ.pop(policy.CHECKOV_ENV, None)
    try:
        return (saved if saved and saved.lower() not in policy.OFF_WORDS else None) or (
            policy.checkov_program()
        )
    finally:
        if saved is not None:
            os.environ[policy.CHECKOV_ENV] = saved


CHECKOV = checkov_found()


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    workdir = copy_workspace(applied, tmp_path / "ws")
    (workdir / "firewall.tf").write_text(OPEN + CLOSED)
    return workdir


@pytest.fixture
def trusted_checks(tmp_path: Path) -> Path:
    checks = tmp_path / "trusted-checks"
    checks.mkdir()
    (checks / "world_open.yaml").write_text(POLICY)
    return checks


@pytest.mark.skipif(CHECKOV is None, reason="checkov is not installed (IAC_KERNEL_CHECKOV)")
async def test_checkov_findings_are_on_the_plan_card_and_in_the_apply_question(
    ws: Path, trusted_checks: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(policy.CHECKOV_ENV, CHECKOV)
    monkeypatch.setenv(policy.CHECKS_ENV, str(trusted_checks))
    # A workspace config naming checks in the workspace is never read (it could load code).
    (ws / "evil").mkdir()
    (ws / "evil" / "__init__.py").write_text("")  # checkov imports such a package's modules
    (ws / "evil" / "check.py").write_text(f"open({str(ws / 'PWNED')!r}, 'w').write('x')\n")
    (ws / ".checkov.yaml").write_text("external-checks-dir:\n  - evil\n")
    ctx = ToolContext(cwd=ws, settings=Settings())
    result = await TerraformPlanTool().run({"out": "p.tfplan"}, ctx)
    plan = result.raw_output["plan"]
    assert plan["checks_note"] == ""
    failed = [(c["check_id"], c["address"]) for c in plan["checks"]]
    assert failed == [("CKV2_IACK_1", "terraform_data.firewall")]  # not the vpn
    assert "Policy (checkov): 1 failed check(s):" in result.content
    assert "- terraform_data.firewall: CKV2_IACK_1" in result.content
    html = plan_card.bundle(plan)["text/html"]
    assert "✗ CKV2_IACK_1" in html and "iac-plan-checks" in html
    approved = await TerraformApplyTool().review({"plan": "p.tfplan"}, ctx)
    question = approved.summary()["text"]
    assert "Failed policy checks (checkov): 1 (CKV2_IACK_1)." in question
    assert not (ws / "PWNED").exists()


async def test_without_checkov_the_card_says_so(ws: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(policy.CHECKOV_ENV, str(ws / "no-such-checkov"))
    result = await TerraformPlanTool().run({}, ToolContext(cwd=ws, settings=Settings()))
    assert result.raw_output["plan"]["checks"] == []
    assert result.raw_output["plan"]["checks_note"] == policy.NOT_INSTALLED
    assert f"Policy (checkov): {policy.NOT_INSTALLED}" in result.content
    tf(ws, "validate")


def test_reports_are_read_by_address():
    report = (
        '{"check_type": "terraform_plan", "results": {"failed_checks": ['
        '{"check_id": "CKV_AWS_1", "check_name": "n", "resource": "aws_s3_bucket.b",'
        ' "resource_address": "module.m.aws_s3_bucket.b"}]}}'
    )
    assert policy.parse_report(report)[0]["address"] == "module.m.aws_s3_bucket.b"
    assert policy.parse_report("[" + report + "]")[0]["check_id"] == "CKV_AWS_1"
