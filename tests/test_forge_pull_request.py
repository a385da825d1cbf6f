"""The pull_request tool end to end (issue 44, item 1): a real agent loop (scripted model,
real tools, real permission gate) edits a file and calls ``pull_request``; every git
command runs through the guard's sandbox, the push reaches a real ``git http-backend``
on loopback through the egress proxy and the credential broker, and the request is
opened through the real PyGithub against a loopback GitHub Enterprise API that validates
each request and answer against GitHub's published OpenAPI description."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from forge_support import (
    PR,
    PROJECT,
    TOKEN,
    Site,
    host_git,
    needs_git_sandbox,
    pr_question,
    run_session,
    site_fixture,  # noqa: F401 (the site fixture)
    spec_fixture,  # noqa: F401 (the spec fixture)
)
from iac_kernel.egress import broker
from terraform_support import needs_terraform, tf

pytestmark = needs_git_sandbox


async def test_a_session_change_becomes_a_pull_request(site: Site):
    (site.workspace / "unrelated.txt").write_text("not the session's\n")
    result, ask, _ = await run_session(site, PR)
    assert result.status == "completed", result.output
    forge = site.forge
    assert forge.problems == []
    # opened through PyGithub, on the Enterprise API of the remote's host, with the token
    # the broker binds to that host
    [pull] = forge.pulls
    assert (pull["title"], pull["base"]) == ("Bump the input", "main")
    branch = pull["head"]
    assert branch.startswith("iac-kernel/bump-the-input-")
    assert {credential for _m, _p, credential in forge.api_seen} == {f"token {TOKEN}"}
    assert [m for m, p, _c in forge.api_seen] == ["GET", "POST"]
    assert result.raw_output["url"] == f"http://{forge.host}/{PROJECT}/pull/1"
    assert f"http://{forge.host}/{PROJECT}/pull/1" in result.output
    # the question carried the diff and named the host, the branch and the files
    question = pr_question(ask)
    assert question.danger and '-  input = "one"' in question.reason
    assert '+  input = "two"' in question.reason and branch in question.reason
    assert "unrelated.txt" in question.reason  # named as not included
    # the pushed branch holds exactly the session's file and the notebook
    assert '"two"' in site.branch_file(branch, "main.tf")
    bare = forge.repos / f"{PROJECT}.git"
    changed = host_git("--git-dir", str(bare), "diff", "--name-only", "main", branch).split()
    notebook = f".iac-kernel/runs/{branch.replace('/', '-')}.ipynb"
    assert sorted(changed) == sorted(["main.tf", notebook])
    # the user's checkout is as it was: same branch, same index, the edit still unstaged
    assert host_git("symbolic-ref", "--short", "HEAD", cwd=site.workspace).strip() == "main"
    status = host_git("status", "--porcelain", cwd=site.workspace)
    assert " M main.tf" in status and "?? unrelated.txt" in status
    assert not host_git("diff", "--cached", "--name-only", cwd=site.workspace).strip()
    # the body: summary, files, notebook link
    assert "The input goes from one to two." in pull["body"]
    assert f"{PROJECT}/blob/{branch}/{notebook}" in pull["body"]


async def test_the_notebook_is_committed_masked(site: Site, monkeypatch: pytest.MonkeyPatch):
    secret = "Sup3rSecretV4lue-for-the-test-0042"
    monkeypatch.setenv("DEPLOY_PASSWORD", secret)
    summary = f"Rotates nothing; the password {secret} must not leave."
    result, _, _ = await run_session(site, {**PR, "summary": summary})
    assert result.status == "completed", result.output
    [pull] = site.forge.pulls
    notebook = f".iac-kernel/runs/{pull['head'].replace('/', '-')}.ipynb"
    text = site.branch_file(pull["head"], notebook)
    assert '"nbformat": 4' in text and "change the input" in text
    assert "edit_file" in text  # the whole conversation: the tool call that changed it
    assert secret not in text and secret not in pull["body"]
    assert "[REDACTED" in pull["body"]


async def test_the_push_goes_through_the_credential_broker(site: Site):
    """The git server demands a password that only the user's ``~/.git-credentials``
    holds: the sandboxed git sees the broker's placeholder, the proxy swaps the real
    one in on the remote's host, and the push lands."""
    password = "realGitPassw0rd-1a2b3c4d5e"
    forge = site.forge
    forge.git_password = password
    (site.home / ".git-credentials").write_text(f"http://bob:{password}@{forge.host}\n")
    with (site.home / ".gitconfig").open("a") as config:
        config.write("[credential]\n\thelper = store\n")
    site.prepare_broker()
    placeholder = broker.active().swaps[password]
    result, ask, _ = await run_session(site, PR)
    assert result.status == "completed", result.output
    assert f"bob:{password}" in forge.git_seen  # swapped in at the wire
    assert f"bob:{placeholder}" not in forge.git_seen
    [pull] = forge.pulls
    assert '"two"' in site.branch_file(pull["head"], "main.tf")
    # one question: the tool's own (the push's wire operation was part of that approval)
    assert [r.tool_name for r in ask.requests if r.tool_name == "pull_request"] == ["pull_request"]
    assert not [r for r in ask.requests if "cloud_operation" in r.input]


