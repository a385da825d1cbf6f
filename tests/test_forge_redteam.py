"""Red-team probes of the apply bound to a pull request (issue 44): "nothing reaches
production that a reviewer did not see". Each test names the attack it probes; a hole
still open is marked ``xfail(strict=True)`` with what it lets through, so it fails the
day it is closed without the mark going too.

The forge clients are driven through the real PyGithub / python-gitlab against a tiny
loopback server that answers what each probe needs and records every path asked."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from iac_kernel.config import Settings
from iac_kernel.forge import gitrun
from iac_kernel.forge.clients import GitHubClient, GitLabClient, PullFacts, Token
from iac_kernel.forge.remote import GITHUB, GITLAB, Remote
from iac_kernel.forge.review import REVIEWS_DIR, approvers, judge, tidy
from iac_kernel.guard.sandbox.bwrap import unusable_reason

pytest.importorskip("github")
pytest.importorskip("gitlab")

HEAD = "a" * 40
OLDER = "b" * 40
PLAN = "c" * 64
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
needs_sandbox = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

Answer = Callable[[str], Any]


class Server:
    """A loopback HTTP server: ``answer(path)`` gives each GET's JSON (None: 404)."""

    def __init__(self, answer: Answer) -> None:
        self.paths: list[str] = []
        paths, answer_of = self.paths, answer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                data = answer_of(self.path)
                body = json.dumps(data if data is not None else {"message": "Not Found"})
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], Server]]:
    made: list[Server] = []

    def start(answer: Answer) -> Server:
        made.append(Server(answer))
        return made[-1]

    yield start
    for server in made:
        server.close()


def github(server: Server) -> GitHubClient:
    remote = Remote(
        "origin",
        f"{server.url}/octo/infra.git",
        GITHUB,
        "127.0.0.1",
        "octo/infra",
        f"{server.url}/api/v3",
        f"{server.url}/octo/infra",
    )
    return GitHubClient(remote, Token("GH_ENTERPRISE_TOKEN", "t0ken"))


def gitlab(server: Server) -> GitLabClient:
    remote = Remote(
        "origin",
        f"{server.url}/infra/app.git",
        GITLAB,
        "127.0.0.1",
        "infra/app",
        server.url,
        f"{server.url}/infra/app",
    )
    return GitLabClient(remote, Token("GITLAB_TOKEN", "t0ken"))


# -- (c)/(b) a rule's group with path tricks ------------------------------------------------


def answers_everything(path: str) -> Any:
    """A forge that says "active member" to any membership path, and knows user bob."""
    if path.startswith("/api/v4/users"):
        return [{"id": 5, "username": "bob", "state": "active"}]
    return {"state": "active", "role": "member", "id": 5, "username": "bob", "url": path}


@pytest.mark.parametrize("group", ["..", "."])
def test_a_dot_segment_group_reaches_no_other_github_path(serve, group):
    """A group ``..`` became ``/orgs/octo/teams/../memberships/bob``, which requests
    normalizes to the organization's membership (``/orgs/octo/memberships/bob``): every
    member of the organization counted for it."""
    server = serve(answers_everything)
    membership = github(server).groups_of("bob", [group])
    assert group not in membership.groups
    assert group in membership.not_counted
    assert all(p.startswith("/api/v3/orgs/octo/teams/") for p in server.paths), server.paths


@pytest.mark.parametrize("group", ["..", "infra/..", "./infra"])
def test_a_dot_segment_group_reaches_no_other_gitlab_path(serve, group):
    server = serve(answers_everything)
    membership = gitlab(server).groups_of("bob", [group])
    assert group not in membership.groups
    assert group in membership.not_counted
    assert all(p.startswith(("/api/v4/groups/", "/api/v4/users")) for p in server.paths), (
        server.paths
    )


def test_a_real_team_still_counts(serve):
    """The guard above does not refuse a slug with a dot inside it."""
    server = serve(answers_everything)
    membership = github(server).groups_of("bob", ["platform", "infra.ops"])
    assert membership.groups == {"platform", "infra.ops"}
    assert "/api/v3/orgs/octo/teams/infra.ops/memberships/bob" in server.paths


# -- (c) GitHub reviews: which commit, by whom, and when ------------------------------------


