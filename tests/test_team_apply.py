"""terraform_apply under a team's approval rules (issue 43, items 1-3), with real terraform:
the apply waits for people other than its requester, applies exactly the plan they
approved, spends their approval once, and survives a kill -9 of the process that waited.
Without a matching rule it applies exactly as before."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core_support import make_loop, write_script
from iac_kernel.acp.protocol.updates import to_update
from iac_kernel.agent.permissions import ALLOW_ONCE, PermissionRequest
from iac_kernel.events import ToolCallOutput, ToolCallResult
from iac_kernel.team import rules
from iac_kernel.team.approvals import Approval, ApprovalError, Approvals
from iac_kernel.team.store import Identity, open_store, os_identity
from iac_kernel.terraform import gate
from iac_kernel.terraform.gate import change_of
from iac_kernel.terraform.plan import Plan, ResourceChange
from iac_kernel.tools.tf_apply import TerraformApplyTool
from iac_kernel.tools.tf_plans import TerraformPlanTool
from team_support import (  # noqa: F401 (fixtures)
    BOB,
    BOB_ID,
    DEFAULT_RULE,
    PLATFORM,
    Approver,
    admin_rules,
    ensure_user,
    needs_root,
    pg_cluster,
    pg_database,
    records,
    run_as,
)
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
    tf_env,
)

pytestmark = needs_terraform

CAROL_ID = Identity("carol", groups=frozenset({"platform"}))


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    """Stage 2 planned into p.tfplan; a destroy plan of the same state in other.tfplan."""
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan", destroy_plan="other.tfplan")


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite team store of this test; the waiting apply looks at it often."""
    url = f"sqlite:///{tmp_path / 'team.sqlite'}"
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", url)
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.05)
    return url


