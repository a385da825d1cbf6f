"""The audit record of every apply (tool or bash): after approve, reject and failure; no
secret in it; ``iac-kernel audit`` and ``%audit`` list it (real terraform)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pwd
from pathlib import Path
from types import SimpleNamespace

import pytest

from apply_support import APPROVER, run_call, trail_bytes
from iac_kernel.cli import main
from iac_kernel.kernel.magics.commands import Magics
from iac_kernel.sessions.audit import AuditLog, describe
from terraform_support import (
    SECRET,
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
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan")


def answer(option: str):
    return lambda _request: option


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def serial(ws: Path) -> int:
    return json.loads((ws / "terraform.tfstate").read_text())["serial"]


BASH_APPLY = "terraform apply -input=false -no-color p.tfplan"


def test_a_bash_apply_approved_leaves_a_full_record(ws: Path, isolated_store: Path):
    digest, before = sha(ws / "p.tfplan"), serial(ws)
    run = run_call(ws, "bash", {"command": BASH_APPLY}, answer("allow_once"))
    assert run.result.status == "completed", run.result.output
    (record,) = run.records
    (question,) = run.exec_questions
    assert record["question"] == f"{question.title}\n{question.reason}"
    assert record["plan_file"] == "p.tfplan" and record["plan_sha256"] == digest
    assert record["summary"].startswith("Plan: 2 to add, 1 to change, 2 to destroy")
    assert record["counts"] == {"delete": 1, "replace": 1, "update": 1, "create": 1}
    assert record["answer"] == "allow_once" and record["approver"] == APPROVER
    assert record["os_user"] == pwd.getpwuid(os.getuid()).pw_name
    assert record["answered_at"] and record["recorded_at"]
    assert record["outcome"] == "applied" and record["exit"] == 0
    assert record["form"] == "bash" and record["tool"] == "bash" and record["call_id"]
    assert record["cwd"] == str(ws) and record["session_id"]
    assert record["policy"]["failed"] == []
    assert record["state_before"]["serial"] == before
    assert record["state_after"]["serial"] == serial(ws) > before
    assert record["state_after"]["lineage"] == record["state_before"]["lineage"]
    assert (isolated_store / "team.sqlite").stat().st_mode & 0o777 == 0o600


def test_a_bash_apply_rejected_is_recorded_without_running(ws: Path):
    before = addresses(ws)
    run = run_call(ws, "bash", {"command": BASH_APPLY}, answer("reject_once"))
    (record,) = run.records
    assert record["outcome"] == "rejected" and record["exit"] is None
    assert record["answer"] == "reject_once" and "state_after" not in record
    assert addresses(ws) == before


def test_a_bash_apply_that_fails_records_terraforms_exit(ws: Path):
    tf(ws, "apply", "-auto-approve", "-input=false")  # p.tfplan is stale now
    run = run_call(ws, "bash", {"command": BASH_APPLY}, answer("allow_once"))
    (record,) = run.records
    assert record["outcome"] == "failed" and record["exit"] == 1
    assert record["state_after"]["serial"] == record["state_before"]["serial"]


def test_the_apply_tool_is_recorded_approved_rejected_and_failed(ws: Path):
    plan = {"plan": "p.tfplan"}
    rejected = run_call(ws, "terraform_apply", plan, answer("reject_once")).records[-1]
    assert rejected["outcome"] == "rejected" and rejected["form"] == "tool"
    assert rejected["plan_sha256"] == sha(ws / "p.tfplan")
    applied = run_call(ws, "terraform_apply", plan, answer("allow_once")).records[-1]
    assert applied["outcome"] == "applied" and applied["exit"] == 0
    assert applied["state_after"]["serial"] > applied["state_before"]["serial"]
    assert applied["question"].splitlines()[0] == "terraform_apply: p.tfplan"
    failed = run_call(ws, "terraform_apply", plan, answer("allow_once")).records[-1]
    assert failed["outcome"] == "stale" and failed["exit"] == 1  # applied already
    missing = run_call(ws, "terraform_apply", {"plan": "nope.tfplan"}, answer("allow_once"))
    assert missing.records[-1]["outcome"] == "refused"


def test_no_secret_reaches_the_audit_log(ws: Path, isolated_store: Path):
    env = (
        f'export TF_CLI_ARGS_apply="-var=db_password={SECRET}"\nexport API_TOKEN=tok-9f8e7d6c5b4a\n'
    )
    (ws / "ci.env").write_text(env)
    command = ". ./ci.env; terraform apply -auto-approve -input=false -no-color"
    run = run_call(ws, "bash", {"command": command}, answer("allow_once"))
    assert run.records and SECRET not in run.exec_questions[0].reason  # masked by shape too
    data = trail_bytes(isolated_store).decode(errors="replace")
    assert SECRET not in data and "db_password=" in data


def test_the_cli_and_the_magic_list_the_records(ws: Path, capsys, isolated_store: Path):
    run_call(ws, "bash", {"command": BASH_APPLY}, answer("reject_once"))
    run_call(ws, "bash", {"command": BASH_APPLY}, answer("allow_once"))
    assert main(["audit", "--cwd", str(ws)]) == 0
    text = capsys.readouterr().out
    assert "rejected  terraform apply -input=false -no-color p.tfplan  [bash]" in text
    assert "applied (exit 0)" in text and f"by {APPROVER}" in text
    assert "plan p.tfplan sha256 " in text and "state serial " in text
    assert main(["audit", "--json", "--cwd", str(ws)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["outcome"] for r in lines] == ["rejected", "applied"]
    assert main(["audit", "--cwd", str(ws.parent / "elsewhere")]) == 0
    assert capsys.readouterr().out == ""
    state = SimpleNamespace(settings=SimpleNamespace(sessions_dir=isolated_store), cwd=str(ws))
    shown = asyncio.run(Magics(state).audit(""))
    assert shown.markdown.startswith("2 audit record(s):") and "applied (exit 0)" in shown.plain
    empty = SimpleNamespace(settings=state.settings, cwd=str(ws.parent / "elsewhere"))
    assert "No audit records" in asyncio.run(Magics(empty).audit("")).plain


def test_the_log_is_never_written_through_a_symlink(tmp_path: Path):
    root = tmp_path / "store"
    root.mkdir()
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    (root / "audit.jsonl").symlink_to(outside)
    with pytest.raises(OSError):
        AuditLog(root).append({"outcome": "x"})
    assert outside.read_text() == ""


def test_front_ends_say_who_answered():
    from iac_kernel.acp.session.permissions import approver
    from iac_kernel.agent.permissions import PermissionRequest
    from iac_kernel.kernel.ask.permission_ui import PermissionUI

    class Out:
        def markdown(self, *_args, **_kwargs) -> None: ...

    request = PermissionRequest("c1", "bash", "t", "execute", {}, ["allow_once", "reject_once"], "")
    ui = PermissionUI(Out(), ui="policy", allow_stdin=False, policy=lambda: "deny", ask_stdin=None)
    answer = asyncio.run(ui.ask(request))
    assert answer == "reject_once" and answer.by == "headless policy (deny)"
    assert approver("kernel", {"name": "zed"}) == "editor via the kernel endpoint (zed)"
    assert approver("acp", SimpleNamespace(name="acpx")) == "ACP client (acpx)"
    assert approver("acp", None) == "ACP client"


def test_an_acp_answer_carries_its_client():
    from iac_kernel.acp.session.permissions import PermissionAsker
    from iac_kernel.agent.permissions import PermissionRequest

    class Channel:
        async def request(self, _method, _params):
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    request = PermissionRequest("c1", "bash", "t", "execute", {}, ["allow_once", "reject_once"], "")
    answer = asyncio.run(PermissionAsker(Channel(), "s1", "ACP client (acpx)")(request))
    assert answer == "allow_once" and answer.by == "ACP client (acpx)"


def test_policy_results_and_a_remote_state_are_recorded(tmp_path: Path):
    from iac_kernel.terraform.binding import state_mark
    from iac_kernel.terraform.plan import Plan, PlanFile
    from iac_kernel.terraform.review import plan_fields

    check = {"check_id": "CKV_X_1", "name": "open", "address": "a.b", "guideline": "u"}
    plan = Plan(file=PlanFile("p", "ab" * 32, 1, 0.0), counts={"delete": 2}, checks=[check])
    fields = plan_fields(plan)
    assert fields["policy"]["failed"] == [{"address": "a.b", "check_id": "CKV_X_1", "name": "open"}]
    assert fields["counts"]["delete"] == 2 and fields["plan_sha256"] == "ab" * 32
    (tmp_path / ".terraform").mkdir()
    (tmp_path / ".terraform" / "terraform.tfstate").write_text('{"backend": {"type": "s3"}}')
    assert state_mark(tmp_path, {})["note"].startswith("remote backend")
    backend = {"backend": {"type": "local", "config": {"path": "prod.state"}}}
    (tmp_path / ".terraform" / "terraform.tfstate").write_text(json.dumps(backend))
    (tmp_path / "prod.state").write_text('{"lineage": "L", "serial": 7}')
    mark = {"path": "prod.state", "lineage": "L", "serial": 7, "workspace": "default"}
    assert state_mark(tmp_path, {}) == mark
    (tmp_path / "terraform.tfstate.d" / "blue").mkdir(parents=True)
    (tmp_path / "terraform.tfstate.d" / "blue" / "terraform.tfstate").write_text('{"serial": 2}')
    assert state_mark(tmp_path, {"TF_WORKSPACE": "blue"})["serial"] == 2


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [("bash", {"command": BASH_APPLY}), ("terraform_apply", {"plan": "p.tfplan"})],
)
def test_a_cancelled_question_is_recorded(ws: Path, tool: str, tool_input: dict):
    before = addresses(ws)
    run = run_call(ws, tool, tool_input, answer("cancelled"))
    (record,) = run.records
    assert record["outcome"] == "cancelled" and record["exit"] is None
    assert addresses(ws) == before


TEST_MAIN = """
variable "token" {
  type      = string
  sensitive = true
  default   = "unset"
}
resource "terraform_data" "a" {
  input = var.token
}
"""
TEST_RUN = """
run "makes_it" {
  assert {
    condition     = terraform_data.a.input != ""
    error_message = "empty"
  }
}
"""


@pytest.mark.parametrize("option", ["allow_once", "reject_once"])
def test_terraform_test_is_asked_as_what_it_does_and_recorded(
    tmp_path: Path, isolated_store: Path, option: str
):
    """Its run blocks apply and destroy for real: one question that says so, and a record
    with the answer and terraform's exit; a -var value never reaches it."""
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "main.tf").write_text(TEST_MAIN)
    (ws / "tests" / "a.tftest.hcl").write_text(TEST_RUN)
    tf(ws, "init", "-input=false", "-no-color")
    command = "terraform test -no-color -var token=Test-Token-Value-7731"
    run = run_call(ws, "bash", {"command": command}, answer(option))
    (question,) = run.asked  # once, at exec time: no text-level question first
    assert question in run.exec_questions
    assert "applies the configuration for real" in question.reason
    (record,) = run.records
    assert record["kind"] == "terraform_test" and record["form"] == "bash"
    assert record["answer"] == option and record["workdir"] == str(ws)
    if option == "allow_once":
        assert "1 passed" in run.result.output
        assert record["outcome"] == "applied" and record["exit"] == 0
    else:
        assert record["outcome"] == "rejected" and record["exit"] is None
    data = trail_bytes(isolated_store).decode(errors="replace")
    assert "Test-Token-Value-7731" not in data and "token=(sensitive)" in data
    lines = "\n".join(describe(record))
    assert "terraform test -no-color" in lines
