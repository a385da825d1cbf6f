"""A rule's ``group`` and approvals given on the request (issue 44, item 2): the forge
says which of the record's groups each approver belongs to, through the same client
(PyGithub: the team of that slug of the repository's owner organization; python-gitlab:
the group of that full path, membership inherited from the groups above it included).

The clients are asked directly against the loopback forge (its GitHub API validated
against GitHub's OpenAPI description), then applies run end to end as in
``test_forge_apply.py``: a real agent loop, real terraform, git through the guard, the
reviewers acting through their own clients and tokens."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forge_openapi import GitHubSpec
from forge_support import (
    CAROL_TOKEN,
    PROJECT,
    TOKEN,
    Site,
    opened_with_plan,
    reviewer,
    run_calls,
    running_forge,
    spec_fixture,  # noqa: F401 (the spec fixture)
    team_site,
    user_id,
)
from iac_kernel.forge.clients import GitHubClient, GitLabClient, Token
from iac_kernel.forge.remote import forge_of
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.audit import entries
from iac_kernel.team.store import open_store
from iac_kernel.terraform import gate
from terraform_support import (
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
needs_sandbox = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

GL_ALICE, GL_BOB, GL_CAROL = ("glpat-" + n * 2 for n in ("Al1ceT0ken", "B0bT0kenGl", "C4r0lT0ken"))


# -- the clients ------------------------------------------------------------------------


@needs_git
def test_github_says_who_is_in_the_owners_teams(outside_tmp: Path, spec: GitHubSpec):
    with running_forge(outside_tmp, spec, (PROJECT,)) as forge:
        forge.tokens.add(TOKEN)
        forge.teams["octo/platform"] = {"bob": "active", "dave": "pending"}
        forge.teams["octo/dba"] = {"carol": "active"}
        remote = forge_of("origin", forge.url(PROJECT), {"GH_HOST": forge.host})
        client = GitHubClient(remote, Token("GH_ENTERPRISE_TOKEN", TOKEN))
        bob = client.groups_of("bob", ["platform", "dba", "security", "infra/platform"])
        carol = client.groups_of("carol", {"platform", "dba"})
        dave = client.groups_of("dave", ["platform"])
        before = len(forge.api_seen)
        assert client.groups_of("bob", []).groups == frozenset()
        assert len(forge.api_seen) == before  # nothing asked when no group is wanted
    assert bob.groups == {"platform"}
    assert bob.not_counted == {
        "dba": "bob is not a member of the GitHub team octo/dba",
        "security": "the GitHub team octo/security does not exist or the token "
        "GH_ENTERPRISE_TOKEN cannot see it (404 Not Found)",
        "infra/platform": "'infra/platform' is not a GitHub team's slug (the teams of octo "
        "are named by slug)",
    }
    assert carol.groups == {"dba"}
    assert set(carol.not_counted) == {"platform"}
    assert dave.groups == frozenset()
    assert dave.not_counted == {
        "platform": "dave's membership of the GitHub team octo/platform is pending, not active"
    }
    asked = [p for m, p, _c in forge.api_seen if p.startswith("/orgs/")]
    assert "/orgs/octo/teams/platform/memberships/bob" in asked
    assert all(m == "GET" for m, _p, _c in forge.api_seen)
    assert forge.problems == []  # every request and answer is GitHub's, by its description


@needs_git
def test_a_repository_owned_by_a_user_has_no_teams(outside_tmp: Path, spec: GitHubSpec):
    with running_forge(outside_tmp, spec, ("solo/infra",)) as forge:
        forge.tokens.add(TOKEN)
        remote = forge_of("origin", forge.url("solo/infra"), {"GH_HOST": forge.host})
        client = GitHubClient(remote, Token("GH_ENTERPRISE_TOKEN", "ghp_" + "wrong" * 8))
        refused = client.groups_of("bob", ["platform"])
    assert refused.groups == frozenset()
    # a token the forge refuses: the team cannot be read, and that is the reason
    assert refused.not_counted["platform"].startswith(
        "the GitHub team solo/platform cannot be read with the token GH_ENTERPRISE_TOKEN (401"
    )
    assert forge.problems == []


@needs_git
def test_gitlab_says_who_is_in_a_group_or_above_it(outside_tmp: Path):
    with running_forge(outside_tmp, None, (PROJECT,)) as forge:
        forge.tokens.add(GL_ALICE)
        forge.teams["infra"] = {"bob": "active"}
        forge.teams["infra/platform"] = {"erin": "active", "dave": "awaiting"}
        env = {"GITLAB_HOST": f"http://{forge.host}"}
        client = GitLabClient(forge_of("origin", forge.url(PROJECT), env), Token("T", GL_ALICE))
        bob = client.groups_of("bob", ["infra/platform", "ops"])
        erin = client.groups_of("erin", ["infra/platform", "infra"])
        carol = client.groups_of("carol", ["infra/platform"])
        dave = client.groups_of("dave", ["infra/platform"])
        nobody = client.groups_of("mallory", ["infra"])
        asked = [p for _m, p, _c in forge.api_seen]
    assert bob.groups == {"infra/platform"}  # inherited from infra
    assert bob.not_counted == {
        "ops": "the GitLab group ops does not exist or the token T cannot see it "
        "(404 404 Group Not Found)"
    }
    assert erin.groups == {"infra/platform"}
    assert erin.not_counted == {
        "infra": "erin is not a member of the GitLab group infra (nor of a group above it)"
    }
    assert carol.groups == frozenset()
    assert carol.not_counted == {
        "infra/platform": "carol is not a member of the GitLab group infra/platform "
        "(nor of a group above it)"
    }
    assert dave.not_counted == {
        "infra/platform": "dave's membership of the GitLab group infra/platform is awaiting, "
        "not active"
    }
    assert nobody.not_counted == {"infra": "GitLab has no user mallory"}
    assert "/users" in asked
    assert f"/groups/infra%2Fplatform/members/all/{user_id('bob')}" in asked
    assert forge.problems == []


# -- applies bound to a request ---------------------------------------------------------


@pytest.fixture
def site(outside_tmp: Path, spec: GitHubSpec, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    # An approval nobody gives ends soon: the apply's wait then ends with its reason.
    monkeypatch.setenv("IAC_KERNEL_APPROVAL_TTL", "4")
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.05)
    with team_site(outside_tmp, spec, monkeypatch, rule("platform")) as made:
        made.forge.teams["octo/platform"] = {"bob": "active"}
        yield made


def rule(group: str) -> str:
    return (
        f'[[rule]]\nname = "{group} people"\nwhen = {{ workspace = "*" }}\napprovers = 1\n'
        f'group = "{group}"\n'
    )


async def apply(site: Site) -> Any:
    [result], _ = await run_calls(
        site, [("terraform_apply", {"plan": "tfplan", "pull_request": 1})]
    )
    return result


def applied_input(folder: Path) -> str | None:
    path = folder / "terraform.tfstate"
    if not path.exists():
        return None
    [resource] = json.loads(path.read_text())["resources"]
    return resource["instances"][0]["attributes"]["input"]["value"]


def records() -> list[Any]:
    store = open_store()
    try:
        return Approvals(store).list(None)
    finally:
        store.close()


@needs_terraform
@needs_git
@needs_sandbox
async def test_an_approver_in_the_forge_team_satisfies_the_group_rule(site: Site):
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    result = await apply(site)
    assert result.status == "completed", result.output
    assert applied_input(site.workspace) == "two"
    [record] = records()
    assert record.status == "spent" and record.groups == {"platform": 1}
    [vote] = record.approvals
    assert vote.approver == "bob" and vote.groups == {"platform"}
    assert vote.note is not None and vote.note.startswith("approved pull request #1 (")
    assert vote.note.endswith("on GitHub")
    store = open_store()
    try:
        steps = [(e.record.get("step"), e.actor) for e in entries(store)]
    finally:
        store.close()
    assert ("approve", "bob") in steps and steps[-1][0] == "spend"
    asked = [p for _m, p, _c in site.forge.api_seen if p.startswith("/orgs/")]
    assert asked == ["/orgs/octo/teams/platform/memberships/bob"]  # the record's group only
    comment = site.forge.pull(PROJECT, 1)["comments"][-1]["body"]
    assert comment.startswith("**Applied**") and "approved by bob" in comment
    assert site.forge.problems == []


@needs_terraform
@needs_git
@needs_sandbox
async def test_an_approver_outside_the_team_is_not_counted_and_the_reason_said(site: Site):
    await opened_with_plan(site)
    reviewer(site, CAROL_TOKEN).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    result = await apply(site)
    assert result.status == "failed", result.output
    line, *rest = result.output.splitlines()  # the refusal's one line, then where it went
    assert rest[-1].startswith("The result was posted to pull request #1"), rest
    assert line.startswith("Not applied: approval ")
    assert "expired" in line and "before enough people approved it" in line
    assert (
        "Not counted: carol's approval on GitHub does not count for platform (carol is not "
        "a member of the GitHub team octo/platform)." in line
    )
    assert applied_input(site.workspace) is None
    [record] = records()
    assert record.status == "expired" and record.approvals == ()  # never a vote
    comment = site.forge.pull(PROJECT, 1)["comments"][-1]["body"]
    assert comment.startswith("**Refused**") and "octo/platform" in comment
    assert site.forge.problems == []


@needs_terraform
@needs_git
@needs_sandbox
async def test_a_team_that_does_not_exist_counts_nobody(site: Site, outside_tmp: Path):
    (outside_tmp / "rules.toml").write_text(rule("dba"))
    await opened_with_plan(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    result = await apply(site)
    assert result.status == "failed", result.output
    assert (
        "bob's approval on GitHub does not count for dba (the GitHub team octo/dba does not "
        "exist or the token GH_ENTERPRISE_TOKEN cannot see it (404 Not Found))" in result.output
    )
    assert applied_input(site.workspace) is None
    [record] = records()
    assert record.approvals == ()
    assert site.forge.problems == []


def to_gitlab(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same forge as GitLab: alice's, bob's and carol's tokens."""
    forge = site.forge
    forge.tokens = {GL_ALICE, GL_BOB, GL_CAROL}
    forge.users.update({GL_BOB: "bob", GL_CAROL: "carol"})
    forge.teams = {"infra": {"bob": "active"}, "infra/platform": {"erin": "active"}}
    (site.workspace.parent / "rules.toml").write_text(rule("infra/platform"))
    monkeypatch.delenv("GH_HOST")
    monkeypatch.delenv("GH_ENTERPRISE_TOKEN")
    monkeypatch.setenv("GITLAB_HOST", f"http://{forge.host}")
    monkeypatch.setenv("GITLAB_TOKEN", GL_ALICE)
    site.prepare_broker()