class Turn:
    """One scripted turn that calls terraform_apply on ``plan``; what it emitted."""

    def __init__(self, ws: Path, tmp_path: Path, plan: str = "p.tfplan") -> None:
        script = write_script(
            tmp_path / f"apply-{time.monotonic_ns()}.json",
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
        self.loop, _persist = make_loop(script, ws, [TerraformApplyTool(), TerraformPlanTool()])
        self.events: list[Any] = []
        self.asked: list[PermissionRequest] = []

    async def ask(self, request: PermissionRequest) -> str:
        self.asked.append(request)
        return ALLOW_ONCE

    def turn(self) -> Any:
        """The turn's coroutine (cancelling its task ends the turn as ``cancelled``)."""
        prompt = [{"type": "text", "text": "apply the plan"}]
        return self.loop.run_turn(prompt, self.events.append, self.ask)

    async def run(self) -> Any:
        return await asyncio.wait_for(self.turn(), timeout=180)

    def __call__(self) -> ToolCallResult:
        asyncio.run(self.run())
        (result,) = self.results
        return result

    @property
    def results(self) -> list[ToolCallResult]:
        return [e for e in self.events if isinstance(e, ToolCallResult)]

    @property
    def status(self) -> str:
        """What the running call showed (its live output)."""
        return "".join(e.text for e in self.events if isinstance(e, ToolCallOutput))


async def cancelled_while_waiting(turn: Turn, url: str) -> Any:
    """Run ``turn`` until its apply waits on a pending record, then cancel the turn."""
    task = asyncio.create_task(turn.turn())
    for _ in range(2400):
        if await asyncio.to_thread(records, url, ("pending",)) or task.done():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a few looks at the store by the waiting apply
    task.cancel()
    return await task


def test_a_matched_rule_waits_until_another_person_approves_then_applies(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    seen: dict[str, Any] = {}

    def act(book: Approvals, record: Approval) -> None:
        # The requester's own approval is refused and counts for nothing.
        with pytest.raises(ApprovalError, match="cannot approve"):
            book.approve(record.id, os_identity())
        time.sleep(0.5)  # ten looks at the store by the waiting apply
        seen["before"] = book.get(record.id)
        seen["addresses"] = addresses(ws)
        seen["approved"] = book.approve(record.id, BOB_ID, note="checked")

    approver = Approver(team, act)
    approver.start()
    turn = Turn(ws, tmp_path)
    result = turn()
    approver.join(10)
    assert approver.error is None, approver.error
    # It waited: nothing applied and the record pending before bob approved.
    assert seen["before"].status == "pending" and seen["before"].approvals == ()
    assert seen["addresses"] == STAGE1
    assert result.status == "completed", result.output
    assert addresses(ws) == STAGE2
    # The user was still asked, once, and told about the approval it needs.
    (request,) = turn.asked
    assert request.options == ["allow_once", "reject_once"]
    assert request.reason.splitlines()[-1].startswith(
        "Needs 1 approval by platform from someone other than you (rule: default needs platform)"
    )
    # The call's status said what it waits for, from the record, in the card and ACP.
    (record,) = records(team, None)
    waiting = f"Approval {record.id}: waiting for 1 approval by platform (rule: "
    assert waiting in turn.status
    assert f"Approval {record.id}: approved by bob; applying." in turn.status
    outputs = [e for e in turn.events if isinstance(e, ToolCallOutput)]
    update = to_update(outputs[0])
    assert update.status == "in_progress"
    assert "waiting for 1 approval by platform" in update.content[0].content.text
    # The record: the session's owner asked, bob approved, one apply spent it.
    assert record.requester == os_identity().name
    assert record.status == "spent" and [v.approver for v in record.approvals] == ["bob"]
    assert record.plan_sha256 == result.raw_output["sha256"]
    assert record.binding["folder"] == str(ws.resolve())
    assert record.binding["workspace"] == "default"
    assert record.binding["lineage"] == state(ws)["lineage"]
    assert record.binding["cli_config"] == {"path": "/dev/null", "sha256": "other"}
    assert str(ws.resolve() / "stage.auto.tfvars") in record.binding["var_files"]
    # The approver's panel gets the card the requester saw, masked as it was shown.
    assert record.card is not None and record.card["kind"] == "terraform_apply"
    assert record.card["plan"]["counts"]["delete"] == 1
    assert SECRET not in str(record.card)
    assert record.summary.startswith("Apply of the saved plan p.tfplan: 2 to destroy")


def test_a_rejection_refuses_the_apply_and_nothing_is_applied(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    serial = state(ws)["serial"]
    approver = Approver(
        team, lambda book, record: book.reject(record.id, BOB_ID, "not during the freeze")
    )
    approver.start()
    result = Turn(ws, tmp_path)()
    approver.join(10)
    assert approver.error is None, approver.error
    assert result.status == "failed"
    (record,) = records(team, None)
    assert result.output == (
        f"Not applied: approval {record.id} was rejected by bob: not during the freeze. "
        "Nothing was run."
    )
    assert record.status == "rejected"
    assert addresses(ws) == STAGE1 and state(ws)["serial"] == serial


WAITER = """
import asyncio, sys
from pathlib import Path
from iac_kernel.config import Settings
from iac_kernel.tools import tf_apply
from iac_kernel.terraform import gate
from iac_kernel.tools.base import ToolContext

gate.POLL_SECONDS = 0.05

async def main():
    ws = Path(sys.argv[1])
    ctx = ToolContext(cwd=ws, settings=Settings(), on_output=lambda t: print(t, flush=True))
    tool = tf_apply.TerraformApplyTool()
    ctx.review = await tool.review({"plan": "p.tfplan"}, ctx)
    result = await tool.run({"plan": "p.tfplan"}, ctx)
    print("RESULT", result.content, flush=True)

asyncio.run(main())
"""


def test_after_a_kill_9_of_the_waiting_process_the_same_plan_finds_the_approval_once(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=tf_env(),
    )
    try:
        line = waiter.stdout.readline()
        assert "waiting for 1 approval by platform" in line, line + waiter.stderr.read()
    finally:
        os.kill(waiter.pid, signal.SIGKILL)
        waiter.wait(30)
    assert waiter.returncode == -signal.SIGKILL
    (record,) = records(team, None)
    assert line.startswith(f"Approval {record.id}: ") and record.status == "pending"
    assert addresses(ws) == STAGE1
    store = open_store(team)
    try:
        Approvals(store).approve(record.id, BOB_ID)
    finally:
        store.close()

    # A fresh apply of the same plan finds bob's approval: no wait, applied, spent.
    second = Turn(ws, tmp_path)
    result = second()
    assert result.status == "completed", result.output
    assert addresses(ws) == STAGE2
    assert "waiting for" not in second.status
    assert f"Approval {record.id}: approved by bob; applying." in second.status
    (spent,) = records(team, None)
    assert spent.id == record.id and spent.status == "spent"
    serial = state(ws)["serial"]

    # A third apply of that plan finds no approval to spend: it asks again and waits.
    third = Turn(ws, tmp_path)
    ended = asyncio.run(cancelled_while_waiting(third, team))
    assert ended.stop_reason == "cancelled"
    assert len(third.asked) == 1 and "waiting for 1 approval by platform" in third.status
    assert state(ws)["serial"] == serial
    by_id = {r.id: r.status for r in records(team, None)}
    assert by_id.pop(record.id) == "spent"
    assert list(by_id.values()) == ["pending"]  # a new record; the cancel left it waiting


def test_an_approval_is_never_spent_on_a_changed_plan(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)

    def swap_then_approve(book: Approvals, record: Approval) -> None:
        # The plan file is replaced by a destroy plan while the apply waits; bob approves
        # the record, which is for the plan the requester saw.
        (ws / "p.tfplan").write_bytes((ws / "other.tfplan").read_bytes())
        book.approve(record.id, BOB_ID)

    approver = Approver(team, swap_then_approve)
    approver.start()
    result = Turn(ws, tmp_path)()
    approver.join(10)
    assert approver.error is None, approver.error
    assert result.status == "failed"
    assert result.output.startswith("Refused: the plan file p.tfplan changed after it")
    assert addresses(ws) == STAGE1
    (first,) = records(team, None)
    assert first.status == "approved"  # not spent by the refused apply

    # Applying the changed file: bob's approval is for another plan, so it waits anew.
    turn = Turn(ws, tmp_path)
    ended = asyncio.run(cancelled_while_waiting(turn, team))
    assert ended.stop_reason == "cancelled" and "waiting for 1 approval" in turn.status
    assert addresses(ws) == STAGE1
    (second,) = records(team, ("pending",))
    assert second.id != first.id and second.plan_sha256 != first.plan_sha256
    # Nor can the first approval be spent on the changed plan directly.
    store = open_store(team)
    try:
        with pytest.raises(ApprovalError, match="another plan or binding"):
            Approvals(store).spend(first.id, os_identity(), second.plan_sha256, second.binding)
    finally:
        store.close()


def test_a_workspace_rule_cannot_loosen_an_admin_rule(
    ws: Path, tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(
        tmp_path,
        monkeypatch,
        '[[rule]]\nname = "two people"\nwhen = { workspace = "default" }\napprovers = 2\n',
    )
    # The workspace (which a sandboxed command may write) names the same rule, with one.
    (ws / ".iac-kernel").mkdir()
    (ws / ".iac-kernel" / "approvals.toml").write_text(
        '[[rule]]\nname = "two people"\nwhen = { workspace = "*" }\napprovers = 1\n'
    )
    seen: dict[str, Approval] = {}

    def two_people(book: Approvals, record: Approval) -> None:
        seen["after_bob"] = book.approve(record.id, BOB_ID)
        time.sleep(0.3)
        assert addresses(ws) == STAGE1  # one approval is not enough
        book.approve(record.id, CAROL_ID)

    approver = Approver(team, two_people)
    approver.start()
    turn = Turn(ws, tmp_path)
    result = turn()
    approver.join(10)
    assert approver.error is None, approver.error
    assert seen["after_bob"].status == "pending" and seen["after_bob"].required == 2
    assert ": waiting for 2 approvals (rule: two people; two people (workspace))" in turn.status
    assert ": waiting for 1 approval.\n" in turn.status
    assert result.status == "completed", result.output
    assert addresses(ws) == STAGE2


@pytest.mark.parametrize(
    ("admin", "workspace", "why"),
    [
        ("[[rule]\nname = 'x'\n", None, "not valid TOML"),
        # A workspace file that tries to switch a rule off blocks; it never loosens.
        (DEFAULT_RULE, '[[rule]]\nname = "off"\napprovers = 0\n', "approvers: expects"),
    ],
)
def test_a_bad_rules_file_refuses_the_apply_in_one_line(
    ws: Path,
    tmp_path: Path,
    team: str,
    monkeypatch: pytest.MonkeyPatch,
    admin: str,
    workspace: str | None,
    why: str,
):
    path = admin_rules(tmp_path, monkeypatch, admin)
    if workspace is not None:
        (ws / ".iac-kernel").mkdir()
        (ws / ".iac-kernel" / "approvals.toml").write_text(workspace)
    turn = Turn(ws, tmp_path)
    result = turn()
    assert result.status == "failed"
    assert result.output.startswith("Not run: rules unreadable: approval rules ")
    assert why in result.output and "\n" not in result.output
    assert result.output.endswith("No apply runs until the file is fixed.")
    assert (str(path) in result.output) == (workspace is None)
    assert turn.asked == [] and addresses(ws) == STAGE1
    assert records(team, None) == []


PROD_ONLY = '[[rule]]\nname = "prod"\nwhen = { workspace = "prod*" }\napprovers = 1\n'


@pytest.mark.parametrize("rules", [None, PROD_ONLY])
def test_without_a_matching_rule_the_apply_runs_as_before(
    ws: Path,
    tmp_path: Path,
    team: str,
    monkeypatch: pytest.MonkeyPatch,
    rules: str | None,
):
    monkeypatch.delenv("IAC_KERNEL_APPROVAL_RULES", raising=False)
    if rules is not None:
        admin_rules(tmp_path, monkeypatch, rules)
    turn = Turn(ws, tmp_path)
    result = turn()
    assert result.status == "completed", result.output
    assert addresses(ws) == STAGE2
    (request,) = turn.asked  # the one question it always had, and nothing more
    assert request.options == ["allow_once", "reject_once"]
    assert "Needs " not in request.reason and "approval" not in request.review
    assert turn.status == ""  # no waiting
    assert records(team, None) == []  # no approval record


def test_a_second_os_user_approves_from_a_terminal_against_postgresql(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
):
    """The requester is this process's OS user; ``iacbob`` approves with
    ``iac-kernel approvals approve ID`` as himself, and the waiting apply goes on."""
    needs_root()
    ensure_user(BOB, groups=(PLATFORM,))
    cluster = request.getfixturevalue("pg_cluster")
    url = pg_database(cluster)[1]
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", url)
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.1)
    admin_rules(
        tmp_path,
        monkeypatch,
        f'[[rule]]\nname = "platform"\nwhen = {{ actions = ["delete"] }}\n'
        f'approvers = 1\ngroup = "{PLATFORM}"\n',
    )
    env = {"IAC_KERNEL_TEAM_STORE": url, "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    code = "from iac_kernel.cli import main; raise SystemExit(main(['approvals', 'approve', %r]))"
    done: dict[str, Any] = {}

    def bob_approves(book: Approvals, record: Approval) -> None:
        done["run"] = run_as(BOB, code % record.id, env)

    approver = Approver(url, bob_approves)
    approver.start()
    turn = Turn(ws, tmp_path)
    try:
        result = turn()
        approver.join(60)
        assert approver.error is None, approver.error
        assert done["run"].returncode == 0, done["run"].stderr
        assert f"approved by {BOB}" in done["run"].stdout
        assert result.status == "completed", result.output
        assert addresses(ws) == STAGE2
        assert f"waiting for 1 approval by {PLATFORM}" in turn.status
        (record,) = records(url, None)
        assert record.requester == os_identity().name != BOB
        assert record.status == "spent" and [v.approver for v in record.approvals] == [BOB]
    finally:
        cluster.psql(f"DROP DATABASE {url.split('/')[3].split('?')[0]} WITH (FORCE)")


def test_rules_see_every_changed_resource_and_the_failed_checks_of_the_plan():
    """What the rules match on (no terraform needed): reads and no-ops are no change."""
    plan = Plan(
        resources=[
            ResourceChange("aws_db_instance.main", "replace", "aws_db_instance"),
            ResourceChange("aws_s3_bucket.logs", "create", "aws_s3_bucket"),
            ResourceChange("data.aws_iam_policy.p", "read", "aws_iam_policy", mode="data"),
            ResourceChange("aws_iam_user.u", "no-op", "aws_iam_user"),
        ],
        checks=[{"check_id": "CKV_AWS_18", "address": "aws_s3_bucket.logs"}],
    )
    change = change_of(plan, "prod-eu")
    assert change.workspace == "prod-eu"
    assert change.changes == {("aws_db_instance", "replace"): 1, ("aws_s3_bucket", "create"): 1}
    assert change.failed_checks == {"CKV_AWS_18"}
    ruleset = rules.RuleSet(
        tuple(
            rules.parse(
                """
[[rule]]
name = "dbs"
when = { actions = ["replace"], resource_types = ["aws_db_*"] }
approvers = 2
[[rule]]
name = "policy"
when = { failed_checks = ["ckv_aws_*"] }
approvers = 1
group = "security"
[[rule]]
name = "iam"
when = { resource_types = ["aws_iam_*"] }
approvers = 3
"""
            )
        )
    )
    needed = ruleset.evaluate(change)
    assert needed.rules == ("dbs", "policy") and needed.approvers == 2
    assert needed.text() == "2 approvals (1 by security)"
    # The same plan without its failed check, in a workspace: only the database rule.
    assert ruleset.evaluate(change_of(Plan(resources=plan.resources), "dev")).rules == ("dbs",)


def test_an_unreachable_store_refuses_a_held_back_apply_in_one_line(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    admin_rules(tmp_path, monkeypatch, DEFAULT_RULE)
    missing = tmp_path / "no-socket-here"
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", f"postgresql://nobody@/iac?host={missing}")
    turn = Turn(ws, tmp_path)
    result = turn()
    assert result.status == "failed" and len(turn.asked) == 1
    assert result.output.startswith("Not applied: the approval rules need the team store, and ")
    assert "unreachable" in result.output and result.output.endswith("Nothing was run.")
    assert "\n" not in result.output
    assert addresses(ws) == STAGE1
