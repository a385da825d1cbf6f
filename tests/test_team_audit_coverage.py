"""Every changing operation the agent runs or is asked to run leaves a record in the team
store's audit trail, written where it is decided: the guard's exec-time verdict (kubectl,
helm, cloud CLIs, terraform's state changes, git pushes), the gate's per-call question
for a call that never ran, the wire's judgement of a cloud operation. Reads leave none.
Real sessions (scripted model, real guard and sandbox), fake CLIs on PATH."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
from pathlib import Path

import pytest

from apply_support import run_call
from iac_kernel.config import Settings
from iac_kernel.egress.decide import EgressCall, GuardedRun
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.sessions.audit import AuditLog, describe
from iac_kernel.team.audit import trail
from terraform_support import (
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
)

needs_sandbox = pytest.mark.skipif(unusable_reason() is not None, reason="no bubblewrap")
ME = pwd.getpwuid(os.getuid()).pw_name


def fake_cli(bin_dir: Path, name: str) -> None:
    """``name`` on PATH: prints its argv and leaves a mark in the working folder."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*"\necho "$*" >> ran-{name}\n')
    path.chmod(0o755)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    for name in ("kubectl", "helm", "az"):  # none of them installed here but kubectl
        fake_cli(bin_dir, name)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\ncurrent-context: prod\n")
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


CHANGES = {
    "kubectl": ("kubectl delete namespace shop", "kubectl get pods -A"),
    "helm": ("helm uninstall web", "helm list"),
    "az": ("az group delete --name shop --yes", "az group list"),
}


@needs_sandbox
@pytest.mark.parametrize("program", sorted(CHANGES))
def test_a_changing_command_is_recorded_and_a_read_is_not(
    ws: Path, isolated_store: Path, program: str
) -> None:
    change, read = CHANGES[program]
    run = run_call(ws, "bash", {"command": f"{read}; {change}"}, lambda _r: "allow_once")
    assert f"{change}" in run.result.output, run.result.output
    assert (ws / f"ran-{program}").read_text().count("\n") == 2  # the read ran too, unasked
    (record,) = run.records  # the read left none
    assert record["kind"] == "command" and record["form"] == "bash"
    assert record["command"] == change and record["program"] == program
    assert record["outcome"] == "ran" and record["exit"] == 0
    assert record["workdir"] == str(ws) and record["cwd"] == str(ws)
    assert record["actor"] == ME and record["session_id"] and record["call_id"]
    # The call's own question approved this exact command: its answer is the record's.
    assert record["answer"] == "allow_once" and record["allowed"] is True
    assert record["reason"]
    if program == "kubectl":
        assert record["target"]["kube context"].startswith("prod (from ")
    assert not (isolated_store / "audit.jsonl").exists()  # the store, not the old file
    text = "\n".join(describe(record))
    assert f"ran (exit 0)  {change}  [bash]" in text and f"by {ME}" in text


@needs_sandbox
def test_a_change_rejected_at_the_question_is_recorded_without_running(ws: Path) -> None:
    command = "kubectl delete namespace shop"
    run = run_call(ws, "bash", {"command": command}, lambda _r: "reject_once")
    assert not (ws / "ran-kubectl").exists()
    (record,) = run.records
    assert record["kind"] == "command" and record["form"] == "call"
    assert record["command"] == command and record["outcome"] == "rejected"
    assert record["answer"] == "reject_once" and record["exit"] is None
    assert "kubectl delete" in record["reason"]


@needs_sandbox
def test_a_command_rejected_at_exec_time_is_recorded(ws: Path) -> None:
    """A script runs unasked (bypass mode); the guard asks for what it runs, the answer
    rejects it."""
    script = ws / "go.sh"
    script.write_text("kubectl delete namespace shop\n")  # the call's text shows none
    run = run_call(ws, "bash", {"command": "sh go.sh"}, lambda _r: "reject_once")
    assert len(run.exec_questions) == len(run.asked) == 1
    assert not (ws / "ran-kubectl").exists()
    (record,) = run.records
    assert record["kind"] == "command" and record["form"] == "bash"
    assert record["command"] == "kubectl delete namespace shop"
    assert record["outcome"] == "rejected" and record["answer"] == "reject_once"


@needs_sandbox
def test_a_git_push_is_recorded_and_local_git_is_not(ws: Path, tmp_path: Path) -> None:
    bare = ws / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    steps = (
        "git init -q -b main repo && cd repo && git -c user.email=a@b -c user.name=a "
        "commit -q --allow-empty -m one && git status --short && git log --oneline && "
        "git push -q ../remote.git main"
    )
    run = run_call(ws, "bash", {"command": steps}, lambda _r: "allow_once")
    pushes = [r for r in run.records if r["command"].startswith("git push")]
    assert len(pushes) == 1, run.records
    assert pushes[0]["outcome"] == "ran" and pushes[0]["workdir"] == str(ws / "repo")
    assert not [r for r in run.records if r["command"].startswith(("git status", "git log"))]
    shown = subprocess.run(
        ["git", "--git-dir", str(bare), "log", "--oneline", "main"], capture_output=True, text=True
    )
    assert "one" in shown.stdout  # it was pushed


@needs_sandbox
@needs_terraform
def test_a_terraform_state_change_is_recorded_with_its_workspace(
    applied: Path,
    tmp_path: Path,
) -> None:
    folder = stage2_copy(applied, tmp_path / "tf", plan=None)
    victim = sorted(addresses(folder))[0]
    command = f"terraform state rm -no-color {victim}"
    run = run_call(folder, "bash", {"command": command}, lambda _r: "allow_once")
    assert victim not in addresses(folder)
    (record,) = run.records
    assert record["kind"] == "command" and record["program"] == "terraform"
    assert record["command"] == command and record["outcome"] == "ran"
    assert record["target"] == {"terraform workspace": "default"}
    assert record["workdir"] == str(folder)


async def test_a_cloud_operation_judged_at_the_wire_reaches_the_store(
    isolated_store: Path,
) -> None:
    """The wire's record (egress/decide.py) goes through the same sink as the others."""
    sink = trail(AuditLog(isolated_store))
    run = GuardedRun("aws", ("aws", "iam", "create-access-key"), approved=True)
    call = EgressCall(Settings(), run=run, audit=sink.append)
    operation = {
        "service": "iam",
        "operation": "CreateAccessKey",
        "resource": "user/ci",
        "access": "change",
        "host": "iam.amazonaws.com",
        "method": "POST",
        "digest": "ab" * 32,
    }
    assert (await call.judge(operation)).allow
    assert (await call.judge({**operation, "operation": "ListUsers", "access": "read"})).allow
    (entry,) = await asyncio.to_thread(sink.entries)  # the read left none
    assert entry.kind == "cloud_operation" and entry.actor == ME
    assert entry.record["operation"] == "iam:CreateAccessKey on user/ci"
    assert entry.record["outcome"] == "allowed"
