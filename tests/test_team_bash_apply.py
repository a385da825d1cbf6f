"""``terraform apply`` typed through bash (scripts included) under a team's approval rules
(issue 43): the guard's exec-time review goes through the same gate as the
``terraform_apply`` tool (iac_kernel/terraform/gate.py). Real terraform, the real guard
and sandbox, a scripted model; the user answers "allow once" and another identity
approves from a thread of its own."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from apply_support import Run, run_call
from iac_kernel.config import Settings
from iac_kernel.kernel.ask.questions import PendingQuestions
from iac_kernel.kernel.session.state import KernelState
from iac_kernel.kernel.session.status import StatusChannel, kernel_session_info
from iac_kernel.team.approvals import Approval, ApprovalError, Approvals
from iac_kernel.team.store import open_store, os_identity
from iac_kernel.terraform import gate
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_apply import GatedPlan, TerraformApplyTool
from team_support import BOB_ID, DEFAULT_RULE, Approver, admin_rules, records
from terraform_support import (
    STAGE1,
    STAGE2,
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
    state,
)

pytestmark = needs_terraform

PROD_ONLY = '[[rule]]\nname = "prod"\nwhen = { workspace = "prod*" }\napprovers = 1\n'
APPLY = "terraform apply -input=false -no-color p.tfplan"


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    """Stage 2 planned into p.tfplan (2 to add, 1 to change, 2 to destroy)."""
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan")


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch, isolated_store: Path) -> str:
    """The default team store (SQLite in this test's session store), looked at often."""
    monkeypatch.delenv("IAC_KERNEL_TEAM_STORE", raising=False)
    monkeypatch.delenv("IAC_KERNEL_APPROVAL_RULES", raising=False)
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("CHECKPOINT_DISABLE", "1")
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.05)
    return f"sqlite:///{isolated_store / 'team.sqlite'}"


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """A Slack-compatible webhook on loopback; the JSON bodies it received."""
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("IAC_KERNEL_APPROVAL_WEBHOOK", f"http://127.0.0.1:{server.server_port}/")
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


class StatusComms:
    """The kernel's status comm as the lab extension opens it: what it was sent."""

    def __init__(self, ws: Path) -> None:
        state = KernelState(Settings(), str(ws))
        self.channel = StatusChannel(
            lambda: kernel_session_info(state, PendingQuestions(), []),
            lambda _call: (None, None),
            lambda *_args: None,
        )
        self.sent: list[dict[str, Any]] = []
        self.channel.register(self)
        self.opened(self, {"content": {"data": {}}})

    # the comm manager's and the comm's side
    def register_target(self, _name: str, opened: Callable[..., None]) -> None:
        self.opened = opened

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def on_msg(self, _callback: Any) -> None:
        pass

    def on_close(self, _callback: Any) -> None:
        pass

    def approvals(self) -> list[list[dict[str, str]]]:
        """Each session info's ``approvals``, in the order they were sent."""
        return [m["info"]["approvals"] for m in self.sent if m.get("type") == "session_info"]


def allow(_request: Any) -> str:
    return "allow_once"


def bash(ws: Path, command: str, timeout: float | None = None) -> Run:
    args: dict[str, Any] = {"command": command}
    if timeout is not None:
        args["timeout"] = timeout
    return run_call(ws, "bash", args, allow)