def gitlab_approve(site: Site, token: str) -> None:
    import gitlab

    merge = gitlab.Gitlab(f"http://{site.forge.host}", private_token=token)
    merge = merge.projects.get(PROJECT).mergerequests.get(1)
    merge.approve()
    merge.merge()


@needs_terraform
@needs_git
@needs_sandbox
async def test_gitlab_a_member_above_the_subgroup_counts(
    site: Site, monkeypatch: pytest.MonkeyPatch
):
    to_gitlab(site, monkeypatch)
    await opened_with_plan(site)
    gitlab_approve(site, GL_BOB)
    result = await apply(site)
    assert result.status == "completed", result.output
    assert applied_input(site.workspace) == "two"
    [record] = records()
    [vote] = record.approvals
    assert record.groups == {"infra/platform": 1}
    assert vote.approver == "bob" and vote.groups == {"infra/platform"}
    assert vote.note is not None and vote.note.endswith("on GitLab")
    assert site.forge.problems == []


@needs_terraform
@needs_git
@needs_sandbox
async def test_gitlab_a_non_member_is_not_counted(site: Site, monkeypatch: pytest.MonkeyPatch):
    to_gitlab(site, monkeypatch)
    await opened_with_plan(site)
    gitlab_approve(site, GL_CAROL)
    result = await apply(site)
    assert result.status == "failed", result.output
    assert (
        "carol's approval on GitLab does not count for infra/platform (carol is not a member "
        "of the GitLab group infra/platform (nor of a group above it))" in result.output
    )
    assert applied_input(site.workspace) is None
    assert records()[0].approvals == ()
    assert site.forge.problems == []