def github_pull(
    root: str,
    reviews: list[dict[str, Any]],
    comments: list[dict[str, Any]] | None = None,
    permissions: dict[str, str] | None = None,
) -> Answer:
    """A GitHub Enterprise answering pull request #1 of octo/infra, opened by alice (the
    token's user too), whose head is :data:`HEAD`."""
    user = {"login": "alice", "id": 1, "type": "User"}

    def answer(path: str) -> Any:
        path = path.partition("?")[0]
        base = "/api/v3/repos/octo/infra"
        if path == "/api/v3/user":
            return user
        if path == f"{base}/pulls/1":
            return {
                "number": 1,
                "url": f"{root}{base}/pulls/1",
                "issue_url": f"{root}{base}/issues/1",
                "comments_url": f"{root}{base}/issues/1/comments",
                "html_url": "http://forge/octo/infra/pull/1",
                "state": "open",
                "merged": False,
                "user": user,
                "head": {"sha": HEAD, "ref": "change"},
                "base": {"ref": "main"},
                "body": "",
                "mergeable": True,
                "mergeable_state": "clean",
                "merge_commit_sha": None,
            }
        if path == f"{base}/pulls/1/reviews":
            return reviews
        if path == f"{base}/issues/1/comments":
            return comments or []
        if path.startswith(f"{base}/collaborators/") and path.endswith("/permission"):
            login = path.split("/")[-2]
            level = (permissions or {}).get(login, "none")
            return {"permission": level, "role_name": level, "user": {"login": login}}
        return None

    return answer


def serve_pull(serve: Callable[[Answer], Server], *args: Any, **kwargs: Any) -> Server:
    """A server answering :func:`github_pull` at its own address."""
    answer: list[Answer] = []
    server = serve(lambda path: answer[0](path))
    answer.append(github_pull(server.url, *args, **kwargs))
    return server


def review(login: str, commit: str | None, association: str = "COLLABORATOR", at: str = "") -> dict:
    return {
        "id": abs(hash((login, commit, at))) % 10**6,
        "user": {"login": login, "id": 2, "type": "User"},
        "state": "APPROVED",
        "commit_id": commit,
        "author_association": association,
        "submitted_at": at or "2026-12-01T10:00:00Z",
        "body": "",
    }


def test_a_review_naming_no_commit_does_not_approve_the_head(serve):
    """GitHub names no ``commit_id`` when the reviewed commit is gone (force-pushed away
    and collected): that review approved some other commit, never the head."""
    server = serve_pull(serve, [review("bob", None)], permissions={"bob": "write"})
    facts = github(server).pull(1)
    assert approvers(facts) == []


def test_a_review_of_the_head_approves_it(serve):
    server = serve_pull(serve, [review("bob", HEAD)], permissions={"bob": "write"})
    facts = github(server).pull(1)
    assert approvers(facts) == ["bob"]


def test_an_approval_by_someone_without_write_access_does_not_count(serve):
    server = serve_pull(serve, [review("mallory", HEAD, "NONE")], permissions={"mallory": "read"})
    facts = github(server).pull(1)
    assert approvers(facts) == []


@pytest.mark.xfail(
    strict=True,
    reason="hole left: an approval given before the plan was posted (same head, a plan "
    "made again after drift or with other variables) approves a plan its reviewer never saw",
)
def test_an_approval_older_than_the_plan_does_not_approve_it(serve):
    marker = f"<!-- iac-kernel plan sha256={PLAN} commit={HEAD} -->"
    comment = {
        "id": 9,
        "user": {"login": "alice", "id": 1, "type": "User"},
        "body": marker,
        "created_at": "2026-12-02T10:00:00Z",
        "updated_at": "2026-12-02T10:00:00Z",
        "html_url": "http://forge/octo/infra/pull/1#issuecomment-9",
    }
    server = serve_pull(
        serve, [review("bob", HEAD, at="2026-12-01T10:00:00Z")], [comment], {"bob": "write"}
    )
    client = github(server)
    facts = client.pull(1)
    refusal, _commit = judge(facts, client.remote, PLAN, allow_unmerged=True)
    assert refusal is not None and "approv" in refusal


# -- (a)/(c) the marker, and look() while the apply waits --------------------------------


def facts_of(**changes: Any) -> PullFacts:
    base: dict[str, Any] = {
        "number": 1,
        "url": "http://forge/octo/infra/pull/1",
        "state": "merged",
        "author": "carol",
        "head": HEAD,
        "head_ref": "change",
        "base": "main",
        "merge_commit": "d" * 40,
        "mergeable": None,
        "approvals": (("bob", HEAD),),
        "changes_requested": (),
        "notes": (),
        "viewer": "alice",
    }
    return PullFacts(**{**base, **changes})


def test_a_marker_written_by_someone_else_carries_no_plan():
    from iac_kernel.forge.body import plan_marker
    from iac_kernel.forge.clients import Note

    remote = SimpleNamespace(forge=GITHUB, forge_name="GitHub")
    others = (Note("carol", plan_marker(PLAN, HEAD)), Note("bob", plan_marker(PLAN, HEAD)))
    refusal, _ = judge(facts_of(notes=others), remote, PLAN, False)  # type: ignore[arg-type]
    assert refusal is not None and "carries no plan" in refusal
    mine = (*others, Note("alice", plan_marker(PLAN, HEAD)))
    assert judge(facts_of(notes=mine), remote, PLAN, False) == (None, "d" * 40)  # type: ignore[arg-type]


