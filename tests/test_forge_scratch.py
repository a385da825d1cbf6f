"""Scratch worktrees of reviewed requests (issue 44, item 3) are cleaned: removed once the
request is applied through one's plan and when a later review finds the request closed,
pruned when their folder vanished, and kept (saying why) while they hold what only they
have, a local state above all. Git runs through the guard, as every git of a request."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from forge_support import (
    CAROL_TOKEN,
    Site,
    host_git,
    push_commit,
    reviewer,
    run_calls,
    spec_fixture,  # noqa: F401 (the spec fixture)
    team_site_fixture,  # noqa: F401 (the site fixture)
)
from iac_kernel.config import Settings
from iac_kernel.forge import gitrun
from iac_kernel.forge.review import REVIEWS_DIR, leftovers, tidy
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from terraform_support import (
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
needs_sandbox = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")


def saved_plan(path: Path) -> Path:
    """A file shaped like a saved plan (a zip with a ``tfplan`` member)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("tfplan", b"plan")
    return path


def test_what_keeps_a_scratch_worktree(tmp_path: Path):
    saved_plan(tmp_path / "tfplan")
    (tmp_path / "linked").symlink_to(tmp_path / "tfplan")  # a link is never "the plan"
    status = "\0".join(
        [
            "?? .terraform/",
            "!! sub/.terraform/",
            " M .terraform.lock.hcl",
            "?? tfplan",
            "?? linked",
            "!! terraform.tfstate",
            " M main.tf",
            "R  new.tf",
            "old.tf",
            "?? notes/",
            "",
        ]
    )
    assert leftovers(status, tmp_path) == [
        "linked",
        "terraform.tfstate",
        "main.tf",
        "new.tf",
        "notes/",
    ]
    assert leftovers("?? .terraform/\0?? tfplan\0", tmp_path) == []
    assert leftovers("", tmp_path) == []


@needs_git
@needs_sandbox
async def test_tidy_removes_prunes_and_keeps_a_state(tmp_path: Path):
    repo = tmp_path / "repo"
    host_git("init", "-q", "-b", "main", str(repo))
    (repo / "main.tf").write_text('resource "terraform_data" "a" {}\n')
    host_git("add", "main.tf", cwd=repo)
    host_git("commit", "-qm", "one", cwd=repo)
    reviews = repo / ".git" / REVIEWS_DIR
    planned, applied, vanished, other = (
        reviews / name
        for name in (
            "github-1-aaaaaaaaaaaa",
            "github-1-bbbbbbbbbbbb",
            "github-1-cccc",
            "github-12-d",
        )
    )
    for folder in (planned, applied, vanished, other):
        host_git("worktree", "add", "--detach", "-q", str(folder), "HEAD", cwd=repo)
    # what init and a plan leave: removed
    (planned / ".terraform" / "providers").mkdir(parents=True)
    (planned / ".terraform" / "providers" / "x").write_text("binary")
    (planned / ".terraform.lock.hcl").write_text("# lock\n")
    saved_plan(planned / "tfplan")
    # an apply's local state: kept, and the reason names it
    (applied / "terraform.tfstate").write_text("{}")
    shutil.rmtree(vanished)  # gone by hand: pruned
    asked: list[Any] = []

    async def ask_exec(request: Any) -> tuple[bool, str]:
        asked.append(request)
        return False, "no"

    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    pull = SimpleNamespace(remote=SimpleNamespace(forge="github"), number=1)
    async with gitrun.Git(repo, Settings(), env, ask_exec) as git:
        removed, kept = await tidy(git, reviews, pull, None)  # type: ignore[arg-type]
    assert removed == [planned]
    [why] = kept
    assert why.startswith(f"the scratch worktree {applied} is kept: it holds terraform.tfstate")
    assert not planned.exists() and (applied / "terraform.tfstate").exists()
    assert other.is_dir()  # request 12's, not 1's
    listed = host_git("worktree", "list", "--porcelain", cwd=repo)
    assert f"worktree {planned}\n" not in listed
    assert f"worktree {vanished}\n" not in listed  # pruned
    assert f"worktree {applied}\n" in listed and f"worktree {other}\n" in listed
    assert asked == []  # the guard asked nothing: git in the repository's own folder


# -- through the real loop -----------------------------------------------------------------


def carols_request(site: Site, text: str) -> str:
    """Carol's pull request #1 making main.tf ``text``; its head."""
    host_git("push", "-q", "origin", "main:refs/heads/carol/change", cwd=site.workspace)
    head = push_commit(site, "carol/change", "main.tf", text)
    reviewer(site, CAROL_TOKEN).create_pull(base="main", head="carol/change", title="Carol's")
    return head


def worktrees(site: Site) -> str:
    return host_git("worktree", "list", "--porcelain", cwd=site.workspace)


async def review(site: Site) -> tuple[Any, Any]:
    [planned], ask = await run_calls(site, [("terraform_plan", {"pull_request": 1})])
    return planned, ask


@needs_terraform
@needs_git
@needs_sandbox
async def test_applied_through_its_plan_the_worktree_is_removed(site: Site, outside_tmp: Path):
    state = outside_tmp / "state"
    state.mkdir()
    site.settings.sandbox_writable_paths = str(state)
    head = carols_request(
        site,
        f'terraform {{\n  backend "local" {{\n    path = "{state}/terraform.tfstate"\n  }}\n}}\n'
        'resource "terraform_data" "a" {\n  input = "carol"\n}\n',
    )
    planned, _ = await review(site)
    assert planned.status == "completed", planned.output
    plan_file = Path(planned.raw_output["pull_request"]["plan_file"])
    scratch = site.workspace / ".git" / REVIEWS_DIR / f"github-1-{head[:12]}"
    assert plan_file.parent == scratch and f"worktree {scratch}\n" in worktrees(site)
    reviewer(site).get_pull(1).create_review(event="APPROVE")
    reviewer(site).get_pull(1).merge()
    args = {"plan": "tfplan", "dir": str(scratch), "pull_request": 1}
    [result], ask = await run_calls(site, [("terraform_apply", args)])
    assert result.status == "completed", result.output
    assert f"The scratch worktree {scratch} was removed." in result.output
    assert not scratch.exists()
    assert str(scratch) not in worktrees(site)
    [resource] = json.loads((state / "terraform.tfstate").read_text())["resources"]
    assert resource["instances"][0]["attributes"]["input"]["value"] == "carol"
    assert not ask.exec_questions()
    assert host_git("status", "--porcelain", cwd=site.workspace) == ""
    assert site.forge.problems == []


@needs_terraform
@needs_git
@needs_sandbox
async def test_a_later_review_of_a_closed_request_removes_its_worktree(site: Site):
    head = carols_request(site, 'resource "terraform_data" "a" {\n  input = "carol"\n}\n')
    planned, _ = await review(site)
    assert planned.status == "completed", planned.output
    scratch = site.workspace / ".git" / REVIEWS_DIR / f"github-1-{head[:12]}"
    assert (scratch / "tfplan").is_file()
    reviewer(site, CAROL_TOKEN).get_pull(1).edit(state="closed")
    again, ask = await review(site)
    assert again.status == "failed", again.output
    line = again.output.removeprefix("Not run: ")
    assert "\n" not in line.strip(), line
    assert line.startswith("pull request #1 is closed: only an open one is planned")
    assert f"its scratch worktree github-1-{head[:12]} was removed" in line
    assert not scratch.exists()
    assert str(scratch) not in worktrees(site)
    assert not ask.exec_questions()
    assert site.forge.problems == []
