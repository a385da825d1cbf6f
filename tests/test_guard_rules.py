"""Unit tests of the guard's argv rules where the environment or argv[0] matters (the
end-to-end red team is tests/test_guard_redteam.py)."""

from __future__ import annotations

import pytest

from iac_kernel.guard.policy.rules import CHANGE, READ, classify, git_argv


@pytest.mark.parametrize(
    ("argv", "env", "kind"),
    [
        (["terraform"], {"TF_CLI_ARGS": "apply -auto-approve"}, CHANGE),
        (["terraform", "-chdir=x"], {"TF_CLI_ARGS": "destroy"}, CHANGE),
        (["tofu", "plan"], {"TF_CLI_ARGS_plan": "apply"}, CHANGE),
        (["terraform", "plan"], {"TF_CLI_ARGS_plan": "-refresh=false"}, READ),
        (["terraform", "plan"], {"TF_CLI_ARGS": "'unbalanced"}, READ),
        (["terraform"], {}, READ),
        (["pulumi", "refresh"], {"PULUMI_SKIP_CONFIRMATIONS": "true"}, CHANGE),
        # A terminal answers refresh's own prompt (`script`): asked with or without --yes.
        (["pulumi", "refresh"], {"PULUMI_SKIP_CONFIRMATIONS": "false"}, CHANGE),
        (["pulumi", "refresh", "--preview-only"], {"PULUMI_SKIP_CONFIRMATIONS": "1"}, READ),
    ],
)
def test_the_environment_changes_what_runs(argv, env, kind):
    assert classify(argv[0], argv, env).kind == kind


@pytest.mark.parametrize(
    ("value", "dry"),
    [
        *[("", True), ("=client", True), ("=server", True), ("=1", True), ("=True", True)],
        *[("=0", False), ("=f", False), ("=False", False), ("=none", False), ("=", False)],
    ],
)
def test_only_true_dry_run_values_are_dry_runs(value, dry):
    verdict = classify("kubectl", ["kubectl", "delete", "pod", "web", f"--dry-run{value}"])
    assert verdict.kind == (READ if dry else CHANGE)


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        ("aws s3 --region x rm s3://b/k", CHANGE),
        ("aws --region x --output json ec2 describe-instances", READ),
        ("aws sts get-caller-identity", READ),
        ("aws ec2 made-up-verb", CHANGE),
        ("aws s3 ls s3://b", READ),
        ("gcloud compute instances list --zone a", READ),
        ("gcloud compute instances frobnicate vm --zone list", CHANGE),
        ("gsutil -m ls gs://b", READ),
        ("gsutil cp a gs://b", CHANGE),
        ("az vm list -g rg", READ),
        ("az vm frobnicate -g rg", CHANGE),
    ],
)
def test_cloud_verbs_are_read_only_when_known(argv, kind):
    words = argv.split()
    verdict = classify(words[0], words)
    assert verdict.kind == kind
    unlisted = any(w in argv for w in ("frobnicate", "made-up", "gsutil cp"))
    assert verdict.by_default == unlisted


def test_dashed_git_helpers_are_classified_as_git_subcommands():
    assert git_argv(["/usr/lib/git-core/git-push", "-f"]) == ["git", "push", "-f"]
    assert classify("git", ["git-push", "-f", "origin", "main"]).kind == CHANGE
    assert classify("git", ["git-upload-pack", "../r.git"]).kind == READ
    assert classify("git", ["git-receive-pack", "../r.git"]).kind == CHANGE