def test_a_saved_plan_applied_through_bash_waits_for_another_person_then_applies_once(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch, hook: list
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    monkeypatch.setattr(gate, "listeners", [])
    status = StatusComms(ws)
    seen: dict[str, Any] = {}

    def act(book: Approvals, record: Approval) -> None:
        # The requester's own approval is refused and counts for nothing.
        with pytest.raises(ApprovalError, match="cannot approve"):
            book.approve(record.id, os_identity())
        time.sleep(0.5)  # the exec waits meanwhile
        seen["before"] = book.get(record.id)
        seen["addresses"] = addresses(ws)
        seen["status"] = gate.waiting()  # what the notebook's status item shows
        seen["approved"] = book.approve(record.id, BOB_ID, note="checked")

    approver = Approver(team, act)
    approver.start()
    run = bash(ws, APPLY)
    approver.done()
    # It waited: nothing applied and the record pending (no vote counted) before bob.
    assert seen["before"].status == "pending" and seen["before"].approvals == ()
    assert seen["addresses"] == STAGE1
    (record,) = records(team)
    assert seen["status"] == [
        {"id": record.id, "waiting": "waiting for 1 approval by platform", "rule": record.rule}
    ]
    assert gate.waiting() == []
    # The notebook's status item heard of the wait when it began, and of its end.
    assert status.approvals() == [[], seen["status"], []]
    assert run.result.status == "completed", run.result.output
    assert addresses(ws) == STAGE2
    # One question, at exec time, saying what the apply needs besides the user.
    (question,) = run.asked
    assert question in run.exec_questions
    assert (
        "Needs 1 approval by platform from someone other than you "
        "(rule: default needs platform)" in question.reason
    )
    # The waiting text, from the record, in the call's output (its card and ACP update).
    output = run.result.output
    assert f"Approval {record.id}: waiting for 1 approval by platform (rule: " in output
    assert f"Approval {record.id}: approved by bob; applying." in output
    assert output.index("applying.") < output.index("Apply complete!")
    # The record: bound like the tool's, asked by this process's user, spent once.
    assert record.requester == os_identity().name
    assert record.status == "spent" and [v.approver for v in record.approvals] == ["bob"]
    assert record.binding["folder"] == str(ws.resolve())
    assert record.binding["workspace"] == "default"
    assert record.binding["cli_config"] == {"path": "/dev/null", "sha256": "other"}
    assert record.binding["lineage"] == state(ws)["lineage"]
    assert record.card is not None and record.card["plan"]["counts"]["delete"] == 1
    # The audit record of the exec names the approval spent on it.
    (applied,) = [r for r in run.records if r.get("kind") == "terraform_apply"]
    assert applied["outcome"] == "applied"
    assert applied["approval"] == {"id": record.id, "rule": record.rule, "approvers": ["bob"]}
    # The team's webhook heard of the new record once.
    deadline = time.monotonic() + 10
    while not hook and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(hook) == 1 and record.id in hook[0]["text"]


@pytest.mark.parametrize(
    "command",
    [
        "terraform apply -auto-approve -input=false -no-color",
        "terraform destroy -auto-approve -input=false -no-color",
        # The rules are the kernel's: the command's own environment cannot name others.
        "IAC_KERNEL_APPROVAL_RULES= terraform apply -auto-approve -input=false -no-color",
    ],
)
def test_an_apply_without_a_saved_plan_under_a_rule_is_refused_in_one_line(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch, command: str
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    serial = state(ws)["serial"]
    run = bash(ws, command)
    assert run.asked == []  # refused before any question
    assert run.result.status == "failed"
    (line,) = [x for x in run.result.output.splitlines() if x.startswith("guard: ")]
    assert line.startswith(
        "guard: terraform was not run: Refused: the team's approval rules may hold back a "
        "change of workspace default (rule: default needs platform), and an apply without a "
        "saved plan cannot be bound to an approval."
    )
    flag = " -destroy" if " destroy " in command else ""
    assert f"(`terraform plan{flag} -out=tfplan`)" in line
    assert addresses(ws) == STAGE1 and state(ws)["serial"] == serial
    assert records(team) == []


#: The bash call's timeout in the script test: its wait for the approver is longer.
LIMIT = 6.0
SCRIPT = "#!/bin/sh\nbash -c 'terraform apply -input=false -no-color p.tfplan'\n"


def test_a_script_that_applies_is_held_at_exec_time_and_a_rejection_refuses_it(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    (ws / "deploy.sh").write_text(SCRIPT)
    serial = state(ws)["serial"]

    def reject_later(book: Approvals, record: Approval) -> None:
        time.sleep(LIMIT + 1)  # longer than the bash call may run: waiting is not running
        book.reject(record.id, BOB_ID, "not during the freeze")

    approver = Approver(team, reject_later)
    approver.start()
    run = bash(ws, "sh deploy.sh", timeout=LIMIT)
    approver.done()
    assert "timed out" not in run.result.output
    (question,) = run.exec_questions
    assert "Needs 1 approval by platform" in question.reason
    (record,) = records(team)
    assert record.status == "rejected"
    assert (
        f"guard: terraform was not run: Not applied: approval {record.id} was rejected by bob: "
        "not during the freeze. Nothing was run." in run.result.output
    )
    assert run.result.status == "failed"
    assert addresses(ws) == STAGE1 and state(ws)["serial"] == serial
    # Without a saved plan the script is refused the same way, at exec time.
    (ws / "deploy.sh").write_text(SCRIPT.replace("p.tfplan", "-auto-approve"))
    run = bash(ws, "sh deploy.sh")
    assert run.asked == [] and "cannot be bound to an approval" in run.result.output
    assert addresses(ws) == STAGE1 and state(ws)["serial"] == serial


def test_an_approval_asked_by_the_tool_is_found_and_spent_by_bash_without_a_wait(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch, hook: list
):
    """Both ways of applying bind a record to the same inputs: bob's approval of the
    record the terraform_apply tool's review would ask is what the bash apply spends."""
    import asyncio

    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    ctx = ToolContext(cwd=ws, settings=Settings())
    reviewed = asyncio.run(TerraformApplyTool().review({"plan": "p.tfplan"}, ctx))
    assert isinstance(reviewed, GatedPlan)
    reviewed.cleanup()
    store = open_store(team)
    try:
        book = Approvals(store)
        inputs = reviewed.binding.approval_inputs()
        asked = book.request(os_identity(), reviewed.sha256, inputs, "s", reviewed.requirement)
        book.approve(asked.id, BOB_ID)
    finally:
        store.close()
    run = bash(ws, APPLY)
    assert run.result.status == "completed", run.result.output
    assert addresses(ws) == STAGE2
    assert "waiting for" not in run.result.output
    assert f"Approval {asked.id}: approved by bob; applying." in run.result.output
    (record,) = records(team)
    assert record.id == asked.id and record.status == "spent"
    time.sleep(0.5)
    assert hook == []  # a found record is not announced again


@pytest.mark.parametrize("rules", [None, PROD_ONLY])
@pytest.mark.parametrize("command", [APPLY, "terraform apply -auto-approve -input=false"])
def test_without_a_matching_rule_bash_applies_as_before(
    ws: Path,
    tmp_path: Path,
    team: str,
    monkeypatch: pytest.MonkeyPatch,
    rules: str | None,
    command: str,
):
    if rules is not None:
        admin_rules(tmp_path, monkeypatch, rules)
    run = bash(ws, command)
    assert run.result.status == "completed", run.result.output
    assert addresses(ws) == STAGE2
    (question,) = run.exec_questions  # the one question it always had, and nothing more
    assert "Needs " not in question.reason and "approval" not in str(question.review)
    assert "Approval " not in run.result.output
    assert records(team) == []


@pytest.mark.parametrize("command", [APPLY, "terraform apply -auto-approve -input=false"])
def test_a_rules_file_that_cannot_be_used_refuses_every_apply_through_bash(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch, command: str
):
    path = admin_rules(tmp_path, monkeypatch, "[[rule]\nname = 'x'\n")
    serial = state(ws)["serial"]
    run = bash(ws, command)
    assert run.asked == [] and run.result.status == "failed"
    (line,) = [x for x in run.result.output.splitlines() if x.startswith("guard: ")]
    assert line.startswith(
        f"guard: terraform was not run: Refused: rules unreadable: approval rules {path}"
    )
    assert line.endswith("No apply runs until the file is fixed.")
    assert addresses(ws) == STAGE1 and state(ws)["serial"] == serial
    assert records(team) == []