@needs_terraform
async def test_the_body_carries_the_plan_its_hash_binding_and_rule(
    site: Site, monkeypatch: pytest.MonkeyPatch, outside_tmp: Path
):
    rules = outside_tmp / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "data changes"\nwhen = { resource_types = ["terraform_data"] }\n'
        "approvers = 1\n"
    )
    monkeypatch.setenv("IAC_KERNEL_APPROVAL_RULES", str(rules))
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")
    (site.workspace / "main.tf").write_text(
        'resource "terraform_data" "a" {\n  input = "two"\n}\n'
    )  # the plan below is of the edit the session makes
    tf(site.workspace, "init", "-input=false")
    tf(site.workspace, "plan", "-input=false", "-out=tfplan")
    (site.workspace / "main.tf").write_text('resource "terraform_data" "a" {\n  input = "one"\n}\n')
    sha = hashlib.sha256((site.workspace / "tfplan").read_bytes()).hexdigest()
    result, ask, _ = await run_session(site, {**PR, "plan": "tfplan"})
    assert result.status == "completed", result.output
    assert result.raw_output["plan_sha256"] == sha
    [pull] = site.forge.pulls
    body = pull["body"]
    assert f"SHA-256 `{sha}`" in body
    assert "| `+` create | `terraform_data.a` |" in body
    assert "1 to add" in body and "0 to destroy" in body
    assert "- Workspace: `default`" in body and "- Folder:" in body
    assert "## Policy checks (checkov)" in body
    assert "1 approval" in body and "data changes" in body
    # the question showed the plan card beside the diff; the plan was not committed
    question = pr_question(ask)
    assert question.review["plan"]["counts"] == {"create": 1}
    assert "tfplan" not in host_git(
        "--git-dir", str(site.forge.repos / f"{PROJECT}.git"), "ls-tree", "-r", "--name-only",
        pull["head"],
    )  # fmt: skip


async def test_a_gitlab_merge_request(site: Site, monkeypatch: pytest.MonkeyPatch):
    forge = site.forge
    token = "glpat-" + "G1tlabT0ken" * 2
    forge.tokens = {token}
    monkeypatch.delenv("GH_HOST")
    monkeypatch.delenv("GH_ENTERPRISE_TOKEN")
    monkeypatch.setenv("GITLAB_HOST", f"http://{forge.host}")
    monkeypatch.setenv("GITLAB_TOKEN", token)
    site.prepare_broker()
    result, _, _ = await run_session(site, PR)
    assert result.status == "completed", result.output
    assert forge.problems == []
    [merge] = forge.pulls
    assert (merge["target_branch"], merge["title"]) == ("main", "Bump the input")
    assert result.raw_output["url"] == f"http://{forge.host}/{PROJECT}/-/merge_requests/1"
    assert "!1" in result.output and "merge request" in result.output
    assert {c for _m, _p, c in forge.api_seen} == {token}
    assert "/-/blob/" in merge["description"]
    assert '"two"' in site.branch_file(merge["source_branch"], "main.tf")
