"""Issue 22, point 4: rules read argv by each program's grammar (unit level; the
end-to-end corpus is tests/test_guard_corpus_issue22.py)."""

from __future__ import annotations

import shlex

import pytest

from iac_kernel.guard.policy.rules import CHANGE, classify


@pytest.mark.parametrize(
    "command",
    [
        "kubectl apply -f x.yaml --dry-run=client",
        "kubectl -n prod delete pod web --dry-run=server",
        "kubectl apply -f x.yaml --server-side --dry-run=server",
        "helm upgrade web ./chart --install --dry-run",
        "kubectl get pods --context prod -o wide",
        "kubectl rollout status deploy/web",
        "kubectl config view",
        "kubectl config get-contexts",
        "helm ls -A",
        "helm template ./chart -f values.yaml",
        "helm repo update",
        "gcloud compute instances list --zone a",
        "gcloud storage ls gs://b",
        "gcloud version",
        "gsutil acl get gs://b",
        "gsutil -m ls -r gs://b",
        "az account show",
        "az vm list -g rg",
        "aws sts get-caller-identity",
        "aws ssm get-parameter --name p",
        "pulumi preview",
        "pulumi pre",
        "pulumi stack ls",
        "pulumi stack",
        "terraform plan",
        "terraform init",
        "git status",
    ],
)
def test_reads_stay_unasked(command):
    words = shlex.split(command)
    assert not classify(words[0], words).changing, command


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("kubectl apply -f x.yaml --field-manager --dry-run", "kubectl apply"),
        ("kubectl run pwn --image=alpine -- --dry-run", "kubectl run"),
        ("helm upgrade --install web ./chart --description --dry-run", "helm upgrade"),
        ("gsutil cp get gs://b/o", "not a known read-only"),
        ("gcloud storage rsync list gs://b", "not a known read-only"),
        ("pulumi down --yes", "pulumi destroy"),
        ("pulumi stack rename x", "pulumi stack rename"),
        ("kubectl krew-thing install", "plugin"),
        ("gcloud auth print-access-token", "prints credentials"),
        ("gcloud container clusters get-credentials c --region r", "kubeconfig"),
        ("kubectl config view --raw", "prints credentials"),
        ("git credential fill", "prints stored credentials"),
        ("terraform console", "file()"),
        ("terraform init -migrate-state", "copies the state"),
    ],
)
def test_changes_and_credential_reads_are_asked(command, why):
    words = shlex.split(command)
    verdict = classify(words[0], words)
    assert verdict.kind == CHANGE and why in verdict.reason, (command, verdict)
