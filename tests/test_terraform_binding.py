"""What the question showed is what terraform gets (real terraform, bash through the
guard): a folder, workspace, var file or CLI config changed while the question waits
either does not retarget the run or refuses it; the audit record marks a state lineage
other than the one asked about."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from apply_support import run_call
from iac_kernel.guard.approval.reviews import ExecInfo
from iac_kernel.guard.tfcover.writes import resolve
from iac_kernel.sessions.audit import describe
from iac_kernel.terraform.binding import lineage_check
from iac_kernel.tools.tf_guard import review_exec
from terraform_support import (
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    copy_workspace,
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    state,
    tf,
    to_stage,
)

pytestmark = needs_terraform


def new_lineage(ws: Path) -> str:
    doc = state(ws)
    doc["lineage"] = str(uuid.uuid4())
    (ws / "terraform.tfstate").write_text(json.dumps(doc))
    return doc["lineage"]


@pytest.fixture
def two(applied: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """``root/a`` and ``root/b`` (another lineage), ``root/live -> a``."""
    root = tmp_path / "root"
    root.mkdir()
    a = copy_workspace(applied, root / "a")
    b = copy_workspace(applied, root / "b")
    new_lineage(b)
    (root / "live").symlink_to("a")
    return root, a, b


def swap_then(option: str, change):
    """Answer ``option``; change files while the exec-time question waits."""

    def answer(request) -> str:
        if "argv" in request.input:
            change()
        return option

    return answer


def relink(root: Path, target: str):
    def change() -> None:
        os.replace(_tmp_link(root, target), root / "live")

    return change


def _tmp_link(root: Path, target: str) -> Path:
    tmp = root / f".live-{uuid.uuid4().hex}"
    tmp.symlink_to(target)
    return tmp


@pytest.mark.parametrize(
    "command",
    [
        "terraform -chdir=live destroy -auto-approve -input=false -no-color",
        "terraform -chdir=live apply -auto-approve -input=false -no-color",
        "terraform -chdir=live state rm -no-color terraform_data.app",
        "terraform -chdir=live taint -no-color terraform_data.app",
    ],
)
def test_a_folder_swapped_while_the_question_waits_does_not_retarget(two, command):
    root, a, b = two
    for ws in (a, b):
        to_stage(ws, 2)  # an apply changes either
    before_a, before_b = state(a), state(b)
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", relink(root, "b")))
    assert len(run.exec_questions) == 1  # asked with the folder the link leads to
    assert f"Runs in: {a} " in run.exec_questions[0].reason
    assert state(b) == before_b  # the other folder is untouched
    assert state(a)["serial"] > before_a["serial"], run.result.output  # the asked one ran
    if "destroy" in command or "apply" in command:
        (record,) = run.records
        assert record["outcome"] == "applied" and record["workdir"] == str(a)
        assert record["state_after"]["lineage"] == before_a["lineage"]
        assert "lineage_mismatch" not in record


def test_apply_of_a_saved_plan_runs_in_the_folder_asked_about(two):
    root, a, b = two
    to_stage(a, 2)
    tf(a, "plan", "-input=false", "-out=p.tfplan")
    before_b = state(b)
    command = "terraform -chdir=live apply -input=false -no-color p.tfplan"
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", relink(root, "b")))
    assert run.result.status == "completed", run.result.output
    assert "terraform_data.new[0]" in addresses(a) and state(b) == before_b


def test_a_workspace_selection_changed_while_asked_does_not_retarget(two):
    root, a, _ = two
    tf(a, "workspace", "new", "w2")
    tf(a, "apply", "-auto-approve", "-input=false")
    tf(a, "workspace", "select", "default")
    w2_state = a / "terraform.tfstate.d" / "w2" / "terraform.tfstate"
    w2_before = w2_state.read_text()

    def select_w2() -> None:
        (a / ".terraform" / "environment").write_text("w2")

    command = "terraform -chdir=live destroy -auto-approve -input=false -no-color"
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", select_w2))
    assert "Target: terraform workspace default" in run.exec_questions[0].reason
    assert w2_state.read_text() == w2_before  # w2 untouched
    assert addresses(a) == set(), run.result.output  # default destroyed, as asked
    (record,) = run.records
    assert record["state_before"]["workspace"] == "default"


def test_tf_workspace_in_the_command_is_what_is_asked_and_run(two):
    root, a, _ = two
    tf(a, "workspace", "new", "w2")
    tf(a, "apply", "-auto-approve", "-input=false")
    tf(a, "workspace", "select", "default")
    default_before = state(a)
    command = "TF_WORKSPACE=w2 terraform -chdir=live destroy -auto-approve -input=false -no-color"
    run = run_call(root, "bash", {"command": command}, lambda _r: "allow_once")
    assert "Target: terraform workspace w2" in run.exec_questions[0].reason
    assert state(a) == default_before
    w2 = json.loads((a / "terraform.tfstate.d" / "w2" / "terraform.tfstate").read_text())
    assert w2["resources"] == []


@pytest.mark.parametrize("var_file", ["-var-file=more.tfvars", "auto"])
def test_a_var_file_rewritten_while_asked_refuses_the_run(two, var_file):
    root, a, _ = two
    name = "more.tfvars" if var_file != "auto" else "stage.auto.tfvars"
    (a / name).write_text("stage = 1\n")
    before = state(a)

    def rewrite() -> None:
        (a / name).write_text("stage = 2\n")

    flag = var_file if var_file != "auto" else ""
    command = f"terraform -chdir=live apply -auto-approve -input=false -no-color {flag}"
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", rewrite))
    assert state(a) == before
    (record,) = run.records
    assert (
        record["outcome"] == "refused"
        and "changed while the question waited" in (record["message"])
    )


def test_a_data_folder_swapped_while_asked_does_not_retarget(two):
    root, a, _ = two
    (a / "data-a").mkdir()
    tf_env_copy = dict(os.environ)
    (a / "data").symlink_to("data-a")
    (a / "data-b").mkdir()
    (a / "data-b" / "environment").write_text("w9")

    command = "TF_DATA_DIR=data terraform -chdir=live destroy -auto-approve -input=false -no-color"
    run = run_call(
        root,
        "bash",
        {"command": command},
        swap_then("allow_once", lambda: os.replace(_tmp_link(a, "data-b"), a / "data")),
    )
    assert os.environ == tf_env_copy
    assert addresses(a) == set(), run.result.output  # default workspace, data-a: as asked
    assert not (a / "terraform.tfstate.d" / "w9").exists()


def test_the_state_replaced_while_asked_refuses_the_run(two):
    root, a, b = two
    before = state(b)

    def replace_state() -> None:
        (a / "terraform.tfstate").write_bytes((b / "terraform.tfstate").read_bytes())

    command = "terraform -chdir=live destroy -auto-approve -input=false -no-color"
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", replace_state))
    (record,) = run.records
    assert record["outcome"] == "refused" and "lineage" in record["message"]
    assert state(a) == before  # the copy of b's state was not destroyed either


def test_control_an_unchanged_folder_applies_once_asked(two):
    root, a, _ = two
    to_stage(a, 2)
    command = "terraform -chdir=live apply -auto-approve -input=false -no-color"
    run = run_call(root, "bash", {"command": command}, lambda _r: "allow_once")
    assert len(run.exec_questions) == 1 and run.result.status == "completed"
    assert "terraform_data.new[0]" in addresses(a)
    (record,) = run.records
    assert record["outcome"] == "applied" and "lineage_mismatch" not in record


def info(cwd: Path, private: Path, env: dict, *argv: str) -> ExecInfo:
    private.mkdir(exist_ok=True)
    return ExecInfo("terraform", list(argv), str(cwd), private, "/guard", env)


def test_the_cli_config_is_a_private_copy_and_a_new_one_refuses(two, tmp_path):
    root, _a, _ = two
    config = root / "cli.tfrc"
    config.write_text('plugin_cache_dir = "/nowhere"\n')
    env = {"TF_CLI_CONFIG_FILE": "cli.tfrc"}
    review = review_exec(info(root, tmp_path / "p", env, "terraform", "-chdir=live", "destroy"))
    copy = review.env["TF_CLI_CONFIG_FILE"]
    assert copy.startswith("/guard/")
    config.write_text('plugin_cache_dir = "/elsewhere"\n')
    host_copy = tmp_path / "p" / os.path.relpath(copy, "/guard")
    assert host_copy.read_text() == 'plugin_cache_dir = "/nowhere"\n'
    # No CLI config at question time: one that appears refuses the run.
    home = tmp_path / "home"
    home.mkdir()
    argv = ("terraform", "-chdir=live", "import", "terraform_data.x", "id")
    review = review_exec(info(root, tmp_path / "p", {"HOME": str(home)}, *argv))
    assert review.recheck() is None
    (home / ".terraformrc").write_text("")
    assert "terraformrc changed while the question waited" in review.recheck()


def test_a_lineage_other_than_asked_is_marked_in_the_record(two, tmp_path):
    root, a, _ = two
    review = review_exec(info(root, tmp_path / "p", {}, "terraform", "-chdir=live", "destroy"))
    expected = review.audit["state_before"]["lineage"]
    assert "lineage_mismatch" not in review.after()
    found = new_lineage(a)
    after = review.after()
    assert after["lineage_mismatch"] == {"expected": expected, "found": found}
    record = {**review.audit, **after, "outcome": "applied"}
    assert any("LINEAGE MISMATCH" in line for line in describe(record))
    assert lineage_check({"lineage": None}, {"path": "x", "lineage": "y"}) == {
        "state_after": {"path": "x", "lineage": "y"}
    }


def test_symlinks_are_resolved_as_the_sandbox_sees_them(tmp_path):
    inner, outer = tmp_path / "inner", tmp_path / "outer"
    (outer / "real").mkdir(parents=True)
    inner.mkdir()
    (outer / "link").symlink_to("/tmp/x/real")  # /tmp/x is `outer` in the sandbox

    def host_path(path: str) -> str:
        return str(outer) + path[len("/tmp/x") :] if path.startswith("/tmp/x") else path

    assert resolve("/tmp/x/link/../real/./y", host_path) == "/tmp/x/real/y"
    (outer / "loop").symlink_to("loop")
    with pytest.raises(OSError):
        resolve("/tmp/x/loop", host_path)


def test_workspace_delete_runs_in_the_folder_asked_about(two):
    root, a, b = two
    for ws in (a, b):
        tf(ws, "workspace", "new", "w2")
        tf(ws, "workspace", "select", "default")
    command = "terraform -chdir=live workspace delete -no-color w2"
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", relink(root, "b")))
    assert f"Runs in: {a} " in run.exec_questions[0].reason
    assert not (a / "terraform.tfstate.d" / "w2").exists(), run.result.output
    assert (b / "terraform.tfstate.d" / "w2").exists()


def test_a_workspace_selection_changed_before_workspace_delete_refuses(two):
    root, a, _ = two
    tf(a, "workspace", "new", "w2")
    tf(a, "workspace", "new", "w3")
    tf(a, "workspace", "select", "w3")

    def select_w2() -> None:
        (a / ".terraform" / "environment").write_text("default")

    command = "terraform -chdir=live workspace delete -no-color w2"
    run = run_call(root, "bash", {"command": command}, swap_then("allow_once", select_w2))
    assert "changed while the question waited" in run.result.output
    assert (a / "terraform.tfstate.d" / "w2").exists()


def test_the_apply_tool_runs_in_the_folder_asked_about(two):
    """terraform_apply with ``dir`` a symlink swapped while the question waits (both
    folders hold the same plan bytes): the folder asked about is applied."""
    root, a, b = two
    to_stage(a, 2)
    tf(a, "plan", "-input=false", "-out=p.tfplan")
    (b / "p.tfplan").write_bytes((a / "p.tfplan").read_bytes())
    before_b = state(b)

    def answer(_request) -> str:
        relink(root, "b")()
        return "allow_once"

    run = run_call(root, "terraform_apply", {"plan": "p.tfplan", "dir": "live"}, answer)
    assert state(b) == before_b
    assert "terraform_data.new[0]" in addresses(a), run.result.output
    (record,) = run.records
    assert record["workdir"] == str(a) and "lineage_mismatch" not in record
