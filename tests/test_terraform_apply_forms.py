"""Every form of apply gets one question bound to what terraform reads (real terraform,
real guard, a scripted model): approve, reject, and a plan swapped during the question.

Workspace (stage 2 of tests/terraform): ``p.tfplan`` is the stage 2 plan (2 to add, 1 to
change, 2 to destroy), ``other.tfplan`` a destroy plan of the same state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from apply_support import APPROVER, run_call
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from terraform_support import (
    STAGE1,
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
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


def swap_to(ws: Path, source: str, target: str):
    """Allow, after copying ``source`` over ``target`` while the question is open."""

    def answer(request) -> str:
        if "argv" in request.input:
            shutil.copyfile(ws / source, ws / target)
        return "allow_once"

    return answer


def bash(ws: Path, command: str, answer, mode: str = "bypass"):
    return run_call(ws, "bash", {"command": command}, answer, mode=mode)


# -- a plan file that is not there when asked --------------------------------------------


def test_a_plan_file_missing_at_review_is_refused_even_if_it_appears_while_waiting(ws: Path):
    run = bash(
        ws,
        "terraform apply -input=false -no-color late.tfplan",
        swap_to(ws, "other.tfplan", "late.tfplan"),
    )
    assert run.exec_questions == []  # refused before any question: nothing reviewed backs it
    assert "Refused: the saved plan late.tfplan is not there" in run.result.output
    assert addresses(ws) == STAGE1
    (record,) = run.records
    assert record["outcome"] == "refused" and record["plan_file"] == "late.tfplan"


# -- -destroy with a saved plan: ignored by terraform; the plan is what is reviewed ----


def test_destroy_flag_with_a_plan_shows_and_applies_the_plan(ws: Path):
    run = bash(ws, "terraform apply -input=false -no-color -destroy p.tfplan", allow)
    (question,) = run.exec_questions
    assert question.reason.splitlines()[1].startswith(
        "⚠️ Apply of the saved plan p.tfplan: 2 to destroy (1 of them replaced)"
    )
    assert "Ignored with a saved plan: -destroy" in question.reason
    assert run.result.status == "completed", run.result.output
    assert "terraform_data.new[0]" in addresses(ws)


def test_destroy_flag_with_a_plan_swapped_during_the_question_is_refused(ws: Path):
    run = bash(
        ws,
        "terraform apply -input=false -no-color -destroy p.tfplan",
        swap_to(ws, "other.tfplan", "p.tfplan"),
    )
    assert len(run.exec_questions) == 1
    assert "Refused: the plan file p.tfplan changed after it was reviewed" in run.result.output
    assert addresses(ws) == STAGE1
    assert run.records[-1]["outcome"] == "refused"


# -- a plan after `--` (a name starting with a dash) ----------------------------------


def test_a_plan_after_double_dash_is_reviewed(ws: Path):
    shutil.copyfile(ws / "other.tfplan", ws / "-x.tfplan")
    run = bash(ws, "terraform apply -input=false -no-color -- -x.tfplan", reject)
    (question,) = run.exec_questions
    assert "Apply of the saved plan -x.tfplan: 4 to destroy" in question.reason
    assert run.result.status == "failed" and addresses(ws) == STAGE1
    # A rejection, not a failure: the card says so and the model reads it first.
    assert run.result.denied
    assert run.result.output.startswith(
        "Permission denied. `terraform apply -input=false -no-color -- -x.tfplan` was not run."
    )


def test_a_plan_after_double_dash_approved_applies_the_reviewed_bytes(ws: Path):
    shutil.copyfile(ws / "other.tfplan", ws / "-x.tfplan")
    run = bash(ws, "terraform apply -input=false -no-color -- -x.tfplan", allow)
    assert run.result.status == "completed", run.result.output
    assert addresses(ws) == set()


# -- arguments from the environment (a sourced file) ----------------------------------


def test_tf_cli_args_apply_destroy_from_a_sourced_file_is_asked_as_a_destroy(ws: Path):
    (ws / "ci.env").write_text('export TF_CLI_ARGS_apply="-destroy"\n')
    run = bash(ws, ". ./ci.env; terraform apply -auto-approve -input=false -no-color", reject)
    (question,) = run.exec_questions
    assert "⚠️ DESTROY: destroys every resource in the state" in question.reason
    assert "From the environment: TF_CLI_ARGS_apply='-destroy'." in question.reason
    assert addresses(ws) == STAGE1
    assert run.records[-1]["outcome"] == "rejected"
    assert run.records[-1]["kind"] == "terraform_destroy"


def test_tf_cli_args_apply_destroy_approved_destroys_and_is_recorded(ws: Path):
    (ws / "ci.env").write_text('export TF_CLI_ARGS_apply="-destroy"\n')
    run = bash(ws, ". ./ci.env; terraform apply -auto-approve -input=false -no-color", allow)
    assert run.result.status == "completed", run.result.output
    assert addresses(ws) == set()
    record = run.records[-1]
    assert record["outcome"] == "applied" and record["exit"] == 0
    assert record["state_after"]["serial"] > record["state_before"]["serial"]


def test_a_plan_file_named_in_tf_cli_args_apply_is_reviewed_and_pinned(ws: Path):
    (ws / "ci.env").write_text('export TF_CLI_ARGS_apply="-input=false d.tfplan"\n')
    shutil.copyfile(ws / "p.tfplan", ws / "d.tfplan")
    run = bash(ws, ". ./ci.env; terraform apply -no-color", swap_to(ws, "other.tfplan", "d.tfplan"))
    (question,) = run.exec_questions
    assert "Apply of the saved plan d.tfplan: 2 to destroy" in question.reason
    assert "Refused: the plan file d.tfplan changed after it was reviewed" in run.result.output
    assert addresses(ws) == STAGE1


def test_a_plan_file_named_in_tf_cli_args_apply_applies_the_reviewed_copy(ws: Path):
    (ws / "ci.env").write_text('export TF_CLI_ARGS_apply="-input=false d.tfplan"\n')
    shutil.copyfile(ws / "p.tfplan", ws / "d.tfplan")
    run = bash(ws, ". ./ci.env; terraform apply -no-color", allow)
    assert run.result.status == "completed", run.result.output
    assert "terraform_data.new[0]" in addresses(ws)
    assert run.records[-1]["plan_file"] == "d.tfplan"


# -- Go flag spellings without a plan -------------------------------------------------


@pytest.mark.parametrize("flag", ["--destroy", "-destroy=1", "-destroy=true", "-destroy=T"])
def test_go_spellings_of_destroy_are_asked_as_a_destroy(ws: Path, flag: str):
    run = bash(ws, f"terraform apply {flag} -auto-approve -input=false -no-color", reject)
    (question,) = run.exec_questions
    assert "⚠️ DESTROY" in question.reason
    assert "-auto-approve: terraform applies without showing its plan" in question.reason
    assert addresses(ws) == STAGE1


def test_a_flag_terraform_rejects_is_refused_without_a_question(ws: Path):
    run = bash(ws, "terraform apply -destroy=yes -auto-approve -no-color", allow)
    assert run.exec_questions == []
    assert 'invalid boolean value "yes" for -destroy' in run.result.output
    assert addresses(ws) == STAGE1


# -- one question per bash apply ------------------------------------------------------


@needs_sandbox
@pytest.mark.parametrize("mode", ["default", "bypass"])
def test_a_bash_apply_is_asked_once_at_exec_time_with_the_plan(ws: Path, mode: str):
    run = bash(ws, "terraform apply -input=false -no-color p.tfplan", allow, mode=mode)
    (question,) = run.asked
    assert question.input["argv"][:2] == ["terraform", "apply"]
    assert "Plan: 2 to add, 1 to change, 2 to destroy" in question.reason
    assert run.result.status == "completed", run.result.output


@needs_sandbox
def test_a_compound_command_asks_the_other_danger_and_the_apply_once_each(ws: Path):
    (ws / "junk").mkdir()
    run = bash(ws, "rm -r junk && terraform apply -input=false -no-color p.tfplan", allow)
    text, exec_question = run.asked
    assert "rm: deletes a directory tree" in text.reason and "Plan:" not in text.reason
    assert "Plan: 2 to add" in exec_question.reason
    assert run.result.status == "completed", run.result.output


def test_the_approver_is_recorded(ws: Path):
    run = bash(ws, "terraform apply -input=false -no-color p.tfplan", allow)
    assert run.records[-1]["approver"] == APPROVER


def test_an_apply_in_a_script_is_asked_once_with_its_plan(ws: Path):
    (ws / "deploy.sh").write_text('#!/bin/sh\nterraform apply -input=false -no-color "$1"\n')
    run = bash(ws, "sh ./deploy.sh p.tfplan", swap_to(ws, "other.tfplan", "p.tfplan"))
    (question,) = run.asked
    assert "Apply of the saved plan p.tfplan: 2 to destroy" in question.reason
    assert "Refused: the plan file p.tfplan changed after it was reviewed" in run.result.output
    assert addresses(ws) == STAGE1


def test_an_exported_tf_cli_args_in_the_command_is_read(ws: Path):
    command = "export TF_CLI_ARGS='-destroy'; terraform apply -auto-approve -no-color"
    run = bash(ws, command, reject)
    (question,) = run.asked
    assert "⚠️ DESTROY" in question.reason and "TF_CLI_ARGS='-destroy'" in question.reason
    assert addresses(ws) == STAGE1


@needs_sandbox
def test_a_plan_in_the_sandboxs_private_tmp_is_the_one_reviewed(ws: Path):
    command = "cp p.tfplan /tmp/x.tfplan && terraform apply -input=false -no-color /tmp/x.tfplan"
    run = bash(ws, command, allow)
    (question,) = run.exec_questions
    assert "Apply of the saved plan /tmp/x.tfplan: 2 to destroy" in question.reason
    assert run.result.status == "completed", run.result.output
    assert "terraform_data.new[0]" in addresses(ws)