def test_look_counts_no_approval_of_a_new_head(monkeypatch):
    """While the apply waits, a commit is pushed and bob approves it: nothing of the new
    head votes on the old plan's record; an approval of the same head does."""
    from iac_kernel.forge import review as reviews

    voted: list[tuple[str, ...]] = []
    read: list[PullFacts] = []
    client = SimpleNamespace(pull=lambda number: read.pop(0))
    bound = SimpleNamespace(
        pull=SimpleNamespace(client=client, number=1), facts=facts_of(), approvers=()
    )
    held = reviews.PullRequestGate.__new__(reviews.PullRequestGate)
    held.bound = bound  # type: ignore[assignment]
    held._read_at = 0.0
    monkeypatch.setattr(held, "_vote", lambda b: voted.append(b.approvers))
    monkeypatch.setattr(reviews.gate.Gate, "look", lambda self, book, rid: rid)
    read.append(facts_of(head=OLDER, approvals=(("bob", OLDER), ("dave", None))))
    assert held.look(None, "r1") == "r1"
    assert voted == [] and bound.approvers == ()
    held._read_at = 0.0
    read.append(facts_of(approvals=(("bob", HEAD), ("erin", OLDER))))
    held.look(None, "r1")
    assert voted == [("bob",)]


# -- (a) the scratch worktree removal -----------------------------------------------------


