"""Bad input for a pull request (issue 44, item 4): no remote, a remote on no known forge,
a token missing (or only one for another host), a token refused, a branch that exists
here or on the remote, no change, a forge that refuses after the push. Each is one
readable line, through the real agent loop, and nothing stays pushed."""

from __future__ import annotations

import pytest

from forge_support import (
    PR,
    PROJECT,
    Site,
    host_git,
    needs_git_sandbox,
    run_session,
    site_fixture,  # noqa: F401 (the site fixture)
    spec_fixture,  # noqa: F401 (the spec fixture)
)
from guard_support import Asker
from iac_kernel.agent.permissions import ALLOW_ONCE

pytestmark = needs_git_sandbox


async def refused(site: Site, pr: dict | None = None, ask: Asker | None = None, **kw) -> str:
    """Run the session; the call failed with one line, and the remote has only main."""
    result, _, _ = await run_session(site, pr or PR, ask, **kw)
    assert result.status == "failed", result.output
    line = result.output.removeprefix("Not run: ")
    assert "\n" not in line.strip(), line
    assert site.forge.branches(PROJECT) == ["main"]
    assert site.forge.pulls == []
    assert host_git("symbolic-ref", "--short", "HEAD", cwd=site.workspace).strip() == "main"
    return line


async def test_no_remote(site: Site):
    host_git("remote", "remove", "origin", cwd=site.workspace)
    assert "the repository has no remote" in await refused(site)


async def test_a_remote_on_no_known_forge(site: Site, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GH_HOST")
    site.prepare_broker()
    line = await refused(site)
    assert "neither GitHub nor GitLab" in line and "GH_HOST" in line
    assert site.forge.api_seen == []


async def test_a_token_for_another_host_is_never_sent(site: Site, monkeypatch: pytest.MonkeyPatch):
    """GITHUB_TOKEN belongs to github.com: the Enterprise host never gets it."""
    other = "ghp_" + "G1thubComT0ken" * 2 + "xyzxyzxy"
    monkeypatch.delenv("GH_ENTERPRISE_TOKEN")
    monkeypatch.setenv("GITHUB_TOKEN", other)
    site.prepare_broker()
    line = await refused(site)
    assert f"no GitHub token is bound to {site.forge.host}" in line
    assert site.forge.api_seen == []  # the API was never called, with any token


async def test_a_refused_token(site: Site, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GH_ENTERPRISE_TOKEN", "ghp_" + "Wr0ngT0ken" * 3 + "abcdef")
    site.prepare_broker()
    line = await refused(site)
    assert "GitHub refused the token GH_ENTERPRISE_TOKEN" in line and "401" in line
    assert site.forge.problems == []  # the 401 was an answer GitHub's description allows


async def test_a_branch_that_exists_on_the_remote(site: Site):
    bare = site.forge.repos / f"{PROJECT}.git"
    host_git("--git-dir", str(bare), "branch", "iac-kernel/taken", "main")
    result, _, _ = await run_session(site, {**PR, "branch": "iac-kernel/taken"})
    assert result.status == "failed"
    assert "the branch iac-kernel/taken already exists on origin" in result.output
    assert site.forge.branches(PROJECT) == ["iac-kernel/taken", "main"]
    assert host_git("--git-dir", str(bare), "rev-parse", "iac-kernel/taken") == host_git(
        "--git-dir", str(bare), "rev-parse", "main"
    )  # untouched


async def test_a_branch_that_exists_here(site: Site):
    host_git("branch", "mine", cwd=site.workspace)
    line = await refused(site, {**PR, "branch": "mine"})
    assert "the branch mine already exists in this repository" in line


async def test_a_branch_name_git_refuses(site: Site):
    assert "is not a branch name git accepts" in await refused(site, {**PR, "branch": "a..b"})


async def test_a_session_that_changed_nothing(site: Site):
    assert "this session changed no file" in await refused(site, edit=None)


async def test_a_forge_that_refuses_after_the_push_leaves_no_branch(site: Site):
    site.forge.refuse_pulls = 422
    line = await refused(site, ask=Asker(exec_answer=ALLOW_ONCE))
    assert "opening the pull request" in line and "422" in line and "refused" in line
    assert site.forge.problems == []
    assert "was removed again" in line
