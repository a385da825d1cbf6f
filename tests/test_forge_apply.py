"""Apply after review, exactly as reviewed (issue 44, item 2), and plans of a request's
head (item 3), end to end: a real agent loop (scripted model, real tools and gate), real
terraform (``terraform_data``, ``TF_CLI_CONFIG_FILE=/dev/null``), git through the guard
against a real ``git http-backend``, and the requests read, reviewed, merged and commented
through PyGithub against the loopback GitHub Enterprise API that validates every request
and answer against GitHub's OpenAPI description. The reviewers act through their own
PyGithub clients with their own tokens."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from forge_support import (
    BOB_TOKEN,
    CAROL_TOKEN,
    ONE,
    PR,
    PROJECT,
    TOKEN,
    Site,
    host_git,
    opened_with_plan,
    push_commit,
    reviewer,
    run_calls,
    run_session,
    sha_of,
    spec_fixture,  # noqa: F401 (the spec fixture)
    team_site_fixture,  # noqa: F401 (the site fixture)
)
from guard_support import Asker
from iac_kernel.forge import review
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.audit import entries
from iac_kernel.team.store import Identity, open_store
from iac_kernel.terraform import gate
from terraform_support import (
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    tf,
)

pytestmark = [
    needs_terraform,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
]

THREE = ONE.replace('"one"', '"three"')
APPLY = "terraform_apply"


async def apply(site: Site, args: dict[str, Any], ask: Asker | None = None) -> Any:
    [result], _ = await run_calls(site, [(APPLY, args)], ask)
    return result


def applied_input(folder: Path) -> str | None:
    """The input of terraform_data.a in the folder's state, or None: nothing applied."""
    path = folder / "terraform.tfstate"
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    [resource] = [r for r in state["resources"] if r["name"] == "a"]
    return resource["instances"][0]["attributes"]["input"]["value"]


def comments(site: Site, number: int = 1) -> list[dict[str, Any]]:
    return site.forge.pull(PROJECT, number)["comments"]


def one_line(result: Any) -> str:
    assert result.status == "failed", result.output
    line = result.output.removeprefix("Not run: ")
    assert "\n" not in line.strip(), line
    return line


async def test_a_reviewed_merged_request_applies_its_plan_and_says_so(
    site: Site, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
):
    rules = outside_tmp / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "data changes"\nwhen = { resource_types = ["terraform_data"] }\n'
        "approvers = 1\n"
    )
    monkeypatch.setenv("IAC_KERNEL_APPROVAL_RULES", str(rules))
    sha = await opened_with_plan(site)
    [pull] = site.forge.pulls
    assert f"<!-- iac-kernel plan sha256={sha} commit=" in pull["body"]
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    ask = Asker()
    result = await apply(site, {"plan": "tfplan", "pull_request": 1}, ask)
    assert result.status == "completed", result.output
    assert applied_input(site.workspace) == "two"
    forge = site.forge
    assert forge.problems == []
    # the question said what the apply is bound to
    [question] = [r for r in ask.requests if r.tool_name == APPLY]
    merged = forge.rev(PROJECT, "refs/heads/main")
    assert "Bound to pull request #1" in question.review["text"]
    assert "approved on GitHub by bob" in question.review["text"]
    assert f"merged as {merged[:12]}" in question.review["text"]
    # one approval record: the team's rule and the review, bob's approval a vote on it, spent
    store = open_store()
    try:
        [record] = Approvals(store).list(None)
        steps = [
            (e.record.get("step"), e.actor)
            for e in entries(store)
            if e.record.get("kind") == "approval"
        ]
    finally:
        store.close()
    assert record.status == "spent" and record.plan_sha256 == sha
    assert [v.approver for v in record.approvals] == ["bob"]
    assert record.rule == "data changes; GitHub review of pull request #1"
    assert ("approve", "bob") in steps and steps[-1][0] == "spend"
    # the result went back to the request, with the hash and the record's id
    [comment] = comments(site)
    assert comment["user"] == "alice"
    assert comment["body"].startswith("**Applied** by iac-kernel")
    assert sha in comment["body"] and f"`{record.id}`" in comment["body"]
    assert "approved by bob" in comment["body"]
    assert f"posted to pull request #1: http://{forge.host}/{PROJECT}/pull/1#issuecomment-" in (
        result.output
    )
    # the engineer's calls carried the engineer's token only
    assert {c for _m, _p, c in forge.api_seen if c != f"token {BOB_TOKEN}"} == {f"token {TOKEN}"}


