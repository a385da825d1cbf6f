"""Plan cards (kernel mime bundle), the plan in ACP ``_meta`` and in the ACP question."""

from __future__ import annotations

import os
from typing import Any

import pytest

from iac_kernel.acp.protocol.updates import result_update
from iac_kernel.acp.session.permissions import request_params
from iac_kernel.agent.permissions import PermissionRequest
from iac_kernel.config import Settings
from iac_kernel.events import ToolCallResult, ToolCallStarted
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.render import plan_card, theme
from iac_kernel.kernel.render.turn import TurnView
from iac_kernel.terraform.plan import parse_plan
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_plans import TerraformPlanTool
from terraform_support import (
    SECRET,
    applied_workspace,
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real stage-2 plan (create, update, replace, delete) with a rotated secret."""
    os.environ["TF_CLI_CONFIG_FILE"] = "/dev/null"
    os.environ["IAC_KERNEL_CHECKOV"] = "off"
    root = tmp_path_factory.mktemp("tf")
    ws = stage2_copy(applied_workspace(root), root / "copy")
    (ws / "terraform.tfvars").write_text('db_password = "RotatedSecret-0c1d"\n')
    import asyncio

    result = asyncio.run(TerraformPlanTool().run({}, ToolContext(cwd=ws, settings=Settings())))
    return result.raw_output["plan"]


@needs_terraform
def test_the_card_lists_replacements_and_deletes_first(plan: dict[str, Any]):
    bundle = plan_card.bundle(plan, "c1", "s1")
    plain = bundle["text/plain"]
    assert plain.splitlines()[0] == plan["summary"]
    assert plain.splitlines()[1].startswith("plan file: tfplan · sha256 ")
    assert plain.splitlines()[2] == "changes: 1 replace · 1 delete · 2 update · 1 create"
    actions = [line.split()[1] for line in plain.splitlines()[3:8]]
    assert actions == ["replace", "delete", "update", "update", "create"]
    html = bundle["text/html"]
    order = [html.index(f'data-action="{a}"') for a in ("replace", "delete", "update", "create")]
    assert order == sorted(order)
    delete_row = html[order[1] : order[2]]
    assert f"background:{theme.RED_TINT}" in delete_row and "font-weight:600" in delete_row
    assert "triggers_replace[0]: &quot;small&quot; -&gt; &quot;large&quot;" in html
    payload = bundle[plan_card.PLAN_MIME]
    assert payload["version"] == 1 and payload["plan"]["counts"] == plan["counts"]
    for form in (plain, html, str(payload)):
        assert "RotatedSecret-0c1d" not in form and SECRET not in form
    assert "(sensitive)" in html  # the database's input and its unmarked output copy


@needs_terraform
def test_acp_gets_the_summary_as_content_and_the_plan_in_meta(plan: dict[str, Any]):
    update = result_update(
        ToolCallResult("c1", "terraform_plan", "completed", plan["summary"], {"plan": plan})
    ).model_dump(by_alias=True, exclude_none=True)
    assert update["content"][0]["content"]["text"] == plan["summary"]
    assert update["_meta"]["iac_kernel"]["plan"]["counts"] == plan["counts"]
    request = PermissionRequest(
        "c2",
        "terraform_apply",
        "terraform_apply: tfplan",
        "execute",
        {"plan": "tfplan"},
        ["allow_once", "reject_once"],
        "per call",
        review={"text": "Plan: 2 to add", "plan": plan},
    )
    params = request_params("s1", request)
    assert params["toolCall"]["content"][0]["content"]["text"] == "Plan: 2 to add"
    assert params["toolCall"]["_meta"]["iac_kernel"]["review"]["plan"]["summary"]


@needs_terraform
async def test_the_kernel_shows_a_plan_card_under_the_tool_card(plan: dict[str, Any]):
    sent: list[tuple[str, dict[str, Any]]] = []
    view = TurnView(Publisher(lambda t, c: sent.append((t, c))), "s1")
    view.emit(ToolCallStarted("c1", "terraform_plan", "terraform_plan", "execute"))
    view.emit(ToolCallResult("c1", "terraform_plan", "completed", "x", {"plan": plan}))
    ids = [c.get("transient", {}).get("display_id", "") for t, c in sent if t == "display_data"]
    assert ids[0].startswith("iac-tool-") and ids[-1].startswith("iac-plan-")


def test_everything_in_the_card_is_escaped():
    doc = {
        "resource_changes": [
            {
                "address": 'terraform_data.x["<img src=x onerror=alert(1)>"]',
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": {"input": "<b>"},
                    "after_unknown": {},
                    "before_sensitive": False,
                    "after_sensitive": {},
                },
            }
        ]
    }
    html = plan_card.render_html(parse_plan(doc).to_dict())
    assert "<img" not in html and "<b>" not in html and "&lt;img" in html


def test_resource_drift_is_read_and_shown():
    """The shape terraform gives for objects changed outside Terraform (resource_drift)."""
    doc = {
        "resource_drift": [
            {
                "address": "aws_security_group.web",
                "type": "aws_security_group",
                "name": "web",
                "change": {
                    "actions": ["update"],
                    "before": {"tags": {"env": "prod"}},
                    "after": {"tags": {"env": "prod", "owner": "someone"}},
                    "before_sensitive": {},
                    "after_sensitive": {},
                },
            }
        ],
        "resource_changes": [],
    }
    data = parse_plan(doc, refresh_only=True).to_dict()
    assert data["summary"] == "Drift: 1 resource changed outside Terraform."
    assert data["drift"][0]["changes"][0]["path"] == "tags.owner"
    html = plan_card.render_html(data)
    assert "Drift: 1 resource changed outside Terraform" in html and "tags.owner" in html
    # The summary line says it: the drift table has no heading repeating it.
    assert html.count("changed outside Terraform") == 1
    assert html.count("changed outside Terraform") == 1, "the drift line once, not twice"
    # A plan with changes and drift keeps the drift heading (its summary is the changes).
    data["summary"] = "Plan: 1 to change."
    assert "<strong>Drift: 1 resource changed" in plan_card.render_html(data)