def _repository_with_my_worktree(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with one commit, and the user's own linked worktree outside it."""
    from forge_support import host_git

    repo = tmp_path / "repo"
    host_git("init", "-q", "-b", "main", str(repo))
    (repo / "main.tf").write_text('resource "terraform_data" "a" {}\n')
    host_git("add", "main.tf", cwd=repo)
    host_git("commit", "-qm", "one", cwd=repo)
    mine = tmp_path / "my-feature"
    host_git("worktree", "add", "-q", "-b", "feature", str(mine), cwd=repo)
    return repo, mine


@needs_git
@needs_sandbox
async def test_a_link_in_the_reviews_folder_removes_nothing_it_points_to(tmp_path: Path):
    """Anyone who can write the git folder (the sandbox can: it is the scratch worktrees'
    place) puts a link named like a request's worktree in :data:`REVIEWS_DIR`, pointing at
    the user's own linked worktree: the next review's tidy must not remove that."""
    from forge_support import host_git

    repo, mine = _repository_with_my_worktree(tmp_path)
    reviews = repo / ".git" / REVIEWS_DIR
    reviews.mkdir(parents=True)
    (reviews / "github-1-aaaaaaaaaaaa").symlink_to(mine)

    async def ask_exec(request: Any) -> tuple[bool, str]:
        return True, "yes"  # even a user who allows every git run loses nothing

    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    pull = SimpleNamespace(remote=SimpleNamespace(forge="github"), number=1)
    async with gitrun.Git(repo, Settings(), env, ask_exec) as git:
        removed, kept = await tidy(git, reviews, pull, None)  # type: ignore[arg-type]
    assert removed == []
    assert (mine / "main.tf").is_file()
    assert f"worktree {mine}\n" in host_git("worktree", "list", "--porcelain", cwd=repo)
    assert kept and "link" in kept[0]


@needs_git
@needs_sandbox
async def test_a_review_never_prunes_the_users_own_worktrees(tmp_path: Path):
    """Git runs in the sandbox, where a linked worktree outside the repository looks
    vanished: ``git worktree prune`` there dropped the user's worktree (its index, staged
    changes included) and left its checkout "not a git repository". Only scratch
    worktrees whose folder really vanished are forgotten."""
    from forge_support import host_git

    repo, mine = _repository_with_my_worktree(tmp_path)
    (mine / "staged.tf").write_text("# staged\n")
    host_git("add", "staged.tf", cwd=mine)
    reviews = repo / ".git" / REVIEWS_DIR
    gone = reviews / "github-1-aaaaaaaaaaaa"
    host_git("worktree", "add", "--detach", "-q", str(gone), "HEAD", cwd=repo)
    shutil.rmtree(gone)

    async def ask_exec(request: Any) -> tuple[bool, str]:
        return True, "yes"

    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    pull = SimpleNamespace(remote=SimpleNamespace(forge="github"), number=7)
    async with gitrun.Git(repo, Settings(), env, ask_exec) as git:
        assert await tidy(git, reviews, pull, None) == ([], [])  # type: ignore[arg-type]
    listed = host_git("worktree", "list", "--porcelain", cwd=repo)
    assert f"worktree {mine}\n" in listed
    assert f"worktree {gone}\n" not in listed  # a scratch one that vanished: forgotten
    assert "A  staged.tf" in host_git("status", "--short", cwd=mine)


def test_a_marker_in_a_resource_key_does_not_rebind_the_plan_comment(tmp_path: Path):
    from iac_kernel.forge.body import plan_marker
    from iac_kernel.forge.clients import Note
    from iac_kernel.forge.review import carried_plan, plan_comment
    from iac_kernel.terraform.plan import PlanFile, parse_plan

    planted = plan_marker("e" * 64, HEAD)  # an older plan of the same head, say
    change = {"change": {"actions": ["create"], "before": None, "after": {}}}
    show = {
        "resource_changes": [
            {
                "address": f'terraform_data.a["{planted}"]',
                "mode": "managed",
                "type": "terraform_data",
                "name": "a",
                "index": planted,
                **change,
            }
        ]
    }
    plan = parse_plan(show, PlanFile("tfplan", PLAN, 10, 0.0))
    remote = SimpleNamespace(forge=GITHUB, forge_name="GitHub")
    pull = SimpleNamespace(name="pull request #1", number=1, remote=remote)
    made = SimpleNamespace(pull=pull, facts=facts_of(state="open"), root=tmp_path, folder=tmp_path)
    text = plan_comment(made, plan, set())  # type: ignore[arg-type]
    assert text.startswith(plan_marker(PLAN, HEAD))
    assert carried_plan(facts_of(notes=(Note("alice", text),))) == (PLAN, HEAD)


# -- (a) what the plan read besides the .tf files ------------------------------------------


@needs_git
@needs_sandbox
@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform is not installed")
@pytest.mark.xfail(
    strict=True,
    reason="hole left: only .tf files (and auto var files, as they are now) are compared; a "
    "file the configuration reads (file(), templatefile(), an external program) changed "
    "while the plan was made is applied though the merged commit holds the reviewed one",
)
async def test_a_file_read_by_the_configuration_is_bound_too(tmp_path: Path):
    """The model edits policy.json with bash (not a session change: never committed),
    plans, restores it: the request shows the innocent file, the plan holds the other."""
    from forge_support import host_git
    from iac_kernel.forge import review as reviews
    from iac_kernel.forge.clients import Note
    from iac_kernel.forge.review import PullRequestApply
    from iac_kernel.team.rules import Requirement

    repo = tmp_path / "repo"
    host_git("init", "-q", "-b", "main", str(repo))
    (repo / "main.tf").write_text(
        'resource "terraform_data" "p" {\n  input = file("${path.module}/policy.json")\n}\n'
    )
    (repo / "policy.json").write_text('{"Effect": "Deny"}\n')
    host_git("add", ".", cwd=repo)
    host_git("commit", "-qm", "the reviewed policy", cwd=repo)
    head = host_git("rev-parse", "HEAD", cwd=repo).strip()
    env = {**os.environ, "TF_CLI_CONFIG_FILE": "/dev/null", "TF_IN_AUTOMATION": "1"}
    (repo / "policy.json").write_text('{"Effect": "Allow", "Action": "*"}\n')
    for args in (["init", "-input=false"], ["plan", "-input=false", "-out=tfplan"]):
        await asyncio.to_thread(
            subprocess.run, ["terraform", *args], cwd=repo, env=env, check=True, capture_output=True
        )
    host_git("checkout", "-q", "--", "policy.json", cwd=repo)  # restored: the tree is clean
    sha = hashlib.sha256((repo / "tfplan").read_bytes()).hexdigest()
    shown = await asyncio.to_thread(
        subprocess.run,
        ["terraform", "show", "-json", "tfplan"],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert '\\"Allow\\"' in shown.stdout  # the plan holds what no commit does

    async def ask(request: Any) -> tuple[bool, str]:
        return True, "yes"

    git_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    pull = SimpleNamespace(
        remote=SimpleNamespace(forge=GITHUB, forge_name="GitHub", name="origin"),
        name="pull request #1",
        number=1,
        git=lambda: gitrun.Git(repo, Settings(), git_env, ask),
        refs=lambda facts: [],
    )
    bound = PullRequestApply(pull, ".", Requirement(1), allow_unmerged=True)  # type: ignore[arg-type]
    approved = SimpleNamespace(
        sha256=sha, copy=repo / "tfplan", binding=SimpleNamespace(host_workdir=repo)
    )

    async def marked_facts() -> PullFacts:
        return facts_of(
            state="open",
            mergeable=True,
            merge_commit=None,
            head=head,
            approvals=(("bob", head),),
            notes=(Note("alice", reviews.bodies.plan_marker(sha, head)),),
        )

    pull.facts = marked_facts
    # the marker is the applier's, bob approved the head: only the configuration is left
    assert reviews.judge(await marked_facts(), pull.remote, sha, True) == (None, head)  # type: ignore[arg-type]
    refusal = await bound.check(approved)  # type: ignore[arg-type]
    assert refusal is not None and "policy.json" in refusal