async def test_an_approval_by_the_author_alone_is_refused(site: Site):
    await opened_with_plan(site)
    reviewer(site, TOKEN).get_pull(1).create_review(event="APPROVE")  # alice, the author
    reviewer(site).get_pull(1).merge()
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": 1}))
    assert "pull request #1 has no approval of its head" in line
    assert "by anyone but alice" in line
    assert applied_input(site.workspace) is None
    assert comments(site) == []  # refused before the question: nothing posted
    assert site.forge.problems == []


async def test_a_commit_pushed_after_the_plan_is_refused(site: Site):
    await opened_with_plan(site)
    branch = site.forge.pulls[0]["head_ref"]
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    later = push_commit(site, branch, "README.md", "not in the plan\n")
    reviewer(site).get_pull(1).merge()
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": 1}))
    assert f"commit {later[:12]} came to pull request #1 after its plan was made" in line
    assert applied_input(site.workspace) is None


async def test_a_closed_request_is_refused(site: Site):
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).edit(state="closed")
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": 1}))
    assert "pull request #1 is closed without being merged" in line
    assert applied_input(site.workspace) is None


async def test_an_unmerged_request_waits_for_its_merge_unless_the_setting_allows(site: Site):
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": "#1"}))
    assert "is not merged yet" in line and "pr_apply_before_merge" in line
    site.settings.pr_apply_before_merge = True
    url = f"http://{site.forge.host}/{PROJECT}/pull/1"
    result = await apply(site, {"plan": "tfplan", "pull_request": url})
    assert result.status == "completed", result.output
    assert applied_input(site.workspace) == "two"
    assert comments(site)[-1]["body"].startswith("**Applied**")


async def test_a_commit_pushed_while_the_question_waits_is_refused_and_posted(site: Site):
    """Checked again once the user allowed it: the refusal is the result, and the
    request hears of it."""
    await opened_with_plan(site)
    site.settings.pr_apply_before_merge = True
    branch = site.forge.pulls[0]["head_ref"]
    reviewer(site).get_pull(1).create_review(event="APPROVE")

    class PushingAsker(Asker):
        async def __call__(self, request):  # type: ignore[no-untyped-def]
            if request.tool_name == APPLY and "argv" not in request.input:
                push_commit(site, branch, "main.tf", THREE)  # while "the user reads"
            return await super().__call__(request)

    result = await apply(site, {"plan": "tfplan", "pull_request": 1}, PushingAsker())
    assert result.status == "failed", result.output
    assert "came to pull request #1 after its plan was made" in result.output
    assert applied_input(site.workspace) is None
    [comment] = comments(site)
    assert comment["body"].startswith("**Refused** by iac-kernel")
    assert "Nothing was applied." in comment["body"]
    assert site.forge.problems == []


