"""The argv terraform really parses for apply/destroy (checked against terraform 1.11.4's
own behaviour: `terraform apply FLAGS /nonexistent.tfplan` accepts or rejects them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from iac_kernel.terraform.commands import resolve
from iac_kernel.tools.danger import dangerous_reason
from terraform_support import TERRAFORM, needs_terraform, tf, tf_env


def line(*argv: str, **env: str):
    parsed = resolve(list(argv), env)
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(
    "flag", ["-destroy", "--destroy", "-destroy=1", "-destroy=t", "-destroy=T", "-destroy=TRUE"]
)
def test_go_true_spellings_destroy(flag: str):
    assert line("terraform", "apply", flag).destroy


@pytest.mark.parametrize("flag", ["-destroy=0", "-destroy=false", "--destroy=F"])
def test_go_false_spellings_do_not(flag: str):
    assert not line("terraform", "apply", flag).destroy


@pytest.mark.parametrize("flag", ["-auto-approve", "--auto-approve", "-auto-approve=1"])
def test_auto_approve_spellings(flag: str):
    assert line("terraform", "destroy", flag).auto_approve
    assert not line("terraform", "destroy", flag, "--auto-approve=false").auto_approve


def test_a_bool_flag_does_not_take_the_next_word():
    parsed = line("terraform", "apply", "-destroy", "1")
    assert parsed.plan == "1" and not parsed.destroy  # with a plan, -destroy is ignored
    assert parsed.ignored_with_plan() == ["-destroy"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["-destroy=yes"], 'invalid boolean value "yes" for -destroy'),
        (["---destroy"], "bad flag syntax: ---destroy"),
        (["-no-color=true"], "flag provided but not defined: -no-color"),
        (["-exclude=a.b"], "flag provided but not defined: -exclude"),
        (["-var"], "flag needs an argument: -var"),
        (["a.tfplan", "b.tfplan"], "too many command line arguments"),
    ],
)
def test_what_terraform_rejects(argv: list[str], error: str):
    assert line("terraform", "apply", *argv).error.startswith(error)


def test_value_flags_take_the_next_word_whatever_it_is():
    parsed = line("terraform", "apply", "-target", "-x", "-var", "a=b", "p.tfplan")
    assert parsed.option("target") == ["-x"] and parsed.plan == "p.tfplan"


def test_double_dash_ends_the_flags_and_view_tokens_go_anywhere():
    parsed = line("terraform", "apply", "-input=false", "--", "-x.tfplan", "-no-color")
    assert parsed.plan == "-x.tfplan" and parsed.error is None
    assert parsed.run_argv("/g/c") == ["terraform", "apply", "-no-color", "-input=false", "/g/c"]


def test_environment_arguments_go_after_the_subcommand_apply_ones_first():
    parsed = line(
        "terraform",
        "-chdir=ws",
        "apply",
        "-auto-approve",
        TF_CLI_ARGS="-lock=false",
        TF_CLI_ARGS_apply="-destroy",
        TF_CLI_ARGS_plan="-refresh=false",
        tf_cli_args_apply="p.tfplan",  # names are exact (Go reads the environment as is)
    )
    assert parsed.args == ["-destroy", "-lock=false", "-auto-approve"]
    assert parsed.shown() == "terraform -chdir=ws apply -destroy -lock=false -auto-approve"
    assert parsed.destroy and parsed.chdir == "ws"
    assert parsed.env_names() == ["TF_CLI_ARGS", "TF_CLI_ARGS_apply"]


def test_the_subcommand_can_come_from_tf_cli_args():
    parsed = line("terraform", TF_CLI_ARGS="apply -auto-approve", TF_CLI_ARGS_apply="-destroy")
    assert parsed.subcommand == "apply" and parsed.auto_approve
    assert not parsed.destroy  # TF_CLI_ARGS_apply is read only when argv names apply


def test_destroy_reads_its_own_variable_and_takes_no_plan():
    assert line("tofu", "destroy", TF_CLI_ARGS_apply="x.tfplan").error is None
    assert line("terraform", "destroy", TF_CLI_ARGS_destroy="x.tfplan").error.startswith(
        "destroy takes no positional"
    )


@pytest.mark.parametrize("value", ["-destroy; x", "a | b", "`x`", "$(x)", "'unclosed"])
def test_environment_values_a_shell_split_cannot_match_are_refused(value: str):
    assert line("terraform", "apply", TF_CLI_ARGS_apply=value).error


def test_chdir_needs_an_equals_sign_and_other_top_flags_are_rejected():
    assert line("terraform", "-chdir", "ws", "apply").error.startswith("-chdir needs")
    assert line("terraform", "-foo", "apply").error.startswith("invalid flags before")


def test_help_and_version_apply_nothing():
    assert line("terraform", "apply", "-help").no_op == "help"
    assert line("terraform", "apply", TF_CLI_ARGS="-v").no_op == "version"


def test_other_subcommands_are_not_applies():
    assert resolve(["terraform", "plan", "-destroy"], {}) is None
    assert resolve(["kubectl", "apply"], {}) is None


@pytest.mark.parametrize(
    "command",
    [
        "terraform apply p.tfplan",
        "terraform apply --destroy -auto-approve",
        "cd ws && tofu destroy",
        "bash -c 'terraform apply'",
    ],
)
def test_the_text_check_leaves_reviewed_applies_to_exec_time(command: str):
    assert dangerous_reason(command) is not None  # no exec-time review: asked here
    assert dangerous_reason(command, frozenset({"terraform", "tofu"})) is None


def test_the_text_check_still_asks_for_other_dangers_beside_an_apply():
    reviewed = frozenset({"terraform", "tofu"})
    assert dangerous_reason("terraform apply p && rm -rf /x", reviewed).startswith("rm")
    assert dangerous_reason("terraform state rm x", reviewed).startswith("terraform state rm")


@pytest.mark.parametrize(
    "command",
    [
        "./terraform apply p.tfplan",  # a copy off PATH is not the guard's launcher
        "/tmp/dl/terraform apply p.tfplan",
        "PATH=/tmp/dl:$PATH terraform apply p.tfplan",
        "export PATH=/tmp/dl; terraform apply p.tfplan",
        "hash -p /tmp/dl/terraform terraform; terraform apply p.tfplan",
    ],
)
def test_the_text_check_still_asks_when_the_name_may_miss_the_launcher(command: str):
    assert dangerous_reason(command, frozenset({"terraform", "tofu"})) is not None


def test_without_a_sandbox_the_text_check_asks_too(monkeypatch: pytest.MonkeyPatch, tool_ctx):
    from iac_kernel.tools import bash

    args = {"command": "terraform apply p.tfplan"}
    tool = bash.BashTool()
    monkeypatch.setattr(bash, "unusable_reason", lambda: None)
    assert tool.gate_reason(args, tool_ctx) == (False, None)
    assert tool.asked_at_exec(args, tool_ctx)
    monkeypatch.setattr(bash, "unusable_reason", lambda: "bwrap is not installed")
    # Reduced guard: a command of bare-name applies only still reaches the launcher...
    assert tool.gate_reason(args, tool_ctx) == (False, None)
    # ... anything else may start terraform past it (a sourced file, a script): asked here.
    sourced = {"command": ". ./ci.env; terraform apply p.tfplan"}
    assert tool.gate_reason(sourced, tool_ctx)[0] and not tool.asked_at_exec(sourced, tool_ctx)
    tool_ctx.settings.guarded_programs = "kubectl"  # terraform not guarded: asked here
    monkeypatch.setattr(bash, "unusable_reason", lambda: None)
    assert tool.gate_reason(args, tool_ctx)[0]


@needs_terraform
@pytest.mark.parametrize(
    "env",
    [
        {"TF_CLI_ARGS": "-destroy=false", "TF_CLI_ARGS_apply": "-destroy"},
        {"TF_CLI_ARGS": "-destroy", "TF_CLI_ARGS_apply": "-destroy=false"},
        {"TF_CLI_ARGS_apply": "--destroy"},
        {"TF_CLI_ARGS": "-destroy=0"},
    ],
)
def test_the_replay_agrees_with_terraform(tmp_path: Path, env: dict[str, str]):
    (tmp_path / "main.tf").write_text('resource "terraform_data" "a" {\n  input = "x"\n}\n')
    tf(tmp_path, "apply", "-auto-approve", "-input=false")
    argv = ["terraform", "apply", "-auto-approve", "-input=false", "-no-color"]
    done = subprocess.run(
        [TERRAFORM, *argv[1:]], cwd=tmp_path, env={**tf_env(), **env}, capture_output=True
    )
    destroyed = b"1 destroyed" in done.stdout
    assert resolve(argv, env).destroy is destroyed, done.stdout.decode()
