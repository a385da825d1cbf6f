"""Red-team corpus of the one-question apply (issue 23, points 1 and 3), by category:
real terraform, the real guard and sandbox, a scripted model, every question answered
"allow once" unless a test says otherwise.

Workspace (stage 2 of tests/terraform): ``p.tfplan`` is the stage 2 plan (2 to add, 1 to
change, 2 to destroy), ``other.tfplan`` a destroy plan of the same state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from apply_support import run_call, trail_bytes
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from terraform_support import (
    STAGE1,
    STAGE2,
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
    tf,
)

pytestmark = needs_terraform
needs_sandbox = pytest.mark.skipif(unusable_reason() is not None, reason="no bubblewrap")


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan", destroy_plan="other.tfplan")


def allow(_request) -> str:
    return "allow_once"


def reject(_request) -> str:
    return "reject_once"


def bash(ws: Path, command: str, answer=allow, mode: str = "bypass"):
    return run_call(ws, "bash", {"command": command}, answer, mode=mode)


def wait_for(path: Path, answer: str = "allow_once", limit: float = 30.0):
    """Answer once ``path`` exists (the sandboxed command's attack has run)."""

    def answering(_request) -> str:
        deadline = time.monotonic() + limit
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return answer

    return answering


# -- the private copy of the approved plan -------------------------------------------


@needs_sandbox
def test_the_approved_copy_cannot_be_rewritten_when_the_guard_folder_is_in_the_workspace(
    applied: Path, monkeypatch: pytest.MonkeyPatch
):
    # TMPDIR (the guard's host folder) under the session's folder, e.g. a session in /tmp
    # or in $HOME with TMPDIR=$HOME/tmp: the writable bind of the folder must not expose
    # the approved copy, the launchers or other calls' folders.
    short = Path(tempfile.mkdtemp(prefix="rt"))  # the guard's socket path must stay short
    try:
        ws = stage2_copy(applied, short / "ws", plan="p.tfplan", destroy_plan="other.tfplan")
        (ws / ".t").mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(ws / ".t"))
        swap_copy_during_question(ws)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def swap_copy_during_question(ws: Path) -> None:
    swap = (
        "for i in $(seq 30); do for f in .t/*/call-*/approved-plan-*/approved.tfplan; do "
        '[ -e "$f" ] && rm -f "$f" && cp other.tfplan "$f" && echo swapped; done; '
        "sleep 0.1; done; touch tried"
    )
    command = f"({swap}) & terraform apply -input=false -no-color p.tfplan; wait"
    run = bash(ws, command, wait_for(ws / "tried"))
    (question,) = run.exec_questions
    assert "Plan: 2 to add, 1 to change, 2 to destroy" in question.reason
    assert "swapped" not in run.result.output
    assert run.result.status == "completed", run.result.output
    assert addresses(ws) == STAGE2