async def test_a_plan_made_again_after_a_change_needs_a_new_approval(site: Site):
    """A change after the review: the request's head is planned again (``terraform_plan``
    with ``pull_request``, as ``%pr review`` asks) and posted; the old plan is no longer
    the request's, and the new one needs an approval of the new head."""
    old_sha = await opened_with_plan(site)
    branch = site.forge.pulls[0]["head_ref"]
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    head = push_commit(site, branch, "main.tf", THREE, "three, after the review")
    [planned], ask = await run_calls(site, [("terraform_plan", {"pull_request": 1})])
    assert planned.status == "completed", planned.output
    assert not ask.exec_questions()  # fetch, worktree, init and plan: nothing to ask
    made = planned.raw_output["pull_request"]
    new_sha, plan_file = made["plan_sha256"], Path(made["plan_file"])
    assert made["head"] == head and new_sha != old_sha
    assert sha_of(plan_file) == new_sha
    gitdir = site.workspace / ".git"
    assert plan_file.is_relative_to(gitdir / "iac-kernel" / "reviews")
    assert "iac-kernel" not in host_git("status", "--porcelain", cwd=site.workspace)
    [comment] = comments(site)
    assert comment["body"].startswith(f"<!-- iac-kernel plan sha256={new_sha} commit={head} -->")
    assert "| `+` create | `terraform_data.a` |" in comment["body"]
    # the old plan is not what the request carries any more
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": 1}))
    assert f"(sha256 {old_sha[:12]}) is not the plan pull request #1 carries" in line
    # the new one was not approved: bob approved the commit before
    scratch = {"plan": "tfplan", "dir": str(plan_file.parent), "pull_request": 1}
    line = one_line(await apply(site, scratch))
    assert f"has no approval of its head {head[:12]}" in line
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    result = await apply(site, scratch)
    assert result.status == "completed", result.output
    assert applied_input(plan_file.parent) == "three"
    assert applied_input(site.workspace) is None
    assert comments(site)[-1]["body"].startswith("**Applied**")
    assert new_sha in comments(site)[-1]["body"]
    assert site.forge.problems == []


async def test_the_merged_configuration_must_be_the_plans(site: Site):
    """A base that changed the configuration meanwhile: the merge commit is not what was
    planned, though the request's head is."""
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    push_commit(site, "main", "extra.tf", 'resource "terraform_data" "b" {}\n', "on main")
    reviewer(site).get_pull(1).merge()
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": 1}))
    assert "does not hold the configuration the plan was made from" in line
    assert "extra.tf is in the commit, not in the plan" in line
    assert applied_input(site.workspace) is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("abc", "'abc' is not a pull request's number (7) or address"),
        (0, "0 is not a pull request's number (they start at 1)"),
        ("https://elsewhere.example/octo/infra/pull/1", "is not a pull request of octo/infra"),
        (9, "has no pull request #9 that the token GH_ENTERPRISE_TOKEN can see (404)"),
    ],
)
async def test_bad_requests_are_one_line(site: Site, given: Any, said: str):
    await opened_with_plan(site)
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": given}))
    assert said in line
    assert applied_input(site.workspace) is None


async def test_a_request_without_a_plan_is_one_line(site: Site):
    result, _, _ = await run_session(site, PR)  # opened with no plan: no marker
    assert result.status == "completed", result.output
    ws = site.workspace
    tf(ws, "init", "-input=false")
    tf(ws, "plan", "-input=false", "-out=tfplan")
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": 1}))
    assert "pull request #1 carries no plan" in line and "%pr review 1" in line


async def test_pull_request_approvals_are_votes_beside_the_teams(
    site: Site, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
):
    """A rule wants two approvals: bob's on the request is one vote on the record, and
    the apply waits for a second person, who approves the same record from a terminal."""
    rules = outside_tmp / "rules.toml"
    rules.write_text('[[rule]]\nname = "two people"\nwhen = { workspace = "*" }\napprovers = 2\n')
    monkeypatch.setenv("IAC_KERNEL_APPROVAL_RULES", str(rules))
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.05)
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    seen: list[list[str]] = []

    def second() -> None:  # carol, in a terminal, while the apply waits
        store = open_store(os.environ["IAC_KERNEL_TEAM_STORE"])
        try:
            book = Approvals(store)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the record, once the request's votes are in
                voted = [r for r in book.list(("pending",)) if r.approvals]
                if voted:
                    break
                time.sleep(0.05)
            [record] = voted
            seen.append([v.approver for v in record.approvals])
            book.approve(record.id, Identity("carol"), plan_sha256=record.plan_sha256)
        finally:
            store.close()

    approver = threading.Thread(target=second, daemon=True)
    approver.start()
    result = await asyncio.wait_for(apply(site, {"plan": "tfplan", "pull_request": 1}), 120)
    approver.join(30)
    assert result.status == "completed", result.output
    assert seen == [["bob"]]  # the request's approval was on the record while it waited
    assert applied_input(site.workspace) == "two"
    comment = comments(site)[-1]["body"]
    assert "approved by bob, carol" in comment


