"""``%pr review NUMBER`` in a real kernel process (issue 44, item 3): carol opened a pull
request (her branch, her token); the engineer's magic asks the agent (scripted model) for
``terraform_plan`` with ``pull_request``, the user allows it through stdin, the head is
checked out in a scratch worktree through the guard, planned by real terraform, and the
plan is posted to the request as a comment carrying its hash and commit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from forge_openapi import GitHubSpec
from forge_support import (
    CAROL_TOKEN,
    PROJECT,
    Site,
    forge_site,
    host_git,
    needs_git_sandbox,
    push_commit,
    reviewer,
    spec_fixture,  # noqa: F401 (the spec fixture)
)
from iac_kernel.forge.body import plan_markers
from iac_kernel.tools.pull_request import subcommand_prompt
from kernel_harness import KernelHarness, scripted_kernel
from terraform_support import needs_terraform

pytestmark = [needs_terraform, *needs_git_sandbox]


@pytest.fixture
def site(outside_tmp: Path, spec: GitHubSpec, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with forge_site(outside_tmp, spec, monkeypatch) as made:
        made.forge.tokens.add(CAROL_TOKEN)
        yield made


def test_pr_review_plans_the_head_and_posts_the_plan(site: Site, outside_tmp: Path):
    host_git("push", "-q", "origin", "main:refs/heads/carol/tags", cwd=site.workspace)
    head = push_commit(
        site, "carol/tags", "main.tf", 'resource "terraform_data" "a" {\n  input = "carol"\n}\n'
    )
    reviewer(site, CAROL_TOKEN).create_pull(base="main", head="carol/tags", title="Carol's")
    prompt = subcommand_prompt("review 1")
    assert prompt is not None and prompt.startswith("Review pull request 1")
    script = outside_tmp / "review.json"
    exchange = {
        "match": "Review pull request 1",
        "turns": [
            {"tool_use": [{"name": "terraform_plan", "input": {"pull_request": 1}}]},
            {"text": "The plan is posted."},
        ],
    }
    script.write_text(json.dumps({"name": "review", "exchanges": [exchange]}))
    env = {
        "IAC_KERNEL_EGRESS_ALLOW": site.settings.egress_allow,
        "IAC_KERNEL_EGRESS_ALLOW_PRIVATE": site.forge.host,
        "IAC_KERNEL_MODE": "accept_edits",
        "IAC_KERNEL_HEADLESS_POLICY": "stdin",
        "IAC_KERNEL_CHECKOV": "off",
        "TF_CLI_CONFIG_FILE": "/dev/null",
        "CHECKPOINT_DISABLE": "1",
    }
    kernel: KernelHarness = scripted_kernel(outside_tmp / "k", site.workspace, script, env)
    prompts: list[str] = []

    def answer(text: str) -> str:
        prompts.append(text)
        return "1"  # allow once

    try:
        result = kernel.execute("%pr review 1", allow_stdin=True, on_stdin=answer)
        assert result.status == "ok", result.reply["content"]
    finally:
        kernel.stop()
    assert len(prompts) == 1 and "scratch worktree" in prompts[0]  # the one question
    [pull] = site.forge.pulls
    [comment] = pull["comments"]
    assert comment["user"] == "alice"  # the engineer's token, not carol's
    [(sha, commit)] = plan_markers(comment["body"])
    assert commit == head
    scratch = site.workspace / ".git" / "iac-kernel" / "reviews" / f"github-1-{head[:12]}"
    plan = scratch / "tfplan"
    assert hashlib.sha256(plan.read_bytes()).hexdigest() == sha
    assert '"carol"' in (scratch / "main.tf").read_text()
    assert "| `+` create | `terraform_data.a` |" in comment["body"]
    assert f"http://{site.forge.host}/{PROJECT}/pull/1#issuecomment-" in result.markdown()
    # the engineer's checkout is as it was
    assert host_git("status", "--porcelain", cwd=site.workspace) == ""
    assert site.forge.problems == []