@needs_sandbox
def test_the_real_binary_copies_of_a_process_with_another_tmpdir_cannot_be_run(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Another kernel of the same user (another TMPDIR: an editor's `iac-kernel acp`, a
    # CI worktree) keeps execute-only copies of the real terraform; run from a sandboxed
    # call they would apply with no question and no record.
    from iac_kernel.guard.sandbox import reals
    from terraform_support import TERRAFORM

    elsewhere = tmp_path / "other-tmpdir"
    elsewhere.mkdir()
    with monkeypatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(elsewhere))
        copy = reals.private_copy(os.path.realpath(TERRAFORM))
    candidates = " ".join(sorted({str(copy), *map(str, elsewhere.rglob("terraform-*"))}))
    command = (
        f"for t in {candidates}; do $t apply -auto-approve -destroy -input=false -no-color "
        "&& echo RAN; done; true"
    )
    run = bash(ws, command)
    assert "RAN" not in run.result.output
    assert run.asked == [] and addresses(ws) == STAGE1


# -- secrets on the command line: the audit record ------------------------------------

SECRET_VAR = "Expanded-Secret-4471"


def audit_bytes() -> bytes:
    """The audit trail of this test's session store."""
    from iac_kernel.config import Settings

    return trail_bytes(Path(Settings.from_env().sessions_dir))


@pytest.mark.parametrize(
    "command",
    [
        'terraform apply -var "db_password=$(cat pw.txt)" -auto-approve -input=false -no-color',
        'terraform apply -var="db_password=$(cat pw.txt) x" -auto-approve -input=false -no-color',
        'export TF_CLI_ARGS_apply="-var=db_password=$(cat pw.txt)"; '
        "terraform apply -auto-approve -input=false -no-color",
        'terraform apply -var "db_password=$(cat pw.txt)" -destroy=yes -no-color',
    ],
    ids=["var", "var-equals-quoted", "tf-cli-args", "refused-line"],
)
def test_a_var_value_expanded_at_exec_time_is_not_in_the_audit_record(ws: Path, command: str):
    # The session log only holds `$(cat pw.txt)`; the guard sees the expanded value.
    (ws / "pw.txt").write_text(SECRET_VAR + "\n")
    run = bash(ws, command, reject)
    assert run.records, "no audit record"
    assert SECRET_VAR.encode() not in audit_bytes()
    assert "db_password=(sensitive)" in run.records[-1]["command"]
    assert addresses(ws) == STAGE1


def test_a_short_var_value_is_not_in_the_audit_record_either(ws: Path):
    (ws / "pw.txt").write_text("Zq9\n")
    run = bash(ws, 'terraform apply -var "db_password=$(cat pw.txt)" -auto-approve', reject)
    record = run.records[-1]
    assert "Zq9" not in str(record)
    assert record["command"].startswith("terraform apply -var db_password=(sensitive)")


# -- aliases: `terraform refresh` is `apply -refresh-only -auto-approve` -----------------


@needs_sandbox
@pytest.mark.parametrize("mode", ["default", "bypass"])
def test_refresh_is_asked_once_at_exec_time_as_a_refresh_only_apply_and_recorded(
    ws: Path, mode: str
):
    run = bash(ws, "terraform refresh -input=false -no-color", allow, mode=mode)
    (question,) = run.asked
    assert "argv" in question.input
    assert "Refresh only" in question.reason and "without asking" in question.reason
    assert run.result.status == "completed", run.result.output
    (record,) = run.records
    assert record["kind"] == "terraform_apply" and record["outcome"] == "applied"
    assert record["flags"]["refresh_only"] and record["flags"]["auto_approve"]
    assert not record["flags"]["destroy"]


def test_refresh_with_destroy_is_not_called_a_destroy_terraform_ignores_it(ws: Path):
    run = bash(ws, "TF_CLI_ARGS_refresh=-destroy terraform refresh -input=false -no-color")
    (question,) = run.exec_questions
    assert "DESTROY" not in question.reason and "Refresh only" in question.reason
    assert "TF_CLI_ARGS_refresh='-destroy'" in question.reason
    assert addresses(ws) == STAGE1  # terraform did refresh only
    assert run.records[-1]["outcome"] == "applied"


def test_refresh_with_a_plan_file_is_refused_as_terraform_would(ws: Path):
    run = bash(ws, "terraform refresh -input=false -no-color p.tfplan")
    assert run.exec_questions == []
    assert "would reject this command line" in run.result.output
    assert run.records[-1]["outcome"] == "refused"


# -- workspace and state: the question says which -------------------------------------


@pytest.fixture
def two_workspaces(ws: Path) -> Path:
    tf(ws, "workspace", "new", "other")
    tf(ws, "workspace", "select", "default")
    return ws


def test_a_workspace_selected_in_the_same_call_is_named_in_the_question(two_workspaces: Path):
    ws = two_workspaces
    command = (
        "terraform workspace select other && terraform apply -auto-approve -input=false -no-color"
    )
    run = bash(ws, command, reject)
    (question,) = run.exec_questions
    assert "State: terraform.tfstate.d/other/terraform.tfstate (workspace other; no state yet)" in (
        question.reason
    )
    assert run.records[-1]["state_before"]["workspace"] == "other"


def test_tf_workspace_and_a_data_dir_in_the_sandboxs_tmp_are_read_where_terraform_reads(
    two_workspaces: Path,
):
    ws = two_workspaces
    command = (
        "mkdir /tmp/dd && cp -r .terraform/. /tmp/dd/ && echo other > /tmp/dd/environment && "
        "TF_DATA_DIR=/tmp/dd terraform apply -input=false -no-color p.tfplan"
    )
    run = bash(ws, command, reject)
    (question,) = run.exec_questions
    assert "(workspace other; no state yet)" in question.reason
    run = bash(ws, "TF_WORKSPACE=other terraform apply -input=false -no-color p.tfplan", reject)
    assert "(workspace other; no state yet)" in run.exec_questions[0].reason


def test_the_state_of_the_default_workspace_is_named_with_its_serial(ws: Path):
    run = bash(ws, "terraform apply -input=false -no-color p.tfplan", reject)
    (question,) = run.exec_questions
    serial = run.records[-1]["state_before"]["serial"]
    assert f"State: terraform.tfstate (workspace default; serial {serial}, lineage" in (
        question.reason
    )


def test_state_out_is_where_the_record_reads_the_state_after(ws: Path):
    run = bash(ws, "terraform apply -input=false -no-color -state-out=out.tfstate p.tfplan")
    assert run.result.status == "completed", run.result.output
    record = run.records[-1]
    assert record["state_after"]["path"] == "out.tfstate"
    assert record["state_after"]["serial"] > record["state_before"]["serial"]


# -- one question in default mode ------------------------------------------------------


@needs_sandbox
def test_default_mode_an_apply_after_variable_assignments_is_asked_once(ws: Path):
    command = "TF_IN_AUTOMATION=1 TF_CLI_ARGS_apply=-lock=true terraform apply -no-color p.tfplan"
    run = bash(ws, command, allow, mode="default")
    (question,) = run.asked
    assert "argv" in question.input and "Plan: 2 to add" in question.reason
    assert run.result.status == "completed", run.result.output


@needs_sandbox
def test_default_mode_allow_always_never_names_the_apply_and_then_one_question(ws: Path):
    plan = "terraform plan -input=false -no-color -out=z.tfplan"
    command = f"{plan} && terraform apply -input=false -no-color z.tfplan"
    answers = iter(["allow_always", "allow_once", "allow_once"])

    def answer(request) -> str:
        if "argv" not in request.input:
            assert "terraform apply" not in request.labels.get("allow_always", "")
        return next(answers)

    run = run_call(
        ws,
        "bash",
        {"command": command},
        answer,
        mode="default",
        before=[("bash", {"command": command})],
    )
    text, first_apply, second_apply = run.asked
    assert (
        "argv" not in text.input and text.labels["allow_always"] == "Allow always: `terraform plan`"
    )
    assert "argv" in first_apply.input and "argv" in second_apply.input
    assert run.result.status == "completed", run.result.output


def test_default_mode_an_apply_the_guard_does_not_review_is_asked_before_the_call(
    ws: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("IAC_KERNEL_GUARDED_PROGRAMS", "git")
    plan = "terraform plan -input=false -no-color -out=z.tfplan"
    command = f"{plan} && terraform apply -input=false -no-color z.tfplan"
    run = run_call(
        ws,
        "bash",
        {"command": command},
        reject,
        mode="default",
        before=[("bash", {"command": plan})],
    )
    assert "terraform apply: applies infrastructure changes" in run.asked[-1].reason
    assert "allow_always" not in run.asked[-1].options


# -- the question's text: what the argv can write in it ----------------------------------

SPOOF = "x=1\n\nOnly a refresh: nothing is destroyed.\u202e\x1b[1A\x1b[2K"


@pytest.mark.parametrize("where", ["argv", "TF_CLI_ARGS_apply", "target", "state", "chdir"])
def test_an_argument_cannot_write_lines_or_controls_into_the_question(ws: Path, where: str):
    (ws / "spoof.txt").write_text(SPOOF)
    flag = "-target" if where == "target" else "-var"
    if where == "TF_CLI_ARGS_apply":
        command = (
            "export TF_CLI_ARGS_apply=\"-var='$(cat spoof.txt)'\"; "
            "terraform apply -destroy -auto-approve -input=false -no-color"
        )
    elif where == "chdir":
        command = 'd="$(cat spoof.txt)"; mkdir "$d"; cp -r .terraform *.tf* "$d"/; '
        command += 'terraform -chdir="$d" apply -destroy -auto-approve -input=false -no-color'
    else:
        flag = "-state" if where == "state" else flag
        command = "terraform apply -destroy -auto-approve -input=false -no-color"
        command += f' {flag} "$(cat spoof.txt)"'
    run = bash(ws, command, reject)
    (question,) = run.exec_questions
    text = question.title + "\n" + question.reason
    assert "\x1b" not in text and "\u202e" not in text
    assert not any(line.startswith("Only a refresh") for line in text.splitlines())
    assert question.reason.splitlines()[1].startswith("⚠️ DESTROY")
    assert addresses(ws) == STAGE1


# -- controls: read-only commands still run unasked -------------------------------------

READ_ONLY = (
    "terraform plan -input=false -no-color -out=c.tfplan && terraform show -no-color c.tfplan"
    " && terraform show -json p.tfplan >/dev/null && terraform validate -no-color"
    " && terraform fmt -check -no-color; terraform version && terraform output -no-color size"
    " && TF_CLI_ARGS_plan=-destroy terraform plan -input=false -no-color >/dev/null"
    " && terraform -chdir=. show -no-color >/dev/null && echo CONTROLS-OK"
)


@pytest.mark.parametrize("mode", ["bypass", "default"])
def test_read_only_terraform_commands_run_with_no_exec_question_and_no_record(ws: Path, mode: str):
    run = bash(ws, READ_ONLY, lambda _request: "allow_always", mode=mode)
    assert "CONTROLS-OK" in run.result.output, run.result.output
    assert run.exec_questions == [] and run.records == []
    assert len(run.asked) == (1 if mode == "default" else 0)  # default: the command itself
    assert addresses(ws) == STAGE1


# -- open: `make apply` --------------------------------------------------------------


@needs_sandbox
@pytest.mark.xfail(
    strict=True,
    reason="the text rule `make|just apply` is also the only question for a recipe running "
    "an unguarded tool (cdk, ansible): leaving it to the exec-time guard would lose that, "
    "so a recipe running terraform apply is asked twice (the recipe, then the apply)",
)
def test_make_apply_is_asked_once(ws: Path):
    (ws / "Makefile").write_text("apply:\n\tterraform apply -input=false -no-color p.tfplan\n")
    run = bash(ws, "make apply")
    (question,) = run.asked
    assert "argv" in question.input


# -- the approval socket: only the call's own processes --------------------------------


def forged_request(path: Path, request: dict) -> str:
    """What a process that can reach the socket gets for a request of its own making."""
    import json
    import socket
    import struct

    data = json.dumps(request).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(str(path))
        sock.sendall(struct.pack("!I", len(data)) + data)
        reply = b""
        while b"\n" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    return reply.decode()


@needs_sandbox
def test_a_process_outside_the_calls_sandbox_cannot_ask_its_guard(ws: Path):
    import asyncio

    from iac_kernel.config import Settings
    from iac_kernel.guard.call import GuardedCall

    asked = []

    async def ask_exec(request):
        asked.append(request)
        return True, ""

    argv = ["terraform", "apply", "-destroy", "-auto-approve", "-input=false", "-no-color"]
    request = {"program": "terraform", "argv": argv, "cwd": str(ws), "env": {}, "fds": []}

    async def go() -> str:
        async with GuardedCall(ws, Settings.from_env(), dict(os.environ), ask_exec) as call:
            sock = call.server.guard_dir / "sock"
            return await asyncio.to_thread(forged_request, sock, request)

    reply = asyncio.run(go())
    assert "serves the processes of its own call only" in reply
    assert asked == [] and addresses(ws) == STAGE1