async def test_an_approval_given_on_the_request_while_the_apply_waits_counts(
    site: Site, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
):
    """Two approvals wanted, bob's on the request: the apply waits; carol approves on the
    forge meanwhile (nobody touches the record): the wait reads it and the apply goes on."""
    rules = outside_tmp / "rules.toml"
    rules.write_text('[[rule]]\nname = "two people"\nwhen = { workspace = "*" }\napprovers = 2\n')
    monkeypatch.setenv("IAC_KERNEL_APPROVAL_RULES", str(rules))
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(review, "FORGE_POLL_SECONDS", 0.2)
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    waited: list[str] = []

    def carol_on_the_forge() -> None:
        store = open_store(os.environ["IAC_KERNEL_TEAM_STORE"])
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not waited:
                waited.extend(r.id for r in Approvals(store).list(("pending",)) if r.approvals)
                time.sleep(0.05)
        finally:
            store.close()
        reviewer(site, CAROL_TOKEN).get_pull(1).create_review(event="APPROVE")

    approver = threading.Thread(target=carol_on_the_forge, daemon=True)
    approver.start()
    result = await asyncio.wait_for(apply(site, {"plan": "tfplan", "pull_request": 1}), 120)
    approver.join(30)
    assert waited, "the apply never waited with bob's vote on its record"
    assert result.status == "completed", result.output
    assert applied_input(site.workspace) == "two"
    store = open_store(os.environ["IAC_KERNEL_TEAM_STORE"])
    try:
        record = Approvals(store).get(waited[0])
    finally:
        store.close()
    assert [v.approver for v in record.approvals] == ["bob", "carol"]
    assert "approved by bob, carol" in comments(site)[-1]["body"]


async def test_a_gitlab_merge_request_is_applied_as_reviewed(
    site: Site, monkeypatch: pytest.MonkeyPatch
):
    import gitlab

    forge = site.forge
    alice, bob = "glpat-" + "Al1ceT0ken" * 2, "glpat-" + "B0bT0kenGl" * 2
    forge.tokens = {alice, bob}
    forge.users[bob] = "bob"
    monkeypatch.delenv("GH_HOST")
    monkeypatch.delenv("GH_ENTERPRISE_TOKEN")
    monkeypatch.setenv("GITLAB_HOST", f"http://{forge.host}")
    monkeypatch.setenv("GITLAB_TOKEN", alice)
    site.prepare_broker()
    sha = await opened_with_plan(site)
    as_bob = gitlab.Gitlab(f"http://{forge.host}", private_token=bob)
    merge = as_bob.projects.get(PROJECT).mergerequests.get(1)
    merge.approve()
    line = one_line(await apply(site, {"plan": "tfplan", "pull_request": "!1"}))
    assert "merge request !1 is not merged yet" in line
    merge.merge()
    result = await apply(site, {"plan": "tfplan", "pull_request": 1})
    assert result.status == "completed", result.output
    assert applied_input(site.workspace) == "two"
    [note] = comments(site)
    assert note["user"] == "alice" and note["body"].startswith("**Applied**")
    assert sha in note["body"]
    assert {c for _m, _p, c in forge.api_seen} == {alice, bob}  # each his own client
    assert forge.problems == []
