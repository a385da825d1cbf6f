"""A Terraform plan in Jupyter AI's chat reads as text: the plan card's output is the
summary, and the apply question posts the summary of the plan it would apply beside its
once-only buttons. Real terraform (terraform_data: offline), headless chat."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip(
    "jupyter_ai_acp_client",
    reason="needs Jupyter AI 3 + jupyter-ai-acp-client (pip install -e '.[jupyter-ai]'; "
    "CI: .ci/jupyter-ai)",
)

from jupyter_ai_support import SCRIPT, ChatRoom
from terraform_support import (
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
)
from test_acp_support import wait_until

pytestmark = needs_terraform

TERRAFORM_WAIT = 120.0
SUMMARY = "Plan: 2 to add, 1 to change, 2 to destroy"


async def test_plan_summary_and_apply_review_read_as_text(applied: Path, tmp_path, monkeypatch):
    monkeypatch.setenv("IAC_KERNEL_SCRIPT", str(SCRIPT))
    monkeypatch.setenv("JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY", "1")
    root = tmp_path / "root"
    root.mkdir()
    workdir = stage2_copy(applied, root / "infra")
    before = addresses(workdir)
    room = ChatRoom(root, path="infra/plan.chat")
    try:
        turn = room.send("plan and apply")
        plan = await room.pending_question()
        assert plan["title"].startswith("terraform_plan")
        await room.click(plan, "allow_once")

        def planned() -> dict | None:
            calls = [c for c in room.tool_calls() if c["tool_call_id"] == plan["tool_call_id"]]
            return calls[0] if calls and calls[0].get("status") == "completed" else None

        # terraform plan under the guard: generous on a loaded machine.
        done = await wait_until(planned, "the plan's result", TERRAFORM_WAIT)
        assert isinstance(done["raw_output"], str) and SUMMARY in done["raw_output"]

        apply = await room.pending_question(TERRAFORM_WAIT)
        assert apply["tool_call_id"] != plan["tool_call_id"]
        assert [o["option_id"] for o in apply["permission_options"]] == [
            "allow_once",
            "reject_once",
        ]
        # The review (the plan it would apply) is in the chat beside the buttons.
        reviews = [m.body for m in room.agent_messages() if "Plan file: p.tfplan" in m.body]
        assert reviews and SUMMARY in reviews[0]
        await room.click(apply, "reject_once")
        await asyncio.wait_for(turn, TERRAFORM_WAIT)
        await room.wait_text("Plan reviewed.")
        assert addresses(workdir) == before
    finally:
        await room.close()
