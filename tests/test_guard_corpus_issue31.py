"""Issue 31, item 4: verbs are judged by what they can do. Read verbs that would run
code the call controls (a retargeting variable or file: config files, plugin folders,
PATH for exec plugins and credential helpers, terraform's CLI config and plugin cache in
a writable place) and read verbs that print or send a credential (every spelling) are
asked per call at exec time and never reach the program when rejected; the question
names the variable that retargets it. Safe controls run unasked. Real bwrap and bash,
fake CLIs on PATH (tests/test_guard_corpus_issue22.py)."""

from __future__ import annotations

import pytest

from guard_support import Asker, Harness, gather_limited, make_fakes
from iac_kernel.agent.permissions import ALLOW_ALWAYS
from iac_kernel.guard.policy.rules import classify
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from test_guard_corpus_issue22 import _bypass, home  # noqa: F401  (a fixture)

sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

#: (command, the variable the question must name).
CODE_RUNNING: list[tuple[str, str]] = [
    ("export PATH=$PWD/bin:$PATH; kubectl get pods", "PATH"),
    ("PATH=$PWD/bin:$PATH aws s3 ls", "PATH"),
    ("export PATH=/tmp/bin:$PATH; helm status web", "PATH"),
    ("KUBECONFIG=$PWD/kc.yaml kubectl get pods", "KUBECONFIG"),
    ("HELM_PLUGINS=$PWD/plugins helm list", "HELM_PLUGINS"),
    ("HELM_CONFIG_HOME=$PWD/h helm list", "HELM_CONFIG_HOME"),
    ("AWS_CONFIG_FILE=$PWD/aws.cfg aws s3 ls", "AWS_CONFIG_FILE"),
    ("CLOUDSDK_CONFIG=$PWD/gc gcloud compute instances list", "CLOUDSDK_CONFIG"),
    ("AZURE_CONFIG_DIR=$PWD/az az vm list", "AZURE_CONFIG_DIR"),
    ("PULUMI_HOME=$PWD/ph pulumi preview", "PULUMI_HOME"),
    ("TF_CLI_CONFIG_FILE=$PWD/dev.tfrc terraform plan", "TF_CLI_CONFIG_FILE"),
    ("export TERRAFORM_CONFIG=/tmp/x.tfrc; terraform validate", "TERRAFORM_CONFIG"),
    ("TF_PLUGIN_CACHE_DIR=/tmp/cache terraform plan", "TF_PLUGIN_CACHE_DIR"),
    ("HOME=$PWD terraform plan", "HOME"),
    ("TF_CLI_ARGS_init=-plugin-dir=$PWD/p terraform init", "TF_CLI_ARGS_init"),
    ("XDG_CONFIG_HOME=$PWD/x az vm list", "XDG_CONFIG_HOME"),
]
CREDENTIAL_PRINTING = [
    "kubectl get secret db -o yaml",
    "kubectl get secrets -ojson",
    "kubectl -n prod get secret/db -o=jsonpath={.data.password}",
    "kubectl get secrets.v1 db --output=go-template={{.data}}",
    "kubectl get cm,secret --output json",
    "kubectl get secret db --template={{.data}}",
    "kubectl get --raw /api/v1/namespaces/prod/secrets",
    "kubectl config view --raw",
    "kubectl --context prod config view --minify --raw",
    "helm get values web",
    "helm get all web -n prod",
    "helm get manifest web",
    "aws configure export-credentials --format env",
    "aws s3 presign s3://b/k --expires-in 60",
    "aws --region=eu-west-1 s3 presign s3://b/k",
    "aws ecr get-login-password",
    "aws sts assume-role --role-arn arn:aws:iam::1:role/x --role-session-name s",
    "gcloud auth print-access-token",
    "gcloud auth print-identity-token --audiences=x",
    "az account get-access-token",
    "az keyvault secret show --vault-name v -n s",
    "az storage account generate-sas --account-name a --permissions r",
    "az storage container generate-sas -n c --account-name a",
    "az functionapp keys list -n f -g rg",
    "az acr credential show -n r",
]
#: Reads that must run unasked (the session's own environment is not changed).
SAFE = [
    "git status",
    "kubectl get pods",
    "kubectl get secret",
    "kubectl get secrets -o name",
    "kubectl describe secret db",
    "kubectl get pods -o yaml",
    "helm get notes web",
    "helm list",
    "aws s3 ls",
    "gcloud compute instances list",
    "az vm list",
    "terraform plan",
    "TF_CLI_CONFIG_FILE=/dev/null terraform plan",
    "TF_LOG=info terraform validate",
    "AWS_REGION=eu-west-1 aws s3 ls",
]


def test_corpus_sizes():
    assert len(CODE_RUNNING) >= 12 and len(CREDENTIAL_PRINTING) >= 20 and len(SAFE) >= 10


def test_credential_printing_verbs_are_changing_by_their_argv():
    for command in CREDENTIAL_PRINTING:
        words = command.split()
        assert classify(words[0], words).changing, command


@sandboxed
async def test_each_form_is_asked_naming_what_retargets_it(tmp_path, home):  # noqa: F811
    commands = [c for c, _ in CODE_RUNNING] + CREDENTIAL_PRINTING
    outcomes = await gather_limited(
        [_bypass(tmp_path / f"c{i}", c) for i, c in enumerate(commands)], 4
    )
    named = dict(CODE_RUNNING)
    problems = []
    for command, questions, ran in outcomes:
        if not questions:
            problems.append(f"never asked: {command!r} (ran: {ran})")
            continue
        if ran:
            problems.append(f"reached the program: {command!r}: {ran}")
        if any(ALLOW_ALWAYS in q.options for q in questions):
            problems.append(f"offered always: {command!r}")
        variable = named.get(command)
        if variable and not any(f"{variable}" in q.reason for q in questions):
            problems.append(f"question does not name {variable}: {questions[0].reason!r}")
    assert not problems, "\n".join(problems)


@sandboxed
async def test_safe_reads_run_unasked(tmp_path, home):  # noqa: F811
    outcomes = await gather_limited([_bypass(tmp_path / f"s{i}", c) for i, c in enumerate(SAFE)], 4)
    problems = [f"{c!r}: asked {q[0].reason!r}" for c, q, _ran in outcomes if q]
    problems += [f"{c!r}: did not run" for c, q, ran in outcomes if not q and not ran]
    assert not problems, "\n".join(problems)


@sandboxed
async def test_real_terraform_plan_and_git_status_run_unasked(
    tmp_path, outside_tmp, monkeypatch: pytest.MonkeyPatch
):
    """Controls with the real programs: ``terraform plan`` of a ``terraform_data``
    workspace, ``git status`` in a plain repository."""
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")
    bin_dir, log = make_fakes(tmp_path)
    for name in ("terraform", "git"):
        (bin_dir / name).unlink()  # the real ones on PATH
    harness = Harness(outside_tmp / "ws", bin_dir, log, mode="bypass")
    (harness.cwd / "main.tf").write_text('resource "terraform_data" "x" {\n  input = "a"\n}\n')
    ask = Asker()
    result = await harness.run(
        "terraform init -input=false >/dev/null && terraform plan -input=false -no-color "
        "&& git init -q . && git status --short",
        ask,
        timeout=120,
    )
    assert result is not None and not ask.exec_questions(), [q.reason for q in ask.requests]
    assert "Plan: 1 to add" in result.content, result.content
    assert "?? main.tf" in result.content
